//! The credential store: one file per server under `state_dir/credentials/` (directory 0700, files 0600), written atomically and synced before a rotated refresh token is used, read back at start so a restarted daemon needs no new login.

use super::discovery::ServerMetadata;
use super::registration::{AuthMethod, Client, Source};
use crate::config::Secret;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What is kept of one server's login. Tokens are in plain text in a file only its owner
/// can read (OAuth 2.1 §7.1); nothing else ever prints them.
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

#[derive(Debug, Clone, Serialize, Deserialize)]
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
        }
    }
}

/// Seconds since the Unix epoch for a time, 0 before it.
pub fn epoch_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A time from seconds since the Unix epoch.
pub fn from_epoch(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// Where one server's credentials live.
pub fn path(state_dir: &Path, server: &str) -> PathBuf {
    state_dir.join("credentials").join(format!("{server}.json"))
}

/// Reads a server's stored login; None when there is none or it cannot be read (then a
/// new login is needed, which the status says).
pub async fn load(file: PathBuf) -> Option<Stored> {
    let text = tokio::fs::read(&file).await.ok()?;
    match serde_json::from_slice(&text) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(path = %file.display(), "ignoring stored credentials that cannot be read: {e}");
            None
        }
    }
}

/// Writes a server's login atomically and durably (the file and its directory are
/// synced before this returns), on a blocking thread.
pub async fn save(file: PathBuf, stored: &Stored) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(stored).map_err(std::io::Error::other)?;
    crate::tasks::spawn_blocking(move || {
        crate::private_file::write(&file, &bytes)?;
        sync_dir(&file)
    })
    .await
    .map_err(std::io::Error::other)?
}

/// Forgets a server's login.
pub async fn remove(file: PathBuf) -> std::io::Result<()> {
    match tokio::fs::remove_file(&file).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Syncs the directory holding `file`, so its rename survives a crash.
#[allow(clippy::disallowed_methods, reason = "called on a blocking thread")]
fn sync_dir(file: &Path) -> std::io::Result<()> {
    match file.parent() {
        Some(dir) => std::fs::File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests may block")]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[tokio::test]
    async fn a_login_is_kept_privately_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path(), "remote");
        let stored = Stored {
            server_url: "https://mcp.example.com/mcp".into(),
            resource: "https://mcp.example.com/mcp".into(),
            metadata: ServerMetadata {
                issuer: "https://auth.example.com".into(),
                ..ServerMetadata::default()
            },
            client: StoredClient {
                client_id: "c".into(),
                client_secret: None,
                method: AuthMethod::None,
                source: Source::Dynamic,
                redirect_uri: None,
            },
            requested_scopes: vec!["mcp:basic".into()],
            tokens: StoredTokens {
                access_token: "a".into(),
                expires_at: Some(epoch_secs(SystemTime::now()) + 60),
                lifetime: Some(60),
                refresh_token: Some("r".into()),
                scope: Some("mcp:basic".into()),
            },
        };
        save(file.clone(), &stored).await.unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(file.parent().unwrap()), 0o700);
        let back = load(file.clone()).await.unwrap();
        assert_eq!(back.tokens.refresh_token.as_deref(), Some("r"));
        assert_eq!(back.metadata.issuer, "https://auth.example.com");
        remove(file.clone()).await.unwrap();
        assert!(load(file.clone()).await.is_none());
        remove(file).await.unwrap();
    }
}
