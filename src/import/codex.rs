//! Codex's config.toml: its `[mcp_servers.NAME]` tables read into entries.
//!
//! The keys only Codex has (`env_vars`, `bearer_token_env_var`, `env_http_headers`,
//! `enabled`, timeouts, tool lists) are added to a converted `[servers.NAME]` table.

use super::notes::Notes;
use super::policy::{duration, number, tools_table};
use super::store::{Move, Place};
use super::values::{is_var_name, strings};
use super::{Dialect, Entry, ImportError};
use serde_json::{Map, Value};
use std::path::Path;

/// The keys of a Codex server table that are read (here or by the common conversion);
/// any other is reported as not copied. The reader renames `http_headers` to `headers`
/// and moves `scopes` and `oauth_resource` into `oauth`.
const KNOWN: [&str; 18] = [
    "command",
    "args",
    "env",
    "env_vars",
    "cwd",
    "url",
    "headers",
    "env_http_headers",
    "bearer_token_env_var",
    "bearer_token",
    "oauth",
    "enabled",
    "required",
    "startup_timeout_sec",
    "startup_timeout_ms",
    "tool_timeout_sec",
    "enabled_tools",
    "disabled_tools",
];

/// Whether a file that is not JSON is a Codex config: TOML with an `mcp_servers` table.
pub(super) fn looks_like_codex(text: &str) -> bool {
    toml::from_str::<toml::Table>(text)
        .ok()
        .is_some_and(|t| t.get("mcp_servers").is_some_and(toml::Value::is_table))
}

/// Reads a Codex config.toml. `found` says it was found as Codex's own file, where having
/// no servers is no error.
pub(super) fn read(
    file: &Path,
    text: &str,
    label: &str,
    found: bool,
) -> Result<Vec<Entry>, ImportError> {
    let top: toml::Table = toml::from_str(text).map_err(|e| {
        ImportError::Invalid(format!(
            "{} is not valid TOML: {}",
            file.display(),
            e.to_string().trim_end()
        ))
    })?;
    let Some(servers) = top.get("mcp_servers") else {
        if found {
            return Ok(Vec::new());
        }
        return Err(ImportError::Invalid(format!(
            "{} has no [mcp_servers] table: not a Codex config with MCP servers",
            file.display()
        )));
    };
    let Some(servers) = servers.as_table() else {
        return Err(ImportError::Invalid(format!(
            "{label}: mcp_servers is not a table"
        )));
    };
    let mut out = Vec::new();
    for (name, def) in servers {
        let def = match serde_json::to_value(def) {
            Ok(Value::Object(def)) => def,
            _ => {
                mcpd_ctl::errln!("{label}: skipped {name:?}: [mcp_servers.{name}] is not a table");
                continue;
            }
        };
        out.push(Entry {
            source: label.to_owned(),
            original: name.clone(),
            dialect: Dialect::Codex,
            def: normalize(def),
        });
    }
    Ok(out)
}

/// Moves Codex's keys that mean what another client's key means to that key, so the
/// common conversion reads them: `http_headers` (literal values) to `headers`, and the
/// server's `scopes` and `oauth_resource` into its `oauth` table.
fn normalize(mut def: Map<String, Value>) -> Map<String, Value> {
    if let Some(h) = def.remove("http_headers") {
        def.insert("headers".into(), h);
    }
    for (key, to) in [("scopes", "scopes"), ("oauth_resource", "resource")] {
        let Some(v) = def.remove(key) else { continue };
        let oauth = def
            .entry("oauth")
            .or_insert_with(|| Value::Object(Map::new()));
        match oauth.as_object_mut() {
            Some(o) => {
                o.insert(to.into(), v);
            }
            // Reported by the OAuth conversion; the key goes back to be reported too.
            None => {
                def.insert(key.into(), v);
            }
        }
    }
    def
}

/// Adds what Codex's own keys say to `t`, and notes what mcpd has no place for.
pub(super) fn extra(
    def: &Map<String, Value>,
    t: &mut toml::Table,
    name: &str,
    what: &str,
    notes: &mut Notes,
) {
    if def.get("enabled") == Some(&Value::Bool(false)) {
        t.insert("enabled".into(), false.into());
    }
    let remote = t.contains_key("url");
    let wrong_kind = |key: &str, notes: &mut Notes| {
        notes.warn(format!(
            "{what}: {key} ignored: it applies to {} servers only",
            if remote { "local" } else { "remote" }
        ));
    };
    if let Some(v) = def.get("env_vars") {
        if remote {
            wrong_kind("env_vars", notes);
        } else {
            env_vars(v, name, what, notes);
        }
    }
    for key in ["env_http_headers", "bearer_token_env_var"] {
        if def.contains_key(key) && !remote {
            wrong_kind(key, notes);
        }
    }
    if remote {
        env_headers(def, t, name, what, notes);
        bearer(def, t, name, what, notes);
    }
    if def.contains_key("bearer_token") {
        literal_bearer(def, t, name, what, notes);
    }
    timeouts(def, t, what, notes);
    let allow = def.get("enabled_tools").map(|v| ("enabled_tools", v));
    let deny = def.get("disabled_tools").map(|v| ("disabled_tools", v));
    if let Some(tools) = tools_table(allow, deny, false, what, notes) {
        t.insert("tools".into(), tools.into());
    }
    if def.get("required") == Some(&Value::Bool(true)) {
        notes.warn(format!(
            "{what}: required not copied: mcpd starts the other servers when one fails, and mcpd ctl status \
             shows which"
        ));
    }
    for key in def.keys().filter(|k| !KNOWN.contains(&k.as_str())) {
        notes.warn(format!(
            "{what}: {key} not copied: mcpd has no such setting"
        ));
    }
}

/// `env_vars`: names of Codex's environment variables passed on to the server. mcpd's
/// local servers inherit its whole environment, so each must be set there.
fn env_vars(v: &Value, name: &str, what: &str, notes: &mut Notes) {
    let Some(items) = v.as_array() else {
        notes.warn(format!("{what}: \"env_vars\" is not a list; ignored"));
        return;
    };
    for item in items {
        // An item is a name, or a table naming one.
        match item
            .as_str()
            .or_else(|| item.get("name").and_then(Value::as_str))
        {
            Some(var) => {
                notes.need_local(name, var, format!("{var}, passed on by Codex's env_vars"))
            }
            None => notes.warn(format!(
                "{what}: env_vars has {item}, which names no variable; ignored"
            )),
        }
    }
}

/// `env_http_headers`: header name → the variable holding its value, as `${VAR}` headers.
fn env_headers(
    def: &Map<String, Value>,
    t: &mut toml::Table,
    name: &str,
    what: &str,
    notes: &mut Notes,
) {
    let mut added = Vec::new();
    for (header, var) in strings(def.get("env_http_headers"), what, "env_http_headers", notes) {
        if is_var_name(&var) {
            notes.need(name, &var, format!("header {header}"));
            added.push((header, toml::Value::from(format!("${{{var}}}"))));
        } else {
            notes.warn(format!(
                "{what}: env_http_headers {header} skipped: {var:?} is not a variable name mcpd's ${{VAR}} takes"
            ));
        }
    }
    if added.is_empty() {
        return;
    }
    let headers = t
        .entry("headers")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let Some(headers) = headers.as_table_mut() {
        headers.extend(added);
    }
}

/// `bearer_token_env_var` as mcpd's `bearer_token_env`, which (like an Authorization
/// header) turns mcpd's OAuth login off.
fn bearer(
    def: &Map<String, Value>,
    t: &mut toml::Table,
    name: &str,
    what: &str,
    notes: &mut Notes,
) {
    let Some(v) = def.get("bearer_token_env_var") else {
        return;
    };
    let Some(var) = v.as_str().filter(|s| !s.trim().is_empty()) else {
        notes.warn(format!(
            "{what}: bearer_token_env_var is not a variable name; ignored"
        ));
        return;
    };
    let auth_header = t
        .get("headers")
        .and_then(toml::Value::as_table)
        .is_some_and(|h| h.keys().any(|k| k.eq_ignore_ascii_case("authorization")));
    if auth_header {
        notes.warn(format!(
            "{what}: bearer_token_env_var not copied: it also sends an Authorization header, and mcpd takes the \
             token one way only"
        ));
        return;
    }
    if t.remove("oauth").is_some() {
        notes.warn(format!(
            "{what}: its OAuth settings were not copied: a bearer token turns mcpd's OAuth login off"
        ));
    }
    notes.need(name, var, "bearer token");
    t.insert("bearer_token_env".into(), var.into());
}

/// A literal `bearer_token` (which Codex itself refuses now) as mcpd's `bearer_token =
/// "${secret:NAME}"`, its value noted to be moved into the secret store; not when the
/// token is given another way too.
fn literal_bearer(
    def: &Map<String, Value>,
    t: &mut toml::Table,
    name: &str,
    what: &str,
    notes: &mut Notes,
) {
    let token = def
        .get("bearer_token")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let auth_header = t
        .get("headers")
        .and_then(toml::Value::as_table)
        .is_some_and(|h| h.keys().any(|k| k.eq_ignore_ascii_case("authorization")));
    let why_not = if !t.contains_key("url") {
        Some("it applies to remote servers only")
    } else if token.is_none() {
        Some("it is not a token (a non-empty string)")
    } else if auth_header || t.contains_key("bearer_token_env") {
        Some("the token is also given another way, and mcpd takes it one way only")
    } else {
        None
    };
    let (Some(token), None) = (token, why_not) else {
        let why = why_not.unwrap_or_default();
        notes.warn(format!("{what}: bearer_token not copied: {why}"));
        return;
    };
    if t.remove("oauth").is_some() {
        notes.warn(format!(
            "{what}: its OAuth settings were not copied: a bearer token turns mcpd's OAuth login off"
        ));
    }
    let m = Move::new(name, Place::Bearer, "", token);
    t.insert("bearer_token".into(), m.reference().into());
    notes.moves.push(m);
}

/// `startup_timeout_sec` (or `_ms`) as `[servers.NAME.health] startup_timeout`, and
/// `tool_timeout_sec` as `timeout`.
fn timeouts(def: &Map<String, Value>, t: &mut toml::Table, what: &str, notes: &mut Notes) {
    let startup = [("startup_timeout_sec", 1000.0), ("startup_timeout_ms", 1.0)]
        .into_iter()
        .find_map(|(key, scale)| Some((key, number(def.get(key)?, scale))));
    if let Some((key, ms)) = startup
        && let Some(d) = duration(ms, key, what, notes)
    {
        let mut health = toml::Table::new();
        health.insert("startup_timeout".into(), d.into());
        t.insert("health".into(), health.into());
    }
    if let Some(v) = def.get("tool_timeout_sec")
        && let Some(d) = duration(number(v, 1000.0), "tool_timeout_sec", what, notes)
    {
        t.insert("timeout".into(), d.into());
    }
}
