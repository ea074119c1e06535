//! Values a setting takes from outside the file: a `Secret` (shown nowhere) and a `Missing` variable (one mcpd's environment lacks, which keeps only its server from starting).

/// A value that must never be shown: header values and bearer tokens. `Debug` prints a
/// placeholder, and there is deliberately no `Display`, so a secret cannot slip into a
/// log line, a status row or an error message by formatting.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Secret {
        Secret(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A setting whose value comes from a variable that mcpd's environment lacks (or holds
/// empty). The server it belongs to does not start, with a status line naming it; the
/// rest of the config is in force. An imported server whose header became
/// `${IMPORTED_…}` is the common case.
#[derive(Debug, Clone, PartialEq)]
pub struct Missing {
    /// The setting, e.g. `servers.gh.headers.Authorization`.
    pub key: String,
    pub var: String,
    /// The variable is set but empty.
    pub empty: bool,
}

impl Missing {
    pub(super) fn new(key: String, var: &str, empty: bool) -> Missing {
        Missing {
            key,
            var: var.to_owned(),
            empty,
        }
    }

    /// What stops a server with these missing variables from starting, and what to do.
    pub fn explain(missing: &[Missing]) -> Option<String> {
        let parts: Vec<String> = missing
            .iter()
            .map(|m| {
                let how = if m.empty { "is empty" } else { "is not set" };
                format!("{} {how} (for {})", m.var, m.key)
            })
            .collect();
        (!parts.is_empty()).then(|| {
            format!(
                "{} in mcpd's environment; set it where mcpd starts (a systemd drop-in's Environment= or EnvironmentFile=, or the shell that runs `mcpd serve`) and restart mcpd",
                parts.join(", ")
            )
        })
    }
}
