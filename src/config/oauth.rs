//! A remote server's `[servers.NAME.oauth]` settings (or `oauth = false`): the raw table serde reads and the validated `OAuthConfig`.

use super::value::{Missing, Secret};
use super::{ConfigError, Validator};

/// `[servers.NAME.oauth]`: everything optional; without the table mcpd still logs in
/// (discovery and dynamic registration) when the server asks.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OAuthConfig {
    /// A client registered with the authorization server beforehand.
    pub client_id: Option<String>,
    /// Its secret, from the variable `client_secret_env` names, or `client_secret`'s text
    /// with its `${secret:NAME}` references, put in when a login needs it.
    pub client_secret: Option<Secret>,
    /// Scopes to ask for, beyond what the server's challenge and metadata name.
    pub scopes: Vec<String>,
    /// The loopback port of the redirect (`http://127.0.0.1:PORT/callback`); random if unset.
    pub redirect_port: Option<u16>,
    /// A client ID metadata document URL, used when the authorization server supports them.
    pub client_metadata_url: Option<String>,
    /// Where the login (tokens, client, metadata) is kept across restarts.
    pub store: CredentialStore,
}

/// `[servers.NAME.oauth] store`: where a server's login is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CredentialStore {
    /// `state_dir/credentials/NAME.json`, 0600 (the default: it needs no desktop session).
    #[default]
    File,
    /// One item in the desktop keyring, through the Secret Service on the session bus; a
    /// keyring that cannot be reached is an error, never a fall back to the file.
    Keyring,
}

/// The raw `[servers.NAME.oauth]` table, or `oauth = false`.
#[derive(Debug, Clone)]
pub(super) enum RawOAuth {
    Enabled(bool),
    Table(RawOAuthTable),
}

impl<'de> serde::Deserialize<'de> for RawOAuth {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        super::bool_or_table::read(d, RawOAuth::Enabled, RawOAuth::Table)
    }
}

#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOAuthTable {
    client_id: Option<String>,
    client_secret_env: Option<String>,
    client_secret: Option<String>,
    #[serde(default)]
    scopes: Vec<String>,
    redirect_port: Option<u16>,
    client_metadata_url: Option<String>,
    store: Option<String>,
}

impl Validator<'_> {
    /// The OAuth settings of a remote server: on unless a static credential is configured
    /// or `oauth = false`.
    pub(super) fn oauth(
        &self,
        key: &str,
        raw: Option<&RawOAuth>,
        static_auth: bool,
        missing: &mut Vec<Missing>,
    ) -> Result<Option<OAuthConfig>, ConfigError> {
        let okey = format!("{key}.oauth");
        let table = match raw {
            None => {
                return Ok((!static_auth).then(OAuthConfig::default));
            }
            Some(RawOAuth::Enabled(false)) => return Ok(None),
            Some(RawOAuth::Enabled(true)) => RawOAuthTable::default(),
            Some(RawOAuth::Table(t)) => t.clone(),
        };
        if static_auth {
            return Err(self.err(
                okey,
                "conflicts with bearer_token_env or an Authorization header; log in one way only",
            ));
        }
        let store = match table.store.as_deref() {
            None | Some("file") => CredentialStore::File,
            Some("keyring") => CredentialStore::Keyring,
            Some(other) => {
                return Err(self.err(
                    format!("{okey}.store"),
                    format!("{other:?} is not a credential store; use \"file\" or \"keyring\""),
                ));
            }
        };
        if table
            .client_id
            .as_deref()
            .is_some_and(|c| c.trim().is_empty())
        {
            return Err(self.err(format!("{okey}.client_id"), "is empty"));
        }
        let client_secret = match (&table.client_secret, &table.client_secret_env) {
            (Some(_), Some(_)) => {
                return Err(self.err(
                    format!("{okey}.client_secret"),
                    "conflicts with client_secret_env; set the client secret one way only",
                ));
            }
            (Some(text), None) => {
                let skey = format!("{okey}.client_secret");
                if table.client_id.is_none() {
                    return Err(self.err(skey, "a client secret needs its client_id"));
                }
                let refs = crate::secrets::references(text).map_err(|e| self.err(&skey, e))?;
                if refs.is_empty() {
                    return Err(self.err(
                        skey,
                        "holds no ${secret:NAME}: a client secret written here would sit in the config in plain text; store it with `mcpd ctl secret set NAME` and write client_secret = \"${secret:NAME}\"",
                    ));
                }
                // Put in when a login or a refresh needs it (`oauth::flow`).
                Some(Secret::new(text.clone()))
            }
            (None, None) => None,
            (None, Some(var)) => {
                let skey = format!("{okey}.client_secret_env");
                if table.client_id.is_none() {
                    return Err(self.err(skey, "a client secret needs its client_id"));
                }
                match (self.env)(var) {
                    Some(secret) if !secret.is_empty() => Some(Secret::new(secret)),
                    found => {
                        missing.push(Missing::new(skey, var, found.is_some()));
                        None
                    }
                }
            }
        };
        if let Some(url) = &table.client_metadata_url {
            let ok =
                reqwest::Url::parse(url).is_ok_and(|u| u.scheme() == "https" && u.path() != "/");
            if !ok {
                return Err(self.err(
                    format!("{okey}.client_metadata_url"),
                    "a client ID metadata document URL is https with a path, e.g. \"https://example.com/mcpd/client.json\"",
                ));
            }
        }
        for s in &table.scopes {
            if s.is_empty()
                || s.chars()
                    .any(|c| c.is_whitespace() || c == '"' || c == '\\')
            {
                return Err(self.err(
                    format!("{okey}.scopes"),
                    format!("{s:?} is not a scope (one word each, no spaces or quotes)"),
                ));
            }
        }
        if table.redirect_port == Some(0) {
            return Err(self.err(
                format!("{okey}.redirect_port"),
                "must be 1-65535 (leave it unset for a random port)",
            ));
        }
        Ok(Some(OAuthConfig {
            client_id: table.client_id,
            client_secret,
            scopes: table.scopes,
            redirect_port: table.redirect_port,
            client_metadata_url: table.client_metadata_url,
            store,
        }))
    }
}
