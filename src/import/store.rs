//! Literal secrets moved out of a client's config into mcpd's secret store.
//!
//! Each gets a name from its server and key (`github-GITHUB_TOKEN`), a free one or one
//! that already holds the same value, and the config gets `${secret:NAME}` in its place.
//! Nothing here prints or formats a value.

use super::{Converted, ImportError};
use crate::secrets::{Preferred, SecretError, SecretValue, Secrets, Store};

/// Where in a server's table a moved value stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Place {
    /// A local server's `env.KEY`.
    Env(String),
    /// A remote server's `headers.NAME`.
    Header(String),
    /// A remote server's `bearer_token`.
    Bearer,
    /// A remote server's `[oauth] client_secret`.
    ClientSecret,
}

impl Place {
    /// The setting in a sentence: "env GITHUB_TOKEN", "header Authorization".
    fn describe(&self) -> String {
        match self {
            Place::Env(k) => format!("env {k}"),
            Place::Header(k) => format!("header {k}"),
            Place::Bearer => "bearer token".to_owned(),
            Place::ClientSecret => "OAuth client secret".to_owned(),
        }
    }

    /// The key the secret's name is made from.
    fn key(&self) -> &str {
        match self {
            Place::Env(k) | Place::Header(k) => k,
            Place::Bearer => "bearer_token",
            Place::ClientSecret => "oauth_client_secret",
        }
    }
}

/// What becomes of a moved value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Stored under its name (in the store `set` picks). Every move starts so.
    Store,
    /// A store already holds this very value under its name: nothing to store.
    Reuse(Store),
    /// An earlier move of this import has the same value and name, and stores it.
    Shared,
}

/// The longest name made from a server and key: [`crate::secrets::SecretName`]'s 128
/// bytes less room for a `-N` suffix.
const NAME_ROOM: usize = 120;

/// One literal value moving from a client's config into the secret store.
pub(super) struct Move {
    pub(super) place: Place,
    /// Text kept before the reference in the config (`"Bearer "`), or empty.
    prefix: String,
    value: SecretValue,
    /// Its secret's name: the one made from the server and key, then the one picked.
    name: String,
    fate: Fate,
}

impl Move {
    /// A value of `server`'s setting `place` to move; `prefix` stays in the config.
    pub(super) fn new(server: &str, place: Place, prefix: &str, value: &str) -> Move {
        let name = secret_name(server, place.key());
        Move {
            place,
            prefix: prefix.to_owned(),
            value: SecretValue::new(value.to_owned()),
            name,
            fate: Fate::Store,
        }
    }

    /// What the config holds in its place: `Bearer ${secret:NAME}`.
    pub(super) fn reference(&self) -> String {
        format!("{}${{secret:{}}}", self.prefix, self.name)
    }

    /// Whether two moves carry the same setting and value (two clients' copies of one
    /// server are one server only when their secrets are the same too).
    pub(super) fn same(&self, other: &Move) -> bool {
        self.place == other.place
            && self.prefix == other.prefix
            && self.value.expose() == other.value.expose()
    }
}

/// A secret's name for `server`'s `key`: `SERVER-KEY`, other characters than a
/// [`crate::secrets::SecretName`] takes turned to `_`, short enough for a `-N` suffix.
pub(super) fn secret_name(server: &str, key: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let mut name = format!("{}-{}", clean(server), clean(key));
    // ASCII only, so any byte is a character boundary.
    name.truncate(NAME_ROOM);
    if name.starts_with('.') {
        name.replace_range(..1, "_");
    }
    name
}

/// `base`, `base-2`, `base-3`…: the names tried for one secret.
fn candidates(base: &str) -> impl Iterator<Item = String> + '_ {
    std::iter::once(base.to_owned()).chain((2..1000).map(move |n| format!("{base}-{n}")))
}

/// The stores `mcpd import` moves secrets into: the daemon's, from its config's
/// `[daemon] state_dir` and `secrets`.
pub(super) struct Target {
    secrets: Secrets,
    preferred: Preferred,
}

impl Target {
    pub(super) fn new(state_dir: Option<std::path::PathBuf>, preferred: Preferred) -> Target {
        let dir = mcpd_ctl::paths::state_dir(state_dir);
        Target {
            secrets: Secrets::new(dir.as_deref(), preferred),
            preferred,
        }
    }

    /// The store a new secret goes to.
    async fn store(&self) -> Store {
        match self.preferred {
            Preferred::Auto => self.secrets.default_store().await,
            Preferred::Keyring => Store::Keyring,
            Preferred::File => Store::File,
        }
    }
}

/// Picks each moved value's name: its own when no store has it, the next `-N` when one
/// holds another value under it, and a name that holds this same value as it is. Writes
/// the picked names into the servers' tables; stores nothing.
pub(super) async fn plan(target: &Target, servers: &mut [Converted]) -> Result<(), ImportError> {
    // The names picked so far in this import, with their values.
    let mut picked: Vec<(String, SecretValue, Fate)> = Vec::new();
    for server in servers.iter_mut() {
        for m in &mut server.moves {
            let (name, fate) =
                pick(target, &m.name, &m.value, &picked, &server.name, &m.place).await?;
            if fate == Fate::Store || !picked.iter().any(|(n, ..)| *n == name) {
                picked.push((name.clone(), m.value.clone(), fate));
            }
            m.name = name;
            m.fate = fate;
            let reference = m.reference();
            set_reference(&mut server.table, &m.place, reference);
        }
    }
    Ok(())
}

/// The first of `base`'s candidates that is free or holds `value`.
async fn pick(
    target: &Target,
    base: &str,
    value: &SecretValue,
    picked: &[(String, SecretValue, Fate)],
    server: &str,
    place: &Place,
) -> Result<(String, Fate), ImportError> {
    for name in candidates(base) {
        if let Some((_, v, fate)) = picked.iter().find(|(n, ..)| *n == name) {
            if v.expose() == value.expose() {
                // Already planned in this import: stored once, by the first.
                let fate = match fate {
                    Fate::Reuse(s) => Fate::Reuse(*s),
                    _ => Fate::Shared,
                };
                return Ok((name, fate));
            }
            continue;
        }
        match target.secrets.lookup(&name).await {
            Err(SecretError::Missing { .. }) => return Ok((name, Fate::Store)),
            Ok((v, store)) if v.expose() == value.expose() => {
                return Ok((name, Fate::Reuse(store)));
            }
            Ok(_) => {}
            Err(source) => {
                return Err(ImportError::Secret {
                    message: format!(
                        "cannot tell whether secret {name:?} (for [servers.{server}] {}) is stored already, \
                         so nothing was stored or written",
                        place.describe()
                    ),
                    source,
                });
            }
        }
    }
    Err(ImportError::Runtime(format!(
        "no free secret name like {base:?} or {base}-N is left for [servers.{server}] {}",
        place.describe()
    )))
}

/// Writes `reference` at `place` in a server's table.
fn set_reference(table: &mut toml::Table, place: &Place, reference: String) {
    let (section, key) = match place {
        Place::Env(k) => (Some("env"), k.as_str()),
        Place::Header(k) => (Some("headers"), k.as_str()),
        Place::Bearer => (None, "bearer_token"),
        Place::ClientSecret => (Some("oauth"), "client_secret"),
    };
    let table = match section {
        None => Some(table),
        Some(s) => table.get_mut(s).and_then(toml::Value::as_table_mut),
    };
    if let Some(t) = table {
        t.insert(key.to_owned(), reference.into());
    }
}

/// The lines `--dry-run` prints: what would be stored where, never a value.
pub(super) async fn would(target: &Target, servers: &[Converted]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut store = None;
    for server in servers {
        for m in &server.moves {
            let what = format!("[servers.{}] {}", server.name, m.place.describe());
            match m.fate {
                Fate::Store => {
                    let s = match store {
                        Some(s) => s,
                        None => *store.insert(target.store().await),
                    };
                    lines.push(format!(
                        "would store secret {} in {} ({what})",
                        m.name,
                        describe(s)
                    ));
                }
                Fate::Reuse(s) => lines.push(format!(
                    "would use secret {}, which {} already holds with the same value ({what})",
                    m.name,
                    describe(s)
                )),
                Fate::Shared => lines.push(format!(
                    "would use secret {} for {what} too (the same value)",
                    m.name
                )),
            }
        }
    }
    lines
}

/// Stores every planned secret; the lines saying what went where. The first failure
/// ends it: the config is then not written, and what was stored before stays (a second
/// import finds it holding the same value and uses it).
pub(super) async fn store(
    target: &Target,
    servers: &[Converted],
) -> Result<Vec<String>, ImportError> {
    let mut lines = Vec::new();
    let mut stored: Vec<(&str, Store)> = Vec::new();
    let mut into = None;
    for server in servers {
        for m in &server.moves {
            let what = format!("[servers.{}] {}", server.name, m.place.describe());
            let store = match m.fate {
                Fate::Store => {
                    let s = match into {
                        Some(s) => s,
                        None => *into.insert(target.store().await),
                    };
                    let store = target.secrets.set(&m.name, &m.value).await.map_err(|source| {
                        ImportError::Secret {
                            message: format!(
                                "cannot store secret {:?} (for {what}) in {}, so the config was not written",
                                m.name,
                                describe(s)
                            ),
                            source,
                        }
                    })?;
                    stored.push((&m.name, store));
                    store
                }
                Fate::Reuse(s) => s,
                Fate::Shared => match stored.iter().find(|(n, _)| *n == m.name) {
                    Some((_, s)) => *s,
                    None => continue,
                },
            };
            let again = if matches!(m.fate, Fate::Reuse(_)) {
                " (already there with the same value)"
            } else {
                ""
            };
            lines.push(format!(
                "{what}: secret {} in {}{again}",
                m.name,
                describe(store)
            ));
        }
    }
    Ok(lines)
}

/// A store in a sentence.
fn describe(store: Store) -> &'static str {
    match store {
        Store::Credentials => "systemd credentials",
        Store::Keyring => "the keyring",
        Store::File => "the file store",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_from_the_server_and_the_key() {
        assert_eq!(secret_name("github", "GITHUB_TOKEN"), "github-GITHUB_TOKEN");
        assert_eq!(
            secret_name("gh-remote", "Authorization"),
            "gh-remote-Authorization"
        );
        assert_eq!(secret_name("x", "a b/c:d"), "x-a_b_c_d");
        let long = secret_name("x", &"K".repeat(300));
        assert_eq!(long.len(), NAME_ROOM);
        let last = candidates(&long).last().unwrap();
        assert!(crate::secrets::SecretName::new(&last).is_ok(), "{last}");
        assert_eq!(
            candidates("a").take(3).collect::<Vec<_>>(),
            ["a", "a-2", "a-3"]
        );
    }

    #[test]
    fn a_reference_keeps_the_scheme_and_never_the_value() {
        let m = Move::new(
            "gh",
            Place::Header("Authorization".into()),
            "Bearer ",
            "XYZ-canary",
        );
        assert_eq!(m.reference(), "Bearer ${secret:gh-Authorization}");
        let mut t: toml::Table = toml::from_str("[headers]\nAuthorization = \"x\"").unwrap();
        set_reference(&mut t, &m.place, m.reference());
        assert_eq!(
            t["headers"]["Authorization"].as_str(),
            Some("Bearer ${secret:gh-Authorization}")
        );
        let mut t = toml::Table::new();
        set_reference(&mut t, &Place::Bearer, "${secret:a}".into());
        assert_eq!(t["bearer_token"].as_str(), Some("${secret:a}"));
        assert!(!format!("{:?}", m.value).contains("canary"));
    }
}
