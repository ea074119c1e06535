//! A proxy request's head.
//!
//! Read within a size and time limit, tokenized by httparse, and read into what it asks
//! to reach and, for plain HTTP, the head to send on in origin-form.
//!
//! Only two forms are proxy requests: `CONNECT host:port` (a tunnel, what HTTPS_PROXY
//! clients send) and an absolute `http://` URL (what HTTP_PROXY clients send for plain
//! HTTP). Everything else is refused before any rule is consulted. The head is tokenized
//! by httparse, hyper's own HTTP/1 parser, in its strict default configuration (CRLF or
//! LF line ends, no bare CR, no folded headers, no space before a colon, one space
//! between the parts of the request line, no control characters, at most `MAX_HEADERS`
//! header lines). The head of a plain HTTP request is sent on, written anew from what
//! httparse read, so nothing it forwards can read differently to the server than it did
//! to the proxy.
//!
//! httparse reads the request target only as a string of URI characters. What it means
//! is mcpd's to read, and kept small here: the authority of CONNECT and of an `http://`
//! URL, read by `host.rs` exactly as the network list's rules are read.

use super::host::{self, Host, Target};
use memchr::memchr_iter;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::Instant;

/// Largest request head (request line, headers and the blank line) read.
pub const MAX_HEAD: usize = 8 * 1024;
/// Most header lines a head may have. Refusals name the number, so it is in their text.
pub const MAX_HEADERS: usize = 64;
const TOO_MANY_HEADERS: &str = "the request head has over 64 header lines";
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
    let mut incoming = Incoming::default();
    let mut chunk = [0u8; 2048];
    loop {
        let read = tokio::time::timeout_at(deadline, reader.read(&mut chunk)).await;
        let n = match read {
            Err(_) => return Err(HeadError::TimedOut),
            Ok(Err(_) | Ok(0)) => return Err(HeadError::Closed),
            Ok(Ok(n)) => n,
        };
        if let Some(done) = incoming.push(chunk.get(..n).unwrap_or_default()) {
            return done;
        }
    }
}

/// The bytes of a head as they arrive, kept until its blank line or `MAX_HEAD` bytes.
/// Finding the end is a scan for the blank line, linear in the bytes and done once for
/// each byte, not a parse (which would start over with every read); httparse then reads
/// the head once, and must find it ending at the same place.
#[derive(Debug, Default)]
pub struct Incoming {
    buf: Vec<u8>,
}

impl Incoming {
    /// Adds `bytes` just read: the head and what followed it once its blank line is in,
    /// `TooLong` once `MAX_HEAD` bytes hold none, None while more may complete it. Once
    /// it has answered, it is not asked again.
    pub fn push(&mut self, bytes: &[u8]) -> Option<Result<Head, HeadError>> {
        let searched = self.buf.len().saturating_sub(2);
        self.buf.extend_from_slice(bytes);
        if let Some(end) = head_end(&self.buf, searched) {
            if end > MAX_HEAD {
                return Some(Err(HeadError::TooLong));
            }
            let rest = self.buf.split_off(end);
            let head = std::mem::take(&mut self.buf);
            return Some(Ok(Head { head, rest }));
        }
        (self.buf.len() >= MAX_HEAD).then_some(Err(HeadError::TooLong))
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
    // httparse passes bytes 0x80 and up (obs-text) through as opaque; mcpd sends the head
    // on, and a server could read such bytes in an encoding of its own, so the whole head
    // must be UTF-8 without a C1 control (httparse refuses the C0 ones and DEL).
    let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8")?;
    if text
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\t' | '\r' | '\n'))
    {
        return Err("the request head has a control character");
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(head) {
        // The blank line `Incoming` found is the one httparse ends at; it can only
        // differ when the head is nothing but blank lines.
        Ok(httparse::Status::Complete(n)) if n == head.len() => {}
        Ok(_) => return Err("the request head has no request line"),
        Err(e) => return Err(syntax(e)),
    }
    let (Some(method), Some(uri), Some(minor)) = (request.method, request.path, request.version)
    else {
        // A complete parse sets all three.
        return Err("the request line is not METHOD TARGET VERSION");
    };
    let version = if minor == 0 { "HTTP/1.0" } else { "HTTP/1.1" };
    if method == "CONNECT" {
        // The client's Host header, if any, is not read: CONNECT's target is the one
        // place a tunnel's host is named (RFC 9110, 9.3.6).
        return Ok(Request::Connect(authority(uri, None)?));
    }
    let Some(rest) = strip_prefix_ignore_case(uri, "http://") else {
        return Err("not a proxy request: send CONNECT host:port, or an absolute http:// URL");
    };
    // The authority ends at the path, the query or the fragment (RFC 3986, 3.2); a
    // fragment is never sent, so one is refused wherever it stands.
    if rest.contains('#') {
        return Err("the URL has a fragment");
    }
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (auth, path) = rest.split_at_checked(split).unwrap_or((rest, ""));
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
    // The Host the upstream sees is the URL's authority, the one the rules allowed, never
    // the client's own Host header (which could name another site behind the same
    // address): a proxy replaces Host with the target's (RFC 9112, 3.2.2), so the two are
    // never compared, and no Host header of the client's is sent on.
    out.push_str("\r\nHost: ");
    out.push_str(auth.to_ascii_lowercase().as_str());
    out.push_str("\r\n");
    for header in request.headers.iter() {
        if DROPPED.iter().any(|d| header.name.eq_ignore_ascii_case(d)) {
            continue;
        }
        // A slice of the UTF-8 head cut at ASCII bytes, so UTF-8 itself.
        let value =
            std::str::from_utf8(header.value).map_err(|_| "the request head is not UTF-8")?;
        out.push_str(header.name);
        out.push_str(": ");
        out.push_str(value);
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

/// What a refusal by httparse says.
fn syntax(error: httparse::Error) -> &'static str {
    match error {
        httparse::Error::Token => "the request line is not METHOD TARGET VERSION",
        httparse::Error::Version => "the request line does not end in HTTP/1.0 or HTTP/1.1",
        httparse::Error::HeaderName => "a header line has no name and colon",
        httparse::Error::HeaderValue => "a header value has a control character or a bare CR",
        httparse::Error::NewLine => "a line of the request head ends in a bare CR",
        httparse::Error::TooManyHeaders => TOO_MANY_HEADERS,
        // Only a response's status line causes this one.
        httparse::Error::Status => "the request head is malformed",
    }
}

/// `host:port` (or `host` when `default` gives the port), the host a name, an IPv4
/// address or an IPv6 address in brackets: RFC 3986's authority without user
/// information, and with only the hosts `host.rs` reads, the form rules are written in.
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

#[cfg(test)]
mod tests;
