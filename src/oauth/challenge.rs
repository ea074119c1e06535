//! `WWW-Authenticate` challenges (RFC 9110 §11.6.1, RFC 6750 §3).
//!
//! Parsed from one or more header values, without panicking on anything a server sends.

/// One challenge: its scheme (lowercased) and parameters (names lowercased, values as
/// sent, with quoted-string escapes removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub scheme: String,
    pub params: Vec<(String, String)>,
}

impl Challenge {
    /// A parameter's value, by name (case-insensitive).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What a `Bearer` challenge says, as MCP uses it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bearer {
    /// Where the server's protected resource metadata is (RFC 9728 §5.1).
    pub resource_metadata: Option<String>,
    /// The scopes the request needs, space-separated as sent.
    pub scope: Option<String>,
    /// `invalid_token`, `insufficient_scope`, …
    pub error: Option<String>,
    pub error_description: Option<String>,
}

impl Bearer {
    /// The scopes named in `scope`, in order, without duplicates.
    pub fn scopes(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in self.scope.as_deref().unwrap_or("").split_ascii_whitespace() {
            if !out.iter().any(|o| o == s) {
                out.push(s.to_owned());
            }
        }
        out
    }

    /// Whether this is a step-up challenge (a token that lacks a scope).
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// The first `Bearer` or `DPoP` challenge among the header values, if any: a DPoP
/// challenge carries the same parameters (RFC 9449 §7.1).
pub fn bearer<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<Bearer> {
    let challenges: Vec<Challenge> = values.into_iter().flat_map(parse).collect();
    let c = challenges.iter().find(|c| {
        c.scheme.eq_ignore_ascii_case("bearer") || c.scheme.eq_ignore_ascii_case("dpop")
    })?;
    let get = |n: &str| c.param(n).map(str::to_owned);
    Some(Bearer {
        resource_metadata: get("resource_metadata"),
        scope: get("scope"),
        error: get("error"),
        error_description: get("error_description"),
    })
}

/// Whether a `DPoP` challenge among the header values asks for a nonce (RFC 9449 §9).
pub fn dpop_nonce_asked<'a>(values: impl IntoIterator<Item = &'a str>) -> bool {
    values.into_iter().flat_map(parse).any(|c| {
        c.scheme.eq_ignore_ascii_case("dpop") && c.param("error") == Some("use_dpop_nonce")
    })
}

/// Longest header value read; the rest is ignored.
const MAX_HEADER: usize = 16 * 1024;

/// Parses one header value into its challenges. Token68 credentials (`Basic abc==`) are
/// skipped; malformed parts end the parse, keeping what came before.
pub fn parse(value: &str) -> Vec<Challenge> {
    let chars: Vec<char> = value.chars().take(MAX_HEADER).collect();
    let mut p = Parser { chars, at: 0 };
    let mut out: Vec<Challenge> = Vec::new();
    loop {
        p.skip(|c| c == ',' || c.is_whitespace());
        let Some(word) = p.token() else {
            break;
        };
        p.skip(|c| c == ' ' || c == '\t');
        if p.peek() == Some('=') {
            // A parameter of the current challenge (or a token68 after a scheme).
            p.at += 1;
            p.skip(|c| c == ' ' || c == '\t');
            let value = match p.peek() {
                Some('"') => p.quoted(),
                _ => p.token_or_token68(),
            };
            let Some(current) = out.last_mut() else {
                break; // a parameter before any scheme
            };
            if let Some(v) = value {
                current.params.push((word.to_ascii_lowercase(), v));
            }
        } else {
            out.push(Challenge {
                scheme: word.to_ascii_lowercase(),
                params: Vec::new(),
            });
        }
    }
    out
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn skip(&mut self, what: impl Fn(char) -> bool) {
        while self.peek().is_some_and(&what) {
            self.at += 1;
        }
    }

    /// The run of characters `what` accepts; None when it is empty.
    fn run(&mut self, what: impl Fn(char) -> bool) -> Option<String> {
        let start = self.at;
        self.skip(what);
        let len = self.at - start;
        (len > 0).then(|| self.chars.iter().skip(start).take(len).collect())
    }

    /// An RFC 9110 token.
    fn token(&mut self) -> Option<String> {
        self.run(is_tchar)
    }

    /// An unquoted value: a token or token68, read leniently up to the next comma or
    /// space (servers send `scope=mcp:write`, whose `:` a strict token would stop at).
    fn token_or_token68(&mut self) -> Option<String> {
        self.run(|c| c != ',' && c != '"' && !c.is_whitespace())
    }

    /// A quoted string, with `\x` escapes resolved. None when it is not closed.
    fn quoted(&mut self) -> Option<String> {
        self.at += 1; // the opening quote
        let mut out = String::new();
        loop {
            let c = self.peek()?;
            self.at += 1;
            match c {
                '"' => return Some(out),
                '\\' => {
                    out.push(self.peek()?);
                    self.at += 1;
                }
                c => out.push(c),
            }
        }
    }
}

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenges_are_read_as_servers_send_them() {
        let b = bearer([
            r#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp:basic mcp:read""#,
        ])
        .unwrap();
        assert_eq!(
            b.resource_metadata.as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(b.scopes(), ["mcp:basic", "mcp:read"]);
        assert!(!b.insufficient_scope());
        // Several challenges, several header lines, another scheme first, odd case.
        let b = bearer([
            r#"Basic realm="x", charset="UTF-8""#,
            r#"bEaReR error="insufficient_scope", scope=mcp:write, error_description="needs \"write\", sorry""#,
        ])
        .unwrap();
        assert!(b.insufficient_scope());
        assert_eq!(b.scopes(), ["mcp:write"]);
        assert_eq!(
            b.error_description.as_deref(),
            Some(r#"needs "write", sorry"#)
        );
        // A token68 after Basic does not confuse what follows.
        let c = parse(r#"Basic dXNlcjpwYXNz==, Bearer scope="a""#);
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(c[1].param("scope"), Some("a"));
        // Just the scheme.
        assert_eq!(bearer(["Bearer"]), Some(Bearer::default()));
        assert_eq!(bearer([r#"Basic realm="x""#]), None);
    }

    #[test]
    fn malformed_headers_never_panic_and_keep_what_parsed() {
        for v in [
            "",
            "=",
            "==,,",
            "Bearer scope=\"unclosed",
            "Bearer scope=",
            "Bearer \"x\"",
            "Bearer a=\"\\",
            ",Bearer,",
            "é=é",
            "Bearer scope=\"ü\"",
        ] {
            let _ = parse(v);
            let _ = bearer([v]);
        }
        let c = parse(r#"Bearer scope="a", error="unclosed"#);
        assert_eq!(c[0].param("scope"), Some("a"));
        assert_eq!(c[0].param("error"), None);
    }
}
