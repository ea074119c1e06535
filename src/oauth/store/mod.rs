//! The credential store.
//!
//! Where one server's login is kept (`Place`: a file under `state_dir/credentials/`, or
//! one item in the desktop keyring), written whole before a rotated refresh token is
//! used, read back at start so a restarted daemon needs no new login.
//!
//! `[servers.NAME.oauth] store` picks the place. Either way a login is one unit written in
//! one step: the file is written aside, synced and renamed (`file.rs`); the keyring item
//! is replaced in one `CreateItem` call (`crate::secrets::CredentialItems`). A keyring
//! that cannot be reached is an error, never a reason to write the file instead.

use super::discovery::ServerMetadata;
use super::registration::{AuthMethod, Client, Source};
use crate::config::{CredentialStore, Grant, Secret};
use crate::secrets::{CredentialItems, SecretError, SecretValue};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod file;
#[cfg(test)]
mod tests;

/// What is kept of one server's login. Tokens are in plain text in a file only its owner
/// can read (OAuth 2.1 §7.1), or in the keyring; nothing else ever prints them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stored {
    /// The server's configured URL when it logged in: a login is used only for that URL.
    #[serde(default)]
    pub server_url: String,
    /// The resource the tokens are for (the server's URL, as authorized).
    pub resource: String,
    /// The authorization server's metadata, so a refresh goes to the right host after a
    /// restart; its `issuer` binds the client and tokens to that server.
    pub metadata: ServerMetadata,
    pub client: StoredClient,
    /// The scopes last asked for (a step-up asks for their union with new ones).
    #[serde(default)]
    pub requested_scopes: Vec<String>,
    pub tokens: StoredTokens,
    /// The grant the tokens came from: a login of another grant is not used.
    #[serde(default)]
    pub grant: Grant,
    /// The DPoP key (PKCS#8, base64url), kept as long as tokens bound to it: a refresh
    /// token of a public client is bound to it too (RFC 9449 §5).
    #[serde(default)]
    pub dpop_key: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredClient {
    pub client_id: String,
    #[serde(default)]
    pub client_secret: Option<String>,
    pub method: AuthMethod,
    pub source: Source,
    /// The redirect URI a dynamically registered client was registered with.
    #[serde(default)]
    pub redirect_uri: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StoredTokens {
    pub access_token: String,
    /// Seconds since the Unix epoch.
    #[serde(default)]
    pub expires_at: Option<u64>,
    /// The lifetime it was issued with, in seconds.
    #[serde(default)]
    pub lifetime: Option<u64>,
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// The scopes granted, space-separated.
    #[serde(default)]
    pub scope: Option<String>,
    /// Bound to the DPoP key (`token_type: DPoP`): sent with `Authorization: DPoP` and
    /// a proof.
    #[serde(default)]
    pub dpop_bound: bool,
}

impl StoredClient {
    pub fn of(c: &Client, redirect_uri: &str) -> StoredClient {
        StoredClient {
            client_id: c.client_id.clone(),
            client_secret: c.secret.as_ref().map(|s| s.expose().to_owned()),
            method: c.method,
            source: c.source,
            redirect_uri: Some(redirect_uri.to_owned()),
        }
    }

    pub fn client(&self) -> Client {
        Client {
            client_id: self.client_id.clone(),
            secret: self.client_secret.clone().map(Secret::new),
            method: self.method,
            source: self.source,
            proof: None,
        }
    }
}

/// The user's sign-in at an enterprise identity provider (`mcpd ctl login` of a server
/// with an `identity_provider` and no ID token configured), kept in a place of its own
/// (`Place::idp`): its ID token is exchanged for each ID-JAG, its refresh token renews it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdpLogin {
    pub issuer: String,
    pub token_endpoint: String,
    pub client: StoredClient,
    pub id_token: String,
    #[serde(default)]
    pub refresh_token: Option<String>,
}

/// Seconds since the Unix epoch for a time, 0 before it.
pub fn epoch_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A time from seconds since the Unix epoch.
pub fn from_epoch(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// Where one server's credentials live in the file store.
pub fn path(state_dir: &Path, server: &str) -> PathBuf {
    state_dir.join("credentials").join(format!("{server}.json"))
}

/// Where one server's login is kept.
#[derive(Debug, Clone)]
pub enum Place {
    /// `state_dir/credentials/SERVER.json`.
    File(PathBuf),
    /// The item of `server` in the desktop keyring.
    Keyring {
        server: String,
        items: CredentialItems,
    },
}

impl Place {
    /// Where `store` keeps `server`'s login: None for the file store without a state
    /// directory (then a login lasts until mcpd stops).
    pub fn of(state_dir: Option<&Path>, server: &str, store: CredentialStore) -> Option<Place> {
        match store {
            CredentialStore::File => state_dir.map(|d| Place::File(path(d, server))),
            CredentialStore::Keyring => Some(Place::Keyring {
                server: server.to_owned(),
                items: CredentialItems::new(),
            }),
        }
    }

    /// Where the sign-in at `server`'s identity provider is kept: beside its login
    /// (`SERVER.idp.json`, or the keyring item of `SERVER.idp`; server names have no dot).
    pub fn idp(&self) -> Place {
        match self {
            Place::File(p) => Place::File(p.with_extension("idp.json")),
            Place::Keyring { server, items } => Place::Keyring {
                server: format!("{server}.idp"),
                items: items.clone(),
            },
        }
    }

    pub fn is_keyring(&self) -> bool {
        matches!(self, Place::Keyring { .. })
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::File(p) => write!(f, "{}", p.display()),
            Place::Keyring { server, .. } => write!(f, "the keyring (the item of {server:?})"),
        }
    }
}

/// Why a login could not be read, kept or removed, by cause.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Reading or writing the file failed.
    #[error("{}: {source}", path.display())]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    /// What is stored is no login mcpd can read (damaged, or from another program).
    #[error("the stored login in {place} cannot be read: {why}")]
    Unreadable { place: String, why: String },
    /// The keyring cannot be reached, or failed (locked and not unlocked, no answer in
    /// time). The message says what to do.
    #[error(
        "{0}; or keep logins in state_dir/credentials with [servers.NAME.oauth] store = \"file\""
    )]
    Keyring(SecretError),
}

/// Whether the place can be written now: the keyring answers and has a collection to
/// write to. A login checks it before the browser is involved.
pub async fn reachable(place: &Place) -> Result<(), StoreError> {
    match place {
        Place::File(_) => Ok(()),
        Place::Keyring { items, .. } => items.answers().await.map_err(StoreError::Keyring),
    }
}

/// Reads a server's stored login: None when there is none; an error when one may be
/// there but cannot be read (then a new login is needed, and the status says why).
pub async fn load<T: serde::de::DeserializeOwned>(place: &Place) -> Result<Option<T>, StoreError> {
    let parsed = match place {
        Place::File(path) => match file::read(path).await? {
            Some(bytes) => serde_json::from_slice(&bytes),
            None => return Ok(None),
        },
        Place::Keyring { server, items } => match items.get(server).await {
            Ok(Some(text)) => serde_json::from_str(text.expose()),
            Ok(None) => return Ok(None),
            Err(e) => return Err(StoreError::Keyring(e)),
        },
    };
    parsed.map(Some).map_err(|e| StoreError::Unreadable {
        place: place.to_string(),
        why: e.to_string(),
    })
}

/// Writes a server's login whole: a file atomically and durably (it and its directory
/// synced before this returns), a keyring item in one call. Done when this returns.
pub async fn save<T: Serialize>(place: &Place, stored: &T) -> Result<(), StoreError> {
    let encode = |e: serde_json::Error| StoreError::Unreadable {
        place: place.to_string(),
        why: e.to_string(),
    };
    match place {
        Place::File(path) => {
            let bytes = serde_json::to_vec_pretty(stored).map_err(encode)?;
            file::write(path, bytes).await
        }
        Place::Keyring { server, items } => {
            let text = SecretValue::new(serde_json::to_string(stored).map_err(encode)?);
            items.set(server, &text).await.map_err(StoreError::Keyring)
        }
    }
}

/// Forgets a server's login; whether one was stored.
pub async fn remove(place: &Place) -> Result<bool, StoreError> {
    match place {
        Place::File(path) => file::remove(path).await,
        Place::Keyring { server, items } => items.remove(server).await.map_err(StoreError::Keyring),
    }
}
