//! What a host and port are to the proxy.
//!
//! Names, IP literals and ports, with the syntax the network list and requests share.
//!
//! One reader serves both sides so that a request can only name a host in the form a
//! rule could have named it: a name is lowercased and loses its trailing dot on both
//! sides, and anything that is neither a plain name nor an IP literal is refused before
//! any rule is consulted or any resolver asked.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Longest host name, in bytes (RFC 1035, without the trailing dot).
pub const MAX_NAME: usize = 253;
/// Longest label of a host name, in bytes (RFC 1035).
const MAX_LABEL: usize = 63;

/// A host as a request names it: a name (lowercase, no trailing dot) or an IP literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Name(String),
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
        }
    }
}

/// What a request asks to reach: a host and a TCP port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: Host,
    pub port: u16,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// The host part of `host[:port]` as written, before it is read as a name or address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostText<'a> {
    /// What stood between `[` and `]`.
    Bracketed(&'a str),
    Plain(&'a str),
}

/// Splits `host[:port]`, where an IPv6 host stands in brackets. The error is a phrase
/// that completes a sentence about the text (`"x:0" has port 0`).
pub fn split(text: &str) -> Result<(HostText<'_>, Option<u16>), String> {
    if let Some(inner) = text.strip_prefix('[') {
        let Some((host, after)) = inner.split_once(']') else {
            return Err("opens a bracket it does not close".to_owned());
        };
        let port = match after {
            "" => None,
            _ => match after.strip_prefix(':') {
                Some(p) => Some(port(p)?),
                None => return Err("has something other than :port after the bracket".to_owned()),
            },
        };
        return Ok((HostText::Bracketed(host), port));
    }
    match text.rsplit_once(':') {
        Some((host, p)) => Ok((HostText::Plain(host), Some(port(p)?))),
        None => Ok((HostText::Plain(text), None)),
    }
}

/// A TCP port written in decimal: 1 to 65535.
pub fn port(text: &str) -> Result<u16, String> {
    if text.is_empty() {
        return Err("has an empty port".to_owned());
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err("has a port that is not a number".to_owned());
    }
    // Five digits at most keeps the parse in range of u32; leading zeros beyond that are
    // no one's intent.
    let value = if text.len() <= 5 {
        text.parse::<u32>().unwrap_or(u32::MAX)
    } else {
        u32::MAX
    };
    match u16::try_from(value) {
        Ok(0) => Err("has port 0, which names no port".to_owned()),
        Ok(p) => Ok(p),
        Err(_) => Err("has a port over 65535".to_owned()),
    }
}

/// A host name, lowercased and without its trailing dot.
pub fn name(text: &str) -> Result<String, String> {
    let text = text.strip_suffix('.').unwrap_or(text);
    if text.is_empty() {
        return Err("names no host".to_owned());
    }
    if text.len() > MAX_NAME {
        return Err(format!("has a host name longer than {MAX_NAME} bytes"));
    }
    if !text.is_ascii() {
        return Err("has a host name that is not ASCII; write it in its xn-- form".to_owned());
    }
    let lower = text.to_ascii_lowercase();
    let mut last = "";
    for label in lower.split('.') {
        if label.is_empty() {
            return Err("has a host name with an empty label".to_owned());
        }
        if label.len() > MAX_LABEL {
            return Err(format!(
                "has a label longer than {MAX_LABEL} bytes in its host name"
            ));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(
                "has a character other than a-z, 0-9, '-', '_' and '.' in its host name".to_owned(),
            );
        }
        last = label;
    }
    // No top-level domain is all digits; a name that ends in one is a mistyped address
    // (`10.0.0`, `010.0.0.1`), which a resolver might read as one in a form of its own.
    if last.bytes().all(|b| b.is_ascii_digit()) {
        return Err("is neither a host name nor an IPv4 address".to_owned());
    }
    Ok(lower)
}

/// The host of a request: an IPv6 address in brackets, an IPv4 address, or a name.
pub fn host(text: HostText<'_>) -> Result<Host, String> {
    match text {
        HostText::Bracketed(inner) => inner
            .parse::<Ipv6Addr>()
            .map(|ip| Host::Ip(IpAddr::V6(ip)))
            .map_err(|_| "has brackets around something other than an IPv6 address".to_owned()),
        HostText::Plain(plain) => match plain.parse::<Ipv4Addr>() {
            Ok(ip) => Ok(Host::Ip(IpAddr::V4(ip))),
            Err(_) => name(plain).map(Host::Name),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_decimal_numbers_from_one_to_65535() {
        let cases: &[(&str, Result<u16, &str>)] = &[
            ("1", Ok(1)),
            ("443", Ok(443)),
            ("08080", Ok(8080)),
            ("65535", Ok(65535)),
            ("", Err("empty port")),
            ("0", Err("port 0")),
            ("00000", Err("port 0")),
            ("65536", Err("over 65535")),
            ("99999999999999999999", Err("over 65535")),
            ("+80", Err("not a number")),
            ("-1", Err("not a number")),
            ("8o", Err("not a number")),
            ("８０", Err("not a number")),
        ];
        for (text, want) in cases {
            match (port(text), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, *want, "{text:?}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{text:?}: {got}"),
                (got, want) => panic!("{text:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn names_are_lowercased_without_their_trailing_dot_and_checked_label_by_label() {
        let long_label = "a".repeat(64);
        let long_name = [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(62),
        ]
        .join(".");
        let cases: Vec<(&str, Result<&str, &str>)> = vec![
            ("Example.COM", Ok("example.com")),
            ("example.com.", Ok("example.com")),
            ("_dmarc.x-y.example", Ok("_dmarc.x-y.example")),
            ("localhost", Ok("localhost")),
            ("3com.com", Ok("3com.com")),
            ("", Err("names no host")),
            (".", Err("names no host")),
            ("a..b", Err("empty label")),
            (".a", Err("empty label")),
            ("a.b..", Err("empty label")),
            ("ex ample.com", Err("a character other than")),
            ("ex*ample.com", Err("a character other than")),
            ("user@example.com", Err("a character other than")),
            ("bücher.example", Err("xn-- form")),
            (&long_label, Err("label longer than 63")),
            (&long_name, Err("longer than 253")),
            ("10.0.0", Err("neither a host name nor an IPv4")),
            ("010.0.0.1", Err("neither a host name nor an IPv4")),
            ("2130706433", Err("neither a host name nor an IPv4")),
        ];
        for (text, want) in cases {
            match (name(text), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{text:?}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{text:?}: {got}"),
                (got, want) => panic!("{text:?}: got {got:?}, want {want:?}"),
            }
        }
        let longest = [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61),
        ]
        .join(".");
        assert_eq!(longest.len(), MAX_NAME);
        assert_eq!(name(&longest), Ok(longest.clone()));
        assert_eq!(name(&format!("{longest}.")), Ok(longest));
    }

    #[test]
    fn hosts_and_ports_split_with_ipv6_in_brackets() {
        let v6 = |s: &str| Host::Ip(s.parse().unwrap());
        type Split = (Host, Option<u16>);
        let cases: Vec<(&str, Result<Split, &str>)> = vec![
            (
                "example.com:443",
                Ok((Host::Name("example.com".into()), Some(443))),
            ),
            ("example.com", Ok((Host::Name("example.com".into()), None))),
            (
                "10.0.0.5:8080",
                Ok((Host::Ip("10.0.0.5".parse().unwrap()), Some(8080))),
            ),
            ("[::1]:8080", Ok((v6("::1"), Some(8080)))),
            ("[::1]", Ok((v6("::1"), None))),
            (
                "[::ffff:127.0.0.1]:80",
                Ok((v6("::ffff:127.0.0.1"), Some(80))),
            ),
            ("[::1", Err("does not close")),
            ("[::1]8080", Err("after the bracket")),
            ("[10.0.0.5]:80", Err("other than an IPv6")),
            ("[fe80::1%eth0]:80", Err("other than an IPv6")),
            ("::1:443", Err("a character other than")),
            ("example.com:", Err("empty port")),
            (":443", Err("names no host")),
        ];
        for (text, want) in cases {
            let got = split(text).and_then(|(h, p)| Ok((host(h)?, p)));
            match (got, want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{text:?}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{text:?}: {got}"),
                (got, want) => panic!("{text:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn targets_show_ipv6_in_brackets() {
        let t = |host, port| Target { host, port }.to_string();
        assert_eq!(t(Host::Name("a.example".into()), 443), "a.example:443");
        assert_eq!(t(Host::Ip("10.0.0.5".parse().unwrap()), 80), "10.0.0.5:80");
        assert_eq!(t(Host::Ip("::1".parse().unwrap()), 8080), "[::1]:8080");
    }
}
