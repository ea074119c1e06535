//! What a server's last stderr lines say went wrong, when one command can fix it.
//!
//! That is a package runner's cache left half-written (an install that was interrupted),
//! which the user can fix with one command.

use std::path::Path;

/// A hint that says what to run, when `stderr` shows a broken package cache of `name`:
/// its private one (`cache`) when it runs confined, else the user's. The command names
/// the cache from mcpd's own knowledge, never from the lines, which the server wrote.
pub(super) fn broken_cache(name: &str, cache: Option<&Path>, stderr: &[String]) -> Option<String> {
    let private = |sub: &str| {
        format!(
            "'{}'",
            cache.map(|c| c.join(sub)).unwrap_or_default().display()
        )
    };
    let has = |needles: &[&str]| stderr.iter().any(|l| needles.iter().any(|n| l.contains(n)));
    let missing_js = has(&[
        "ERR_MODULE_NOT_FOUND",
        "Cannot find module",
        "Cannot find package",
    ]);
    if missing_js && has(&["/_npx/"]) {
        let dir = match cache {
            Some(_) => private("npm/_npx"),
            None => "~/.npm/_npx".into(),
        };
        return Some(format!(
            "npx's package cache looks broken (a module is missing under {dir}, as when an install was interrupted): run `rm -rf {dir}`, then `mcpd ctl restart {name}`"
        ));
    }
    let missing_py = has(&["ModuleNotFoundError", "No module named"]);
    if missing_py && has(&["/uv/", "archive-v0"]) {
        let clean = match cache {
            Some(_) => format!("rm -rf {}", private("uv")),
            None => "uv cache clean".into(),
        };
        return Some(format!(
            "uv's package cache looks broken (a module is missing from an environment uvx made, as when an install was interrupted): run `{clean}`, then `mcpd ctl restart {name}`"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(lines: &[&str], expected: Option<&str>) {
        check_in(None, lines, expected);
    }

    fn check_in(cache: Option<&str>, lines: &[&str], expected: Option<&str>) {
        let lines: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
        let got = broken_cache("mem", cache.map(Path::new), &lines);
        match expected {
            Some(cmd) => assert!(got.as_deref().is_some_and(|g| g.contains(cmd)), "{got:?}"),
            None => assert_eq!(got, None),
        }
    }

    #[test]
    fn a_broken_package_cache_is_told_with_the_command_that_clears_it() {
        check(
            &[
                "node:internal/modules/esm/resolve:873",
                "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'zod' imported from /home/u/.npm/_npx/9f2/node_modules/@modelcontextprotocol/sdk/dist/esm/types.js",
            ],
            Some("rm -rf ~/.npm/_npx"),
        );
        check(
            &[
                "  File \"/home/u/.cache/uv/archive-v0/abc/lib/python3.11/site-packages/mcp_server_fetch/__init__.py\", line 1",
                "ModuleNotFoundError: No module named 'httpx'",
            ],
            Some("uv cache clean"),
        );
        // A project's own missing module is not a cache problem.
        check(
            &["Error [ERR_MODULE_NOT_FOUND]: Cannot find module '/srv/app/server.js'"],
            None,
        );
        check(&["Starting default (STDIO) server..."], None);
    }

    #[test]
    fn a_confined_server_is_told_to_clear_its_private_cache() {
        let cache = Some("/home/u/.cache/mcpd/servers/mem");
        check_in(
            cache,
            &[
                "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'zod' imported from /home/u/.cache/mcpd/servers/mem/npm/_npx/9f2/node_modules/x.js",
            ],
            Some("rm -rf '/home/u/.cache/mcpd/servers/mem/npm/_npx'"),
        );
        check_in(
            cache,
            &[
                "/mcpd/servers/mem/uv/archive-v0/abc/x.py",
                "ModuleNotFoundError: No module named 'httpx'",
            ],
            Some("rm -rf '/home/u/.cache/mcpd/servers/mem/uv'"),
        );
    }
}
