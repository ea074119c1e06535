//! Remote (HTTP) server settings: the URL, the transport, headers and secrets taken from the daemon's environment.

use super::{ConfigError, Validator};
use std::collections::BTreeMap;
use std::time::Duration;

/// Default bound on establishing a TCP/TLS connection to a remote server.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Headers mcpd sets itself on every HTTP request; a config may not override them.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "host",
    "connection",
    "transfer-encoding",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    "mcp-method",
    "mcp-name",
];

/// A value that must never be shown: header values and bearer tokens. `Debug` prints a
/// placeholder, and there is deliberately no `Display`, so a secret cannot slip into a
/// log line, a status row or an error message by formatting.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Secret {
        Secret(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Which HTTP transport to speak to a remote server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpTransport {
    /// Streamable HTTP, falling back to HTTP+SSE when the server refuses the first POST
    /// with 400, 404 or 405, as the spec's backward-compatibility rule describes.
    Auto,
    StreamableHttp,
    /// The deprecated 2024-11-05 HTTP+SSE transport.
    Sse,
}

impl HttpTransport {
    pub fn as_str(self) -> &'static str {
        match self {
            HttpTransport::Auto => "auto",
            HttpTransport::StreamableHttp => "streamable-http",
            HttpTransport::Sse => "sse",
        }
    }
}

/// How to reach a remote server.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpLaunch {
    pub url: reqwest::Url,
    pub transport: HttpTransport,
    /// Extra headers sent on every request, values already expanded from the environment.
    pub headers: Vec<(String, Secret)>,
    /// Sent as `Authorization: Bearer …`.
    pub bearer: Option<Secret>,
    pub connect_timeout: Duration,
}

impl HttpLaunch {
    /// The URL without anything that may be a secret (user info, query string), for
    /// status, logs and error messages.
    pub fn display_url(&self) -> String {
        display_url(&self.url)
    }
}

/// A URL with its user info and query string hidden.
pub fn display_url(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username(""); // fails only for URLs that cannot have one
    let _ = shown.set_password(None);
    let hidden_query = shown.query().is_some();
    shown.set_query(None);
    let mut s = shown.to_string();
    if hidden_query {
        s.push_str("?…");
    }
    s
}

/// The raw remote keys of a `[servers.NAME]` table.
pub(super) struct RawRemote<'a> {
    pub url: &'a str,
    pub transport: Option<&'a str>,
    pub headers: &'a BTreeMap<String, String>,
    pub bearer_token_env: Option<&'a str>,
    pub connect_timeout: &'a Option<String>,
}

impl Validator<'_> {
    pub(super) fn remote(&self, key: &str, raw: RawRemote<'_>) -> Result<HttpLaunch, ConfigError> {
        let url = reqwest::Url::parse(raw.url).map_err(|e| {
            self.err(
                format!("{key}.url"),
                format!("not a valid URL ({e}); write e.g. \"https://example.com/mcp\""),
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(self.err(
                format!("{key}.url"),
                format!("the scheme must be http or https, not {:?}", url.scheme()),
            ));
        }
        let transport = match raw.transport {
            None | Some("auto") => HttpTransport::Auto,
            Some("streamable-http") => HttpTransport::StreamableHttp,
            Some("sse") => HttpTransport::Sse,
            Some(other) => {
                return Err(self.err(
                    format!("{key}.transport"),
                    format!(
                        "{other:?} is not a transport; use \"auto\", \"streamable-http\" or \"sse\""
                    ),
                ));
            }
        };
        let mut headers = Vec::new();
        for (name, value) in raw.headers {
            let hkey = format!("{key}.headers.{name}");
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(self.err(hkey, "not a valid HTTP header name"));
            }
            let lower = name.to_ascii_lowercase();
            if RESERVED_HEADERS.contains(&lower.as_str()) {
                return Err(self.err(hkey, "mcpd sets this header itself"));
            }
            if lower == "authorization" && raw.bearer_token_env.is_some() {
                return Err(self.err(
                    hkey,
                    "conflicts with bearer_token_env; set the token one way only",
                ));
            }
            let value = self.expand(&hkey, value)?;
            if reqwest::header::HeaderValue::from_str(value.expose()).is_err() {
                return Err(self.err(
                    hkey,
                    "the value (after ${VAR} expansion) is not a valid header value",
                ));
            }
            headers.push((name.clone(), value));
        }
        let bearer = match raw.bearer_token_env {
            None => None,
            Some(var) => {
                let bkey = format!("{key}.bearer_token_env");
                let token = (self.env)(var).ok_or_else(|| {
                    self.err(
                        &bkey,
                        format!("the variable {var} is not set in mcpd's environment"),
                    )
                })?;
                if token.trim().is_empty() {
                    return Err(self.err(&bkey, format!("the variable {var} is empty")));
                }
                if reqwest::header::HeaderValue::from_str(&format!("Bearer {token}")).is_err() {
                    return Err(self.err(
                        &bkey,
                        format!("the variable {var} holds characters a header cannot carry"),
                    ));
                }
                Some(Secret(token))
            }
        };
        Ok(HttpLaunch {
            url,
            transport,
            headers,
            bearer,
            connect_timeout: self.duration(
                &format!("{key}.connect_timeout"),
                raw.connect_timeout,
                CONNECT_TIMEOUT,
            )?,
        })
    }

    /// Expands `${VAR}` from the daemon's environment. A `$` not followed by `{` stays as
    /// it is. Errors name the variable, never the value.
    fn expand(&self, key: &str, value: &str) -> Result<Secret, ConfigError> {
        let mut out = String::with_capacity(value.len());
        let mut rest = value;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err(self.err(key, "an unterminated ${ in the value"));
            };
            let var = &after[..end];
            let valid = !var.is_empty()
                && !var.starts_with(|c: char| c.is_ascii_digit())
                && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(self.err(key, format!("${{{var}}} is not a variable name")));
            }
            let v = (self.env)(var).ok_or_else(|| {
                self.err(
                    key,
                    format!("refers to ${{{var}}}, which is not set in mcpd's environment"),
                )
            })?;
            out.push_str(&v);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(Secret(out))
    }
}
