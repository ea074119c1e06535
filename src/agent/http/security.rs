//! Who may use the HTTP listener.
//!
//! `Host` and `Origin` must name this machine (the DNS-rebinding defence), and the bearer
//! token must match.
//!
//! The checks are a layer (`Gate`) in front of every route: they read only the request
//! head, so a client that is refused never makes mcpd read, let alone buffer, its body.

use crate::config::{HttpAuth, HttpListen, Secret};
use crate::errors::EdgeError;
use axum::http::{HeaderMap, HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use subtle::ConstantTimeEq;
use tower_http::validate_request::ValidateRequest;

/// The policy as a request validator for `ValidateRequestHeaderLayer`: refusals are
/// answered before the handler (and its body extractor) runs.
#[derive(Clone)]
pub struct Gate(Arc<Policy>);

impl Gate {
    pub fn new(policy: Policy) -> Gate {
        Gate(Arc::new(policy))
    }
}

impl<B> ValidateRequest<B> for Gate {
    type ResponseBody = axum::body::Body;

    fn validate(&mut self, request: &mut Request<B>) -> Result<(), Response> {
        self.0.check(request.headers())
    }
}

/// The listener's checks, made once from its settings.
pub struct Policy {
    /// Host names a request may address (lowercase, IPv6 in brackets).
    hosts: Vec<String>,
    /// The expected `Authorization` value, or None when `http_auth = "none"`.
    bearer: Option<Secret>,
}

impl Policy {
    pub fn new(cfg: &HttpListen, token: Option<Secret>) -> Policy {
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        let own = match cfg.addr.ip() {
            std::net::IpAddr::V4(ip) => ip.to_string(),
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        };
        hosts.push(own);
        hosts.extend(cfg.allowed_hosts.iter().cloned());
        let bearer = match &cfg.auth {
            HttpAuth::None => None,
            HttpAuth::Token(_) => token.map(|t| Secret::new(format!("Bearer {}", t.expose()))),
        };
        Policy { hosts, bearer }
    }

    /// Refuses a request that addresses another host, comes from a foreign web origin,
    /// or lacks the token.
    #[allow(clippy::result_large_err)]
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Response> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(host_part);
        if !host.is_some_and(|h| self.allowed(&h)) {
            return Err(forbidden(&EdgeError::ForeignHost));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin_host = origin
                .to_str()
                .ok()
                .and_then(|o| reqwest::Url::parse(o).ok())
                .and_then(|u| u.host_str().map(str::to_ascii_lowercase));
            if !origin_host.is_some_and(|h| self.allowed(&h)) {
                return Err(forbidden(&EdgeError::ForeignOrigin));
            }
        }
        if let Some(expected) = &self.bearer {
            let presented = headers
                .get(header::AUTHORIZATION)
                .map(HeaderValue::as_bytes)
                .unwrap_or_default();
            // Constant time, so the comparison does not reveal how much of a guess was right.
            if !bool::from(presented.ct_eq(expected.expose().as_bytes())) {
                let mut r = (
                    StatusCode::UNAUTHORIZED,
                    "a bearer token is required: send `Authorization: Bearer TOKEN`; \
                     `mcpd ctl http-token` prints it",
                )
                    .into_response();
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"mcpd\""),
                );
                return Err(r);
            }
        }
        Ok(())
    }

    fn allowed(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| h == host)
    }
}

/// The host of a `Host` header value, without the port, lowercase.
fn host_part(value: &str) -> String {
    let v = value.trim().to_ascii_lowercase();
    if v.starts_with('[') {
        return match v.find(']') {
            Some(end) => v[..=end].to_owned(),
            None => v,
        };
    }
    match v.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h.to_owned(),
        _ => v,
    }
}

fn forbidden(why: &EdgeError) -> Response {
    let e = why.to_error_object();
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "application/json")],
        mcpd_wire::jsonrpc::error_line(None, &e),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::host_part;

    #[test]
    fn host_headers_lose_their_port() {
        assert_eq!(host_part("127.0.0.1:8765"), "127.0.0.1");
        assert_eq!(host_part("LocalHost"), "localhost");
        assert_eq!(host_part("[::1]:80"), "[::1]");
        assert_eq!(host_part("evil.example.com:80"), "evil.example.com");
    }
}
