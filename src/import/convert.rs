//! One client entry to the body of a `[servers.NAME]` table.
//!
//! A remote server's url, transport, headers and OAuth client, or a local server's
//! command, args, env and cwd; then the keys only Gemini CLI or Codex have. Literal
//! secrets in headers and env become `${secret:NAME}` references, their values noted to
//! be moved into the secret store.

use super::notes::Notes;
use super::oauth::{OAUTH_FIELDS, oauth_table};
use super::secret_like::secret_part;
use super::store::{Move, Place};
use super::values::{Ref, has_reference, reference, strings, vars_in};
use super::{Dialect, Entry, codex, gemini};
use serde_json::Value;
use std::path::Path;

/// Converts one client entry into the body of `[servers.NAME]`; None (with a message) when
/// it cannot be imported.
pub(super) fn convert(entry: &Entry, name: &str, notes: &mut Notes) -> Option<toml::Table> {
    let def = &entry.def;
    let what = format!("{}: server {:?}", entry.source, entry.original);
    // Gemini CLI's `httpUrl` (Streamable HTTP) wins over its `url`, as in Gemini CLI.
    let url = ["httpUrl", "url"]
        .iter()
        .find_map(|k| def.get(*k).and_then(Value::as_str));
    let mut t = if let Some(url) = url {
        remote(entry, url, name, &what, notes)
    } else if let Some(command) = def.get("command").and_then(Value::as_str) {
        local(entry, command, name, &what, notes)?
    } else {
        notes.warn(format!(
            "{what}: skipped: it has neither \"command\" nor \"url\""
        ));
        return None;
    };
    if def.get("disabled").and_then(Value::as_bool) == Some(true) {
        t.insert("enabled".into(), false.into());
    }
    match entry.dialect {
        Dialect::Json => {}
        Dialect::Gemini => gemini::extra(def, &mut t, name, &what, notes),
        Dialect::Codex => codex::extra(def, &mut t, name, &what, notes),
    }
    Some(t)
}

/// A remote server: `url`, `transport`, `headers` and its OAuth client.
fn remote(entry: &Entry, url: &str, name: &str, what: &str, notes: &mut Notes) -> toml::Table {
    let def = &entry.def;
    let mut t = toml::Table::new();
    t.insert("url".into(), url.into());
    // `"type": "sse"` is the 2024-11-05 transport; anything else is left to mcpd's
    // "auto", which falls back to it as Gemini CLI does for a `url` without a type.
    if def.get("type").and_then(Value::as_str) == Some("sse") && !def.contains_key("httpUrl") {
        t.insert("transport".into(), "sse".into());
    }
    let mut headers = toml::Table::new();
    for (key, value) in strings(def.get("headers"), what, "headers", notes) {
        match reference(&value, entry.dialect) {
            Ref::Literal => match secret_part(&key, &value) {
                Some((prefix, secret)) => {
                    let m = Move::new(name, Place::Header(key.clone()), prefix, secret);
                    headers.insert(key, m.reference().into());
                    notes.moves.push(m);
                }
                None => {
                    headers.insert(key, value.into());
                }
            },
            Ref::Vars(v) => {
                for var in vars_in(&v) {
                    notes.need(name, &var, format!("header {key}"));
                }
                headers.insert(key, v.into());
            }
            Ref::Unresolvable(why) => notes.warn(format!(
                "{what}: header {key} skipped: {why}; add it to [servers.{name}] headers by hand"
            )),
        }
    }
    let auth_header = headers
        .keys()
        .any(|k| k.eq_ignore_ascii_case("authorization"));
    if !headers.is_empty() {
        t.insert("headers".into(), headers.into());
    }
    if auth_header && OAUTH_FIELDS.iter().any(|f| def.contains_key(*f)) {
        notes.warn(format!(
            "{what}: its OAuth settings were not copied: it also sends an Authorization header, and a static \
             Authorization header turns mcpd's OAuth login off; to log in with OAuth instead, remove \
             headers.Authorization from [servers.{name}] and add a [servers.{name}.oauth] table"
        ));
    } else if let Some(oauth) = oauth_table(def, name, what, entry.dialect, notes) {
        t.insert("oauth".into(), oauth.into());
    }
    t
}

/// A local server: `command`, `args`, `env` and `cwd`; None (with a message) when it
/// cannot be imported.
fn local(
    entry: &Entry,
    command: &str,
    name: &str,
    what: &str,
    notes: &mut Notes,
) -> Option<toml::Table> {
    let def = &entry.def;
    let kind = def.get("type").and_then(Value::as_str);
    if is_mcpd(command) {
        notes.warn(format!(
            "{what}: skipped: it runs mcpd itself (the entry that points this client at mcpd); mcpd does not import itself"
        ));
        return None;
    }
    if kind.is_some_and(|k| k != "stdio") {
        notes.warn(format!("{what}: skipped: type {kind:?} without a url"));
        return None;
    }
    for field in OAUTH_FIELDS.iter().filter(|f| def.contains_key(**f)) {
        notes.warn(format!(
            "{what}: \"{field}\" ignored: OAuth settings apply to remote servers (with a \"url\") only"
        ));
    }
    let mut t = toml::Table::new();
    t.insert("command".into(), command.into());
    let args: Vec<String> = match def.get("args") {
        None => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect(),
        Some(_) => {
            notes.warn(format!("{what}: skipped: \"args\" is not an array"));
            return None;
        }
    };
    if args.iter().any(|a| has_reference(a, entry.dialect)) {
        notes.warn(format!(
            "{what}: its args refer to environment variables, which mcpd passes on as they are; edit [servers.{name}] args"
        ));
    }
    if !args.is_empty() {
        t.insert("args".into(), args.into());
    }
    let env = local_env(entry, name, what, notes);
    if !env.is_empty() {
        t.insert("env".into(), env.into());
    }
    if let Some(cwd) = def.get("cwd").and_then(Value::as_str) {
        if has_reference(cwd, entry.dialect) {
            notes.warn(format!("{what}: cwd {cwd:?} is a placeholder; not copied"));
        } else {
            t.insert("cwd".into(), cwd.into());
        }
    }
    Some(t)
}

/// A local server's literal env values: a secret as a `${secret:NAME}` reference (its
/// value noted to be moved), anything else as it is. One that refers to a variable is
/// left out: mcpd does not expand variables there, and the server inherits mcpd's
/// environment, so the user is told to set the key there.
fn local_env(entry: &Entry, name: &str, what: &str, notes: &mut Notes) -> toml::Table {
    let mut env = toml::Table::new();
    let mut copied = false;
    for (key, value) in strings(entry.def.get("env"), what, "env", notes) {
        if has_reference(&value, entry.dialect) {
            notes.warn(format!(
                "{what}: env {key} skipped: {value:?} is a placeholder and mcpd does not expand ${{…}} in a local \
                 server's env; local servers inherit mcpd's environment, so set {key} there instead"
            ));
            notes.need_local(
                name,
                &key,
                format!("env {key}, which the client set from a variable"),
            );
            continue;
        }
        if let Some((prefix, secret)) = secret_part(&key, &value) {
            let m = Move::new(name, Place::Env(key.clone()), prefix, secret);
            env.insert(key, m.reference().into());
            notes.moves.push(m);
        } else {
            copied = true;
            env.insert(key, value.into());
        }
    }
    if copied {
        notes.literal_env.push(name.to_owned());
    }
    env
}

/// Whether a client's command runs mcpd: named `mcpd`, or the very binary running now.
/// Importing it would make the daemon its own server.
fn is_mcpd(command: &str) -> bool {
    let path = Path::new(command);
    if path.file_name().is_some_and(|n| n == "mcpd") {
        return true;
    }
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    let this = std::env::current_exe().ok().and_then(|p| canonical(&p));
    this.is_some() && canonical(path) == this
}

#[cfg(test)]
mod tests {
    use super::super::store;
    use super::*;
    use serde_json::json;

    fn entry(def: Value) -> Entry {
        Entry {
            source: "test.json".into(),
            original: "gh".into(),
            dialect: Dialect::Json,
            def: def.as_object().cloned().unwrap_or_default(),
        }
    }

    #[test]
    fn literal_secrets_become_references_and_their_values_appear_nowhere_in_the_table() {
        let canary = "ghp_CANARY0123456789abcdef";
        let mut notes = Notes::default();
        let remote = entry(json!({"url": "https://x.example/mcp", "headers": {
            "Authorization": format!("Bearer {canary}"), "X-Team": "acme", "X-Ref": "${TEAM}"}}));
        let t = convert(&remote, "gh", &mut notes).unwrap();
        let text = toml::to_string(&t).unwrap();
        assert!(!text.contains(canary), "{text}");
        assert_eq!(
            t["headers"]["Authorization"].as_str(),
            Some("Bearer ${secret:gh-Authorization}")
        );
        assert_eq!(t["headers"]["X-Team"].as_str(), Some("acme"));
        assert_eq!(t["headers"]["X-Ref"].as_str(), Some("${TEAM}"));

        let local = entry(json!({"command": "srv", "env": {
            "GITHUB_TOKEN": canary, "LOG_LEVEL": "debug"}}));
        let t = convert(&local, "gh", &mut notes).unwrap();
        let text = toml::to_string(&t).unwrap();
        assert!(!text.contains(canary), "{text}");
        assert_eq!(
            t["env"]["GITHUB_TOKEN"].as_str(),
            Some("${secret:gh-GITHUB_TOKEN}")
        );
        assert_eq!(t["env"]["LOG_LEVEL"].as_str(), Some("debug"));
        let places: Vec<&store::Place> = notes.moves.iter().map(|m| &m.place).collect();
        assert_eq!(
            places,
            [
                &store::Place::Header("Authorization".into()),
                &store::Place::Env("GITHUB_TOKEN".into())
            ]
        );
    }
}
