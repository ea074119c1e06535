//! What the OAuth fixture has seen, as `OAuthHandle::stats` reports it: every request to
//! its endpoints and what it answered.

use super::options::AuthMethod;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// A snapshot of everything the fixture recorded.
#[derive(Clone, Debug, Default)]
pub struct OAuthStats {
    /// Token requests by `grant_type` as sent (`authorization_code`, `refresh_token`, or
    /// whatever else arrived; `""` when it was missing), whatever the outcome.
    pub token_requests: BTreeMap<String, usize>,
    /// Every token request, in order.
    pub token_log: Vec<TokenRequest>,
    /// Refresh requests by the refresh token they presented, whatever the outcome.
    pub refreshes: HashMap<String, usize>,
    /// Every authorization request, in order.
    pub authorizations: Vec<AuthorizationRequest>,
    /// Every registration request body, in order (a body that is not JSON as a string).
    pub registrations: Vec<Value>,
    /// Every revocation request, in order.
    pub revocations: Vec<RevocationRequest>,
    /// Every token family revoked, in order: a family is one authorization and every access
    /// and refresh token descended from it.
    pub families_revoked: Vec<FamilyRevoked>,
    /// Every CIMD `client_id` the AS looked up (as if it fetched the document).
    pub cimd_lookups: Vec<String>,
    /// Every request the protected resource's check saw (the MCP endpoints), in order.
    pub resource_requests: Vec<ResourceRequest>,
    /// Every request to the metadata and AS endpoints, on either origin, and every request
    /// to a path nobody serves (404), in order.
    pub requests: Vec<HttpRecord>,
    /// Every request to the identity provider's token endpoint (whatever its grant), in
    /// order.
    pub idp_requests: Vec<IdpRequest>,
    /// Every ID-JAG the identity provider issued, in order.
    pub id_jags: Vec<String>,
    /// Every authorization request to the identity provider (sign-in), in order.
    pub idp_authorizations: Vec<AuthorizationRequest>,
    /// Every ID token the identity provider's sign-in issued (code or refresh), in order.
    pub id_tokens: Vec<String>,
}

impl OAuthStats {
    /// Token requests with this `grant_type`.
    pub fn token_requests_for(&self, grant_type: &str) -> usize {
        self.token_requests.get(grant_type).copied().unwrap_or(0)
    }

    /// Requests to the identity provider's token endpoint with this `grant_type` (`""`
    /// when it was missing), whatever the outcome.
    pub fn idp_token_requests_for(&self, grant_type: &str) -> usize {
        (self.idp_requests.iter())
            .filter(|r| r.param("grant_type").unwrap_or_default() == grant_type)
            .count()
    }

    /// The paths of `requests`, in order.
    pub fn paths(&self) -> Vec<&str> {
        self.requests.iter().map(|r| r.path.as_str()).collect()
    }

    /// Whether any request reached `path` (on either origin).
    pub fn requested(&self, path: &str) -> bool {
        self.requests.iter().any(|r| r.path == path)
    }

    /// The token requests with this `grant_type`, in order.
    pub fn token_log_for(&self, grant_type: &str) -> Vec<&TokenRequest> {
        (self.token_log.iter())
            .filter(|r| r.param("grant_type").unwrap_or_default() == grant_type)
            .collect()
    }

    /// The DPoP checks of every token and resource request that carried a proof, in order
    /// within each (token requests first).
    pub fn dpop_checks(&self) -> Vec<&DpopCheck> {
        let tokens = self.token_log.iter().filter_map(|r| r.dpop.as_ref());
        tokens
            .chain(
                self.resource_requests
                    .iter()
                    .filter_map(|r| r.dpop.as_ref()),
            )
            .collect()
    }
}

/// The value of the first parameter called `name`.
fn first<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// One `GET /authorize`.
#[derive(Clone, Debug)]
pub struct AuthorizationRequest {
    /// The query parameters, decoded, in order.
    pub params: Vec<(String, String)>,
    /// 302 (a redirect back to the client, with a code or an error) or 400 (no redirect:
    /// an unknown client or a bad `redirect_uri`).
    pub status: u16,
    /// The redirect's `Location`.
    pub location: Option<String>,
    /// The OAuth error code, when refused.
    pub error: Option<String>,
}

impl AuthorizationRequest {
    pub fn param(&self, name: &str) -> Option<&str> {
        first(&self.params, name)
    }

    /// The requested scopes, split on spaces.
    pub fn scopes(&self) -> Vec<&str> {
        self.param("scope")
            .map(|s| s.split(' ').filter(|s| !s.is_empty()).collect())
            .unwrap_or_default()
    }
}

/// One `POST /token`.
#[derive(Clone, Debug)]
pub struct TokenRequest {
    /// The form parameters, decoded, in order.
    pub params: Vec<(String, String)>,
    /// The `Authorization` header, as sent.
    pub authorization: Option<String>,
    pub status: u16,
    /// The OAuth error code, when refused.
    pub error: Option<String>,
    /// The check of its `DPoP` proof; None when it carried none (or the AS ignores DPoP).
    pub dpop: Option<DpopCheck>,
    /// The `token_type` issued (`Bearer` or `DPoP`), when it succeeded.
    pub token_type: Option<String>,
}

impl TokenRequest {
    pub fn param(&self, name: &str) -> Option<&str> {
        first(&self.params, name)
    }
}

/// One `POST /revoke`.
#[derive(Clone, Debug)]
pub struct RevocationRequest {
    pub params: Vec<(String, String)>,
    pub authorization: Option<String>,
    pub status: u16,
    /// Whether the token was known (and is now revoked).
    pub known: bool,
}

impl RevocationRequest {
    pub fn param(&self, name: &str) -> Option<&str> {
        first(&self.params, name)
    }
}

/// A token family's revocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FamilyRevoked {
    pub family: u64,
    pub why: Revocation,
}

/// Why a family was revoked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Revocation {
    /// A rotated-out refresh token was presented again.
    RefreshReuse,
    /// An authorization code was redeemed a second time.
    CodeReuse,
    /// Its refresh token was revoked at the revocation endpoint.
    Endpoint,
    /// The test revoked it (`OAuthHandle::revoke`, `revoke_all`).
    Test,
}

/// One request to the protected resource's MCP endpoints.
#[derive(Clone, Debug)]
pub struct ResourceRequest {
    pub method: String,
    pub path: String,
    /// The token it carried (with the `Bearer` or `DPoP` scheme).
    pub token: Option<String>,
    /// The `Authorization` scheme, as sent, when it carried a token.
    pub scheme: Option<String>,
    /// The check of its `DPoP` proof, when it carried one or needed one.
    pub dpop: Option<DpopCheck>,
    /// The `error` of the challenge it got (`invalid_token`, `invalid_dpop_proof`,
    /// `use_dpop_nonce`, `insufficient_scope`).
    pub error: Option<String>,
    /// The JSON-RPC method of its body, if any.
    pub rpc_method: Option<String>,
    /// The tool's name, for `tools/call`.
    pub tool: Option<String>,
    pub outcome: ResourceOutcome,
}

/// What the resource's check decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResourceOutcome {
    /// Passed on to the MCP server.
    Admitted,
    /// 401: no token, or one that is unknown, expired, revoked or for another audience.
    Unauthorized,
    /// 403 `insufficient_scope`, naming these scopes.
    InsufficientScope(Vec<String>),
}

/// One request to the metadata or AS endpoints, or to a path nobody serves.
#[derive(Clone, Debug)]
pub struct HttpRecord {
    /// The port it arrived on: the MCP origin's or the AS's.
    pub port: u16,
    pub method: String,
    pub path: String,
    pub status: u16,
}

/// Where a client came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientSource {
    PreRegistered,
    Dcr,
    Cimd,
}

/// A client the AS knows.
#[derive(Clone, Debug)]
pub struct RegisteredClient {
    pub id: String,
    pub secret: Option<String>,
    pub auth_method: AuthMethod,
    /// Empty: any loopback URI.
    pub redirect_uris: Vec<String>,
    pub grant_types: Vec<String>,
    pub application_type: Option<String>,
    pub source: ClientSource,
    /// The ES256 public point of a `private_key_jwt` client.
    pub public_key: Option<Vec<u8>>,
}

/// What the fixture made of one DPoP proof (or of its absence, where one was needed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DpopCheck {
    /// Whether a `DPoP` header was sent.
    pub had_proof: bool,
    /// The proof's `jti`, `nonce` and key thumbprint (`jkt`), as far as they could be read.
    pub jti: Option<String>,
    pub nonce: Option<String>,
    pub jkt: Option<String>,
    /// None when the proof passed; else why not. A missing or stale nonce starts with
    /// `use_dpop_nonce`.
    pub error: Option<String>,
}

impl DpopCheck {
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }
}

/// One `POST /token` at the identity provider.
#[derive(Clone, Debug)]
pub struct IdpRequest {
    /// The form parameters, decoded, in order, without `client_secret`.
    pub params: Vec<(String, String)>,
    /// Whether it authenticated with `Authorization: Basic`.
    pub basic: bool,
    pub status: u16,
    /// The OAuth error code, when refused.
    pub error: Option<String>,
}

impl IdpRequest {
    pub fn param(&self, name: &str) -> Option<&str> {
        first(&self.params, name)
    }
}
