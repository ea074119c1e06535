//! A proxy request's head: read within a size and time limit, and parsed into what it asks to reach and, for plain HTTP, the head to send on in origin-form.
//!
//! Only two forms are proxy requests: `CONNECT host:port` (a tunnel, what HTTPS_PROXY
//! clients send) and an absolute `http://` URL (what HTTP_PROXY clients send for plain
//! HTTP). Everything else is refused before any rule is consulted. The parser is strict
//! (CRLF or LF line ends, no bare CR, no folded headers, no control characters): the head
//! of a plain HTTP request is sent on, so nothing it forwards may read differently to
//! the server than it did to the proxy.

use super::host::{self, Host, Target};
use memchr::memchr_iter;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::Instant;

/// Largest request head (request line, headers and the blank line) read.
pub const MAX_HEAD: usize = 8 * 1024;
/// How long the whole head may take to arrive.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Headers of the client's that are not sent on: those addressed to the proxy, and those
/// the proxy sets itself (`Host` from the URL, `Connection: close`).
const DROPPED: [&str; 5] = [
    "proxy-authorization",
    "proxy-connection",
    "host",
    "connection",
    "keep-alive",
];

/// Why no head was read.
#[derive(Debug, PartialEq, Eq)]
pub enum HeadError {
    /// The client closed (or failed) before its head was complete: nobody to answer.
    Closed,
    /// No blank line within `MAX_HEAD` bytes.
    TooLong,
    /// The head did not arrive within `HEAD_TIMEOUT`.
    TimedOut,
}

/// A request head as read: the head itself (up to and with its blank line) and whatever
/// the client sent after it, which belongs to the upstream.
#[derive(Debug, PartialEq, Eq)]
pub struct Head {
    pub head: Vec<u8>,
    pub rest: Vec<u8>,
}

/// Reads a request head from `reader`, within `MAX_HEAD` bytes and `HEAD_TIMEOUT`.
pub async fn read_head<R: AsyncRead + Unpin>(reader: &mut R) -> Result<Head, HeadError> {
    let deadline = Instant::now() + HEAD_TIMEOUT;
    let mut buf: Vec<u8> = Vec::with_capacity(MAX_HEAD);
    let mut chunk = [0u8; 2048];
    loop {
        let read = tokio::time::timeout_at(deadline, reader.read(&mut chunk)).await;
        let n = match read {
            Err(_) => return Err(HeadError::TimedOut),
            Ok(Err(_) | Ok(0)) => return Err(HeadError::Closed),
            Ok(Ok(n)) => n,
        };
        let searched = buf.len().saturating_sub(2);
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
        if let Some(end) = head_end(&buf, searched) {
            if end > MAX_HEAD {
                return Err(HeadError::TooLong);
            }
            let rest = buf.split_off(end);
            return Ok(Head { head: buf, rest });
        }
        if buf.len() >= MAX_HEAD {
            return Err(HeadError::TooLong);
        }
    }
}

/// Where the head in `buf` ends (just after its blank line), looking at line ends from
/// `from` on; None while no blank line has arrived.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let tail = buf.get(from..)?;
    memchr_iter(b'\n', tail).find_map(|i| {
        let at = from + i;
        match (buf.get(at + 1), buf.get(at + 2)) {
            (Some(b'\n'), _) => Some(at + 2),
            (Some(b'\r'), Some(b'\n')) => Some(at + 3),
            _ => None,
        }
    })
}

/// What a proxy request asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// `CONNECT host:port`: a tunnel.
    Connect(Target),
    /// A plain HTTP request for an absolute URL, with its head rewritten for the upstream.
    Forward { target: Target, head: Vec<u8> },
}

impl Request {
    pub fn target(&self) -> &Target {
        match self {
            Request::Connect(target) | Request::Forward { target, .. } => target,
        }
    }
}

/// Parses a head that `read_head` returned. The error says, in a few words, what is wrong
/// (it never quotes the request).
pub fn parse(head: &[u8]) -> Result<Request, &'static str> {
    let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8")?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let request_line = lines.next().unwrap_or_default();
    let headers: Vec<&str> = lines.take_while(|l| !l.is_empty()).collect();
    for line in std::iter::once(request_line).chain(headers.iter().copied()) {
        if line.chars().any(|c| c.is_control() && c != '\t') {
            return Err("the request head has a control character");
        }
    }
    let mut parts = request_line.split(' ');
    let (Some(method), Some(uri), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("the request line is not METHOD TARGET VERSION");
    };
    if method.is_empty() || !method.bytes().all(is_token) {
        return Err("the request line has no method");
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err("the request is not HTTP/1.x");
    }
    let mut kept = Vec::with_capacity(headers.len());
    for line in &headers {
        let Some((name, _)) = line.split_once(':') else {
            return Err("a header line has no colon");
        };
        if name.is_empty() || !name.bytes().all(is_token) {
            return Err("a header line has no name");
        }
        if !DROPPED.iter().any(|d| name.eq_ignore_ascii_case(d)) {
            kept.push(*line);
        }
    }
    if method == "CONNECT" {
        return Ok(Request::Connect(authority(uri, None)?));
    }
    let Some(rest) = strip_prefix_ignore_case(uri, "http://") else {
        return Err("not a proxy request: send CONNECT host:port, or an absolute http:// URL");
    };
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (auth, path) = rest.split_at_checked(split).unwrap_or((rest, ""));
    if path.contains('#') {
        return Err("the URL has a fragment");
    }
    let target = authority(auth, Some(80))?;
    let mut out = String::with_capacity(head.len() + 64);
    out.push_str(method);
    out.push(' ');
    if !path.starts_with('/') {
        out.push('/');
    }
    out.push_str(path);
    out.push(' ');
    out.push_str(version);
    out.push_str("\r\nHost: ");
    // The Host the upstream sees is the one the rules allowed, never the client's own
    // (which could name another site behind the same address).
    out.push_str(auth.to_ascii_lowercase().as_str());
    out.push_str("\r\n");
    for line in kept {
        out.push_str(line);
        out.push_str("\r\n");
    }
    // One request per connection: a second one on it could name another Host, so the
    // upstream is asked to close after its response.
    out.push_str("Connection: close\r\n\r\n");
    Ok(Request::Forward {
        target,
        head: out.into_bytes(),
    })
}

/// `host:port` (or `host` when `default` gives the port), the host a name, an IPv4
/// address or an IPv6 address in brackets.
fn authority(text: &str, default: Option<u16>) -> Result<Target, &'static str> {
    const BAD: &str = "the request names no valid host and port";
    if text.contains('@') {
        return Err("the URL has user information");
    }
    let (host_text, port) = host::split(text).map_err(|_| BAD)?;
    let host: Host = host::host(host_text).map_err(|_| BAD)?;
    let port = port.or(default).ok_or("CONNECT names no port")?;
    Ok(Target { host, port })
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| text.get(prefix.len()..))
        .flatten()
}

/// A byte of an HTTP token (RFC 9110 `tchar`).
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_in(first: &[u8], second: &[u8]) -> Result<Head, HeadError> {
        let mut reader = first.chain(second);
        read_head(&mut reader).await
    }

    #[tokio::test]
    async fn a_head_ends_at_its_blank_line_and_what_follows_is_kept() {
        let got = read_in(b"CONNECT a.example:443 HTTP/1.1\r\n\r\nhello", b"").await;
        assert_eq!(
            got,
            Ok(Head {
                head: b"CONNECT a.example:443 HTTP/1.1\r\n\r\n".to_vec(),
                rest: b"hello".to_vec(),
            })
        );
        // The blank line split across reads, and bare LF line ends.
        for (a, b) in [
            (&b"GET http://a/ HTTP/1.1\r\nX: y\r\n\r"[..], &b"\nbody"[..]),
            (b"GET http://a/ HTTP/1.1\r\nX: y\r\n", b"\r\nbody"),
            (b"GET http://a/ HTTP/1.1\r\nX: y\n", b"\nbody"),
        ] {
            let got = read_in(a, b).await.unwrap();
            assert_eq!(got.rest, b"body", "{:?}", String::from_utf8_lossy(a));
            assert!(got.head.ends_with(b"\n"));
        }
    }

    #[tokio::test]
    async fn a_head_without_a_blank_line_within_the_limit_is_too_long() {
        let big = format!(
            "GET http://a/ HTTP/1.1\r\nX: {}\r\n\r\n",
            "y".repeat(MAX_HEAD)
        );
        assert_eq!(read_in(big.as_bytes(), b"").await, Err(HeadError::TooLong));
        let exact = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "y".repeat(MAX_HEAD - 23));
        assert_eq!(exact.len(), MAX_HEAD);
        assert!(read_in(exact.as_bytes(), b"more").await.is_ok());
        let over = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "y".repeat(MAX_HEAD - 22));
        assert_eq!(read_in(over.as_bytes(), b"").await, Err(HeadError::TooLong));
        assert_eq!(
            read_in(b"GET / HTTP/1.1\r\n", b"").await,
            Err(HeadError::Closed)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_that_does_not_arrive_in_time_times_out() {
        let (_writer, mut reader) = tokio::io::duplex(64);
        assert_eq!(read_head(&mut reader).await, Err(HeadError::TimedOut));
    }

    fn target(host: &str, port: u16) -> Target {
        let (h, _) = host::split(host).unwrap();
        Target {
            host: host::host(h).unwrap(),
            port,
        }
    }

    #[test]
    fn connect_names_a_host_and_a_port() {
        let cases = [
            (
                "CONNECT api.example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n",
                target("api.example.com", 443),
            ),
            (
                "CONNECT API.Example.com.:8443 HTTP/1.0\r\n\r\n",
                target("api.example.com", 8443),
            ),
            (
                "CONNECT 10.0.0.5:22 HTTP/1.1\r\n\r\n",
                target("10.0.0.5", 22),
            ),
            ("CONNECT [::1]:8080 HTTP/1.1\n\n", target("[::1]", 8080)),
        ];
        for (head, want) in cases {
            assert_eq!(
                parse(head.as_bytes()),
                Ok(Request::Connect(want)),
                "{head:?}"
            );
        }
    }

    #[test]
    fn an_absolute_url_is_sent_on_in_origin_form_without_the_proxy_headers() {
        let head = "GET http://API.example.com:8080/v1/x?q=1 HTTP/1.1\r\n\
                    Host: evil.example\r\n\
                    Proxy-Authorization: Basic c2VjcmV0\r\n\
                    proxy-connection: keep-alive\r\n\
                    Connection: keep-alive\r\n\
                    Accept: */*\r\n\
                    X-Long:  spaced\tvalue \r\n\r\n";
        let Ok(Request::Forward {
            target: t,
            head: out,
        }) = parse(head.as_bytes())
        else {
            panic!("not forwarded");
        };
        assert_eq!(t, target("api.example.com", 8080));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /v1/x?q=1 HTTP/1.1\r\nHost: api.example.com:8080\r\nAccept: */*\r\n\
             X-Long:  spaced\tvalue \r\nConnection: close\r\n\r\n"
        );
        let cases = [
            (
                "POST HTTP://a.example HTTP/1.0\n\n",
                "POST / HTTP/1.0\r\nHost: a.example\r\n",
                80,
            ),
            (
                "GET http://a.example?x HTTP/1.1\r\n\r\n",
                "GET /?x HTTP/1.1\r\nHost: a.example\r\n",
                80,
            ),
            (
                "GET http://[::1]:81/ HTTP/1.1\r\n\r\n",
                "GET / HTTP/1.1\r\nHost: [::1]:81\r\n",
                81,
            ),
        ];
        for (head, start, port) in cases {
            let Ok(Request::Forward {
                target: t,
                head: out,
            }) = parse(head.as_bytes())
            else {
                panic!("{head:?} not forwarded");
            };
            assert_eq!(t.port, port, "{head:?}");
            let out = String::from_utf8(out).unwrap();
            assert!(out.starts_with(start), "{head:?}: {out:?}");
            assert!(out.ends_with("Connection: close\r\n\r\n"), "{out:?}");
        }
    }

    #[test]
    fn anything_else_is_refused_without_quoting_it() {
        let cases: &[&[u8]] = &[
            b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n",
            b"GET https://a.example/ HTTP/1.1\r\n\r\n",
            b"GET ftp://a.example/ HTTP/1.1\r\n\r\n",
            b"GET http:// HTTP/1.1\r\n\r\n",
            b"GET http://user:pw@a.example/ HTTP/1.1\r\n\r\n",
            b"GET http://a.example/#frag HTTP/1.1\r\n\r\n",
            b"GET http://a.example:0/ HTTP/1.1\r\n\r\n",
            b"GET http://a.example:99999/ HTTP/1.1\r\n\r\n",
            b"GET http://a*b.example/ HTTP/1.1\r\n\r\n",
            b"CONNECT a.example HTTP/1.1\r\n\r\n",
            b"CONNECT ::1:443 HTTP/1.1\r\n\r\n",
            b"CONNECT a.example:443 HTTP/2\r\n\r\n",
            b"CONNECT a.example:443  HTTP/1.1\r\n\r\n",
            b"CONNECT a.example:443\r\n\r\n",
            b"CONNECT a.example:443 HTTP/1.1 x\r\n\r\n",
            b"CONNECT a.example:443 HTTP/1.1\r\nno colon\r\n\r\n",
            b"CONNECT a.example:443 HTTP/1.1\r\n folded: x\r\n\r\n",
            b"CONNECT a.example:443 HTTP/1.1\r\nX: a\rb\r\n\r\n",
            b"CONNECT a.example:443 HTTP/1.1\r\nX: a\x00b\r\n\r\n",
            b"CONNECT a.\xffexample:443 HTTP/1.1\r\n\r\n",
            b"\r\n\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n\n",
        ];
        for head in cases {
            let got = parse(head);
            assert!(
                got.is_err(),
                "{:?} parsed as {got:?}",
                String::from_utf8_lossy(head)
            );
        }
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\n\r\n"),
            Err("not a proxy request: send CONNECT host:port, or an absolute http:// URL")
        );
    }

    proptest::proptest! {
        /// Whatever bytes a client sends, the parser answers without panicking, and a
        /// plain HTTP request for a valid URL goes on with no proxy header and one Host.
        #[test]
        fn any_head_parses_or_is_refused_and_forwards_no_proxy_headers(
            head in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            line in concat!(
                "GET http://[a-z]{1,8}(\\.[a-z]{1,8}){0,2}(:[1-9][0-9]{0,3})?(/[a-z?=&]{0,10})? ",
                "HTTP/1\\.[01]\r?\n((Host|Proxy-Connection|Proxy-Authorization|X): [ -~]{0,10}\r?\n){0,4}\r?\n",
            ),
        ) {
            let _ = parse(&head);
            if let Ok(Request::Forward { head, .. }) = parse(line.as_bytes()) {
                let out = String::from_utf8(head).unwrap().to_ascii_lowercase();
                proptest::prop_assert!(!out.contains("\r\nproxy-"), "{}", out);
                proptest::prop_assert_eq!(out.matches("\r\nhost: ").count(), 1, "{}", out);
                proptest::prop_assert!(out.starts_with("get /"), "{}", out);
            } else {
                proptest::prop_assert!(false, "{:?} is not forwarded", line);
            }
        }
    }
}
