//! Package runners (`npx`, `uvx`, `pipx run`, `bunx`, `pnpm dlx`, …).
//!
//! Commands that may download and install a server's package before starting it, so their
//! first start gets more time.

use super::StdioLaunch;
use std::path::Path;

impl StdioLaunch {
    /// The package runner this launch goes through, if any: its name as a person
    /// writes it (`"npx"`, `"pipx run"`).
    pub fn package_runner(&self) -> Option<&'static str> {
        let program = Path::new(&self.command).file_name()?.to_str()?;
        let first = self.args.first().map(String::as_str);
        let second = self.args.get(1).map(String::as_str);
        match (program, first, second) {
            ("npx", ..) => Some("npx"),
            ("uvx", ..) => Some("uvx"),
            ("bunx", ..) => Some("bunx"),
            ("pnpx", ..) => Some("pnpx"),
            ("npm", Some("exec" | "x"), _) => Some("npm exec"),
            ("pnpm", Some("dlx"), _) => Some("pnpm dlx"),
            ("yarn", Some("dlx"), _) => Some("yarn dlx"),
            ("bun", Some("x"), _) => Some("bun x"),
            ("pipx", Some("run"), _) => Some("pipx run"),
            ("uv", Some("tool"), Some("run")) => Some("uv tool run"),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(command: &str, args: &[&str], expected: Option<&str>) {
        let launch = StdioLaunch {
            command: command.into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: Default::default(),
            cwd: None,
        };
        assert_eq!(launch.package_runner(), expected, "{command} {args:?}");
    }

    #[test]
    fn package_runners_are_told_by_program_and_subcommand() {
        check(
            "npx",
            &["-y", "@modelcontextprotocol/server-memory"],
            Some("npx"),
        );
        check("/usr/local/bin/npx", &["pkg"], Some("npx"));
        check("uvx", &["mcp-server-fetch"], Some("uvx"));
        check("pipx", &["run", "mcp-server-git"], Some("pipx run"));
        check("pipx", &["install", "x"], None);
        check("pnpm", &["dlx", "pkg"], Some("pnpm dlx"));
        check("bunx", &["pkg"], Some("bunx"));
        check("uv", &["tool", "run", "pkg"], Some("uv tool run"));
        check("uv", &["run", "server.py"], None);
        check("node", &["server.js"], None);
        check("npx-like", &[], None);
    }
}
