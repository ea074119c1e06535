//! What the user is told about an import.
//!
//! Warnings per entry as they come, notes once, and at the very end one line per server
//! that still needs a variable set in mcpd's environment. It also carries the secrets an
//! entry's conversion found, until they join their server.

use super::store::Move;

/// A variable an imported server needs from mcpd's environment.
struct Need {
    server: String,
    var: String,
    /// What it stands for: "header Authorization", "bearer token", "env GITHUB_TOKEN"…
    what: String,
    /// A local server, which inherits mcpd's environment and starts without it; a remote
    /// one does not start until it is set.
    local: bool,
}

/// Messages collected while converting, printed once at the end.
#[derive(Default)]
pub(super) struct Notes {
    needs: Vec<Need>,
    /// Literal secrets found in the entry being converted, to be moved into the secret
    /// store; `accept` hands them to their server before absorbing these notes.
    pub(super) moves: Vec<Move>,
    /// Servers with literal env values copied as they are (none looked like a secret).
    pub(super) literal_env: Vec<String>,
    /// Servers given an OAuth `client_id`, whose app must allow mcpd's redirect.
    pub(super) oauth_clients: Vec<String>,
    /// Of those, the ones without a client secret in the client's config.
    pub(super) oauth_without_secret: Vec<String>,
    /// Per-entry warnings, printed as they come.
    warnings: Vec<String>,
}

impl Notes {
    pub(super) fn warn(&mut self, message: String) {
        self.warnings.push(message);
    }

    /// A remote server that will not start until `var` is set.
    pub(super) fn need(&mut self, server: &str, var: &str, what: impl Into<String>) {
        self.push_need(server, var, what.into(), false);
    }

    /// A local server that gets `var` only from mcpd's environment.
    pub(super) fn need_local(&mut self, server: &str, var: &str, what: impl Into<String>) {
        self.push_need(server, var, what.into(), true);
    }

    fn push_need(&mut self, server: &str, var: &str, what: String, local: bool) {
        if !self
            .needs
            .iter()
            .any(|n| n.server == server && n.var == var)
        {
            self.needs.push(Need {
                server: server.to_owned(),
                var: var.to_owned(),
                what,
                local,
            });
        }
    }

    /// Moves another entry's notes into these, printing its warnings.
    pub(super) fn absorb(&mut self, other: Notes) {
        let Notes {
            needs,
            // Taken by `accept` for the server they belong to; an entry's are never merged.
            moves: _,
            literal_env,
            oauth_clients,
            oauth_without_secret,
            warnings,
        } = other;
        for w in &warnings {
            mcpd_ctl::errln!("{w}");
        }
        self.needs.extend(needs);
        self.literal_env.extend(literal_env);
        self.oauth_clients.extend(oauth_clients);
        self.oauth_without_secret.extend(oauth_without_secret);
    }

    /// Prints the warnings of an entry that was not imported; the rest does not apply.
    pub(super) fn absorb_warnings(&mut self, other: Notes) {
        for w in &other.warnings {
            mcpd_ctl::errln!("{w}");
        }
    }

    pub(super) fn print(&self) {
        if !self.literal_env.is_empty() {
            mcpd_ctl::errln!(
                "note: env values of {} that do not look like secrets were copied as they are; if one is a secret, \
                 store it with `mcpd ctl secret set NAME` and write \"${{secret:NAME}}\" in its place",
                self.literal_env.join(", ")
            );
        }
        if !self.oauth_clients.is_empty() {
            mcpd_ctl::errln!(
                "note: an OAuth client_id was copied for {}: mcpd logs in with the redirect \
                 http://127.0.0.1:PORT/callback (PORT is redirect_port, else a random one), which the OAuth app \
                 must allow (Claude Code registers http://localhost:PORT/callback, the other clients their own redirects)",
                self.oauth_clients.join(", ")
            );
        }
        if !self.oauth_without_secret.is_empty() {
            mcpd_ctl::errln!(
                "note: no OAuth client secret was copied for {} (Claude Code and VS Code keep it in the keychain \
                 or their secret storage, not in the config): if the app has one, set client_secret_env in \
                 [servers.NAME.oauth] to a variable of mcpd's environment that holds it",
                self.oauth_without_secret.join(", ")
            );
        }
    }

    /// The closing lines: per server, the variables it still needs, then how to set them.
    pub(super) fn need_lines(&self) -> Vec<String> {
        let mut servers: Vec<&str> = Vec::new();
        for n in &self.needs {
            if !servers.contains(&n.server.as_str()) {
                servers.push(&n.server);
            }
        }
        let mut out = Vec::new();
        for server in servers {
            let needs: Vec<&Need> = self.needs.iter().filter(|n| n.server == server).collect();
            let vars = and_list(needs.iter().map(|n| n.var.as_str()).collect());
            let whats: Vec<&str> = needs.iter().map(|n| n.what.as_str()).collect();
            let (it, is) = if needs.len() == 1 {
                ("it", "is")
            } else {
                ("they", "are")
            };
            if needs.iter().all(|n| n.local) {
                out.push(format!(
                    "[servers.{server}] will not get {vars} until {it} {is} set in mcpd's environment, \
                     which a local server inherits ({})",
                    whats.join("; ")
                ));
            } else {
                out.push(format!(
                    "[servers.{server}] will not start until {vars} {is} set in mcpd's environment ({})",
                    whats.join("; ")
                ));
            }
        }
        if out.is_empty() {
            return out;
        }
        out.push(
            "set them where `mcpd serve` runs: for the systemd unit, `systemctl --user edit mcpd` and add \
             `Environment=NAME=value` lines (or `EnvironmentFile=` naming a file only you can read) under \
             [Service], then `systemctl --user restart mcpd`; otherwise export them in the shell that starts \
             `mcpd serve` and start it again"
                .into(),
        );
        out
    }

    /// Prints [`Notes::need_lines`]: the last thing an import says.
    pub(super) fn print_needs(&self) {
        for line in self.need_lines() {
            mcpd_ctl::errln!("{line}");
        }
    }
}

/// `A`, `A and B`, `A, B and C`.
fn and_list(items: Vec<&str>) -> String {
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_server_gets_one_line_naming_what_to_set() {
        let mut notes = Notes::default();
        notes.need("gh-remote", "GH_CLIENT_SECRET", "OAuth client secret");
        notes.need("events", "EVENTS_KEY", "header X-Api-Key");
        notes.need("events", "TEAM", "header X-Team");
        notes.need("events", "EVENTS_KEY", "header X-Other");
        notes.need_local("github", "GITHUB_HOST", "passed on by Codex's env_vars");
        let lines = notes.need_lines();
        assert_eq!(
            lines[0],
            "[servers.gh-remote] will not start until GH_CLIENT_SECRET is set in mcpd's \
             environment (OAuth client secret)"
        );
        assert_eq!(
            lines[1],
            "[servers.events] will not start until EVENTS_KEY and TEAM are set in mcpd's environment \
             (header X-Api-Key; header X-Team)"
        );
        assert!(lines[2].starts_with("[servers.github] will not get GITHUB_HOST until it is set"));
        assert!(lines[3].contains("Environment=") && lines[3].contains("EnvironmentFile="));
        assert_eq!(lines.len(), 4);
        assert_eq!(and_list(vec!["A", "B", "C"]), "A, B and C");
        assert!(Notes::default().need_lines().is_empty());
    }
}
