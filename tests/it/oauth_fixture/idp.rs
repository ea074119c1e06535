//! The identity provider of an enterprise-managed login, on its own origin: OIDC discovery,
//! its signing key at `/jwks`, and `POST /token` doing token exchange (RFC 8693) of the ID
//! token the test set for an ID-JAG (an ES256 JWT, `typ` `oauth-id-jag+jwt`) that the
//! fixture's AS accepts at its jwt-bearer grant. With `IdpOptions::sign_in`, a client can
//! also sign in (OpenID Connect authorization code flow, in `idp_signin`) and exchange the
//! ID token it got.

use super::idp_signin::{self, IdCode, IssuedIdToken};
use super::jwt::{Es256Key, ID_JAG_TYPE, ID_TOKEN_TYPE, TOKEN_EXCHANGE, jti, now};
use super::options::IdpOptions;
use super::server::{AsShared, Assertion};
use super::stats::{AuthorizationRequest, IdpRequest};
use super::token::form_checks;
use super::wire::{OAuthError, basic_credentials, json_response, param, parse_form};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// What the IdP's handlers and every `OAuthHandle` share.
pub(super) struct IdpShared {
    pub opts: IdpOptions,
    /// `http://127.0.0.1:PORT`.
    pub issuer: String,
    pub key: Es256Key,
    /// The AS whose jwt-bearer grant accepts the ID-JAGs (and whose issuer is their
    /// audience).
    auth: Arc<AsShared>,
    /// The `resource` an exchange must name (the PRM's), when the fixture runs a resource.
    resource: Option<String>,
    inner: Mutex<IdpState>,
}

pub(super) struct IdpState {
    /// The `subject_token` an exchange must present.
    pub id_token: String,
    pub requests: Vec<IdpRequest>,
    /// The ID-JAGs issued, in order.
    pub issued: Vec<String>,
    /// Sign-in: authorization codes by value.
    pub codes: HashMap<String, IdCode>,
    /// Sign-in: the refresh tokens a refresh accepts (retired ones are removed), with the
    /// scope they carry.
    pub refresh_tokens: HashMap<String, Vec<String>>,
    /// Sign-in: every ID token issued, in order, with its `exp`.
    pub id_tokens: Vec<IssuedIdToken>,
    /// Sign-in: every authorization request, in order.
    pub authorizations: Vec<AuthorizationRequest>,
}

impl IdpShared {
    pub fn new(
        opts: IdpOptions,
        port: u16,
        auth: Arc<AsShared>,
        resource: Option<String>,
    ) -> IdpShared {
        let state = IdpState {
            id_token: opts.id_token.clone(),
            requests: Vec::new(),
            issued: Vec::new(),
            codes: HashMap::new(),
            refresh_tokens: HashMap::new(),
            id_tokens: Vec::new(),
            authorizations: Vec::new(),
        };
        IdpShared {
            opts,
            issuer: format!("http://127.0.0.1:{port}"),
            key: Es256Key::generate(),
            auth,
            resource,
            inner: Mutex::new(state),
        }
    }

    /// Locks the state; a panic in another holder does not poison the fixture for the test.
    pub fn lock(&self) -> MutexGuard<'_, IdpState> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub(super) fn routes(idp: Arc<IdpShared>) -> Router {
    let mut router = Router::new()
        .route("/.well-known/openid-configuration", get(discovery))
        .route("/token", post(token))
        .route("/jwks", get(jwks));
    if idp.opts.sign_in {
        router = router.route("/authorize", get(idp_signin::authorize));
    }
    router.with_state(idp)
}

async fn discovery(State(idp): State<Arc<IdpShared>>) -> Response {
    let methods = match idp.opts.client_secret {
        Some(_) => json!(["client_secret_basic", "client_secret_post"]),
        None => json!(["none"]),
    };
    let mut doc = json!({
        "issuer": idp.issuer,
        "token_endpoint": format!("{}/token", idp.issuer),
        "jwks_uri": format!("{}/jwks", idp.issuer),
        "grant_types_supported": [TOKEN_EXCHANGE],
        "token_endpoint_auth_methods_supported": methods,
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
    });
    if idp.opts.sign_in {
        idp_signin::discovery(&idp, &mut doc);
    }
    json_response(StatusCode::OK, &doc)
}

async fn jwks(State(idp): State<Arc<IdpShared>>) -> Response {
    let mut jwk = idp.key.public_jwk();
    jwk["use"] = json!("sig");
    jwk["alg"] = json!("ES256");
    json_response(StatusCode::OK, &json!({"keys": [jwk]}))
}

async fn token(State(idp): State<Arc<IdpShared>>, headers: HeaderMap, body: Bytes) -> Response {
    let params = parse_form(&String::from_utf8_lossy(&body));
    let mut st = idp.lock();
    let grant_type = param(&params, "grant_type").unwrap_or_default();
    let outcome = match grant_type {
        "authorization_code" | "refresh_token" if idp.opts.sign_in => {
            idp_signin::grant(&idp, &mut st, &headers, &params, grant_type)
        }
        _ => exchange(&idp, &mut st, &headers, &params),
    };
    let (status, error) = match &outcome {
        Ok(_) => (200, None),
        Err(e) => (e.status.as_u16(), Some(e.code.to_owned())),
    };
    st.requests.push(IdpRequest {
        params: (params.iter())
            .filter(|(name, _)| name != "client_secret")
            .cloned()
            .collect(),
        basic: basic_credentials(&headers).is_some(),
        status,
        error,
    });
    match outcome {
        Ok(body) => json_response(StatusCode::OK, &body),
        Err(e) => e.into_response(),
    }
}

/// Checks a token exchange request; the response body (its ID-JAG recorded), or why not.
fn exchange(
    idp: &IdpShared,
    st: &mut IdpState,
    headers: &HeaderMap,
    params: &[(String, String)],
) -> Result<Value, OAuthError> {
    form_checks(headers, params)?;
    authenticate(idp, headers, params)?;
    let required = |name: &str| {
        param(params, name)
            .ok_or_else(|| OAuthError::new("invalid_request", format!("{name} is missing")))
    };
    let grant_type = required("grant_type")?;
    if grant_type != TOKEN_EXCHANGE {
        return Err(OAuthError::new(
            "unsupported_grant_type",
            grant_type.to_owned(),
        ));
    }
    let mismatch = |name: &str, want: &str| {
        OAuthError::new("invalid_request", format!("{name} must be {want}"))
    };
    if required("requested_token_type")? != ID_JAG_TYPE {
        return Err(mismatch("requested_token_type", ID_JAG_TYPE));
    }
    let subject_token = required("subject_token")?;
    if required("subject_token_type")? != ID_TOKEN_TYPE {
        return Err(mismatch("subject_token_type", ID_TOKEN_TYPE));
    }
    if subject_token != st.id_token {
        idp_signin::check_issued(st, subject_token)?;
    }
    let audience = required("audience")?;
    if audience != idp.auth.issuer {
        let why = format!("audience must be {}", idp.auth.issuer);
        return Err(OAuthError::new("invalid_target", why));
    }
    let resource = required("resource")?;
    if idp.resource.as_ref().is_some_and(|r| r != resource) {
        return Err(OAuthError::new("invalid_target", "unknown resource"));
    }
    let scope = param(params, "scope");
    let (jag, body) = issue(idp, resource, scope);
    st.issued.push(jag);
    Ok(body)
}

/// The IdP's client: `client_id` in the body or Basic credentials, and the secret when the
/// IdP client has one.
pub(super) fn authenticate(
    idp: &IdpShared,
    headers: &HeaderMap,
    params: &[(String, String)],
) -> Result<(), OAuthError> {
    let (form_id, form_secret) = (param(params, "client_id"), param(params, "client_secret"));
    let (id, secret) = match basic_credentials(headers) {
        Some(Err(())) => return Err(OAuthError::invalid_client("malformed Basic credentials")),
        Some(Ok(_)) if form_secret.is_some() => {
            let why = "more than one client authentication method";
            return Err(OAuthError::new("invalid_request", why));
        }
        Some(Ok((id, _))) if form_id.is_some_and(|f| f != id) => {
            let why = "client_id differs from the Basic credentials";
            return Err(OAuthError::new("invalid_request", why));
        }
        Some(Ok((id, secret))) => (Some(id), Some(secret)),
        None => (form_id.map(str::to_owned), form_secret.map(str::to_owned)),
    };
    match id {
        None => Err(OAuthError::invalid_client("no client_id")),
        Some(id) if id != idp.opts.client_id => {
            Err(OAuthError::invalid_client(format!("unknown client {id}")))
        }
        Some(_) if idp.opts.client_secret.is_some() && secret != idp.opts.client_secret => {
            Err(OAuthError::invalid_client("wrong or missing client secret"))
        }
        Some(_) => Ok(()),
    }
}

/// A signed ID-JAG for `resource` at the AS, registered with the AS, and the response.
fn issue(idp: &IdpShared, resource: &str, scope: Option<&str>) -> (String, Value) {
    let now = now();
    let ttl = idp.opts.jag_ttl;
    let mut claims = json!({
        "iss": idp.issuer, "sub": idp.opts.subject, "aud": idp.auth.issuer,
        "jti": jti(), "iat": now, "exp": now + ttl.as_secs() as i64, "resource": resource,
    });
    if let Some(client_id) = &idp.opts.jag_client_id {
        claims["client_id"] = json!(client_id);
    }
    if let Some(scope) = scope {
        claims["scope"] = json!(scope);
    }
    let header = json!({"alg": "ES256", "typ": "oauth-id-jag+jwt"});
    let jag = idp.key.sign(&header, &claims);
    let accepted = Assertion {
        expires: Some(Instant::now() + ttl),
        client_id: idp.opts.jag_client_id.clone(),
        resource: Some(resource.to_owned()),
        scope: super::authorize::scopes(scope),
    };
    idp.auth.lock().assertions.insert(jag.clone(), accepted);
    let mut body = json!({
        "access_token": jag, "issued_token_type": ID_JAG_TYPE, "token_type": "N_A",
        "expires_in": ttl.as_secs(),
    });
    if let Some(scope) = scope {
        body["scope"] = json!(scope);
    }
    (jag, body)
}
