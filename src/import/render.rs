//! The text appended to mcpd's config.
//!
//! A `# imported from` comment per source, then each server's `[servers.NAME]` table and
//! its sub-tables, one value a line.

use super::Converted;
use std::fmt::Write as _;

/// The keys of `[servers.NAME]` in the order they are written.
const SERVER_KEYS: [&str; 11] = [
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "transport",
    "headers",
    "bearer_token_env",
    "bearer_token",
    "timeout",
    "enabled",
];

/// The sub-tables of `[servers.NAME]` and their keys, in the order they are written.
const SUB_TABLES: [(&str, &[&str]); 3] = [
    ("tools", &["allow", "deny"]),
    ("health", &["startup_timeout"]),
    (
        "oauth",
        &[
            "client_id",
            "client_secret",
            "client_secret_env",
            "scopes",
            "redirect_port",
        ],
    ),
];

/// A description longer than this is cut in the comment.
const DESCRIPTION_CHARS: usize = 200;

/// The text appended to the config: a `# imported from` comment per source, then tables.
pub(super) fn render(servers: &[Converted]) -> String {
    let mut out = String::new();
    let mut last_source: Option<&str> = None;
    // Writing to a String cannot fail: the `let _ =` below drop nothing.
    for c in servers {
        if last_source != Some(c.source.as_str()) {
            if last_source.is_some() {
                out.push('\n');
            }
            let _ = writeln!(out, "# imported from {}", one_line(&c.source));
            last_source = Some(&c.source);
        } else {
            out.push('\n');
        }
        if c.name != c.original {
            let _ = writeln!(out, "# (named {:?} there)", one_line(&c.original));
        }
        if let Some(d) = c
            .description
            .as_deref()
            .map(one_line)
            .filter(|d| !d.is_empty())
        {
            let cut: String = d.chars().take(DESCRIPTION_CHARS).collect();
            let more = if cut.len() < d.len() { "…" } else { "" };
            let _ = writeln!(out, "# {cut}{more}");
        }
        let _ = writeln!(out, "[servers.{}]", c.name);
        for key in SERVER_KEYS {
            if let Some(v) = c.table.get(key) {
                let _ = writeln!(out, "{key} = {}", value_text(v));
            }
        }
        for (sub, keys) in SUB_TABLES {
            if let Some(toml::Value::Table(t)) = c.table.get(sub) {
                let _ = writeln!(out, "[servers.{}.{sub}]", c.name);
                for key in keys {
                    if let Some(v) = t.get(*key) {
                        let _ = writeln!(out, "{key} = {}", value_text(v));
                    }
                }
            }
        }
    }
    out
}

/// Text from a client on one comment line: control characters (a TOML comment takes
/// none but tab) become spaces.
fn one_line(s: &str) -> String {
    let line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    line.trim().to_owned()
}

/// A TOML value on one line (tables inline).
fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(t) => {
            let items: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{} = {}", key_text(k), value_text(v)))
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
        toml::Value::Array(a) => {
            let items: Vec<String> = a.iter().map(value_text).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

fn key_text(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_owned()
    } else {
        toml::Value::String(k.to_owned()).to_string()
    }
}
