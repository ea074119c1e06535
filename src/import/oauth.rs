//! A remote server's OAuth client settings, read from any client's entry.
//!
//! They become the body of `[servers.NAME.oauth]`.

use super::Dialect;
use super::notes::Notes;
use super::store::{Move, Place};
use super::values::{Ref, has_reference, reference, whole_var};
use serde_json::Value;
use std::collections::BTreeSet;

/// The fields of a client's server entry that hold OAuth client settings: Claude Code's,
/// VS Code's, Gemini CLI's and Codex's `oauth`, Cursor's `auth`.
pub(super) const OAUTH_FIELDS: [&str; 2] = ["oauth", "auth"];

/// What was read so far.
#[derive(Default)]
struct Found {
    client_id: Option<String>,
    /// The variable holding the client secret.
    secret: Option<String>,
    /// A literal client secret, moved into the secret store.
    literal: Option<String>,
    scopes: Vec<String>,
    port: Option<u16>,
}

/// The body of `[servers.NAME.oauth]` from a remote entry's OAuth settings; None when
/// nothing mcpd can use is left. Read, case- and `_`-insensitively:
///
/// - Claude Code (`~/.claude.json`, `.mcp.json`): `"oauth": {"clientId", "callbackPort",
///   "scopes" (one space-separated string), "authServerMetadataUrl", "xaa"}`; its client
///   secret is kept in the keychain, not in the config;
/// - VS Code (`mcp.json`): `"oauth": {"clientId"}`;
/// - Cursor (`mcp.json`): `"auth": {"CLIENT_ID", "CLIENT_SECRET", "scopes" (a list)}`;
/// - Gemini CLI (settings.json): `"oauth": {"enabled", "clientId", "clientSecret",
///   "scopes", "authorizationUrl", "tokenUrl", "redirectUri", "audiences", …}`;
/// - Codex (config.toml): `[mcp_servers.NAME.oauth]` `client_id`, `client_secret`,
///   `callback_url`, with the server's `scopes` (moved in here by its reader).
///
/// A client secret that refers to a variable becomes `client_secret_env`; a literal one is
/// moved into the secret store, and `client_secret = "${secret:NAME}"` written. Everything
/// left out gets a note.
pub(super) fn oauth_table(
    def: &serde_json::Map<String, Value>,
    name: &str,
    what: &str,
    dialect: Dialect,
    notes: &mut Notes,
) -> Option<toml::Table> {
    let mut found = Found::default();
    let ctx = Ctx {
        name,
        what,
        dialect,
    };
    for field in OAUTH_FIELDS {
        let Some(value) = def.get(field) else {
            continue;
        };
        let Some(map) = value.as_object() else {
            notes.warn(format!(
                "{what}: \"{field}\" is not an object; no OAuth settings copied from it"
            ));
            continue;
        };
        for (key, value) in map {
            let k = format!("{field}.{key}");
            setting(&mut found, &ctx, &k, value, notes);
        }
    }
    table(found, name, what, notes)
}

/// The entry an OAuth object belongs to.
struct Ctx<'a> {
    name: &'a str,
    what: &'a str,
    dialect: Dialect,
}

/// Reads one setting of an OAuth object (`k` is `field.key`) into `found`.
fn setting(found: &mut Found, ctx: &Ctx<'_>, k: &str, value: &Value, notes: &mut Notes) {
    let Ctx {
        name,
        what,
        dialect,
    } = *ctx;
    let key = k.split_once('.').map_or(k, |(_, key)| key);
    let finds_it_itself = "mcpd has no such setting and finds the authorization server itself \
                           (protected resource metadata, then authorization server metadata)";
    match key.to_ascii_lowercase().replace('_', "").as_str() {
        "clientid" => match value.as_str() {
            Some(id) if has_reference(id, dialect) => notes.warn(format!(
                "{what}: {k} {id:?} is a placeholder, and mcpd does not expand ${{…}} in client_id; \
                 write the client id into [servers.{name}.oauth] client_id by hand"
            )),
            Some(id) if !id.trim().is_empty() => found.client_id = Some(id.to_owned()),
            _ => notes.warn(format!(
                "{what}: {k} is not a client id (a non-empty string); ignored"
            )),
        },
        "clientsecret" => match value.as_str().map(|s| reference(s, dialect)) {
            Some(Ref::Literal) if value.as_str() == Some("") => {
                notes.warn(format!("{what}: {k} is empty; ignored"));
            }
            Some(Ref::Literal) => found.literal = value.as_str().map(str::to_owned),
            Some(Ref::Vars(v)) => match whole_var(&v) {
                Some(var) => found.secret = Some(var.to_owned()),
                None => notes.warn(format!(
                    "{what}: {k} skipped: client_secret_env names one variable that holds the whole \
                     secret, not text around ${{VAR}}; set it in [servers.{name}.oauth] by hand"
                )),
            },
            Some(Ref::Unresolvable(why)) => notes.warn(format!(
                "{what}: {k} skipped: {why}; set client_secret_env in [servers.{name}.oauth] by hand"
            )),
            None => notes.warn(format!("{what}: {k} is not a string; ignored")),
        },
        "callbackport" => match port_of(value) {
            Some(p) => found.port = Some(p),
            None => notes.warn(format!(
                "{what}: {k} {value} is not a port (1-65535); ignored, so mcpd redirects to a random port"
            )),
        },
        "scopes" | "scope" => found.scopes.extend(scope_list(value, k, what, notes)),
        "authservermetadataurl" | "authorizationurl" | "tokenurl" | "registrationurl" => {
            notes.warn(format!("{what}: {k} not copied: {finds_it_itself}"));
        }
        "redirecturi" | "callbackurl" => notes.warn(format!(
            "{what}: {k} not copied: mcpd's redirect is http://127.0.0.1:PORT/callback \
             (PORT is redirect_port in [servers.{name}.oauth]), which the OAuth app must allow"
        )),
        "enabled" if value == &Value::Bool(true) => {}
        "enabled" => notes.warn(format!(
            "{what}: {k} not copied: to turn mcpd's OAuth login off, set oauth = false in [servers.{name}]"
        )),
        "xaa" if value == &Value::Bool(false) => {}
        "xaa" => notes.warn(format!(
            "{what}: {k} not copied: mcpd has no cross-app access; it logs in with mcpd ctl login"
        )),
        "audiences" | "tokenparamname" | "resource" => notes.warn(format!(
            "{what}: {k} not copied: mcpd has no such setting"
        )),
        _ => notes.warn(format!(
            "{what}: {k} is not an OAuth setting mcpd import knows; ignored"
        )),
    }
}

/// The `[servers.NAME.oauth]` body of what was found; None when it is empty.
fn table(mut found: Found, name: &str, what: &str, notes: &mut Notes) -> Option<toml::Table> {
    if (found.secret.is_some() || found.literal.is_some()) && found.client_id.is_none() {
        notes.warn(format!(
            "{what}: its OAuth client secret was not copied: mcpd uses a client secret only with its client_id"
        ));
        found.secret = None;
        found.literal = None;
    }
    let mut t = toml::Table::new();
    if let Some(id) = found.client_id {
        t.insert("client_id".into(), id.into());
        notes.oauth_clients.push(name.to_owned());
        if found.secret.is_none() && found.literal.is_none() {
            notes.oauth_without_secret.push(name.to_owned());
        }
    }
    if let Some(var) = found.secret {
        notes.need(name, &var, "OAuth client secret");
        t.insert("client_secret_env".into(), var.into());
    }
    if let Some(literal) = found.literal {
        let m = Move::new(name, Place::ClientSecret, "", &literal);
        t.insert("client_secret".into(), m.reference().into());
        notes.moves.push(m);
    }
    let mut seen = BTreeSet::new();
    found.scopes.retain(|s| seen.insert(s.clone()));
    if !found.scopes.is_empty() {
        t.insert("scopes".into(), found.scopes.into());
    }
    if let Some(p) = found.port {
        t.insert("redirect_port".into(), i64::from(p).into());
    }
    (!t.is_empty()).then_some(t)
}

/// A callback port: an integer (or a string of digits) from 1 to 65535.
fn port_of(value: &Value) -> Option<u16> {
    let n = match value {
        Value::Number(n) => n.as_u64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    u16::try_from(n).ok().filter(|p| *p != 0)
}

/// Scopes from one space-separated string (Claude Code) or a list of strings (Cursor,
/// Gemini CLI, Codex); values mcpd's config would refuse are reported and left out.
fn scope_list(value: &Value, key: &str, what: &str, notes: &mut Notes) -> Vec<String> {
    let mut words = Vec::new();
    match value {
        Value::String(s) => words.extend(s.split_whitespace().map(str::to_owned)),
        Value::Array(items) => {
            for item in items {
                match item.as_str() {
                    Some(s) => words.extend(s.split_whitespace().map(str::to_owned)),
                    None => notes.warn(format!(
                        "{what}: {key} has {item}, which is not a scope (a string); ignored"
                    )),
                }
            }
        }
        _ => {
            notes.warn(format!(
                "{what}: {key} is neither a string nor a list of strings; ignored"
            ));
        }
    }
    let mut out = Vec::new();
    for w in words {
        if w.contains(['"', '\\']) || w.contains("${") {
            notes.warn(format!(
                "{what}: {key}: {w:?} is not a scope mcpd accepts; ignored"
            ));
        } else {
            out.push(w);
        }
    }
    out
}
