//! Secrets out of plaintext config.
//!
//! The stores a `${secret:NAME}` is looked up in (systemd credentials, the desktop
//! keyring, mcpd's file store), in that order, and the references themselves.
//!
//! # The API
//!
//! Names: 1 to 128 bytes of ASCII letters, digits, `_`, `-`, `.`, not starting with `.`
//! ([`SecretName`]). Values: [`SecretValue`], whose `Debug` and `Display` print
//! `<redacted>` and whose bytes are cleared when dropped; `expose()` gives the text.
//!
//! References (pure, no IO), for a server's `env` and `headers` values:
//! - [`references`]`(text)`: the names `text` refers to with `${secret:NAME}`, each once,
//!   in order; an error for an unterminated reference or a bad name. Run it when the
//!   config is validated, so a bad reference is a config error.
//! - [`substitute`]`(text, lookup)`: `text` with each reference replaced by
//!   `lookup(NAME)`, as a `SecretValue`; an error if `lookup` has no value for one. Run it
//!   when the server starts, with the values [`Secrets::lookup_all`] found.
//!
//! The syntax is the config's `${VAR}`: a `$` not followed by `{` stays, there is no `$$`
//! escape, other `${…}` pass through untouched. Both kinds expand in one value; the
//! config's `${VAR}` expansion must leave `${secret:…}` alone (today it calls it "not a
//! variable name") and expand first, at load; a variable's value that happens to contain
//! `${secret:X}` is then resolved at start too (the environment is the daemon's own).
//!
//! Stores ([`Secrets`], built once from the state directory and `[daemon] secrets`):
//! - [`Secrets::lookup`]`(name)` → `(SecretValue, Store)`: the first store that has it, in
//!   the order [`Store::Credentials`] (`$CREDENTIALS_DIRECTORY/NAME`, when systemd set the
//!   variable), [`Store::Keyring`] (when a Secret Service answers; a locked keyring is
//!   unlocked or is an error, never passed over), [`Store::File`]
//!   (`state_dir/secrets/NAME.json`). [`SecretError::Missing`] when none has it: its
//!   message lists where mcpd looked and says how to set it. Use it (or `lookup_all`) when
//!   a server starts; a failure stops that server alone, with the error as its reason.
//! - [`Secrets::lookup_all`]`(names)`: the same for several names, reaching the keyring
//!   at most once.
//! - [`Secrets::set`]`(name, value)` → the `Store` written: the configured one
//!   ([`Preferred`]), `Auto` meaning [`Secrets::default_store`]; never credentials.
//! - [`Secrets::list`]`()` → `(name, Store)` pairs, sorted, never values.
//! - [`Secrets::remove`]`(name)` → the stores it was removed from (keyring and file;
//!   credentials are the unit's to change). Empty when neither had it.
//! - [`Secrets::default_store`]`()` → `Keyring` when a Secret Service with a default
//!   collection answers within 2 s, else `File`.
//!
//! Remote servers' OAuth logins (`[servers.NAME.oauth] store = "keyring"`) are items of
//! their own ([`CredentialItems`]: `get`, `set`, `remove` of one server's login, keyed by
//! a `credential` attribute where a secret has its `name`): no lookup or listing of
//! secrets ever sees one, and no login is ever a secret.
//!
//! Every keyring call is bounded (5 s; an unlock prompt 30 s); a keyring that cannot be
//! reached is passed over by lookups, listings and removals, and is an error for `set`
//! only when it is the configured store. Errors ([`SecretError`]) name secrets and files,
//! never values. Everything runs on the tokio runtime, file IO on tracked blocking
//! threads (`mcpd_runtime::tracker`).
//!
//! Where it runs: `Secrets::new` reads `$CREDENTIALS_DIRECTORY` when called and finds the
//! session bus when the keyring is first reached, so the daemon and a `mcpd ctl secret`
//! see the same stores only when they share a state directory and a session bus.
//! `tests/it/tidy.rs` lets `ctl` import only what it lists: `secrets` imports no more of
//! the crate than `private_file` and `tasks`, so it can join that list, or `ctl` can ask
//! the daemon over the socket.

mod credentials;
mod file;
mod keyring;
#[cfg(test)]
mod keyring_tests;
mod logins;
mod mask;
mod reference;
#[cfg(test)]
mod tests;
mod value;

pub use keyring::Bus;
pub use logins::CredentialItems;
pub use mask::Mask;
pub use reference::{references, substitute};
pub use value::{SecretName, SecretValue};

use file::FileStore;
use keyring::{Keyring, Open, PROBE_DEADLINE, Unavailable};
use std::path::{Path, PathBuf};

/// Where a secret was found or put, in lookup order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Store {
    /// systemd credentials: `$CREDENTIALS_DIRECTORY/NAME`. Read-only.
    Credentials,
    /// The desktop keyring, through the Secret Service on the session bus.
    Keyring,
    /// mcpd's own file store: `state_dir/secrets/NAME.json`, 0600.
    File,
}

impl Store {
    /// The short name `ctl secret list` shows and `[daemon] secrets` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Store::Credentials => "credentials",
            Store::Keyring => "keyring",
            Store::File => "file",
        }
    }

    /// The store in a sentence.
    pub fn describe(self) -> &'static str {
        match self {
            Store::Credentials => "systemd credentials",
            Store::Keyring => "the keyring",
            Store::File => "mcpd's file store",
        }
    }
}

impl Preferred {
    /// The store it names in a sentence ("auto" as the choice it is).
    pub fn describe(self) -> &'static str {
        match self {
            Preferred::Auto => "the keyring if a Secret Service answers, else mcpd's file store",
            Preferred::Keyring => Store::Keyring.describe(),
            Preferred::File => Store::File.describe(),
        }
    }

    /// As `[daemon] secrets` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Preferred::Auto => "auto",
            Preferred::Keyring => "keyring",
            Preferred::File => "file",
        }
    }
}

impl std::fmt::Display for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where `set` writes: `[daemon] secrets`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Preferred {
    /// The keyring when a Secret Service answers, else the file store (the default).
    #[default]
    Auto,
    Keyring,
    File,
}

/// What went wrong, by cause. Messages name secrets, stores and files, never a value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// No store has the secret; `tried` are the stores looked in, in order.
    #[error("{}", missing(name, tried))]
    Missing { name: String, tried: Vec<Store> },
    /// A name that is no secret name, or a stored secret mcpd cannot use (too large, not
    /// UTF-8, a file others may read): the message says which and what to do.
    #[error("{0}")]
    Invalid(String),
    /// The keyring was reached but failed (locked and not unlocked, an error, no answer in
    /// time), or it is the configured store and cannot be reached.
    #[error("the keyring: {0}")]
    Keyring(String),
    /// The file store is configured but there is no state directory to keep it in.
    #[error(
        "mcpd's file store needs a state directory: set [daemon] state_dir (or HOME, for ~/.local/state/mcpd)"
    )]
    NoStateDir,
    /// Reading or writing a store's files failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl SecretError {
    fn io(what: impl Into<String>, source: std::io::Error) -> SecretError {
        SecretError::Io {
            what: what.into(),
            source,
        }
    }
}

/// The message of `Missing`: where mcpd looked, and the two ways to give it the secret.
fn missing(name: &str, tried: &[Store]) -> String {
    let looked: Vec<&str> = tried.iter().map(|s| s.describe()).collect();
    let skipped = if tried.contains(&Store::Keyring) {
        ""
    } else {
        "; no Secret Service answered, so the keyring was not searched"
    };
    format!(
        "secret {name:?} is not set (looked in: {}{skipped}); set it with `mcpd ctl secret set {name}`, or give it to mcpd's unit with `LoadCredential={name}:/path/to/file` (or `LoadCredentialEncrypted=`)",
        looked.join(", ")
    )
}

/// The stores, as one daemon (or one `mcpd ctl`) sees them. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Secrets {
    /// `$CREDENTIALS_DIRECTORY`: None when systemd did not start mcpd with credentials.
    credentials: Option<PathBuf>,
    keyring: Keyring,
    /// None without a state directory.
    file: Option<FileStore>,
    preferred: Preferred,
}

impl Secrets {
    /// The stores for `state_dir` (the daemon's state directory; None when there is none,
    /// and then no file store) and `[daemon] secrets`, with the credentials directory and
    /// the session bus taken from the environment, as systemd and D-Bus set them.
    pub fn new(state_dir: Option<&Path>, preferred: Preferred) -> Secrets {
        Secrets {
            credentials: std::env::var_os("CREDENTIALS_DIRECTORY")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from),
            keyring: Keyring::new(Bus::Session),
            file: state_dir.map(FileStore::new),
            preferred,
        }
    }

    /// The same with this credentials directory instead of `$CREDENTIALS_DIRECTORY`.
    #[cfg(test)]
    pub fn with_credentials_dir(mut self, dir: Option<PathBuf>) -> Secrets {
        self.credentials = dir;
        self
    }

    /// The same with the Secret Service looked for on `bus`.
    #[cfg(test)]
    pub fn with_bus(mut self, bus: Bus) -> Secrets {
        self.keyring = Keyring::new(bus);
        self
    }

    /// The value of `name` from the first store that has it, and that store.
    pub async fn lookup(&self, name: &str) -> Result<(SecretValue, Store), SecretError> {
        let name = checked(name)?;
        let mut keyring = KeyringOnce::default();
        self.lookup_in(&name, &mut keyring).await
    }

    /// `lookup` of each name, in order, reaching the keyring at most once; the first
    /// failure ends it.
    pub async fn lookup_all(
        &self,
        names: &[String],
    ) -> Result<Vec<(String, SecretValue, Store)>, SecretError> {
        let mut keyring = KeyringOnce::default();
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let checked = checked(name)?;
            let (value, store) = self.lookup_in(&checked, &mut keyring).await?;
            out.push((name.clone(), value, store));
        }
        Ok(out)
    }

    async fn lookup_in(
        &self,
        name: &SecretName,
        keyring: &mut KeyringOnce,
    ) -> Result<(SecretValue, Store), SecretError> {
        let mut tried = Vec::new();
        if let Some(dir) = &self.credentials {
            tried.push(Store::Credentials);
            if let Some(v) = credentials::read(dir.clone(), name.clone()).await? {
                return Ok((v, Store::Credentials));
            }
        }
        if let Some(open) = keyring.get(&self.keyring).await {
            tried.push(Store::Keyring);
            if let Some(v) = open.get(name).await? {
                return Ok((v, Store::Keyring));
            }
        }
        if let Some(file) = &self.file {
            tried.push(Store::File);
            if let Some(v) = file.get(name).await? {
                return Ok((v, Store::File));
            }
        }
        Err(SecretError::Missing {
            name: name.to_string(),
            tried,
        })
    }

    /// Stores `value` under `name` in the configured store; which one it was.
    pub async fn set(&self, name: &str, value: &SecretValue) -> Result<Store, SecretError> {
        let name = checked(name)?;
        let len = value.expose().len() as u64;
        if len == 0 || len > credentials::MAX_BYTES {
            return Err(SecretError::Invalid(format!(
                "secret {name:?}: a value is 1 byte to {} KiB, not {len} bytes",
                credentials::MAX_BYTES / 1024
            )));
        }
        let store = match self.preferred {
            Preferred::Auto => self.default_store().await,
            Preferred::Keyring => Store::Keyring,
            Preferred::File => Store::File,
        };
        match store {
            Store::Keyring => {
                let open = self.keyring.open(keyring::DEADLINE).await.map_err(|Unavailable(why)| {
                    SecretError::Keyring(format!(
                        "{why}; to keep secrets in mcpd's file store instead, set [daemon] secrets = \"file\""
                    ))
                })?;
                open.set(&name, value).await?;
            }
            _ => self.file()?.set(&name, value).await?,
        }
        Ok(store)
    }

    /// Every secret's name with the store that has it, sorted by name then lookup order;
    /// a name in two stores is listed twice. A keyring that cannot be reached is left out.
    pub async fn list(&self) -> Result<Vec<(String, Store)>, SecretError> {
        let mut out = Vec::new();
        if let Some(dir) = &self.credentials {
            let names = credentials::list(dir.clone()).await?;
            out.extend(names.into_iter().map(|n| (n, Store::Credentials)));
        }
        if let Some(open) = KeyringOnce::default().get(&self.keyring).await {
            out.extend(open.list().await?.into_iter().map(|n| (n, Store::Keyring)));
        }
        if let Some(file) = &self.file {
            out.extend(file.list().await?.into_iter().map(|n| (n, Store::File)));
        }
        out.sort();
        Ok(out)
    }

    /// Removes `name` from the keyring (when it can be reached) and the file store; the
    /// stores it was in. Credentials are never removed: they are the unit's.
    pub async fn remove(&self, name: &str) -> Result<Vec<Store>, SecretError> {
        let name = checked(name)?;
        let mut removed = Vec::new();
        if let Some(open) = KeyringOnce::default().get(&self.keyring).await
            && open.remove(&name).await?
        {
            removed.push(Store::Keyring);
        }
        if let Some(file) = &self.file
            && file.remove(&name).await?
        {
            removed.push(Store::File);
        }
        Ok(removed)
    }

    /// The store `set` uses under `Preferred::Auto`: the keyring when a Secret Service
    /// with a default collection answers within 2 s, else the file store.
    pub async fn default_store(&self) -> Store {
        self.default_store_within(PROBE_DEADLINE).await
    }

    /// `default_store` waiting at most `deadline` for the Secret Service: for a status
    /// that must not wait on a bus that hangs.
    pub async fn default_store_within(&self, deadline: std::time::Duration) -> Store {
        match self.keyring.answers(deadline).await {
            Ok(()) => Store::Keyring,
            Err(Unavailable(why)) => {
                tracing::debug!("secrets go to the file store: {why}");
                Store::File
            }
        }
    }

    /// `[daemon] secrets`, as configured.
    pub fn preferred(&self) -> Preferred {
        self.preferred
    }

    fn file(&self) -> Result<&FileStore, SecretError> {
        self.file.as_ref().ok_or(SecretError::NoStateDir)
    }
}

fn checked(name: &str) -> Result<SecretName, SecretError> {
    SecretName::new(name).map_err(SecretError::Invalid)
}

/// The keyring reached at most once per operation: the first lookup that needs it opens
/// a session (or learns it cannot), later ones reuse the answer.
#[derive(Default)]
enum KeyringOnce {
    #[default]
    Untried,
    Open(Open),
    Unavailable,
}

impl KeyringOnce {
    async fn get(&mut self, keyring: &Keyring) -> Option<&Open> {
        if matches!(self, KeyringOnce::Untried) {
            *self = match keyring.open(keyring::DEADLINE).await {
                Ok(open) => KeyringOnce::Open(open),
                Err(Unavailable(why)) => {
                    tracing::debug!("the keyring is not searched: {why}");
                    KeyringOnce::Unavailable
                }
            };
        }
        match self {
            KeyringOnce::Open(open) => Some(open),
            _ => None,
        }
    }
}
