//! A confined server's network list.
//!
//! The rules (`HostRule`) parsed from its entries, and which of them match a requested
//! host and port.

use super::host::{self, Host, HostText, Target};
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

/// Most entries a server's network list may have; the config enforces it.
pub const MAX_RULES: usize = 256;
/// The ports a rule that names none lets through: plain HTTP and HTTPS.
const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// What a rule's host part names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// Exactly this name (lowercase, no trailing dot).
    Name(String),
    /// Any name below this one, at any depth, but not the name itself (`*.example.com`
    /// holds `example.com` here).
    Below(String),
    /// Exactly this address, and only when a request names it as an address.
    Ip(IpAddr),
}

/// One entry of a server's network list: a host pattern and an optional port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    pattern: Pattern,
    /// None lets through `DEFAULT_PORTS`.
    port: Option<u16>,
}

impl HostRule {
    /// Parses one entry of a server's `network` list; the error is a sentence for the
    /// config error message.
    pub fn parse(entry: &str) -> Result<HostRule, String> {
        Self::read(entry).map_err(|why| format!("{entry:?} {why}"))
    }

    /// The TCP ports this rule lets through (for a fallback that can only restrict
    /// ports): its port, or [80, 443] when it names none.
    pub fn ports(&self) -> Vec<u16> {
        match self.port {
            Some(p) => vec![p],
            None => DEFAULT_PORTS.to_vec(),
        }
    }

    /// The entry read; the error completes a sentence whose subject is the entry.
    fn read(entry: &str) -> Result<HostRule, String> {
        if entry.is_empty() {
            return Err("is empty; name a host, as in \"api.example.com\"".to_owned());
        }
        if entry.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("contains whitespace or a control character".to_owned());
        }
        if entry.contains("://") {
            return Err(
                "has a scheme; write the host alone, with :port unless it is 80 or 443".to_owned(),
            );
        }
        if entry.contains('/') {
            return Err(
                "has a path; write the host alone, with :port unless it is 80 or 443".to_owned(),
            );
        }
        // Two colons or more outside brackets can only be a bare IPv6 address, which
        // cannot carry a port: `::1:8080` would be ambiguous.
        if !entry.starts_with('[') && entry.matches(':').count() >= 2 {
            return match entry.parse::<Ipv6Addr>() {
                Ok(ip) => Ok(HostRule {
                    pattern: Pattern::Ip(IpAddr::V6(ip)),
                    port: None,
                }),
                Err(_) => Err("is not an IPv6 address; one with a port goes in brackets, \
                               as in \"[::1]:8080\""
                    .to_owned()),
            };
        }
        let (text, port) = host::split(entry)?;
        let pattern = match text {
            HostText::Plain(plain) if plain.contains('*') => wildcard(plain)?,
            _ => match host::host(text)? {
                Host::Name(name) => Pattern::Name(name),
                Host::Ip(ip) => Pattern::Ip(ip),
            },
        };
        Ok(HostRule { pattern, port })
    }

    /// Whether this rule lets a request for `target` through (before its addresses are
    /// judged).
    pub(super) fn matches(&self, target: &Target) -> bool {
        let port = match self.port {
            Some(p) => p == target.port,
            None => DEFAULT_PORTS.contains(&target.port),
        };
        port && match (&self.pattern, &target.host) {
            (Pattern::Name(rule), Host::Name(name)) => rule == name,
            (Pattern::Below(rule), Host::Name(name)) => name
                .strip_suffix(rule.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (Pattern::Ip(rule), Host::Ip(ip)) => rule == ip,
            // A name rule never matches an address, nor an address rule a name: what a
            // name resolves to is judged by its addresses instead.
            _ => false,
        }
    }

    /// The address this rule names, if it is an address rule.
    pub(super) fn ip(&self) -> Option<IpAddr> {
        match self.pattern {
            Pattern::Ip(ip) => Some(ip),
            _ => None,
        }
    }

    /// Whether this rule is the exact name `localhost`, which names loopback explicitly.
    pub(super) fn is_localhost(&self) -> bool {
        matches!(&self.pattern, Pattern::Name(name) if name == "localhost")
    }
}

/// `*.name`: the only place a `*` may stand is a whole first label.
fn wildcard(plain: &str) -> Result<Pattern, String> {
    if plain == "*" {
        return Err("would let every host through; name the hosts".to_owned());
    }
    match plain.strip_prefix("*.") {
        Some(below) if !below.contains('*') => host::name(below).map(Pattern::Below),
        _ => Err("may hold `*` only as its whole first label, as in \"*.example.com\"".to_owned()),
    }
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pattern {
            Pattern::Name(name) => f.write_str(name)?,
            Pattern::Below(name) => write!(f, "*.{name}")?,
            Pattern::Ip(ip) => write!(f, "{}", Host::Ip(*ip))?,
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

/// A server's whole network list.
#[derive(Debug)]
pub struct Allow {
    rules: Vec<HostRule>,
}

impl Allow {
    pub fn new(rules: Vec<HostRule>) -> Allow {
        Allow { rules }
    }

    /// The rules that let a request for `target` through, in list order.
    pub(super) fn matching<'a>(&'a self, target: &'a Target) -> impl Iterator<Item = &'a HostRule> {
        self.rules.iter().filter(move |r| r.matches(target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_to_their_normalised_form() {
        let cases = [
            ("api.example.com", "api.example.com", vec![80, 443]),
            ("API.Example.COM.", "api.example.com", vec![80, 443]),
            ("api.example.com:8443", "api.example.com:8443", vec![8443]),
            ("*.example.com", "*.example.com", vec![80, 443]),
            ("*.Example.com:22", "*.example.com:22", vec![22]),
            ("localhost:3000", "localhost:3000", vec![3000]),
            ("10.0.0.5", "10.0.0.5", vec![80, 443]),
            ("10.0.0.5:8080", "10.0.0.5:8080", vec![8080]),
            ("[::1]:8080", "[::1]:8080", vec![8080]),
            ("[::1]", "[::1]", vec![80, 443]),
            ("::1", "[::1]", vec![80, 443]),
            ("2001:DB8::1", "[2001:db8::1]", vec![80, 443]),
            ("[::ffff:10.0.0.1]:1", "[::ffff:10.0.0.1]:1", vec![1]),
            (
                "my_host-1.internal:65535",
                "my_host-1.internal:65535",
                vec![65535],
            ),
        ];
        for (entry, shown, ports) in cases {
            let rule = HostRule::parse(entry).unwrap_or_else(|e| panic!("{entry}: {e}"));
            assert_eq!(rule.to_string(), shown, "{entry}");
            assert_eq!(rule.ports(), ports, "{entry}");
            assert_eq!(
                HostRule::parse(shown),
                Ok(rule),
                "{shown} reads back the same"
            );
        }
    }

    #[test]
    fn bad_entries_are_refused_with_a_sentence_that_quotes_them() {
        let cases = [
            ("", "is empty"),
            (" example.com", "whitespace"),
            ("example.com ", "whitespace"),
            ("exa\tmple.com", "whitespace"),
            ("https://example.com", "has a scheme"),
            ("example.com/api", "has a path"),
            ("*", "every host"),
            ("*:443", "every host"),
            ("*.*.example.com", "whole first label"),
            ("api.*.example.com", "whole first label"),
            ("*example.com", "whole first label"),
            ("example.*", "whole first label"),
            ("*.", "names no host"),
            ("*.10.0.0.5", "neither a host name nor an IPv4"),
            ("example.com:0", "port 0"),
            ("example.com:65536", "over 65535"),
            ("example.com:https", "not a number"),
            ("example.com:", "empty port"),
            ("exa$mple.com", "other than a-z"),
            ("user@example.com", "other than a-z"),
            ("exa..mple.com", "empty label"),
            ("::1:8080:x", "not an IPv6 address"),
            ("fe80::1%eth0", "not an IPv6 address"),
            ("[::1]:0", "port 0"),
            ("[example.com]:80", "other than an IPv6"),
            ("10.0.0", "neither a host name nor an IPv4"),
        ];
        for (entry, want) in cases {
            let err = HostRule::parse(entry).expect_err(entry);
            assert!(err.contains(want), "{entry:?}: {err}");
            assert!(err.starts_with(&format!("{entry:?} ")), "{entry:?}: {err}");
        }
        let long = format!("{}.example.com", vec!["a".repeat(60); 4].join("."));
        assert!(
            HostRule::parse(&long)
                .unwrap_err()
                .contains("longer than 253")
        );
    }

    fn target(host: &str, port: u16) -> Target {
        let host = match host.trim_matches(|c| c == '[' || c == ']').parse() {
            Ok(ip) => Host::Ip(ip),
            Err(_) => Host::Name(host.to_owned()),
        };
        Target { host, port }
    }

    #[test]
    fn rules_match_their_hosts_and_ports_and_nothing_else() {
        let cases = [
            ("example.com", "example.com", 443, true),
            ("example.com", "example.com", 80, true),
            ("example.com", "example.com", 8080, false),
            ("example.com", "www.example.com", 443, false),
            ("example.com", "notexample.com", 443, false),
            ("example.com:8080", "example.com", 8080, true),
            ("example.com:8080", "example.com", 443, false),
            ("*.example.com", "a.example.com", 443, true),
            ("*.example.com", "a.b.c.example.com", 80, true),
            ("*.example.com", "example.com", 443, false),
            ("*.example.com", "badexample.com", 443, false),
            ("*.example.com", "a.example.com.evil", 443, false),
            ("*.example.com:22", "git.example.com", 22, true),
            ("*.example.com:22", "git.example.com", 443, false),
            ("10.0.0.5", "10.0.0.5", 443, true),
            ("10.0.0.5", "10.0.0.6", 443, false),
            ("10.0.0.5:8080", "10.0.0.5", 8080, true),
            ("[::1]:8080", "[::1]", 8080, true),
            ("[::1]:8080", "[::ffff:127.0.0.1]", 8080, false),
            ("localhost", "localhost", 443, true),
            // A name rule never matches an address, whatever the name resolves to.
            ("localhost:8080", "127.0.0.1", 8080, false),
            ("example.com", "93.184.215.14", 443, false),
            // Nor an address rule a name.
            ("127.0.0.1:8080", "localhost", 8080, false),
        ];
        for (rule, host, port, want) in cases {
            let r = HostRule::parse(rule).unwrap();
            assert_eq!(
                r.matches(&target(host, port)),
                want,
                "{rule} vs {host}:{port}"
            );
        }
    }

    #[test]
    fn a_list_yields_every_rule_that_matches_in_order() {
        let rules = [
            "*.example.com",
            "a.example.com",
            "b.example.com",
            "a.example.com:8080",
        ];
        let allow = Allow::new(rules.iter().map(|r| HostRule::parse(r).unwrap()).collect());
        let t = target("a.example.com", 443);
        let found: Vec<String> = allow.matching(&t).map(ToString::to_string).collect();
        assert_eq!(found, ["*.example.com", "a.example.com"]);
        assert_eq!(allow.matching(&target("c.example.org", 443)).count(), 0);
    }

    proptest::proptest! {
        /// Whatever an entry holds, parsing it never panics, and an entry that parses
        /// reads back as itself from its normalised form.
        #[test]
        fn any_entry_parses_or_is_refused_and_its_normal_form_reads_back(
            entry in "[a-zA-Z0-9.:*\\[\\]_/ -]{0,40}|\\PC{0,40}"
        ) {
            if let Ok(rule) = HostRule::parse(&entry) {
                let shown = rule.to_string();
                proptest::prop_assert_eq!(HostRule::parse(&shown), Ok(rule), "{}", shown);
            }
        }
    }
}
