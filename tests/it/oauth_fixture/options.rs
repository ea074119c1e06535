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
    /// A JWT signed with the client's ES256 key (RFC 7523 §2.2): `client_assertion_type`
    /// and `client_assertion` in the body.
    PrivateKeyJwt,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::None => "none",
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
            AuthMethod::PrivateKeyJwt => "private_key_jwt",
        }
    }

    pub fn parse(name: &str) -> Option<AuthMethod> {
        [
            AuthMethod::None,
            AuthMethod::ClientSecretBasic,
            AuthMethod::ClientSecretPost,
            AuthMethod::PrivateKeyJwt,
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
    /// The uncompressed P-256 point (65 bytes, `04 ‖ x ‖ y`) that verifies the client's
    /// assertions, for `private_key_jwt`.
    pub public_key: Option<Vec<u8>>,
}

impl Client {
    /// A public client (`token_endpoint_auth_method` `none`).
    pub fn public(id: &str) -> Client {
        Client {
            id: id.to_owned(),
            secret: None,
            auth_method: AuthMethod::None,
            redirect_uris: Vec::new(),
            public_key: None,
        }
    }

    /// A confidential client authenticating with `method` (basic or post).
    pub fn confidential(id: &str, secret: &str, method: AuthMethod) -> Client {
        Client {
            id: id.to_owned(),
            secret: Some(secret.to_owned()),
            auth_method: method,
            redirect_uris: Vec::new(),
            public_key: None,
        }
    }

    /// A confidential client authenticating with `private_key_jwt`, its ES256 public key
    /// given as the uncompressed 65-byte point.
    pub fn private_key_jwt(id: &str, public_point: &[u8]) -> Client {
        Client {
            id: id.to_owned(),
            secret: None,
            auth_method: AuthMethod::PrivateKeyJwt,
            redirect_uris: Vec::new(),
            public_key: Some(public_point.to_vec()),
        }
    }

    /// A `private_key_jwt` client whose public key is the JWK with these base64url `x`
    /// and `y` (P-256).
    pub fn private_key_jwt_xy(id: &str, x: &str, y: &str) -> Client {
        let jwk = serde_json::json!({"kty": "EC", "crv": "P-256", "x": x, "y": y});
        let point = super::jose::ec_point(&jwk).expect("x and y of a P-256 key");
        Client::private_key_jwt(id, &point)
    }

    pub fn redirect_uris(mut self, uris: &[&str]) -> Client {
        self.redirect_uris = uris.iter().map(|u| (*u).to_owned()).collect();
        self
    }
}

/// An `aud` a `private_key_jwt` client assertion may carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AssertionAudience {
    /// The AS's issuer, exactly (what the MCP conformance suite requires).
    Issuer,
    /// The token endpoint's URL.
    TokenEndpoint,
    /// This value.
    Exact(String),
}

/// The identity provider of an enterprise-managed login (ID-JAG): on its own origin, it
/// exchanges the ID token the test set for an Identity Assertion JWT Authorization Grant
/// (RFC 8693 token exchange) that the fixture's AS accepts at its jwt-bearer grant.
#[derive(Clone, Debug)]
pub struct IdpOptions {
    /// The client id the IdP knows the client by.
    pub client_id: String,
    /// Its secret, when the IdP client is confidential (then it must be sent, Basic or in
    /// the body).
    pub client_secret: Option<String>,
    /// The ID token a token exchange must present as `subject_token` (the handle can
    /// change it).
    pub id_token: String,
    /// The ID-JAG's `sub`.
    pub subject: String,
    /// The ID-JAG's `client_id`: the client at the AS it is for; the AS then accepts it
    /// from that client only. None leaves the claim out.
    pub jag_client_id: Option<String>,
    /// Lifetime of an ID-JAG (its `exp` and the response's `expires_in`).
    pub jag_ttl: Duration,
    /// Sign-in (OpenID Connect authorization code flow with PKCE): `GET /authorize`, the
    /// `authorization_code` and `refresh_token` grants at `/token` issuing ID tokens, which
    /// the token exchange then accepts until they expire. Off: none of it exists.
    pub sign_in: bool,
    /// Lifetime of an ID token (and of the access token) the sign-in issues.
    pub id_token_ttl: Duration,
}

impl IdpOptions {
    /// A public IdP client `client_id` whose exchanges present `id_token`.
    pub fn new(client_id: &str, id_token: &str) -> IdpOptions {
        IdpOptions {
            client_id: client_id.to_owned(),
            client_secret: None,
            id_token: id_token.to_owned(),
            subject: "fixture-user".to_owned(),
            jag_client_id: None,
            jag_ttl: Duration::from_secs(300),
            sign_in: false,
            id_token_ttl: Duration::from_secs(300),
        }
    }

    /// Clients can sign in at the IdP (see the field).
    pub fn sign_in(mut self, on: bool) -> IdpOptions {
        self.sign_in = on;
        self
    }

    /// Lifetime of the ID tokens the sign-in issues.
    pub fn id_token_ttl(mut self, ttl: Duration) -> IdpOptions {
        self.id_token_ttl = ttl;
        self
    }

    pub fn secret(mut self, secret: &str) -> IdpOptions {
        self.client_secret = Some(secret.to_owned());
        self
    }

    /// The ID-JAGs name (and are accepted from) this client of the AS.
    pub fn for_client(mut self, as_client_id: &str) -> IdpOptions {
        self.jag_client_id = Some(as_client_id.to_owned());
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

    // Grants without a user (all off by default).
    /// The `client_credentials` grant, for confidential clients: an access token, no
    /// refresh token; listed in `grant_types_supported`.
    pub client_credentials: bool,
    /// The jwt-bearer grant (RFC 7523 §2.1): an assertion registered on the handle
    /// (`accept_assertion`) or issued by the fixture's IdP gets an access token, no refresh
    /// token; listed in `grant_types_supported`.
    pub jwt_bearer: bool,
    /// The `aud` values a `private_key_jwt` assertion may carry (one suffices).
    pub assertion_audiences: Vec<AssertionAudience>,
    /// An identity provider on its own origin (turns `jwt_bearer` on).
    pub idp: Option<IdpOptions>,

    // DPoP (RFC 9449). Token requests carrying a `DPoP` header are checked whatever these
    // say (unless `dpop_ignored`), and a valid proof binds the tokens issued.
    /// The AS metadata lists `dpop_signing_alg_values_supported: ["ES256"]`.
    pub dpop_metadata: bool,
    /// The AS ignores `DPoP` headers, as one without DPoP support: Bearer tokens only.
    pub dpop_ignored: bool,
    /// A token request without a proof is refused (400 `invalid_dpop_proof`).
    pub require_dpop: bool,
    /// The AS demands its nonce in proofs (400 `use_dpop_nonce` with `DPoP-Nonce`).
    pub token_dpop_nonce: bool,
    /// The resource speaks DPoP: its challenges use the `DPoP` scheme (with `algs`) and its
    /// PRM lists `dpop_signing_alg_values_supported`. A bound token needs the DPoP scheme
    /// and a proof wherever it is sent; this only changes what is advertised.
    pub rs_dpop: bool,
    /// With `rs_dpop`, a `Bearer` challenge too (a second `WWW-Authenticate`).
    pub rs_dpop_bearer_challenge: bool,
    /// The resource demands its nonce in proofs (401 `use_dpop_nonce` with `DPoP-Nonce`).
    pub rs_dpop_nonce: bool,
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
            client_credentials: false,
            jwt_bearer: false,
            assertion_audiences: vec![AssertionAudience::Issuer],
            idp: None,
            dpop_metadata: false,
            dpop_ignored: false,
            require_dpop: false,
            token_dpop_nonce: false,
            rs_dpop: false,
            rs_dpop_bearer_challenge: false,
            rs_dpop_nonce: false,
        }
    }
}
