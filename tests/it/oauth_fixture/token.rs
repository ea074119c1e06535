//! `POST /token` (the authorization code grant with PKCE, and refresh with rotation and
//! reuse detection) and `POST /revoke` (RFC 7009).

use super::authorize::scopes;
use super::clients::authenticate;
use super::server::{AsShared, AsState, Grant, Issued, RefreshState};
use super::stats::{RegisteredClient, Revocation, RevocationRequest, TokenRequest};
use super::wire::{
    OAuthError, header_text, json_response, param, parse_form, pkce_shaped, repeated, s256,
};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;
use std::sync::Arc;

type Params = [(String, String)];

pub(super) async fn token(
    State(auth): State<Arc<AsShared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let params = parse_form(&String::from_utf8_lossy(&body));
    let grant_type = param(&params, "grant_type").unwrap_or_default().to_owned();
    let mut st = auth.lock();
    *st.stats
        .token_requests
        .entry(grant_type.clone())
        .or_default() += 1;
    if grant_type == "refresh_token"
        && let Some(presented) = param(&params, "refresh_token")
    {
        *st.stats.refreshes.entry(presented.to_owned()).or_default() += 1;
    }
    let outcome = exchange(&auth, &mut st, &headers, &params, &grant_type);
    let (status, error) = match &outcome {
        Ok(_) => (200, None),
        Err(e) => (e.status.as_u16(), Some(e.code.to_owned())),
    };
    st.stats.token_log.push(TokenRequest {
        params: params.clone(),
        authorization: header_text(&headers, "authorization"),
        status,
        error,
    });
    match outcome {
        Ok((issued, scope)) => token_response(&issued, &scope),
        Err(e) => e.into_response(),
    }
}

/// Checks the request and the client, then runs its grant.
fn exchange(
    auth: &AsShared,
    st: &mut AsState,
    headers: &HeaderMap,
    params: &Params,
    grant_type: &str,
) -> Result<(Issued, Vec<String>), OAuthError> {
    form_checks(headers, params)?;
    let client = authenticate(&auth.opts, st, headers, params)?;
    match grant_type {
        "authorization_code" => code_grant(auth, st, &client, params),
        "refresh_token" => refresh_grant(auth, st, &client, params),
        "" => Err(OAuthError::new("invalid_request", "grant_type is missing")),
        _ => Err(OAuthError::new(
            "unsupported_grant_type",
            grant_type.to_owned(),
        )),
    }
}

/// A form body (RFC 6749 §3.2) with no parameter twice.
fn form_checks(headers: &HeaderMap, params: &Params) -> Result<(), OAuthError> {
    let form = header_text(headers, header::CONTENT_TYPE.as_str())
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if !form {
        let why = "the body must be application/x-www-form-urlencoded";
        return Err(OAuthError::new("invalid_request", why));
    }
    match repeated(params) {
        Some(name) => Err(OAuthError::new(
            "invalid_request",
            format!("{name} is repeated"),
        )),
        None => Ok(()),
    }
}

/// Redeems an authorization code: once, by its client, with its redirect URI and the
/// verifier of its challenge. A second redemption revokes what the first one issued.
fn code_grant(
    auth: &AsShared,
    st: &mut AsState,
    client: &RegisteredClient,
    params: &Params,
) -> Result<(Issued, Vec<String>), OAuthError> {
    let invalid = |why: &str| OAuthError::new("invalid_grant", why);
    let Some(code) = param(params, "code") else {
        return Err(OAuthError::new("invalid_request", "code is missing"));
    };
    let Some(grant) = st.codes.get(code) else {
        return Err(invalid("unknown authorization code"));
    };
    if let Some(family) = grant.redeemed {
        st.revoke_family(family, Revocation::CodeReuse);
        return Err(invalid("authorization code already used"));
    }
    if grant.client_id != client.id {
        return Err(invalid("the code was issued to another client"));
    }
    if param(params, "redirect_uri") != Some(grant.redirect_uri.as_str()) {
        return Err(invalid(
            "redirect_uri differs from the authorization request's",
        ));
    }
    let Some(verifier) = param(params, "code_verifier") else {
        return Err(OAuthError::new(
            "invalid_request",
            "code_verifier is missing",
        ));
    };
    if !pkce_shaped(verifier) || s256(verifier) != grant.challenge {
        return Err(invalid("code_verifier does not match the code_challenge"));
    }
    let scope = grant.scope.clone();
    let resource = param(params, "resource")
        .map(str::to_owned)
        .or_else(|| grant.resource.clone());
    let family = st.new_family();
    if let Some(grant) = st.codes.get_mut(code) {
        grant.redeemed = Some(family);
    }
    let grant = Grant {
        family,
        client_id: client.id.clone(),
        scope: scope.clone(),
        resource,
    };
    let refresh = AsState::refresh_for(&auth.opts, &scope);
    Ok((st.issue(&auth.opts, &grant, refresh), scope))
}

/// Refreshes: the token must be active and the client's own; a rotated-out token revokes
/// its family. A `scope` may narrow the grant, never widen it.
fn refresh_grant(
    auth: &AsShared,
    st: &mut AsState,
    client: &RegisteredClient,
    params: &Params,
) -> Result<(Issued, Vec<String>), OAuthError> {
    let invalid = |why: &str| OAuthError::new("invalid_grant", why);
    let Some(presented) = param(params, "refresh_token") else {
        return Err(OAuthError::new(
            "invalid_request",
            "refresh_token is missing",
        ));
    };
    let Some(token) = st.refresh.get(presented) else {
        return Err(invalid("unknown refresh token"));
    };
    let (mut grant, state) = (token.grant.clone(), token.state);
    if grant.client_id != client.id {
        return Err(invalid("the refresh token was issued to another client"));
    }
    if st.family_revoked(grant.family) || state == RefreshState::Revoked {
        return Err(invalid("the refresh token was revoked"));
    }
    if state == RefreshState::Rotated {
        st.revoke_family(grant.family, Revocation::RefreshReuse);
        return Err(invalid("the refresh token was already used"));
    }
    if let Some(asked) = param(params, "scope") {
        let asked = scopes(Some(asked));
        if !asked.iter().all(|s| grant.scope.contains(s)) {
            let why = "the scope exceeds the original grant";
            return Err(OAuthError::new("invalid_scope", why));
        }
        grant.scope = asked;
    }
    if let Some(resource) = param(params, "resource") {
        grant.resource = Some(resource.to_owned());
    }
    let rotating = auth.opts.rotating;
    if rotating && let Some(token) = st.refresh.get_mut(presented) {
        token.state = RefreshState::Rotated;
    }
    let scope = grant.scope.clone();
    Ok((st.issue(&auth.opts, &grant, rotating), scope))
}

fn token_response(issued: &Issued, scope: &[String]) -> Response {
    let mut body = json!({
        "access_token": issued.access,
        "token_type": "Bearer",
        "expires_in": issued.expires_in,
    });
    if let Some(refresh) = &issued.refresh {
        body["refresh_token"] = json!(refresh);
    }
    if !scope.is_empty() {
        body["scope"] = json!(scope.join(" "));
    }
    json_response(StatusCode::OK, &body)
}

/// Revokes a token of the authenticated client: a refresh token takes its whole family with
/// it, an access token goes alone. Unknown tokens (and other clients' tokens) get 200 too.
pub(super) async fn revoke(
    State(auth): State<Arc<AsShared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let params = parse_form(&String::from_utf8_lossy(&body));
    let mut st = auth.lock();
    let outcome = revoke_token(&auth, &mut st, &headers, &params);
    let (status, known) = match &outcome {
        Ok(known) => (200, *known),
        Err(e) => (e.status.as_u16(), false),
    };
    st.stats.revocations.push(RevocationRequest {
        params,
        authorization: header_text(&headers, "authorization"),
        status,
        known,
    });
    match outcome {
        Ok(_) => StatusCode::OK.into_response(),
        Err(e) => e.into_response(),
    }
}

/// Whether the token was the client's and is now revoked.
fn revoke_token(
    auth: &AsShared,
    st: &mut AsState,
    headers: &HeaderMap,
    params: &Params,
) -> Result<bool, OAuthError> {
    form_checks(headers, params)?;
    let client = authenticate(&auth.opts, st, headers, params)?;
    let Some(token) = param(params, "token") else {
        return Err(OAuthError::new("invalid_request", "token is missing"));
    };
    if let Some(t) = st.refresh.get_mut(token)
        && t.grant.client_id == client.id
    {
        t.state = RefreshState::Revoked;
        let family = t.grant.family;
        st.revoke_family(family, Revocation::Endpoint);
        return Ok(true);
    }
    if let Some(t) = st.access.get_mut(token)
        && t.grant.client_id == client.id
    {
        t.revoked = true;
        return Ok(true);
    }
    Ok(false)
}
