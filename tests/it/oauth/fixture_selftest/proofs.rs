//! Requests with DPoP proofs, Basic credentials or another `Authorization` scheme for the
//! self-tests of the grants without a user and of DPoP, and a reader of every challenge a
//! response carries. Plain reqwest, like `client`.

use super::client::*;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::Value;
use std::collections::HashMap;

/// What a token endpoint answered.
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) body: Value,
    pub(super) headers: HeaderMap,
}

impl Answer {
    /// The status and the OAuth error code (empty on success).
    pub(super) fn outcome(&self) -> (u16, String) {
        (self.status.as_u16(), error_code(&self.body).to_owned())
    }

    pub(super) fn ok(&self) -> bool {
        self.status == StatusCode::OK
    }

    /// A string member of the body.
    pub(super) fn get(&self, name: &str) -> &str {
        self.body[name].as_str().unwrap_or_default()
    }

    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// `(status, error)` of a refusal.
pub(super) fn refused(status: u16, error: &str) -> (u16, String) {
    (status, error.to_owned())
}

/// `(200, "")`.
pub(super) fn accepted() -> (u16, String) {
    (200, String::new())
}

/// A form POST of `pairs` to `url`, with Basic credentials when given and one `DPoP`
/// header per proof.
pub(super) async fn post_form<K: AsRef<str>, V: AsRef<str>>(
    url: &str,
    pairs: &[(K, V)],
    basic: Option<(&str, &str)>,
    proofs: &[&str],
) -> Answer {
    let mut req = form_post(url, pairs);
    if let Some((id, secret)) = basic {
        req = req.basic_auth(id, Some(secret));
    }
    for proof in proofs {
        req = req.header("dpop", *proof);
    }
    let resp = send("token request", req).await;
    let headers = resp.headers().clone();
    let (status, body) = json_of(resp).await;
    Answer {
        status,
        body,
        headers,
    }
}

/// A Streamable HTTP POST of `msg` with `Authorization: SCHEME TOKEN` when given and one
/// `DPoP` header per proof.
pub(super) async fn mcp_as(
    url: &str,
    authorization: Option<(&str, &str)>,
    proofs: &[&str],
    msg: &Value,
) -> reqwest::Response {
    let mut req = client()
        .post(url)
        .header("accept", ACCEPT_BOTH)
        .header("content-type", "application/json")
        .body(msg.to_string());
    if let Some((scheme, token)) = authorization {
        req = req.header("authorization", format!("{scheme} {token}"));
    }
    for proof in proofs {
        req = req.header("dpop", *proof);
    }
    send("MCP POST", req).await
}

/// One challenge: its scheme and parameters (values without commas).
pub(super) type Challenge = (String, HashMap<String, String>);

/// Every `WWW-Authenticate` challenge of `resp`, in order (one per header).
pub(super) fn challenges(resp: &reqwest::Response) -> Vec<Challenge> {
    (resp.headers().get_all("www-authenticate").iter())
        .map(|v| {
            let text = v.to_str().unwrap();
            let (scheme, rest) = text.split_once(' ').unwrap_or((text, ""));
            let params = (rest.split(", ").filter(|p| !p.is_empty()))
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap();
                    (k.to_owned(), v.trim_matches('"').to_owned())
                })
                .collect();
            (scheme.to_owned(), params)
        })
        .collect()
}

/// The status of `resp`, and the scheme and `error` of its first challenge.
pub(super) fn denial(resp: &reqwest::Response) -> (u16, String, String) {
    let first = challenges(resp).into_iter().next();
    let (scheme, params) = first.unwrap_or_default();
    let error = params.get("error").cloned().unwrap_or_default();
    (resp.status().as_u16(), scheme, error)
}
