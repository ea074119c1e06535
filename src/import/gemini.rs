//! The keys of a Gemini CLI server entry that other clients do not have.
//!
//! `timeout`, `includeTools`/`excludeTools`, `trust` and `authProviderType`, added to a
//! converted `[servers.NAME]` table.

use super::notes::Notes;
use super::policy::{duration, number, tools_table};
use serde_json::Value;

/// The keys of a Gemini CLI entry that are read (here or by the common conversion); any
/// other is reported as not copied. `disabled` is set by the reader from `mcp.excluded`.
const KNOWN: [&str; 18] = [
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "httpUrl",
    "type",
    "headers",
    "oauth",
    "description",
    "timeout",
    "includeTools",
    "excludeTools",
    "trust",
    "authProviderType",
    "targetAudience",
    "targetServiceAccount",
    "disabled",
];

/// Adds what Gemini CLI's own keys say to `t`, and notes what mcpd has no place for.
pub(super) fn extra(
    def: &serde_json::Map<String, Value>,
    t: &mut toml::Table,
    name: &str,
    what: &str,
    notes: &mut Notes,
) {
    // Gemini CLI's request timeout, in milliseconds.
    if let Some(v) = def.get("timeout")
        && let Some(d) = duration(number(v, 1.0), "timeout", what, notes)
    {
        t.insert("timeout".into(), d.into());
    }
    let allow = def.get("includeTools").map(|v| ("includeTools", v));
    let deny = def.get("excludeTools").map(|v| ("excludeTools", v));
    if let Some(tools) = tools_table(allow, deny, true, what, notes) {
        t.insert("tools".into(), tools.into());
    }
    if def.get("trust") == Some(&Value::Bool(true)) {
        notes.warn(format!(
            "{what}: trust not copied: mcpd does not ask before a tool call; whether to ask is up to each \
             agent's client"
        ));
    }
    match def.get("authProviderType").and_then(Value::as_str) {
        None | Some("dynamic_discovery") => {}
        Some(other) => notes.warn(format!(
            "{what}: authProviderType {other:?} not copied: mcpd cannot log in with Google credentials; give \
             it a token with bearer_token_env or an Authorization header in [servers.{name}]"
        )),
    }
    for key in def.keys().filter(|k| !KNOWN.contains(&k.as_str())) {
        notes.warn(format!(
            "{what}: {key} not copied: mcpd has no such setting"
        ));
    }
}
