//! The JSON client files.
//!
//! `mcpServers` (Claude Desktop, Claude Code, Cursor, Gemini CLI), `servers` (VS Code)
//! and `projects` (Claude Code's `~/.claude.json`), read into entries.

use super::{Dialect, Entry, ImportError};
use serde_json::{Map, Value};
use std::path::Path;

/// Keys only Gemini CLI's server entries have: a file passed by path that uses one is
/// read as Gemini's settings.json. Not `timeout`, which Cline's entries have too, in
/// seconds rather than milliseconds.
const GEMINI_KEYS: [&str; 7] = [
    "httpUrl",
    "trust",
    "includeTools",
    "excludeTools",
    "authProviderType",
    "targetAudience",
    "targetServiceAccount",
];

/// Reads one JSON client file, detecting its layout by its top-level keys. `dialect` is
/// None when the file's client is unknown: Gemini's if an entry uses a key only Gemini
/// has, else the others'. `found` says it was found as a client's own file, where having
/// no servers is no error.
pub(super) fn read(
    file: &Path,
    text: &str,
    label: &str,
    dialect: Option<Dialect>,
    found: bool,
) -> Result<Vec<Entry>, ImportError> {
    let json: Value = serde_json::from_str(text)
        .map_err(|e| ImportError::Invalid(format!("{} is not valid JSON: {e}", file.display())))?;
    let Some(top) = json.as_object() else {
        return Err(ImportError::Invalid(format!(
            "{} is not a JSON object",
            file.display()
        )));
    };
    let known = ["mcpServers", "servers", "projects"];
    if !known.iter().any(|k| top.contains_key(*k)) {
        if found {
            return Ok(Vec::new());
        }
        return Err(ImportError::Invalid(format!(
            "{} has none of the keys \"mcpServers\", \"servers\" or \"projects\": not an MCP client config",
            file.display()
        )));
    }
    let mut out = Vec::new();
    take(&mut out, top.get("mcpServers"), label)?;
    take(&mut out, top.get("servers"), label)?;
    if let Some(projects) = top.get("projects").and_then(Value::as_object) {
        for (project, p) in projects {
            take(
                &mut out,
                p.get("mcpServers"),
                &format!("{label} (project {project})"),
            )?;
        }
    }
    let dialect = dialect.unwrap_or_else(|| {
        let uses_gemini_keys = out
            .iter()
            .any(|e| GEMINI_KEYS.iter().any(|k| e.def.contains_key(*k)));
        if uses_gemini_keys {
            Dialect::Gemini
        } else {
            Dialect::Json
        }
    });
    for entry in &mut out {
        entry.dialect = dialect;
    }
    if dialect == Dialect::Gemini {
        gemini_disabled(top, &mut out);
    }
    Ok(out)
}

/// Adds the entries of one server list (a JSON object of name → definition).
fn take(out: &mut Vec<Entry>, servers: Option<&Value>, source: &str) -> Result<(), ImportError> {
    let Some(servers) = servers else {
        return Ok(());
    };
    let Some(map) = servers.as_object() else {
        return Err(ImportError::Invalid(format!(
            "{source}: the server list is not a JSON object"
        )));
    };
    for (name, def) in map {
        match def.as_object() {
            Some(def) => out.push(Entry {
                source: source.to_owned(),
                original: name.clone(),
                dialect: Dialect::Json,
                def: def.clone(),
            }),
            None => mcpd_ctl::errln!("{source}: skipped {name:?}: not a JSON object"),
        }
    }
    Ok(())
}

/// Gemini CLI's `mcp.excluded` names servers it does not start, and `mcp.allowed`, when
/// set, the only ones it does: the others are imported with `"disabled": true`, which
/// becomes `enabled = false`.
fn gemini_disabled(top: &Map<String, Value>, entries: &mut [Entry]) {
    let list = |key: &str| -> Option<Vec<&str>> {
        let items = top.get("mcp")?.get(key)?.as_array()?;
        Some(items.iter().filter_map(Value::as_str).collect())
    };
    let excluded = list("excluded").unwrap_or_default();
    let allowed = list("allowed");
    for entry in entries {
        let name = entry.original.as_str();
        let off = excluded.contains(&name) || allowed.as_ref().is_some_and(|a| !a.contains(&name));
        if off {
            entry.def.insert("disabled".into(), Value::Bool(true));
        }
    }
}
