//! What a server's last stderr lines say went wrong when it is something the user can fix with one command: a package runner's cache left half-written (an install that was interrupted).

/// A hint that says what to run, when `stderr` shows a broken package cache of `name`.
pub(super) fn broken_cache(name: &str, stderr: &[String]) -> Option<String> {
    let has = |needles: &[&str]| stderr.iter().any(|l| needles.iter().any(|n| l.contains(n)));
    let missing_js = has(&[
        "ERR_MODULE_NOT_FOUND",
        "Cannot find module",
        "Cannot find package",
    ]);
    if missing_js && has(&["/_npx/"]) {
        return Some(format!(
            "npx's package cache looks broken (a module is missing under ~/.npm/_npx, as when an install was interrupted): run `rm -rf ~/.npm/_npx`, then `mcpd ctl restart {name}`"
        ));
    }
    let missing_py = has(&["ModuleNotFoundError", "No module named"]);
    if missing_py && has(&["/uv/", "archive-v0"]) {
        return Some(format!(
            "uv's package cache looks broken (a module is missing from an environment uvx made, as when an install was interrupted): run `uv cache clean`, then `mcpd ctl restart {name}`"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(lines: &[&str], expected: Option<&str>) {
        let lines: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
        let got = broken_cache("mem", &lines);
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
}
