//! `POST /token` (the authorization code grant with PKCE, refresh with rotation and reuse
//! detection, and the grants of `grants`, each with an optional DPoP proof) and
//! `POST /revoke` (RFC 7009).

use super::authorize::scopes;
use super::clients::authenticate;
use super::dpop::{self, Expect, Refusal};
use super::grants;
use super::server::{AsShared, AsState, Binding, Grant, Issued, RefreshState};
use super::stats::{DpopCheck, RegisteredClient, Revocation, RevocationRequest, TokenRequest};
use super::wire::{
    OAuthError, header_text, header_value, json_response, param, parse_form, pkce_shaped, repeated,
    s256,
};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;
use std::sync::Arc;

type Params = [(String, String)];

/// What a grant gives: the tokens and the scope granted.
pub(super) type Granted = Result<(Issued, Vec<String>), OAuthError>;

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
    let (check, proof) = proof_at_token_endpoint(&auth, &mut st, &headers);
    let nonce = st.dpop.nonce.clone();
    let outcome =
        proof.and_then(|jkt| exchange(&auth, &mut st, &headers, &params, &grant_type, jkt));
    let (status, error) = match &outcome {
        Ok(_) => (200, None),
        Err(e) => (e.status.as_u16(), Some(e.code.to_owned())),
    };
    st.stats.token_log.push(TokenRequest {
        params: params.clone(),
        authorization: header_text(&headers, "authorization"),
        status,
        error,
        dpop: check,
        token_type: outcome.as_ref().ok().map(|(i, _)| i.token_type.to_owned()),
    });
    match outcome {
        Ok((issued, scope)) => token_response(&issued, &scope, nonce.as_deref()),
        Err(e) => e.with_nonce(nonce).into_response(),
    }
}

/// The DPoP proof of a token request: its check for the stats (None when there is nothing
/// to record), and the key to bind the tokens to (None: Bearer) or the refusal.
fn proof_at_token_endpoint(
    auth: &AsShared,
    st: &mut AsState,
    headers: &HeaderMap,
) -> (Option<DpopCheck>, Result<Option<String>, OAuthError>) {
    let bad = |why: &str| OAuthError::new("invalid_dpop_proof", why);
    if auth.opts.dpop_ignored {
        return (None, Ok(None));
    }
    let proof = match dpop::proof_header(headers) {
        Ok(Some(proof)) => proof,
        Ok(None) if auth.opts.require_dpop => {
            let why = "a DPoP proof is required";
            return (Some(dpop::missing(why, false)), Err(bad(why)));
        }
        Ok(None) => return (None, Ok(None)),
        Err(why) => return (Some(dpop::missing(&why, true)), Err(bad(&why))),
    };
    let htu = auth.endpoint("/token");
    let expect = Expect {
        htm: "POST",
        htu: &htu,
        access_token: None,
        jkt: None,
    };
    let (check, verdict) = dpop::check(&mut st.dpop, &proof, &expect);
    let why = check.error.clone().unwrap_or_default();
    let verdict = match verdict {
        Ok(jkt) => Ok(Some(jkt)),
        Err(Refusal::Invalid) => Err(bad(&why)),
        Err(Refusal::Nonce) => Err(OAuthError::new("use_dpop_nonce", why)),
    };
    (Some(check), verdict)
}

/// Checks the request and the client, then runs its grant, binding what it issues to `jkt`.
fn exchange(
    auth: &AsShared,
    st: &mut AsState,
    headers: &HeaderMap,
    params: &Params,
    grant_type: &str,
    jkt: Option<String>,
) -> Granted {
    form_checks(headers, params)?;
    let client = authenticate(auth, st, headers, params)?;
    let opts = &auth.opts;
    match grant_type {
        "authorization_code" => code_grant(auth, st, &client, params, jkt),
        "refresh_token" => refresh_grant(auth, st, &client, params, jkt),
        "client_credentials" if opts.client_credentials => {
            grants::client_credentials(auth, st, &client, params, jkt)
        }
        grants::JWT_BEARER if opts.jwt_bearer => grants::jwt_bearer(auth, st, &client, params, jkt),
        "" => Err(OAuthError::new("invalid_request", "grant_type is missing")),
        _ => Err(OAuthError::new(
            "unsupported_grant_type",
            grant_type.to_owned(),
        )),
    }
}

/// The binding of a response's tokens to the proof's key: the access token always, the
/// refresh token only a public client's (RFC 9449 §5: a confidential client's refresh token
/// is bound to its authentication already).
pub(super) fn binding(client: &RegisteredClient, jkt: Option<String>) -> Binding {
    let public = client.auth_method == super::options::AuthMethod::None;
    Binding {
        refresh: jkt.clone().filter(|_| public),
        access: jkt,
    }
}

/// A form body (RFC 6749 §3.2) with no parameter twice.
pub(super) fn form_checks(headers: &HeaderMap, params: &Params) -> Result<(), OAuthError> {
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
    jkt: Option<String>,
) -> Granted {
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
    let binding = binding(client, jkt);
    Ok((st.issue(&auth.opts, &grant, refresh, binding), scope))
}

/// Refreshes: the token must be active and the client's own; a rotated-out token revokes
/// its family. A `scope` may narrow the grant, never widen it. A DPoP-bound refresh token
/// needs a proof by the same key.
fn refresh_grant(
    auth: &AsShared,
    st: &mut AsState,
    client: &RegisteredClient,
    params: &Params,
    jkt: Option<String>,
) -> Granted {
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
    let (mut grant, state, bound) = (token.grant.clone(), token.state, token.jkt.clone());
    if grant.client_id != client.id {
        return Err(invalid("the refresh token was issued to another client"));
    }
    if bound.is_some() && bound != jkt {
        let why = "the refresh token is bound to a DPoP key this request did not prove";
        return Err(invalid(why));
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
    let binding = binding(client, jkt);
    Ok((st.issue(&auth.opts, &grant, rotating, binding), scope))
}

fn token_response(issued: &Issued, scope: &[String], nonce: Option<&str>) -> Response {
    let mut body = json!({
        "access_token": issued.access,
        "token_type": issued.token_type,
        "expires_in": issued.expires_in,
    });
    if let Some(refresh) = &issued.refresh {
        body["refresh_token"] = json!(refresh);
    }
    if !scope.is_empty() {
        body["scope"] = json!(scope.join(" "));
    }
    let mut resp = json_response(StatusCode::OK, &body);
    if let Some(nonce) = nonce {
        resp.headers_mut().insert("dpop-nonce", header_value(nonce));
    }
    resp
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
    let client = authenticate(auth, st, headers, params)?;
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
