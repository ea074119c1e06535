//! Clients of the AS: finding one (pre-registered, registered by DCR, or a CIMD URL),
//! matching redirect URIs (any port on loopback, RFC 8252 §7.3), and authenticating a
//! client at the token and revocation endpoints.

use super::assertion;
use super::options::{AuthMethod, OAuthOptions};
use super::server::{AsShared, AsState};
use super::stats::{ClientSource, RegisteredClient};
use super::wire::{OAuthError, basic_credentials, param};
use axum::http::HeaderMap;
use reqwest::Url;
use serde_json::Value;

/// The client called `id`. With CIMD on, an unknown `https://` id is looked up among the
/// configured documents (a URL without a document is a public client allowed any loopback
/// redirect URI) and remembered.
pub(super) fn lookup(opts: &OAuthOptions, st: &mut AsState, id: &str) -> Option<RegisteredClient> {
    if let Some(client) = st.clients.get(id) {
        return Some(client.clone());
    }
    if !opts.cimd || !id.starts_with("https://") {
        return None;
    }
    st.stats.cimd_lookups.push(id.to_owned());
    let client = match opts.cimd_documents.iter().find(|(url, _)| url == id) {
        Some((_, doc)) => from_document(id, doc)?,
        None => RegisteredClient {
            id: id.to_owned(),
            secret: None,
            auth_method: AuthMethod::None,
            redirect_uris: Vec::new(),
            grant_types: vec!["authorization_code".into(), "refresh_token".into()],
            application_type: None,
            source: ClientSource::Cimd,
            public_key: None,
        },
    };
    st.clients.insert(id.to_owned(), client.clone());
    Some(client)
}

/// A client from its metadata document, which must name itself (`client_id` equal to its
/// URL) and list its redirect URIs; only public clients (`none`) are supported.
fn from_document(id: &str, doc: &Value) -> Option<RegisteredClient> {
    if doc["client_id"].as_str() != Some(id) {
        return None;
    }
    let method = doc["token_endpoint_auth_method"].as_str().unwrap_or("none");
    if method != "none" {
        return None;
    }
    Some(RegisteredClient {
        id: id.to_owned(),
        secret: None,
        auth_method: AuthMethod::None,
        redirect_uris: strings(&doc["redirect_uris"])?,
        grant_types: strings(&doc["grant_types"])
            .unwrap_or_else(|| vec!["authorization_code".into()]),
        application_type: doc["application_type"].as_str().map(str::to_owned),
        source: ClientSource::Cimd,
        public_key: None,
    })
}

/// A JSON array of strings.
pub(super) fn strings(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// Whether `client` may be sent to `uri`: one of its redirect URIs exactly, or the same
/// loopback URI on another port; any loopback URI when it registered none.
pub(super) fn redirect_allowed(client: &RegisteredClient, uri: &str) -> bool {
    let Ok(asked) = Url::parse(uri) else {
        return false;
    };
    if asked.fragment().is_some() {
        return false;
    }
    if client.redirect_uris.is_empty() {
        return loopback(&asked);
    }
    client.redirect_uris.iter().any(|registered| {
        registered == uri
            || Url::parse(registered).is_ok_and(|r| {
                loopback(&r)
                    && loopback(&asked)
                    && r.host_str() == asked.host_str()
                    && r.path() == asked.path()
                    && r.query() == asked.query()
            })
    })
}

/// `http://` to 127.0.0.1, `[::1]` or `localhost`.
pub(super) fn loopback(url: &Url) -> bool {
    url.scheme() == "http" && matches!(url.host_str(), Some("127.0.0.1" | "[::1]" | "localhost"))
}

/// Authenticates the client of a token or revocation request by the method it registered:
/// `none` (`client_id` in the body), `client_secret_basic`, `client_secret_post` or
/// `private_key_jwt`. Using more than one method is `invalid_request`; a wrong method, an
/// unknown client, a wrong secret or a bad assertion is `invalid_client`.
pub(super) fn authenticate(
    auth: &AsShared,
    st: &mut AsState,
    headers: &HeaderMap,
    params: &[(String, String)],
) -> Result<RegisteredClient, OAuthError> {
    let opts = &auth.opts;
    let form_id = param(params, "client_id");
    let form_secret = param(params, "client_secret");
    let basic = match basic_credentials(headers) {
        Some(Ok(pair)) => Some(pair),
        Some(Err(())) => return Err(OAuthError::invalid_client("malformed Basic credentials")),
        None => None,
    };
    let assertion = ["client_assertion", "client_assertion_type"];
    if assertion.iter().any(|name| param(params, name).is_some()) {
        if basic.is_some() || form_secret.is_some() {
            let why = "more than one client authentication method";
            return Err(OAuthError::new("invalid_request", why));
        }
        return assertion::authenticate(auth, st, params);
    }
    let (id, used, secret) = match (&basic, form_secret) {
        (Some(_), Some(_)) => {
            let why = "more than one client authentication method";
            return Err(OAuthError::new("invalid_request", why));
        }
        (Some((id, secret)), None) => {
            if form_id.is_some_and(|f| f != id) {
                let why = "client_id differs from the Basic credentials";
                return Err(OAuthError::new("invalid_request", why));
            }
            (
                id.as_str(),
                AuthMethod::ClientSecretBasic,
                Some(secret.as_str()),
            )
        }
        (None, secret) => {
            let Some(id) = form_id else {
                return Err(OAuthError::invalid_client("no client_id"));
            };
            let method = match secret {
                Some(_) => AuthMethod::ClientSecretPost,
                None => AuthMethod::None,
            };
            (id, method, secret)
        }
    };
    let Some(client) = lookup(opts, st, id) else {
        return Err(OAuthError::invalid_client(format!("unknown client {id}")));
    };
    if used != client.auth_method {
        let why = format!(
            "client {id} authenticates with {}, not {}",
            client.auth_method.as_str(),
            used.as_str()
        );
        return Err(OAuthError::invalid_client(why));
    }
    if secret != client.secret.as_deref() {
        return Err(OAuthError::invalid_client("wrong client secret"));
    }
    Ok(client)
}
