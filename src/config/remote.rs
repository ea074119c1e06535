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
    /// How mcpd logs in when the server asks for OAuth; None when a static credential
    /// (`bearer_token_env`, or an `Authorization` header) is configured, or `oauth = false`.
    pub oauth: Option<OAuthConfig>,
}

/// `[servers.NAME.oauth]`: everything optional; without the table mcpd still logs in
/// (discovery and dynamic registration) when the server asks.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OAuthConfig {
    /// A client registered with the authorization server beforehand.
    pub client_id: Option<String>,
    /// Its secret, from the variable `client_secret_env` names, or `client_secret`'s text
    /// with its `${secret:NAME}` references, put in when a login needs it.
    pub client_secret: Option<Secret>,
    /// Scopes to ask for, beyond what the server's challenge and metadata name.
    pub scopes: Vec<String>,
    /// The loopback port of the redirect (`http://127.0.0.1:PORT/callback`); random if unset.
    pub redirect_port: Option<u16>,
    /// A client ID metadata document URL, used when the authorization server supports them.
    pub client_metadata_url: Option<String>,
    /// Where the login (tokens, client, metadata) is kept across restarts.
    pub store: CredentialStore,
}

/// `[servers.NAME.oauth] store`: where a server's login is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CredentialStore {
    /// `state_dir/credentials/NAME.json`, 0600 (the default: it needs no desktop session).
    #[default]
    File,
    /// One item in the desktop keyring, through the Secret Service on the session bus; a
    /// keyring that cannot be reached is an error, never a fall back to the file.
    Keyring,
}

/// The raw `[servers.NAME.oauth]` table, or `oauth = false`.
#[derive(Debug, Clone)]
pub(super) enum RawOAuth {
    Enabled(bool),
    Table(RawOAuthTable),
}

impl<'de> serde::Deserialize<'de> for RawOAuth {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        super::bool_or_table::read(d, RawOAuth::Enabled, RawOAuth::Table)
    }
}

#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOAuthTable {
    client_id: Option<String>,
    client_secret_env: Option<String>,
    client_secret: Option<String>,
    #[serde(default)]
    scopes: Vec<String>,
    redirect_port: Option<u16>,
    client_metadata_url: Option<String>,
    store: Option<String>,
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
                        Some(Secret(token))
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
            oauth,
            connect_timeout: self.duration(
                &format!("{key}.connect_timeout"),
                raw.connect_timeout,
                CONNECT_TIMEOUT,
            )?,
        })
    }

    /// The OAuth settings of a remote server: on unless a static credential is configured
    /// or `oauth = false`.
    fn oauth(
        &self,
        key: &str,
        raw: Option<&RawOAuth>,
        static_auth: bool,
        missing: &mut Vec<Missing>,
    ) -> Result<Option<OAuthConfig>, ConfigError> {
        let okey = format!("{key}.oauth");
        let table = match raw {
            None => {
                return Ok((!static_auth).then(OAuthConfig::default));
            }
            Some(RawOAuth::Enabled(false)) => return Ok(None),
            Some(RawOAuth::Enabled(true)) => RawOAuthTable::default(),
            Some(RawOAuth::Table(t)) => t.clone(),
        };
        if static_auth {
            return Err(self.err(
                okey,
                "conflicts with bearer_token_env or an Authorization header; log in one way only",
            ));
        }
        let store = match table.store.as_deref() {
            None | Some("file") => CredentialStore::File,
            Some("keyring") => CredentialStore::Keyring,
            Some(other) => {
                return Err(self.err(
                    format!("{okey}.store"),
                    format!("{other:?} is not a credential store; use \"file\" or \"keyring\""),
                ));
            }
        };
        if table
            .client_id
            .as_deref()
            .is_some_and(|c| c.trim().is_empty())
        {
            return Err(self.err(format!("{okey}.client_id"), "is empty"));
        }
        let client_secret = match (&table.client_secret, &table.client_secret_env) {
            (Some(_), Some(_)) => {
                return Err(self.err(
                    format!("{okey}.client_secret"),
                    "conflicts with client_secret_env; set the client secret one way only",
                ));
            }
            (Some(text), None) => {
                let skey = format!("{okey}.client_secret");
                if table.client_id.is_none() {
                    return Err(self.err(skey, "a client secret needs its client_id"));
                }
                let refs = crate::secrets::references(text).map_err(|e| self.err(&skey, e))?;
                if refs.is_empty() {
                    return Err(self.err(
                        skey,
                        "holds no ${secret:NAME}: a client secret written here would sit in the config in plain text; store it with `mcpd ctl secret set NAME` and write client_secret = \"${secret:NAME}\"",
                    ));
                }
                // Put in when a login or a refresh needs it (`oauth::flow`).
                Some(Secret(text.clone()))
            }
            (None, None) => None,
            (None, Some(var)) => {
                let skey = format!("{okey}.client_secret_env");
                if table.client_id.is_none() {
                    return Err(self.err(skey, "a client secret needs its client_id"));
                }
                match (self.env)(var) {
                    Some(secret) if !secret.is_empty() => Some(Secret(secret)),
                    found => {
                        missing.push(Missing::new(skey, var, found.is_some()));
                        None
                    }
                }
            }
        };
        if let Some(url) = &table.client_metadata_url {
            let ok =
                reqwest::Url::parse(url).is_ok_and(|u| u.scheme() == "https" && u.path() != "/");
            if !ok {
                return Err(self.err(
                    format!("{okey}.client_metadata_url"),
                    "a client ID metadata document URL is https with a path, e.g. \"https://example.com/mcpd/client.json\"",
                ));
            }
        }
        for s in &table.scopes {
            if s.is_empty()
                || s.chars()
                    .any(|c| c.is_whitespace() || c == '"' || c == '\\')
            {
                return Err(self.err(
                    format!("{okey}.scopes"),
                    format!("{s:?} is not a scope (one word each, no spaces or quotes)"),
                ));
            }
        }
        if table.redirect_port == Some(0) {
            return Err(self.err(
                format!("{okey}.redirect_port"),
                "must be 1-65535 (leave it unset for a random port)",
            ));
        }
        Ok(Some(OAuthConfig {
            client_id: table.client_id,
            client_secret,
            scopes: table.scopes,
            redirect_port: table.redirect_port,
            client_metadata_url: table.client_metadata_url,
            store,
        }))
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
        Ok(Secret(out))
    }
}

/// Whether `value` can be sent as a header's value once its `${secret:…}` references are
/// put in (checked here with a stand-in; the real values are checked at the start).
fn valid_header(value: &str) -> bool {
    let stand_in = crate::secrets::substitute(value, |_| Some("x"));
    stand_in.is_ok_and(|v| reqwest::header::HeaderValue::from_str(v.expose()).is_ok())
}

/// A setting whose value comes from a variable that mcpd's environment lacks (or holds
/// empty). The server it belongs to does not start, with a status line naming it; the
/// rest of the config is in force. An imported server whose header became
/// `${IMPORTED_…}` is the common case.
#[derive(Debug, Clone, PartialEq)]
pub struct Missing {
    /// The setting, e.g. `servers.gh.headers.Authorization`.
    pub key: String,
    pub var: String,
    /// The variable is set but empty.
    pub empty: bool,
}

impl Missing {
    fn new(key: String, var: &str, empty: bool) -> Missing {
        Missing {
            key,
            var: var.to_owned(),
            empty,
        }
    }

    /// What stops a server with these missing variables from starting, and what to do.
    pub fn explain(missing: &[Missing]) -> Option<String> {
        let parts: Vec<String> = missing
            .iter()
            .map(|m| {
                let how = if m.empty { "is empty" } else { "is not set" };
                format!("{} {how} (for {})", m.var, m.key)
            })
            .collect();
        (!parts.is_empty()).then(|| {
            format!(
                "{} in mcpd's environment; set it where mcpd starts (a systemd drop-in's Environment= or EnvironmentFile=, or the shell that runs `mcpd serve`) and restart mcpd",
                parts.join(", ")
            )
        })
    }
}
