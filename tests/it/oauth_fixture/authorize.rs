//! `GET /authorize`: checks the request, auto-approves it and redirects back to the client
//! with a code (or an error), `state` and `iss` as the options say.

use super::clients::{lookup, redirect_allowed};
use super::options::iss_value;
use super::server::{AsShared, AsState, Code};
use super::stats::AuthorizationRequest;
use super::wire::{OAuthError, fresh, header_value, param, parse_form, pkce_shaped, repeated};
use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use reqwest::Url;
use std::sync::Arc;

/// The answer to an authorization request.
enum Answer {
    /// 302 to this location; the error code when it carries an error.
    Redirect(String, Option<&'static str>),
    /// No redirect: the client or its redirect URI cannot be trusted (RFC 6749 §4.1.2.1).
    Refuse(OAuthError),
}

pub(super) async fn authorize(State(auth): State<Arc<AsShared>>, uri: Uri) -> Response {
    let params = parse_form(uri.query().unwrap_or(""));
    let mut st = auth.lock();
    let answer = decide(&auth, &mut st, &params);
    let (status, location, error) = match &answer {
        Answer::Redirect(to, error) => (302, Some(to.clone()), error.map(str::to_owned)),
        Answer::Refuse(e) => (e.status.as_u16(), None, Some(e.code.to_owned())),
    };
    st.stats.authorizations.push(AuthorizationRequest {
        params,
        status,
        location,
        error,
    });
    match answer {
        Answer::Redirect(to, _) => {
            let mut resp = StatusCode::FOUND.into_response();
            resp.headers_mut()
                .insert(header::LOCATION, header_value(&to));
            resp
        }
        Answer::Refuse(e) => e.into_response(),
    }
}

fn decide(auth: &AsShared, st: &mut AsState, params: &[(String, String)]) -> Answer {
    let refuse = |why: &str| Answer::Refuse(OAuthError::new("invalid_request", why));
    if let Some(name) = repeated(params) {
        return refuse(&format!("{name} is repeated"));
    }
    let Some(client_id) = param(params, "client_id") else {
        return refuse("client_id is missing");
    };
    let Some(client) = lookup(&auth.opts, st, client_id) else {
        return refuse(&format!("unknown client_id {client_id}"));
    };
    let Some(redirect_uri) = param(params, "redirect_uri") else {
        return refuse("redirect_uri is missing");
    };
    if !redirect_allowed(&client, redirect_uri) {
        return refuse("redirect_uri is not registered for this client");
    }
    let state = param(params, "state");
    let back = |pairs: &[(&str, &str)], error| {
        Answer::Redirect(location(auth, redirect_uri, pairs, state), error)
    };
    if let Err((code, why)) = check(auth, params) {
        return back(&[("error", code), ("error_description", why)], Some(code));
    }
    let code = fresh("code-");
    let grant = Code {
        client_id: client.id.clone(),
        redirect_uri: redirect_uri.to_owned(),
        challenge: param(params, "code_challenge")
            .unwrap_or_default()
            .to_owned(),
        scope: scopes(param(params, "scope")),
        resource: param(params, "resource").map(str::to_owned),
        redeemed: None,
    };
    st.codes.insert(code.clone(), grant);
    back(&[("code", &code)], None)
}

/// The checks whose failure is reported to the client by redirect.
fn check(auth: &AsShared, params: &[(String, String)]) -> Result<(), (&'static str, &'static str)> {
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
    if let Some(supported) = &auth.opts.auth_scopes
        && !scopes(param(params, "scope"))
            .iter()
            .all(|s| supported.contains(s))
    {
        return Err(("invalid_scope", "a requested scope is not supported"));
    }
    Ok(())
}

/// `scope` split on spaces.
pub(super) fn scopes(scope: Option<&str>) -> Vec<String> {
    scope
        .unwrap_or_default()
        .split(' ')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `redirect_uri` with `pairs`, then `state` (when sent) and `iss` (as the option says).
fn location(
    auth: &AsShared,
    redirect_uri: &str,
    pairs: &[(&str, &str)],
    state: Option<&str>,
) -> String {
    let mut url = Url::parse(redirect_uri).expect("redirect_allowed parsed it");
    {
        let mut query = url.query_pairs_mut();
        query.extend_pairs(pairs);
        if let Some(state) = state {
            query.append_pair("state", state);
        }
        if let Some(iss) = iss_value(auth.opts.iss, &auth.issuer) {
            query.append_pair("iss", &iss);
        }
    }
    url.to_string()
}
