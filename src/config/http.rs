//! The optional Streamable HTTP listener's settings (`[daemon] http_*`): address, remote access, authentication.

use super::remote::Secret;
use super::{ConfigError, Validator};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

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
}

/// The raw `[daemon] http_*` keys.
pub(super) struct RawHttp<'a> {
    pub listen: Option<&'a str>,
    pub allow_remote: bool,
    pub auth: Option<&'a str>,
    pub token_env: Option<&'a str>,
    pub allowed_hosts: &'a [String],
}

impl Validator<'_> {
    pub(super) fn http(&self, raw: RawHttp<'_>) -> Result<Option<HttpListen>, ConfigError> {
        let Some(listen) = raw.listen else {
            for (set, key) in [
                (raw.allow_remote, "daemon.http_allow_remote"),
                (raw.auth.is_some(), "daemon.http_auth"),
                (raw.token_env.is_some(), "daemon.http_token_env"),
                (!raw.allowed_hosts.is_empty(), "daemon.http_allowed_hosts"),
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
        Ok(Some(HttpListen {
            addr,
            allow_remote: raw.allow_remote,
            auth,
            allowed_hosts: raw
                .allowed_hosts
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
        }))
    }
}

/// `IP:PORT`, `[IPv6]:PORT` or `localhost:PORT`.
fn parse_addr(s: &str) -> Option<SocketAddr> {
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
