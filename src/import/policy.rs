//! Which tools agents see and how long a server may take, as Gemini CLI and Codex say it.
//!
//! Gemini CLI says it with `includeTools`, `excludeTools` and `timeout`, Codex with
//! `enabled_tools`, `disabled_tools` and `*_timeout_sec`; they become mcpd's
//! `[servers.NAME.tools]`, `timeout` and `[servers.NAME.health] startup_timeout`.

use super::notes::Notes;
use super::values::string_list;
use serde_json::Value;

/// The longest duration mcpd's config takes (docs/configuration.md: at most 30 days).
const MAX_MS: f64 = 30.0 * 24.0 * 3600.0 * 1000.0;

/// One client list of tool names: its key and value.
pub(super) type ToolList<'a> = Option<(&'a str, &'a Value)>;

/// `[servers.NAME.tools]` with `allow` and `deny` from a client's lists of tool names;
/// None when both are absent. Names are exact: one with a glob character of mcpd's (`*`,
/// `?`) is left out with a note. `gemini` also reads an item as Gemini CLI does: `name(…)`
/// (a restriction of the tool's arguments, which mcpd cannot apply) as `name`, and, since
/// `gemini mcp add --include-tools a,b` writes one item `"a,b"`, an item with commas as
/// the names between them.
pub(super) fn tools_table(
    allow: ToolList<'_>,
    deny: ToolList<'_>,
    gemini: bool,
    what: &str,
    notes: &mut Notes,
) -> Option<toml::Table> {
    let mut t = toml::Table::new();
    let allow = allow.and_then(|(key, v)| Some((key, names(v, key, gemini, what, notes)?)));
    let mut deny = deny
        .and_then(|(key, v)| names(v, key, gemini, what, notes))
        .unwrap_or_default();
    if let Some((key, allow)) = allow {
        if allow.is_empty() {
            // An empty allow-list lets no tool through in both clients; mcpd's empty
            // `allow` lets every tool through, so the same is said with `deny`.
            notes.warn(format!(
                "{what}: {key} is empty, so the client shows none of its tools; written as tools.deny = [\"*\"]"
            ));
            deny = vec!["*".to_owned()];
        } else {
            t.insert("allow".into(), allow.into());
        }
    }
    if !deny.is_empty() {
        t.insert("deny".into(), deny.into());
    }
    (!t.is_empty()).then_some(t)
}

/// The tool names of one list; None (reported) when it is not a list.
fn names(v: &Value, key: &str, gemini: bool, what: &str, notes: &mut Notes) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for item in string_list(v, what, key, notes)? {
        let parts: Vec<&str> = if gemini && item.contains(',') {
            notes.warn(format!(
                "{what}: {key} item {item:?} read as the tools between its commas (what `gemini mcp add` meant; \
                 Gemini CLI itself compares the whole text)"
            ));
            item.split(',').collect()
        } else {
            vec![item.as_str()]
        };
        for part in parts {
            let mut name = part.trim();
            if gemini && let Some((tool, _)) = name.split_once('(') {
                notes.warn(format!(
                    "{what}: {key} item {name:?} read as {tool:?}: mcpd cannot restrict a tool's arguments"
                ));
                name = tool.trim();
            }
            if name.is_empty() {
                continue;
            }
            if name.contains(['*', '?']) {
                notes.warn(format!(
                    "{what}: {key} item {name:?} left out: * and ? are patterns in mcpd's tool lists"
                ));
                continue;
            }
            if !out.iter().any(|n| n == name) {
                out.push(name.to_owned());
            }
        }
    }
    Some(out)
}

/// A number of milliseconds as an mcpd duration (`"30s"`, `"1500ms"`); None (reported)
/// when it is not a positive number of at most 30 days.
pub(super) fn duration(
    ms: Option<f64>,
    key: &str,
    what: &str,
    notes: &mut Notes,
) -> Option<String> {
    let valid = ms.filter(|ms| ms.is_finite() && *ms >= 0.5 && *ms <= MAX_MS);
    let Some(ms) = valid else {
        notes.warn(format!(
            "{what}: {key} is not a positive duration of at most 30 days; not copied"
        ));
        return None;
    };
    // Whole milliseconds, which `valid` bounds far below u64's range.
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "bounded above"
    )]
    let ms = ms.round() as u64;
    Some(if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    })
}

/// A JSON number as f64, scaled (seconds to milliseconds: 1000).
pub(super) fn number(v: &Value, scale: f64) -> Option<f64> {
    v.as_f64().map(|n| n * scale)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_are_written_as_mcpd_reads_them() {
        let mut notes = Notes::default();
        assert_eq!(
            duration(Some(30000.0), "t", "w", &mut notes).as_deref(),
            Some("30s")
        );
        assert_eq!(
            duration(Some(1500.0), "t", "w", &mut notes).as_deref(),
            Some("1500ms")
        );
        assert_eq!(duration(Some(0.0), "t", "w", &mut notes), None);
        assert_eq!(duration(Some(MAX_MS * 2.0), "t", "w", &mut notes), None);
        assert_eq!(duration(None, "t", "w", &mut notes), None);
    }

    #[test]
    fn tool_lists_become_allow_and_deny() {
        let mut notes = Notes::default();
        let allow = json!(["create_issue,list_issues", "run(git)", "a*"]);
        let deny = json!(["delete"]);
        let t = tools_table(
            Some(("includeTools", &allow)),
            Some(("excludeTools", &deny)),
            true,
            "w",
            &mut notes,
        )
        .unwrap();
        assert_eq!(
            t["allow"],
            toml::Value::from(vec!["create_issue", "list_issues", "run"])
        );
        assert_eq!(t["deny"], toml::Value::from(vec!["delete"]));
        let empty = json!([]);
        let t = tools_table(
            Some(("enabled_tools", &empty)),
            None,
            false,
            "w",
            &mut notes,
        )
        .unwrap();
        assert_eq!(t["deny"], toml::Value::from(vec!["*"]));
        assert!(!t.contains_key("allow"));
        assert!(tools_table(None, None, false, "w", &mut notes).is_none());
    }
}
