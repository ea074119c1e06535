//! Signing in at the identity provider (with `IdpOptions::sign_in`): OpenID Connect's
//! authorization code flow with PKCE. `GET /authorize` approves at once (no login page) and
//! redirects back with `code`, `state` and `iss`; `POST /token` redeems the code (once) for
//! an access token, an ID token signed with the IdP's key and, with `offline_access`, a
//! refresh token, which rotates on every refresh. The token exchange accepts the ID tokens
//! issued here until their `exp` (or `OAuthHandle::expire_id_tokens`).

use super::clients::loopback;
use super::idp::{IdpShared, IdpState, authenticate};
use super::jwt::{TOKEN_EXCHANGE, jti, now};
use super::stats::AuthorizationRequest;
use super::token::form_checks;
use super::wire::{
    OAuthError, fresh, header_value, param, parse_form, pkce_shaped, repeated, s256,
};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use reqwest::Url;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// An authorization code the IdP issued.
pub(super) struct IdCode {
    pub redirect_uri: String,
    pub challenge: String,
    pub scope: Vec<String>,
    /// The authorization request's `nonce`, for the ID token.
    pub nonce: Option<String>,
    pub redeemed: bool,
}

/// An ID token the sign-in issued, and its `exp` (`i64::MIN` once the handle expired it).
#[derive(Clone, Debug)]
pub(super) struct IssuedIdToken {
    pub token: String,
    pub exp: i64,
}

/// What the discovery document adds when clients can sign in.
pub(super) fn discovery(idp: &IdpShared, doc: &mut Value) {
    doc["authorization_endpoint"] = json!(format!("{}/authorize", idp.issuer));
    doc["response_types_supported"] = json!(["code"]);
    doc["response_modes_supported"] = json!(["query"]);
    doc["code_challenge_methods_supported"] = json!(["S256"]);
    doc["scopes_supported"] = json!(["openid", "offline_access", "profile", "email"]);
    doc["grant_types_supported"] = json!(["authorization_code", "refresh_token", TOKEN_EXCHANGE]);
    doc["authorization_response_iss_parameter_supported"] = json!(true);
}

/// The answer to an authorization request: 302 to the location (with the error code it
/// carries, if any), or a refusal without redirect.
type Answer = Result<(String, Option<&'static str>), OAuthError>;

pub(super) async fn authorize(State(idp): State<Arc<IdpShared>>, uri: Uri) -> Response {
    let params = parse_form(uri.query().unwrap_or(""));
    let mut st = idp.lock();
    let answer = decide(&idp, &mut st, &params);
    let (status, location, error) = match &answer {
        Ok((to, error)) => (302, Some(to.clone()), error.map(str::to_owned)),
        Err(e) => (e.status.as_u16(), None, Some(e.code.to_owned())),
    };
    st.authorizations.push(AuthorizationRequest {
        params,
        status,
        location,
        error,
    });
    match answer {
        Ok((to, _)) => {
            let mut resp = StatusCode::FOUND.into_response();
            resp.headers_mut()
                .insert(header::LOCATION, header_value(&to));
            resp
        }
        Err(e) => e.into_response(),
    }
}

/// A 400 refusal (no redirect) when the client or the redirect URI cannot be trusted; else
/// a redirect with a code, or with an error.
fn decide(idp: &IdpShared, st: &mut IdpState, params: &[(String, String)]) -> Answer {
    let refuse = |why: String| Err(OAuthError::new("invalid_request", why));
    if let Some(name) = repeated(params) {
        return refuse(format!("{name} is repeated"));
    }
    match param(params, "client_id") {
        None => return refuse("client_id is missing".to_owned()),
        Some(id) if id != idp.opts.client_id => return refuse(format!("unknown client_id {id}")),
        Some(_) => {}
    }
    let Some(redirect_uri) = param(params, "redirect_uri") else {
        return refuse("redirect_uri is missing".to_owned());
    };
    let parsed = Url::parse(redirect_uri).ok();
    if !parsed.is_some_and(|u| loopback(&u) && u.port().is_some() && u.fragment().is_none()) {
        return refuse("redirect_uri must be a loopback http://127.0.0.1:PORT/ URI".to_owned());
    }
    let state = param(params, "state");
    let back =
        |pairs: &[(&str, &str)], error| Ok((location(idp, redirect_uri, pairs, state), error));
    if let Err((code, why)) = check(params) {
        return back(&[("error", code), ("error_description", why)], Some(code));
    }
    let code = fresh("idp-code-");
    let grant = IdCode {
        redirect_uri: redirect_uri.to_owned(),
        challenge: param(params, "code_challenge")
            .unwrap_or_default()
            .to_owned(),
        scope: super::authorize::scopes(param(params, "scope")),
        nonce: param(params, "nonce").map(str::to_owned),
        redeemed: false,
    };
    st.codes.insert(code.clone(), grant);
    back(&[("code", &code)], None)
}

/// The checks whose failure is reported to the client by redirect.
fn check(params: &[(String, String)]) -> Result<(), (&'static str, &'static str)> {
    match param(params, "response_type") {
        Some("code") => {}
        Some(_) => return Err(("unsupported_response_type", "response_type must be code")),
        None => return Err(("invalid_request", "response_type is missing")),
    }
    if !param(params, "code_challenge").is_some_and(pkce_shaped) {
        return Err(("invalid_request", "code_challenge is missing or malformed"));
    }
    if param(params, "code_challenge_method") != Some("S256") {
        return Err(("invalid_request", "code_challenge_method must be S256"));
    }
    if param(params, "state").is_none_or(str::is_empty) {
        return Err(("invalid_request", "state is missing"));
    }
    if !super::authorize::scopes(param(params, "scope")).contains(&"openid".to_owned()) {
        return Err(("invalid_scope", "scope must include openid"));
    }
    Ok(())
}

/// `redirect_uri` with `pairs`, then `state` (when sent) and `iss`.
fn location(
    idp: &IdpShared,
    redirect_uri: &str,
    pairs: &[(&str, &str)],
    state: Option<&str>,
) -> String {
    let mut url = Url::parse(redirect_uri).expect("decide parsed it");
    {
        let mut query = url.query_pairs_mut();
        query.extend_pairs(pairs);
        if let Some(state) = state {
            query.append_pair("state", state);
        }
        query.append_pair("iss", &idp.issuer);
    }
    url.to_string()
}

/// `POST /token` with `authorization_code` or `refresh_token`: the response body, or why not.
pub(super) fn grant(
    idp: &IdpShared,
    st: &mut IdpState,
    headers: &HeaderMap,
    params: &[(String, String)],
    grant_type: &str,
) -> Result<Value, OAuthError> {
    form_checks(headers, params)?;
    authenticate(idp, headers, params)?;
    let invalid = |why: &str| OAuthError::new("invalid_grant", why);
    let missing = |name: &str| OAuthError::new("invalid_request", format!("{name} is missing"));
    let (scope, nonce) = if grant_type == "authorization_code" {
        let code = param(params, "code").ok_or_else(|| missing("code"))?;
        let grant = st
            .codes
            .get_mut(code)
            .ok_or_else(|| invalid("unknown authorization code"))?;
        if grant.redeemed {
            return Err(invalid("authorization code already used"));
        }
        if param(params, "redirect_uri") != Some(grant.redirect_uri.as_str()) {
            return Err(invalid(
                "redirect_uri differs from the authorization request's",
            ));
        }
        let verifier = param(params, "code_verifier").ok_or_else(|| missing("code_verifier"))?;
        if !pkce_shaped(verifier) || s256(verifier) != grant.challenge {
            return Err(invalid("code_verifier does not match the code_challenge"));
        }
        grant.redeemed = true;
        (grant.scope.clone(), grant.nonce.clone())
    } else {
        let presented = param(params, "refresh_token").ok_or_else(|| missing("refresh_token"))?;
        let scope = st.refresh_tokens.remove(presented);
        (
            scope.ok_or_else(|| invalid("unknown or retired refresh token"))?,
            None,
        )
    };
    let ttl = idp.opts.id_token_ttl;
    let id_token = id_token(idp, st, nonce.as_deref());
    let mut body = json!({
        "access_token": fresh("idp-access-"), "token_type": "Bearer",
        "expires_in": ttl.as_secs(), "id_token": id_token, "scope": scope.join(" "),
    });
    if scope.iter().any(|s| s == "offline_access") {
        let refresh = fresh("idp-refresh-");
        st.refresh_tokens.insert(refresh.clone(), scope);
        body["refresh_token"] = json!(refresh);
    }
    Ok(body)
}

/// A signed ID token for the IdP client, recorded as issued.
fn id_token(idp: &IdpShared, st: &mut IdpState, nonce: Option<&str>) -> String {
    let now = now();
    let exp = now + idp.opts.id_token_ttl.as_secs() as i64;
    let mut claims = json!({
        "iss": idp.issuer, "sub": idp.opts.subject, "aud": idp.opts.client_id,
        "azp": idp.opts.client_id, "iat": now, "auth_time": now, "exp": exp, "jti": jti(),
    });
    if let Some(nonce) = nonce {
        claims["nonce"] = json!(nonce);
    }
    let token = idp
        .key
        .sign(&json!({"alg": "ES256", "typ": "JWT"}), &claims);
    st.id_tokens.push(IssuedIdToken {
        token: token.clone(),
        exp,
    });
    token
}

/// Whether `subject_token` is an ID token the sign-in issued and that has not expired.
pub(super) fn check_issued(st: &IdpState, subject_token: &str) -> Result<(), OAuthError> {
    let invalid = |why: &str| OAuthError::new("invalid_grant", why);
    let issued = (st.id_tokens.iter()).find(|t| t.token == subject_token);
    let Some(issued) = issued else {
        return Err(invalid("unknown subject_token"));
    };
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let exp = u64::try_from(issued.exp).map_or(Duration::ZERO, Duration::from_secs);
    if since_epoch >= exp {
        return Err(invalid("the ID token has expired"));
    }
    Ok(())
}
