//! Remote servers' OAuth logins in the desktop keyring.
//!
//! One item per server, with the attributes `{"application": "mcpd", "credential":
//! SERVER}` and the label `mcpd: SERVER login`, holding the whole stored login as JSON
//! text; kept apart from the `${secret:NAME}` items, which have a `name` instead.
//!
//! The two kinds never see each other: a secret is looked up by its `name` attribute,
//! which a login's item never has, a login by its `credential` attribute, which a
//! secret's never has, and `Secrets::list` passes over any item with a `credential`.
//! Writing a login is one `CreateItem` with `replace` in the default collection, so a
//! reader finds the old login or the new one, never a mix; every call is bounded as the
//! secrets' are (`keyring.rs`).

use super::SecretError;
use super::keyring::{Bus, CREDENTIAL, DEADLINE, Key, Keyring, Open, Unavailable};
use super::value::SecretValue;

/// The keyring as the OAuth credential store sees it. Cheap to clone.
#[derive(Debug, Clone)]
pub struct CredentialItems {
    keyring: Keyring,
}

impl Default for CredentialItems {
    fn default() -> Self {
        CredentialItems::new()
    }
}

impl CredentialItems {
    /// The keyring on the session bus, found as D-Bus finds it.
    pub fn new() -> CredentialItems {
        CredentialItems::with_bus(Bus::Session)
    }

    /// The keyring on `bus`.
    pub fn with_bus(bus: Bus) -> CredentialItems {
        CredentialItems {
            keyring: Keyring::new(bus),
        }
    }

    /// Whether a Secret Service answers and has a default collection to write to; the
    /// error says why not.
    pub async fn answers(&self) -> Result<(), SecretError> {
        self.keyring
            .answers(DEADLINE)
            .await
            .map_err(|Unavailable(why)| SecretError::Keyring(why))
    }

    /// The login stored for `server`, None when the keyring holds none. An error when the
    /// keyring cannot be reached or read (a locked one that is not unlocked): that is not
    /// the same as no login, and the caller says so.
    pub async fn get(&self, server: &str) -> Result<Option<SecretValue>, SecretError> {
        let open = self.open().await?;
        let Some(bytes) = open.get_item(&key(server)).await? else {
            return Ok(None);
        };
        match std::str::from_utf8(&bytes) {
            Ok(text) => Ok(Some(SecretValue::new(text.to_owned()))),
            Err(_) => Err(SecretError::Invalid(format!(
                "the login of {server:?} in the keyring is not UTF-8 text; log in again"
            ))),
        }
    }

    /// Stores `login` as `server`'s one item, replacing the one there.
    pub async fn set(&self, server: &str, login: &SecretValue) -> Result<(), SecretError> {
        let open = self.open().await?;
        let label = format!("mcpd: {server} login");
        let bytes = login.expose().as_bytes();
        open.set_item(&key(server), &label, bytes, "application/json")
            .await
    }

    /// Removes `server`'s login; whether there was one.
    pub async fn remove(&self, server: &str) -> Result<bool, SecretError> {
        self.open().await?.remove_item(&key(server)).await
    }

    async fn open(&self) -> Result<Open, SecretError> {
        self.keyring
            .open(DEADLINE)
            .await
            .map_err(|Unavailable(why)| SecretError::Keyring(why))
    }
}

fn key(server: &str) -> Key<'_> {
    Key {
        attribute: (CREDENTIAL, server),
        what: format!("the login of {server:?}"),
    }
}
