//! Values a setting takes from outside the file.
//!
//! A `Secret` (shown nowhere) and a `Missing` variable (one mcpd's environment lacks,
//! which keeps only its server from starting).

/// A value that must never be shown: header values and bearer tokens. It is the secrets'
/// one value type (redacted wherever it is formatted, cleared from memory when dropped),
/// under the name the config has always given it.
pub use crate::secrets::SecretValue as Secret;

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
