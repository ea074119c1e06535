//! A remote server's `[servers.NAME.oauth]` settings (or `oauth = false`).
//!
//! The raw table serde reads and the validated `OAuthConfig`, with its grant (a person's
//! browser login, or a machine credential), the client's authentication, DPoP and an
//! enterprise identity provider.

use super::value::Secret;
use std::path::PathBuf;

mod validate;

/// `[servers.NAME.oauth]`: everything optional; without the table mcpd still logs in
/// (discovery and dynamic registration) when the server asks.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OAuthConfig {
    /// How tokens are had: a person's login in the browser, or a grant mcpd runs alone.
    pub grant: Grant,
    /// A client registered with the authorization server beforehand.
    pub client_id: Option<String>,
    /// Its secret, from the variable `client_secret_env` names, or `client_secret`'s text
    /// with its `${secret:NAME}` references, put in when a login needs it.
    pub client_secret: Option<Secret>,
    /// How the client authenticates at the token endpoint; None: as the authorization
    /// server's metadata and the configured credential allow.
    pub client_auth: Option<ClientAuth>,
    /// The client's private key for `private_key_jwt`.
    pub private_key: Option<KeySource>,
    /// A JWT in a file, read again at each use: the grant's assertion (`jwt_bearer`) or
    /// the client's assertion (`client_credentials`). Workload identity.
    pub assertion_file: Option<PathBuf>,
    /// DPoP (RFC 9449): None sends proofs when the authorization server offers ES256.
    pub dpop: Option<bool>,
    /// Enterprise-managed authorization: the ID-JAG comes from this identity provider.
    pub identity_provider: Option<Box<IdentityProvider>>,
    /// Scopes to ask for, beyond what the server's challenge and metadata name.
    pub scopes: Vec<String>,
    /// The loopback port of the redirect (`http://127.0.0.1:PORT/callback`); random if unset.
    pub redirect_port: Option<u16>,
    /// A client ID metadata document URL, used when the authorization server supports them.
    pub client_metadata_url: Option<String>,
    /// Where the login (tokens, client, metadata) is kept across restarts.
    pub store: CredentialStore,
}

/// `[servers.NAME.oauth] grant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Grant {
    /// A person logs in with `mcpd ctl login` (authorization code with PKCE).
    #[default]
    AuthorizationCode,
    /// The client's own credentials (RFC 6749 §4.4): no person, no browser.
    ClientCredentials,
    /// A JWT as the grant (RFC 7523 §2.1): from `assertion_file`, or an ID-JAG from the
    /// identity provider.
    JwtBearer,
}

impl Grant {
    pub fn as_str(self) -> &'static str {
        match self {
            Grant::AuthorizationCode => "authorization_code",
            Grant::ClientCredentials => "client_credentials",
            Grant::JwtBearer => "jwt_bearer",
        }
    }

    /// Whether mcpd gets tokens alone, without a person's login.
    pub fn is_machine(self) -> bool {
        self != Grant::AuthorizationCode
    }
}

/// `[servers.NAME.oauth] client_auth`: how the client proves itself at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    ClientSecretBasic,
    ClientSecretPost,
    PrivateKeyJwt,
}

impl ClientAuth {
    pub fn parse(s: &str) -> Option<ClientAuth> {
        match s {
            "none" => Some(ClientAuth::None),
            "client_secret_basic" => Some(ClientAuth::ClientSecretBasic),
            "client_secret_post" => Some(ClientAuth::ClientSecretPost),
            "private_key_jwt" => Some(ClientAuth::PrivateKeyJwt),
            _ => None,
        }
    }
}

/// Where a private key (or a token) is read from, when it is needed.
#[derive(Debug, Clone, PartialEq)]
pub enum KeySource {
    /// `${secret:NAME}` text, looked up at each use.
    Secret(Secret),
    /// A file, read at each use (so a rotated one is picked up).
    File(PathBuf),
}

/// `[servers.NAME.oauth.identity_provider]`: the enterprise's identity provider, where
/// the user's ID token is exchanged for an ID-JAG for this server's authorization server.
#[derive(Debug, Clone, PartialEq)]
pub struct IdentityProvider {
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Option<Secret>,
    /// Its token endpoint; discovered from the issuer when unset.
    pub token_endpoint: Option<String>,
    /// The user's ID token at the identity provider; None: the user signs in there with
    /// `mcpd ctl login` and mcpd keeps (and renews) it.
    pub id_token: Option<KeySource>,
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
    Table(Box<RawOAuthTable>),
}

impl<'de> serde::Deserialize<'de> for RawOAuth {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        super::bool_or_table::read(d, RawOAuth::Enabled, |t| RawOAuth::Table(Box::new(t)))
    }
}

#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOAuthTable {
    grant: Option<String>,
    client_id: Option<String>,
    client_secret_env: Option<String>,
    client_secret: Option<String>,
    client_auth: Option<String>,
    private_key: Option<String>,
    private_key_file: Option<String>,
    assertion_file: Option<String>,
    dpop: Option<bool>,
    identity_provider: Option<Box<RawIdentityProvider>>,
    #[serde(default)]
    scopes: Vec<String>,
    redirect_port: Option<u16>,
    client_metadata_url: Option<String>,
    store: Option<String>,
}

#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIdentityProvider {
    issuer: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    token_endpoint: Option<String>,
    id_token: Option<String>,
    id_token_file: Option<String>,
}

#[cfg(test)]
mod tests;
