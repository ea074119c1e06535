//! `POST /register`: dynamic client registration (RFC 7591).

use super::clients::strings;
use super::jose::ec_point;
use super::options::AuthMethod;
use super::server::AsShared;
use super::stats::{ClientSource, RegisteredClient};
use super::wire::{OAuthError, fresh, json_response};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use reqwest::Url;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

pub(super) async fn register(State(auth): State<Arc<AsShared>>, body: Bytes) -> Response {
    let parsed = serde_json::from_slice::<Value>(&body);
    let recorded = match &parsed {
        Ok(v) => v.clone(),
        Err(_) => Value::String(String::from_utf8_lossy(&body).into_owned()),
    };
    let mut st = auth.lock();
    st.stats.registrations.push(recorded);
    let meta = match parsed {
        Ok(Value::Object(meta)) => Value::Object(meta),
        _ => {
            return OAuthError::new("invalid_client_metadata", "not a JSON object").into_response();
        }
    };
    match client_from(&auth, &meta) {
        Ok(client) => {
            let answer = answer(&meta, &client);
            st.clients.insert(client.id.clone(), client);
            json_response(StatusCode::CREATED, &answer)
        }
        Err(e) => e.into_response(),
    }
}

/// The client a registration request describes, with a fresh id (and secret when its
/// method needs one), or why it is refused.
fn client_from(auth: &AsShared, meta: &Value) -> Result<RegisteredClient, OAuthError> {
    let bad_uri = |why: &str| OAuthError::new("invalid_redirect_uri", why);
    let redirect_uris = strings(&meta["redirect_uris"])
        .filter(|uris| !uris.is_empty())
        .ok_or_else(|| bad_uri("redirect_uris must be a non-empty array of strings"))?;
    let absolute = |u: &String| Url::parse(u).is_ok_and(|u| u.fragment().is_none());
    if !redirect_uris.iter().all(absolute) {
        return Err(bad_uri(
            "every redirect URI must be absolute, without a fragment",
        ));
    }
    let bad = |why: String| OAuthError::new("invalid_client_metadata", why);
    let asked = meta["token_endpoint_auth_method"]
        .as_str()
        .unwrap_or("client_secret_basic");
    let method = match auth.opts.dcr_auth_method {
        Some(method) => method,
        None => AuthMethod::parse(asked)
            .filter(|m| auth.opts.auth_methods.contains(m))
            .ok_or_else(|| {
                bad(format!(
                    "token_endpoint_auth_method {asked} is not supported"
                ))
            })?,
    };
    let grant_types = match &meta["grant_types"] {
        Value::Null => vec!["authorization_code".to_owned()],
        v => strings(v).ok_or_else(|| bad("grant_types must be an array of strings".into()))?,
    };
    if auth.opts.dcr_requires_refresh_grant && !grant_types.iter().any(|g| g == "refresh_token") {
        return Err(bad("grant_types must include refresh_token".into()));
    }
    let public_key = match method {
        AuthMethod::PrivateKeyJwt => Some(jwks_key(meta).map_err(bad)?),
        _ => None,
    };
    let secret_method = [AuthMethod::ClientSecretBasic, AuthMethod::ClientSecretPost];
    Ok(RegisteredClient {
        id: fresh("client-"),
        secret: secret_method.contains(&method).then(|| fresh("secret-")),
        public_key,
        auth_method: method,
        redirect_uris,
        grant_types,
        application_type: meta["application_type"].as_str().map(str::to_owned),
        source: ClientSource::Dcr,
    })
}

/// The public point of the first EC key of the registration's `jwks`, for
/// `private_key_jwt`.
fn jwks_key(meta: &Value) -> Result<Vec<u8>, String> {
    let keys = meta["jwks"]["keys"].as_array();
    let ec = keys.and_then(|keys| keys.iter().find(|k| k["kty"] == "EC"));
    let Some(jwk) = ec else {
        return Err("private_key_jwt needs jwks with an EC P-256 key".into());
    };
    ec_point(jwk).map_err(|why| format!("jwks: {why}"))
}

/// The registration response: the metadata as received, with what the AS decided.
fn answer(meta: &Value, client: &RegisteredClient) -> Value {
    let issued_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut answer = meta.clone();
    answer["client_id"] = json!(client.id);
    answer["client_id_issued_at"] = json!(issued_at);
    answer["token_endpoint_auth_method"] = json!(client.auth_method.as_str());
    answer["grant_types"] = json!(client.grant_types);
    if let Some(secret) = &client.secret {
        answer["client_secret"] = json!(secret);
        answer["client_secret_expires_at"] = json!(0);
    }
    answer
}
