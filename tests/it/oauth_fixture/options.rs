//! What the OAuth fixture does: `OAuthOptions` (set through `OAuthBuilder`) and the small
//! types its options are made of.

use crate::http_fixture::FixtureOptions;
use serde_json::Value;
use std::time::Duration;

/// Where the authorization server runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsPlacement {
    /// On the MCP server's origin (the same port).
    SameOrigin,
    /// On a port of its own: another origin.
    OtherOrigin,
    /// Nowhere: the resource trusts no AS until `OAuthHandle::trust` or `migrate_to`.
    Absent,
}

/// Where the Protected Resource Metadata (RFC 9728) is served, on the MCP origin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrmAt {
    /// `/.well-known/oauth-protected-resource/mcp`.
    PathAware,
    /// `/.well-known/oauth-protected-resource`.
    Root,
    /// This path, e.g. `/custom/metadata/location.json`.
    Custom(String),
}

/// Where the AS metadata is served, for an issuer whose path is P (empty, or `/tenant1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsMetadataAt {
    /// RFC 8414: `/.well-known/oauth-authorization-server` + P.
    Rfc8414,
    /// OIDC discovery with the suffix inserted (RFC 8414 §5): `/.well-known/openid-configuration` + P.
    OidcInserted,
    /// OIDC discovery with the suffix appended: P + `/.well-known/openid-configuration`.
    OidcAppended,
}

/// The `iss` parameter of authorization responses (RFC 9207).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Iss {
    /// The issuer, exactly.
    Correct,
    /// No `iss` at all.
    Omitted,
    /// `https://evil.example.com`.
    Wrong,
    /// The issuer with a `/` appended.
    Normalized,
}

/// The `iss` value an authorization response carries under `Iss`, for `issuer`.
pub(super) fn iss_value(mode: Iss, issuer: &str) -> Option<String> {
    match mode {
        Iss::Correct => Some(issuer.to_owned()),
        Iss::Omitted => None,
        Iss::Wrong => Some("https://evil.example.com".to_owned()),
        Iss::Normalized => Some(format!("{issuer}/")),
    }
}

/// How a client authenticates at the token and revocation endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthMethod {
    /// `client_id` in the body, no secret (a public client).
    None,
    /// `Authorization: Basic` with the form-encoded id and secret.
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the body.
    ClientSecretPost,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::None => "none",
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
        }
    }

    pub fn parse(name: &str) -> Option<AuthMethod> {
        [
            AuthMethod::None,
            AuthMethod::ClientSecretBasic,
            AuthMethod::ClientSecretPost,
        ]
        .into_iter()
        .find(|m| m.as_str() == name)
    }
}

/// When the token endpoint hands out refresh tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefreshTokens {
    /// With every authorization code exchange.
    Always,
    /// Only when the authorization's scope includes `offline_access`.
    WithOfflineAccess,
    /// Never.
    Never,
}

/// A client the AS knows before any registration (or one a test adds while running).
#[derive(Clone, Debug)]
pub struct Client {
    pub id: String,
    pub secret: Option<String>,
    pub auth_method: AuthMethod,
    /// The registered redirect URIs; empty: any loopback URI (`http://127.0.0.1:*`,
    /// `http://[::1]:*`, `http://localhost:*`, any path).
    pub redirect_uris: Vec<String>,
}

impl Client {
    /// A public client (`token_endpoint_auth_method` `none`).
    pub fn public(id: &str) -> Client {
        Client {
            id: id.to_owned(),
            secret: None,
            auth_method: AuthMethod::None,
            redirect_uris: Vec::new(),
        }
    }

    /// A confidential client authenticating with `method` (basic or post).
    pub fn confidential(id: &str, secret: &str, method: AuthMethod) -> Client {
        Client {
            id: id.to_owned(),
            secret: Some(secret.to_owned()),
            auth_method: method,
            redirect_uris: Vec::new(),
        }
    }

    pub fn redirect_uris(mut self, uris: &[&str]) -> Client {
        self.redirect_uris = uris.iter().map(|u| (*u).to_owned()).collect();
        self
    }
}

/// Everything the fixture can be told; `OAuthOptions::default()` is a well-behaved resource
/// with an AS on another origin that supports DCR, revocation and rotating refresh tokens.
#[derive(Clone, Debug)]
pub struct OAuthOptions {
    // The protected resource.
    /// Serve the protected MCP resource (the HTTP fixture behind the bearer check).
    pub resource: bool,
    /// The wrapped HTTP fixture's options (its `wrap` is set by the OAuth fixture).
    pub mcp: FixtureOptions,
    /// Where the PRM is served; the 401 challenge names the first. Empty: no PRM at all.
    pub prm_at: Vec<PrmAt>,
    /// The 401 challenge carries `resource_metadata` (the URL of the first `prm_at`).
    pub challenge_resource_metadata: bool,
    /// The 401 challenge carries this `scope`.
    pub challenge_scope: Option<String>,
    /// The PRM's `resource` instead of the MCP URL (a mismatch, or the origin).
    pub prm_resource: Option<String>,
    /// The PRM's `scopes_supported`; None leaves it out.
    pub prm_scopes: Option<Vec<String>>,
    /// The PRM's `authorization_servers` instead of this fixture's issuer.
    pub prm_authorization_servers: Option<Vec<String>>,
    /// `tools/call` of the named tool needs every one of these scopes, else 403
    /// `insufficient_scope` naming them.
    pub step_up: Vec<(String, Vec<String>)>,
    /// A token is valid at the resource only if its `resource` (from the token or
    /// authorization request) is the PRM's `resource`.
    pub check_audience: bool,

    // The authorization server.
    pub auth_server: AsPlacement,
    /// The issuer's path, e.g. `/tenant1`; empty for an issuer at the origin. The endpoints
    /// live below it (`/tenant1/authorize` …).
    pub issuer_path: String,
    /// Where the AS metadata is served.
    pub metadata_at: Vec<AsMetadataAt>,
    /// The metadata's `issuer` instead of the real one (an issuer mismatch).
    pub metadata_issuer: Option<String>,
    /// The metadata lists `code_challenge_methods_supported: ["S256"]`.
    pub pkce_metadata: bool,
    /// Dynamic client registration at `/register` (RFC 7591), advertised as `registration_endpoint`.
    pub dcr: bool,
    /// DCR assigns this method whatever the request asked (RFC 7591 §3.2.1 lets the AS replace values).
    pub dcr_auth_method: Option<AuthMethod>,
    /// DCR refuses a registration whose `grant_types` lack `refresh_token` (as Miro does).
    pub dcr_requires_refresh_grant: bool,
    /// Revocation at `/revoke` (RFC 7009), advertised as `revocation_endpoint`.
    pub revocation: bool,
    /// Client ID Metadata Documents: an `https://` `client_id` is a client, advertised as
    /// `client_id_metadata_document_supported`.
    pub cimd: bool,
    /// The documents the AS "fetches" for CIMD client ids, by URL. A URL without one is a
    /// public client allowed any loopback redirect URI.
    pub cimd_documents: Vec<(String, Value)>,
    /// The metadata says `authorization_response_iss_parameter_supported: true`.
    pub iss_supported: bool,
    /// What `iss` authorization responses carry.
    pub iss: Iss,
    /// The AS metadata's `scopes_supported`; when set, an authorization asking for a scope
    /// outside it is refused with `invalid_scope`.
    pub auth_scopes: Option<Vec<String>>,
    /// `token_endpoint_auth_methods_supported`; DCR refuses other methods.
    pub auth_methods: Vec<AuthMethod>,
    /// Pre-registered clients.
    pub clients: Vec<Client>,
    /// Lifetime of access tokens.
    pub access_ttl: Duration,
    pub refresh_tokens: RefreshTokens,
    /// Every refresh returns a new refresh token and retires the one presented; presenting
    /// a retired one revokes its whole family. Off: refreshes return no refresh token and the
    /// old one stays valid.
    pub rotating: bool,
}

impl Default for OAuthOptions {
    fn default() -> Self {
        OAuthOptions {
            resource: true,
            mcp: FixtureOptions::default(),
            prm_at: vec![PrmAt::PathAware],
            challenge_resource_metadata: true,
            challenge_scope: None,
            prm_resource: None,
            prm_scopes: None,
            prm_authorization_servers: None,
            step_up: Vec::new(),
            check_audience: false,
            auth_server: AsPlacement::OtherOrigin,
            issuer_path: String::new(),
            metadata_at: vec![AsMetadataAt::Rfc8414],
            metadata_issuer: None,
            pkce_metadata: true,
            dcr: true,
            dcr_auth_method: None,
            dcr_requires_refresh_grant: false,
            revocation: true,
            cimd: false,
            cimd_documents: Vec::new(),
            iss_supported: true,
            iss: Iss::Correct,
            auth_scopes: None,
            auth_methods: vec![
                AuthMethod::None,
                AuthMethod::ClientSecretBasic,
                AuthMethod::ClientSecretPost,
            ],
            clients: Vec::new(),
            access_ttl: Duration::from_secs(3600),
            refresh_tokens: RefreshTokens::Always,
            rotating: true,
        }
    }
}
