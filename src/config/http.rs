//! The optional Streamable HTTP listener's settings (`[daemon] http_*`).
//!
//! Address, remote access, authentication.

use super::remote::Secret;
use super::{ConfigError, Validator};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// Defaults and bounds of the listener's connection settings, documented in docs/configuration.md.
pub mod limits {
    use std::time::Duration;
    /// TCP connections served at once; more wait to be accepted.
    pub const MAX_CONNECTIONS: usize = 256;
    /// Far below tokio's semaphore limit, and below any sane file-descriptor limit.
    pub const MAX_CONNECTIONS_CEILING: usize = 65_536;
    /// How long a request's head may take to arrive.
    pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
    /// Shorter than any client can send a request head in.
    pub const HEADER_TIMEOUT_FLOOR: Duration = Duration::from_millis(100);
    /// Longer is no defence; the bound also keeps deadline arithmetic far from overflow.
    pub const HEADER_TIMEOUT_CEILING: Duration = Duration::from_secs(3600);
}

/// How HTTP agents authenticate.
#[derive(Debug, Clone, PartialEq)]
pub enum HttpAuth {
    /// A bearer token: from `http_token_env`, or else generated on first start into a
    /// 0600 file beside the socket (`mcpd ctl http-token` prints it).
    Token(Option<Secret>),
    /// No authentication; only allowed on a loopback address.
    None,
}

/// The HTTP listener: where it listens and whom it serves.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpListen {
    pub addr: SocketAddr,
    /// Set by `http_allow_remote = true`: the address need not be loopback.
    pub allow_remote: bool,
    pub auth: HttpAuth,
    /// Extra `Host` names (besides loopback names and the listen address) accepted,
    /// for a remote listener reached by a DNS name.
    pub allowed_hosts: Vec<String>,
    /// TCP connections served at once (`http_max_connections`); further ones wait in the
    /// kernel's accept queue until one closes.
    pub max_connections: usize,
    /// How long a connection may take to send a request's head, counted from when it
    /// opens or its previous response ends (`http_header_timeout`); so it is also how
    /// long an idle kept-alive connection stays open.
    pub header_timeout: Duration,
}

/// The raw `[daemon] http_*` keys.
pub(super) struct RawHttp<'a> {
    pub listen: Option<&'a str>,
    pub allow_remote: bool,
    pub auth: Option<&'a str>,
    pub token_env: Option<&'a str>,
    pub allowed_hosts: &'a [String],
    pub max_connections: Option<usize>,
    pub header_timeout: &'a Option<String>,
}

impl<'a> RawHttp<'a> {
    pub(super) fn of(d: &'a super::raw::RawDaemon) -> RawHttp<'a> {
        RawHttp {
            listen: d.http_listen.as_deref(),
            allow_remote: d.http_allow_remote,
            auth: d.http_auth.as_deref(),
            token_env: d.http_token_env.as_deref(),
            allowed_hosts: &d.http_allowed_hosts,
            max_connections: d.http_max_connections,
            header_timeout: &d.http_header_timeout,
        }
    }
}

impl Validator<'_> {
    pub(super) fn http(&self, raw: RawHttp<'_>) -> Result<Option<HttpListen>, ConfigError> {
        let Some(listen) = raw.listen else {
            for (set, key) in [
                (raw.allow_remote, "daemon.http_allow_remote"),
                (raw.auth.is_some(), "daemon.http_auth"),
                (raw.token_env.is_some(), "daemon.http_token_env"),
                (!raw.allowed_hosts.is_empty(), "daemon.http_allowed_hosts"),
                (raw.max_connections.is_some(), "daemon.http_max_connections"),
                (raw.header_timeout.is_some(), "daemon.http_header_timeout"),
            ] {
                if set {
                    return Err(self.err(key, "has no effect without daemon.http_listen"));
                }
            }
            return Ok(None);
        };
        let addr = parse_addr(listen).ok_or_else(|| {
            self.err(
                "daemon.http_listen",
                format!("{listen:?} is not an address; write e.g. \"127.0.0.1:8765\""),
            )
        })?;
        let loopback = addr.ip().is_loopback();
        if !loopback && !raw.allow_remote {
            return Err(self.err(
                "daemon.http_listen",
                format!(
                    "{addr} is not a loopback address; set daemon.http_allow_remote = true to \
                     serve other hosts (agents then need the bearer token, and traffic is not encrypted)"
                ),
            ));
        }
        let auth = match raw.auth.unwrap_or("token") {
            "token" => {
                let token = match raw.token_env {
                    None => None,
                    Some(var) => {
                        let key = "daemon.http_token_env";
                        let token = (self.env)(var).ok_or_else(|| {
                            self.err(
                                key,
                                format!("the variable {var} is not set in mcpd's environment"),
                            )
                        })?;
                        if token.trim().len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic()) {
                            return Err(self.err(
                                key,
                                format!(
                                    "the token in {var} must be at least 16 visible ASCII characters"
                                ),
                            ));
                        }
                        Some(Secret::new(token))
                    }
                };
                HttpAuth::Token(token)
            }
            "none" => {
                if !loopback {
                    return Err(self.err(
                        "daemon.http_auth",
                        "\"none\" is only allowed on a loopback address",
                    ));
                }
                if raw.token_env.is_some() {
                    return Err(self.err(
                        "daemon.http_token_env",
                        "conflicts with http_auth = \"none\"",
                    ));
                }
                HttpAuth::None
            }
            other => {
                return Err(self.err(
                    "daemon.http_auth",
                    format!("{other:?} is not one of \"token\", \"none\""),
                ));
            }
        };
        for (i, h) in raw.allowed_hosts.iter().enumerate() {
            if h.is_empty()
                || !h
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
            {
                return Err(self.err(
                    format!("daemon.http_allowed_hosts[{i}]"),
                    format!("{h:?} is not a host name"),
                ));
            }
        }
        let (max_connections, header_timeout) = self.http_connections(&raw)?;
        Ok(Some(HttpListen {
            addr,
            allow_remote: raw.allow_remote,
            auth,
            allowed_hosts: raw
                .allowed_hosts
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            max_connections,
            header_timeout,
        }))
    }

    /// `http_max_connections` and `http_header_timeout`, within their bounds.
    fn http_connections(&self, raw: &RawHttp<'_>) -> Result<(usize, Duration), ConfigError> {
        let key = "daemon.http_max_connections";
        let max_connections = self.positive(
            key,
            raw.max_connections,
            limits::MAX_CONNECTIONS,
            1..=limits::MAX_CONNECTIONS_CEILING,
        )?;
        let key = "daemon.http_header_timeout";
        let header_timeout = self.duration(key, raw.header_timeout, limits::HEADER_TIMEOUT)?;
        let (floor, ceiling) = (limits::HEADER_TIMEOUT_FLOOR, limits::HEADER_TIMEOUT_CEILING);
        if header_timeout < floor || header_timeout > ceiling {
            return Err(self.err(
                key,
                format!(
                    "must be between {} and {}",
                    humantime::format_duration(floor),
                    humantime::format_duration(ceiling)
                ),
            ));
        }
        Ok((max_connections, header_timeout))
    }
}

/// `IP:PORT`, `[IPv6]:PORT` or `localhost:PORT`.
pub(super) fn parse_addr(s: &str) -> Option<SocketAddr> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Some(a);
    }
    let port = s.strip_prefix("localhost:")?.parse::<u16>().ok()?;
    Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
}

#[cfg(test)]
mod tests {
    use super::parse_addr;

    #[test]
    fn addresses_parse() {
        assert_eq!(
            parse_addr("127.0.0.1:80").map(|a| a.to_string()),
            Some("127.0.0.1:80".into())
        );
        assert_eq!(
            parse_addr("localhost:8765").map(|a| a.to_string()),
            Some("127.0.0.1:8765".into())
        );
        assert_eq!(
            parse_addr("[::1]:9").map(|a| a.to_string()),
            Some("[::1]:9".into())
        );
        assert_eq!(parse_addr("example.com:80"), None);
        assert_eq!(parse_addr("127.0.0.1"), None);
    }
}
