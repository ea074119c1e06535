//! Wire details of the OAuth fixture: form bodies and queries, Basic credentials, access
//! tokens (Bearer or DPoP), PKCE S256, RFC 6749 error responses, fresh random values, and
//! the request log with the 404 fallback.

use super::stats::HttpRecord;
use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// `application/x-www-form-urlencoded` text (a body or a query) as decoded pairs, in order.
pub(super) fn parse_form(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (name, value) = part.split_once('=').unwrap_or((part, ""));
            (decode(name, true), decode(value, true))
        })
        .collect()
}

/// Percent-decodes `text` (and `+` as a space when `plus` is set); a `%` not followed by two
/// hex digits stays as it is, and bytes that are not UTF-8 become U+FFFD.
pub(super) fn decode(text: &str, plus: bool) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b, hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
                continue;
            }
            (b'+', _) if plus => out.push(b' '),
            _ => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The value of the first parameter called `name`.
pub(super) fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// A parameter sent more than once, which RFC 6749 §3.1 and §3.2 forbid.
pub(super) fn repeated(params: &[(String, String)]) -> Option<&str> {
    params
        .iter()
        .enumerate()
        .find(|(i, (name, _))| params[..*i].iter().any(|(n, _)| n == name))
        .map(|(_, (name, _))| name.as_str())
}

/// The value of header `name` as text, if present and visible ASCII.
pub(super) fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name)?.to_str().ok().map(str::to_owned)
}

/// The scheme (as sent) and token of an `Authorization: Bearer` or `DPoP` header (the
/// scheme is case-insensitive).
pub(super) fn access_token(headers: &HeaderMap) -> Option<(String, String)> {
    let value = header_text(headers, "authorization")?;
    let (scheme, token) = value.split_once(' ')?;
    let known = ["bearer", "dpop"]
        .iter()
        .any(|s| scheme.eq_ignore_ascii_case(s));
    known.then(|| (scheme.to_owned(), token.trim().to_owned()))
}

/// The credentials of an `Authorization: Basic` header (RFC 6749 §2.3.1: each part
/// form-encoded before base64): None without such a header, Err when it does not decode.
pub(super) fn basic_credentials(headers: &HeaderMap) -> Option<Result<(String, String), ()>> {
    let value = header_text(headers, "authorization")?;
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = STANDARD
        .decode(encoded.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok());
    Some(match decoded.as_deref().and_then(|d| d.split_once(':')) {
        Some((id, secret)) => Ok((decode(id, true), decode(secret, true))),
        None => Err(()),
    })
}

/// `BASE64URL(SHA256(verifier))` without padding (RFC 7636 §4.2).
pub(super) fn s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Whether `value` is a well-formed code verifier: 43 to 128 characters of
/// `[A-Za-z0-9-._~]` (RFC 7636 §4.1). An S256 challenge has the same shape (43 characters).
pub(super) fn pkce_shaped(value: &str) -> bool {
    (43..=128).contains(&value.len())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
}

/// A fresh unguessable value: `prefix` and 32 hex digits.
pub(super) fn fresh(prefix: &str) -> String {
    format!("{prefix}{:032x}", rand::random::<u128>())
}

/// An OAuth error response (RFC 6749 §5.2, RFC 7591 §3.2.2).
#[derive(Debug)]
pub(super) struct OAuthError {
    pub status: StatusCode,
    pub code: &'static str,
    pub description: String,
    /// A `DPoP-Nonce` header to send along.
    pub dpop_nonce: Option<String>,
}

impl OAuthError {
    /// A 400 error.
    pub fn new(code: &'static str, description: impl Into<String>) -> OAuthError {
        OAuthError {
            status: StatusCode::BAD_REQUEST,
            code,
            description: description.into(),
            dpop_nonce: None,
        }
    }

    /// With a `DPoP-Nonce` header.
    pub fn with_nonce(mut self, nonce: Option<String>) -> OAuthError {
        self.dpop_nonce = nonce;
        self
    }

    /// `401 invalid_client`.
    pub fn invalid_client(description: impl Into<String>) -> OAuthError {
        OAuthError {
            status: StatusCode::UNAUTHORIZED,
            code: "invalid_client",
            description: description.into(),
            dpop_nonce: None,
        }
    }
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let body = json!({"error": self.code, "error_description": self.description});
        let mut resp = json_response(self.status, &body);
        if self.status == StatusCode::UNAUTHORIZED {
            let challenge = HeaderValue::from_static(r#"Basic realm="oauth-fixture""#);
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge);
        }
        if let Some(nonce) = &self.dpop_nonce {
            resp.headers_mut().insert("dpop-nonce", header_value(nonce));
        }
        resp
    }
}

/// A JSON response that caches must not keep (RFC 6749 §5.1).
pub(super) fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut resp = (status, body.to_string()).into_response();
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// A header value from text the fixture made itself (always visible ASCII).
pub(super) fn header_value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).expect("fixture header values are visible ASCII")
}

/// The request log both origins write to.
#[derive(Clone, Default)]
pub(super) struct Log(Arc<Mutex<Vec<HttpRecord>>>);

impl Log {
    pub fn lock(&self) -> MutexGuard<'_, Vec<HttpRecord>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `routes` with a 404 fallback, every request (fallback included) logged with its status.
pub(super) fn logged(routes: Router, log: Log, port: u16) -> Router {
    let not_found = || async { (StatusCode::NOT_FOUND, "not found") };
    routes
        .fallback(not_found)
        .layer(middleware::from_fn(move |req: Request, next: Next| {
            let log = log.clone();
            async move {
                let method = req.method().to_string();
                let path = req.uri().path().to_owned();
                let resp = next.run(req).await;
                let status = resp.status().as_u16();
                log.lock().push(HttpRecord {
                    port,
                    method,
                    path,
                    status,
                });
                resp
            }
        }))
}
