//! The HTTP client of one remote server.
//!
//! Headers and secrets, redirects kept to the server's origin, reading bounded bodies and
//! SSE streams, and naming failures.

use super::sse::{Event, SseDecoder};
use crate::config::{HttpLaunch, display_url};
use crate::oauth::challenge::Bearer;
use crate::oauth::credential::{Access, CredentialHandle};
use crate::oauth::dpop::{DPOP, Side};
use futures::{Stream, StreamExt, TryStreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Response, StatusCode, Url};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::codec::FramedRead;
use tokio_util::io::StreamReader;

/// Bytes of an error body shown to people.
const EXCERPT: usize = 200;
/// Bytes of an error body read at most, to find the excerpt.
const ERROR_BODY_MAX: usize = 8 * 1024;

pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";
pub const SESSION_HEADER: &str = "mcp-session-id";
pub const VERSION_HEADER: &str = "mcp-protocol-version";
pub const LAST_EVENT_ID: &str = "last-event-id";
/// Redirect hops followed at most within one request.
const MAX_REDIRECTS: usize = 5;

/// Why mcpd did not follow a server's redirect.
#[derive(Debug, thiserror::Error)]
pub enum RedirectRefused {
    /// The redirect leads to another scheme, host or port. reqwest drops only
    /// `Authorization` and cookies on such a hop; a configured `X-Api-Key` would go along.
    #[error(
        "the server redirected from {from} to {to}, another origin; mcpd does not send the \
         server's credentials or headers anywhere but its configured origin (if the server \
         moved, set its url to the new address)"
    )]
    CrossOrigin { from: String, to: String },
    #[error("the server redirected more than {0} times")]
    TooMany(usize),
}

/// Everything needed to send a request to one remote server. Cheap to clone: the
/// client's connection pool is shared, so every request reuses kept-alive connections.
#[derive(Clone)]
pub struct Endpoint {
    pub client: reqwest::Client,
    pub url: Url,
    /// The configured headers and bearer token, marked sensitive.
    pub headers: HeaderMap,
    /// Longest body or SSE event accepted, in bytes.
    pub max_body: usize,
    /// The server's OAuth login, when it uses one: its token goes on every request.
    pub login: Option<CredentialHandle>,
    pub server: Arc<str>,
}

/// A request's outcome as far as credentials go.
pub enum Sent {
    Response(Response),
    /// The server wants a login mcpd does not have (or no longer has); says why, with
    /// what to run.
    NeedsLogin(String),
    /// The server wants scopes the login lacks (403 `insufficient_scope`).
    NeedsScope(String),
}

impl Endpoint {
    pub fn new(
        launch: &HttpLaunch,
        max_body: usize,
        server: &str,
        login: Option<CredentialHandle>,
    ) -> Result<Endpoint, String> {
        // The TLS provider is chosen in Cargo.toml; the first client installs it for the
        // process, and later ones find it installed (that Err is expected).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(launch.connect_timeout)
            .tcp_keepalive(Duration::from_secs(30))
            .redirect(same_origin_redirects(server.into()))
            .user_agent(concat!("mcpd/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot set up an HTTP client: {e}"))?;
        let mut headers = HeaderMap::new();
        // Names and values were checked when the config was loaded.
        for (name, value) in &launch.headers {
            if let (Ok(n), Ok(mut v)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value.expose()),
            ) {
                v.set_sensitive(true);
                headers.insert(n, v);
            }
        }
        if let Some(token) = &launch.bearer
            && let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
        {
            v.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, v);
        }
        Ok(Endpoint {
            client,
            url: launch.url.clone(),
            headers,
            max_body,
            login,
            server: server.into(),
        })
    }

    /// Sends a request with the server's credentials. With an OAuth login, its access
    /// token goes along; a 401 gets a newer token (the one refresh every request waits
    /// on) and the request is sent once more.
    pub async fn send(&self, req: reqwest::RequestBuilder) -> Result<Sent, reqwest::Error> {
        let Some(login) = &self.login else {
            return req.send().await.map(Sent::Response);
        };
        let request = req.build()?;
        let token = login.current().await;
        let again = request.try_clone();
        let resp = self.send_with(request, token.as_deref()).await?;
        let status = resp.status();
        if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
            return Ok(Sent::Response(resp));
        }
        // Read once: a refusal's challenge says whether it is about scope or the token.
        let challenge = challenge_of(&resp);
        let step_up = status == StatusCode::FORBIDDEN
            && challenge.as_ref().is_some_and(|c| c.insufficient_scope());
        if step_up
            && token.is_some()
            && let Some(c) = challenge
        {
            let scopes = c.scopes().join(" ");
            login.insufficient(c).await;
            return Ok(Sent::NeedsScope(format!(
                "needs the scope {scopes:?}, which the login lacks: run `mcpd ctl login {}` to grant it",
                self.server
            )));
        }
        // A request without a token refused for its scope needs a login as a 401 does.
        if status != StatusCode::UNAUTHORIZED && !step_up {
            return Ok(Sent::Response(resp));
        }
        let hint = |why: &str| match login.machine() {
            Some(g) => format!(
                "mcpd has no token for it ({why}); check [servers.{}.oauth] (the {} grant), then run `mcpd ctl login {}` to try again",
                self.server,
                g.as_str(),
                self.server
            ),
            None => format!(
                "the server needs an OAuth login ({why}): run `mcpd ctl login {}`",
                self.server
            ),
        };
        let fresh = match login.refused(token.clone(), challenge).await {
            Ok(t) => t,
            Err(why) => return Ok(Sent::NeedsLogin(hint(&why.0))),
        };
        let Some(again) = again else {
            return Ok(Sent::Response(resp));
        };
        let resp = self.send_with(again, Some(&fresh)).await?;
        if resp.status() != StatusCode::UNAUTHORIZED {
            return Ok(Sent::Response(resp));
        }
        // A token just renewed is refused too: the login is no good any more.
        let why = "the server refused a renewed token";
        login.spent(fresh, why).await;
        Ok(Sent::NeedsLogin(hint(why)))
    }

    /// Sends a request with an access token, and a fresh DPoP proof when the token is
    /// bound; a refusal that asks for a DPoP nonce is answered once with a new proof
    /// carrying it (RFC 9449 §9), not taken for a refused login.
    async fn send_with(
        &self,
        request: reqwest::Request,
        access: Option<&Access>,
    ) -> Result<Response, reqwest::Error> {
        let dpop = access.and_then(|a| a.dpop.as_deref());
        let again = dpop.and_then(|_| request.try_clone());
        let resp = self.client.execute(with_token(request, access)).await?;
        let Some(d) = dpop else {
            return Ok(resp);
        };
        let nonce_given = d.saw(Side::Resource, resp.headers());
        let asked = resp.status() == StatusCode::UNAUTHORIZED
            && crate::oauth::challenge::dpop_nonce_asked(
                resp.headers()
                    .get_all(reqwest::header::WWW_AUTHENTICATE)
                    .iter()
                    .filter_map(|v| v.to_str().ok()),
            );
        match again {
            Some(again) if asked && nonce_given => {
                let resp = self.client.execute(with_token(again, access)).await?;
                d.saw(Side::Resource, resp.headers());
                Ok(resp)
            }
            _ => Ok(resp),
        }
    }

    /// A request with the configured headers.
    pub fn request(&self, method: reqwest::Method, url: &Url) -> reqwest::RequestBuilder {
        self.client
            .request(method, url.clone())
            .headers(self.headers.clone())
    }

    pub fn shown_url(&self) -> String {
        display_url(&self.url)
    }
}

/// The request with an access token, marked sensitive: `DPoP` with a fresh proof for a
/// token bound to the key, else `Bearer`.
fn with_token(mut request: reqwest::Request, access: Option<&Access>) -> reqwest::Request {
    let Some(a) = access else {
        return request;
    };
    let (scheme, proof) = match &a.dpop {
        Some(d) => (
            "DPoP",
            d.proof(
                Side::Resource,
                request.method(),
                request.url(),
                Some(a.token.expose()),
            ),
        ),
        None => ("Bearer", None),
    };
    // A token a header cannot carry is sent without, and refused.
    if let Ok(mut v) = HeaderValue::from_str(&format!("{scheme} {}", a.token.expose())) {
        v.set_sensitive(true);
        request
            .headers_mut()
            .insert(reqwest::header::AUTHORIZATION, v);
    }
    if let Some(p) = proof {
        request.headers_mut().insert(DPOP, p);
    }
    request
}

/// The `Bearer` challenge of a response, if it has one.
pub fn challenge_of(resp: &Response) -> Option<Bearer> {
    crate::oauth::challenge::bearer(
        resp.headers()
            .get_all(reqwest::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    )
}

/// Follows a redirect only within the origin (scheme, host and port) of the request's
/// first URL, at most `MAX_REDIRECTS` times; anything else fails the request.
fn same_origin_redirects(server: Arc<str>) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        // reqwest always lists the URL just requested; without it, nothing is followed.
        let Some(first) = attempt.previous().first() else {
            return attempt.stop();
        };
        if attempt.url().origin() != first.origin() {
            let refused = RedirectRefused::CrossOrigin {
                from: origin(first),
                to: origin(attempt.url()),
            };
            tracing::warn!(upstream = %server, "{refused}");
            return attempt.error(refused);
        }
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(RedirectRefused::TooMany(MAX_REDIRECTS));
        }
        attempt.follow()
    })
}

/// A URL's origin as `scheme://host:port`, safe to show (no user info, path or query).
fn origin(url: &Url) -> String {
    let o = url.origin();
    if o.is_tuple() {
        o.ascii_serialization()
    } else {
        format!("a {}: URL", url.scheme())
    }
}

/// Names a failed HTTP exchange in words a person can act on. reqwest's own message
/// can include the URL with its query, so only the kind of failure and the innermost
/// cause are used.
pub fn describe_error(e: &reqwest::Error, url: &str) -> String {
    let mut cause = String::new();
    let mut tls = false;
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        cause = s.to_string();
        tls |= is_tls_error(s);
        source = s.source();
    }
    let lower = cause.to_ascii_lowercase();
    let what = if e.is_timeout() {
        "timed out connecting to"
    } else if tls {
        "TLS failed with"
    } else if lower.contains("dns") || lower.contains("lookup") || lower.contains("resolve") {
        "cannot resolve the host of"
    } else if e.is_connect() {
        "cannot connect to"
    } else if e.is_redirect() {
        "refused a redirect from"
    } else if e.is_body() || e.is_decode() {
        "reading the reply failed from"
    } else {
        "HTTP request failed to"
    };
    if cause.is_empty() {
        format!("{what} {url}")
    } else {
        format!("{what} {url}: {cause}")
    }
}

/// Whether an error in a cause chain comes from TLS (rustls reports through io::Error).
/// io::Error's own `source` skips the error it wraps, so wrapped errors are unwrapped here.
fn is_tls_error(mut e: &(dyn std::error::Error + 'static)) -> bool {
    loop {
        if e.is::<rustls::Error>() {
            return true;
        }
        match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => e = inner,
            None => return false,
        }
    }
}

/// Whether an error means the server cannot be reached at all (as opposed to one
/// exchange going wrong).
pub fn is_unreachable(e: &reqwest::Error) -> bool {
    e.is_connect() || (e.is_timeout() && !e.is_body())
}

/// The content type of a response, lowercased, without parameters.
pub fn content_type(resp: &Response) -> String {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// A body read in full, or the fact that it was too long.
pub enum Body {
    Text(String),
    TooLong,
}

/// Reads a whole body, never holding more than `max` bytes.
pub async fn read_body(resp: Response, max: usize) -> Result<Body, reqwest::Error> {
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Ok(Body::TooLong);
    }
    let mut buf = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if buf.len() + chunk.len() > max {
            return Ok(Body::TooLong);
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(Body::Text(String::from_utf8_lossy(&buf).into_owned()))
}

/// A short, single-line excerpt of an error response's body.
pub async fn excerpt(resp: Response) -> String {
    match read_body(resp, ERROR_BODY_MAX).await {
        Ok(Body::Text(t)) => one_line(&t),
        _ => String::new(),
    }
}

/// A short, single-line excerpt of a text.
pub fn one_line(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut cut: String = one_line.chars().take(EXCERPT).collect();
    if cut.len() < one_line.len() {
        cut.push('…');
    }
    cut
}

/// The events of an SSE response, decoded with the endpoint's size bound.
pub fn events(resp: Response, max: usize) -> impl Stream<Item = std::io::Result<Event>> {
    let bytes = resp.bytes_stream().map_err(std::io::Error::other);
    FramedRead::new(StreamReader::new(bytes), SseDecoder::new(max))
}

/// What a 401 or 403 says about how to authenticate, for the error message and status.
pub fn auth_hint(resp: &Response) -> String {
    let status = resp.status();
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let mut hint = format!(
        "HTTP {} {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    if let Some(w) = header("www-authenticate") {
        hint.push_str(&format!("; WWW-Authenticate: {w}"));
    }
    if let Some(a) = header("mcp-auth-server") {
        hint.push_str(&format!("; authorization server: {a}"));
    }
    hint
}

/// Whether a status means our credentials were refused.
pub fn is_auth_failure(status: StatusCode) -> bool {
    status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN
}

/// A session id as the spec allows it: visible ASCII only.
pub fn session_id(resp: &Response) -> Option<Result<HeaderValue, String>> {
    let v = resp.headers().get(SESSION_HEADER)?;
    let ok = !v.is_empty() && v.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b));
    Some(if ok {
        Ok(v.clone())
    } else {
        Err("the server sent an Mcp-Session-Id that is not visible ASCII".into())
    })
}
