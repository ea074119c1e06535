//! Remote (HTTP) server settings.
//!
//! The URL, the transport, headers and secrets taken from the daemon's environment.

use super::oauth::{OAuthConfig, RawOAuth};
pub use super::value::{Missing, Secret};
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
    /// How mcpd logs in when the server asks for OAuth; None when a static credential
    /// (`bearer_token_env`, or an `Authorization` header) is configured, or `oauth = false`.
    pub oauth: Option<Box<OAuthConfig>>,
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
    pub bearer_token: Option<&'a str>,
    pub connect_timeout: &'a Option<String>,
    pub oauth: Option<&'a RawOAuth>,
}

impl Validator<'_> {
    pub(super) fn remote(
        &self,
        key: &str,
        raw: RawRemote<'_>,
        missing: &mut Vec<Missing>,
    ) -> Result<HttpLaunch, ConfigError> {
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
            if lower == "authorization"
                && (raw.bearer_token_env.is_some() || raw.bearer_token.is_some())
            {
                return Err(self.err(
                    hkey,
                    "conflicts with bearer_token or bearer_token_env; set the token one way only",
                ));
            }
            let before = missing.len();
            let value = self.expand(&hkey, value, missing)?;
            crate::secrets::references(value.expose()).map_err(|e| self.err(&hkey, e))?;
            // A value with a variable missing is not sent: the server does not start.
            if missing.len() == before && !valid_header(value.expose()) {
                return Err(self.err(
                    hkey,
                    "the value (after ${VAR} expansion) is not a valid header value; a ${secret:…} reference is checked when it is put in",
                ));
            }
            headers.push((name.clone(), value));
        }
        let bearer = match (raw.bearer_token, raw.bearer_token_env) {
            (Some(_), Some(_)) => {
                return Err(self.err(
                    format!("{key}.bearer_token"),
                    "conflicts with bearer_token_env; set the token one way only",
                ));
            }
            (Some(token), None) => {
                let bkey = format!("{key}.bearer_token");
                let before = missing.len();
                let token = self.expand(&bkey, token, missing)?;
                let refs =
                    crate::secrets::references(token.expose()).map_err(|e| self.err(&bkey, e))?;
                if refs.is_empty() {
                    return Err(self.err(
                        bkey,
                        "holds no ${secret:NAME}: a token written here would sit in the config in plain text; store it with `mcpd ctl secret set NAME` and write bearer_token = \"${secret:NAME}\"",
                    ));
                }
                if missing.len() == before && !valid_header(&format!("Bearer {}", token.expose())) {
                    return Err(self.err(bkey, "not a valid header value"));
                }
                Some(token)
            }
            (None, None) => None,
            (None, Some(var)) => {
                let bkey = format!("{key}.bearer_token_env");
                match (self.env)(var) {
                    Some(token) if !token.trim().is_empty() => {
                        let header = format!("Bearer {token}");
                        if reqwest::header::HeaderValue::from_str(&header).is_err() {
                            return Err(self.err(
                                &bkey,
                                format!(
                                    "the variable {var} holds characters a header cannot carry"
                                ),
                            ));
                        }
                        Some(Secret::new(token))
                    }
                    found => {
                        missing.push(Missing::new(bkey, var, found.is_some()));
                        None
                    }
                }
            }
        };
        let static_auth = raw.bearer_token_env.is_some()
            || raw.bearer_token.is_some()
            || headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("authorization"));
        let oauth = self.oauth(key, raw.oauth, static_auth, missing)?;
        Ok(HttpLaunch {
            url,
            transport,
            headers,
            bearer,
            oauth: oauth.map(Box::new),
            connect_timeout: self.duration(
                &format!("{key}.connect_timeout"),
                raw.connect_timeout,
                CONNECT_TIMEOUT,
            )?,
        })
    }

    /// Expands `${VAR}` from the daemon's environment. A `$` not followed by `{` stays as
    /// it is. Errors name the variable, never the value. A variable that is not set is
    /// added to `missing`: that server does not start, the others do.
    fn expand(
        &self,
        key: &str,
        value: &str,
        missing: &mut Vec<Missing>,
    ) -> Result<Secret, ConfigError> {
        let mut out = String::with_capacity(value.len());
        let mut rest = value;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err(self.err(key, "an unterminated ${ in the value"));
            };
            let var = &after[..end];
            // A secret reference stays for the start, when its value is looked up
            // (`config/secrets.rs`); its name is checked there.
            if var.starts_with("secret:") {
                out.push_str(&rest[start..start + 2 + end + 1]);
                rest = &after[end + 1..];
                continue;
            }
            let valid = !var.is_empty()
                && !var.starts_with(|c: char| c.is_ascii_digit())
                && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(self.err(key, format!("${{{var}}} is not a variable name")));
            }
            match (self.env)(var) {
                Some(v) => out.push_str(&v),
                None => missing.push(Missing::new(key.to_owned(), var, false)),
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(Secret::new(out))
    }
}

/// Whether `value` can be sent as a header's value once its `${secret:…}` references are
/// put in (checked here with a stand-in; the real values are checked at the start).
fn valid_header(value: &str) -> bool {
    let stand_in = crate::secrets::substitute(value, |_| Some("x"));
    stand_in.is_ok_and(|v| reqwest::header::HeaderValue::from_str(v.expose()).is_ok())
}
