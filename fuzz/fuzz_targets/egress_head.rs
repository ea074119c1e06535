//! Fuzz target: the egress proxy's request head as a confined server sends it, cut from the bytes as they arrive (`Incoming`) and parsed (`parse_head`), checked against httparse and the `http` crate's URI parser on their own.
//!
//! The first input byte picks how the rest arrives (pieces of 1 to 64 bytes); the rest is
//! what the server sends. Whenever mcpd accepts a head, the references must agree with
//! it: httparse alone, on the whole input, ends the head where mcpd cut it and reads the
//! same method, target and headers; the host and port mcpd will judge and connect to are
//! the ones `http::uri::Authority` reads in the request's target; and the head sent on
//! for plain HTTP is one complete request to that same host, carrying the client's
//! headers but none addressed to the proxy. Work is bounded: `Incoming` keeps at most
//! `MAX_HEAD` bytes and looks at each byte once, and CI runs the target with a timeout.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpd::fuzzing::{Host, Incoming, MAX_HEAD, MAX_HEADERS, Request, Target, parse_head};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Headers the reference parser makes room for: more than mcpd allows, so that a head
/// mcpd refuses for its count is still read by the reference.
const ROOM: usize = 4 * MAX_HEADERS;
/// Header names the head sent on never carries from the client (mcpd sets Host and
/// Connection itself, once each).
const PROXY_ONLY: [&str; 5] = [
    "proxy-authorization",
    "proxy-connection",
    "host",
    "connection",
    "keep-alive",
];

fuzz_target!(|data: &[u8]| {
    let Some((&first, input)) = data.split_first() else {
        return;
    };
    let size = usize::from(first % 64) + 1;
    let whole = Incoming::default().push(input);
    let in_pieces = arrive_in_pieces(input, size);
    match (&whole, &in_pieces) {
        (None, None) => {}
        (Some(Ok(a)), Some(Ok(b))) => {
            assert_eq!(
                a.head, b.head,
                "the head is cut in the same place in pieces"
            );
            assert_eq!(a.rest, b.rest, "and what follows it is the same");
        }
        (Some(Err(a)), Some(Err(b))) => assert_eq!(a, b),
        (a, b) => panic!("whole: {a:?}, in pieces of {size}: {b:?}"),
    }
    match whole {
        Some(Ok(head)) => {
            assert!(head.head.len() <= MAX_HEAD);
            assert_eq!([head.head.as_slice(), &head.rest].concat(), input);
            if let Ok(request) = parse_head(&head.head) {
                check_accepted(input, &head.head, &request);
            }
        }
        Some(Err(_)) => assert!(
            input.len() >= MAX_HEAD,
            "refused as too long under the limit"
        ),
        None => assert!(
            input.len() < MAX_HEAD,
            "{} bytes and no answer",
            input.len()
        ),
    }
});

/// `Incoming` fed `input` in pieces of `size`; a head's rest gets the pieces not yet read.
fn arrive_in_pieces(
    input: &[u8],
    size: usize,
) -> Option<Result<mcpd::fuzzing::Head, mcpd::fuzzing::HeadError>> {
    let mut incoming = Incoming::default();
    let mut pieces = input.chunks(size);
    for piece in pieces.by_ref() {
        if let Some(done) = incoming.push(piece) {
            return Some(done.map(|mut head| {
                head.rest.extend(pieces.flatten());
                head
            }));
        }
    }
    None
}

/// What must hold of a head mcpd accepted (`head`, the start of `input`).
fn check_accepted(input: &[u8], head: &[u8], request: &Request) {
    let text = std::str::from_utf8(head).expect("an accepted head is UTF-8");
    assert!(
        !text
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\t' | '\r' | '\n')),
        "an accepted head has no control character: {text:?}"
    );
    let mut headers = [httparse::EMPTY_HEADER; ROOM];
    let mut reference = httparse::Request::new(&mut headers);
    let end = reference.parse(input);
    assert_eq!(
        end,
        Ok(httparse::Status::Complete(head.len())),
        "httparse ends the head where mcpd cut it: {text:?}"
    );
    assert!(reference.headers.len() <= MAX_HEADERS);
    let method = reference.method.expect("complete");
    let uri = reference.path.expect("complete");
    let version = reference.version.expect("complete");
    match request {
        Request::Connect(target) => {
            assert_eq!(method, "CONNECT");
            let named = authority(uri, None).unwrap_or_else(|| panic!("no authority in {uri:?}"));
            assert_same(target, &named, uri);
        }
        Request::Forward { target, head: out } => {
            assert_ne!(method, "CONNECT");
            let scheme = uri.get(..7).map(str::to_ascii_lowercase);
            assert_eq!(scheme.as_deref(), Some("http://"), "{uri:?}");
            let rest = uri.get(7..).unwrap_or_default();
            // RFC 3986, 3.2: the authority runs to the first `/`, `?` or `#`.
            let at = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let (auth, path) = rest.split_at(at);
            assert!(!path.contains('#'), "a fragment is never sent on: {uri:?}");
            let named =
                authority(auth, Some(80)).unwrap_or_else(|| panic!("no authority in {uri:?}"));
            assert_same(target, &named, uri);
            let origin = if path.starts_with('/') {
                path.to_owned()
            } else {
                format!("/{path}")
            };
            let kept: Vec<(&str, &[u8])> = reference
                .headers
                .iter()
                .filter(|h| !PROXY_ONLY.iter().any(|d| h.name.eq_ignore_ascii_case(d)))
                .map(|h| (h.name, h.value))
                .collect();
            check_forwarded(out, method, &origin, version, target, &kept);
        }
    }
}

/// The head sent on: one complete request, read by httparse, with the client's method,
/// the origin-form of its URL, its version, then `Host` naming `target`, the client's
/// `kept` headers as they were, and `Connection: close`.
fn check_forwarded(
    out: &[u8],
    method: &str,
    origin: &str,
    version: u8,
    target: &Target,
    kept: &[(&str, &[u8])],
) {
    let shown = String::from_utf8_lossy(out);
    let mut headers = [httparse::EMPTY_HEADER; ROOM];
    let mut sent = httparse::Request::new(&mut headers);
    assert_eq!(
        sent.parse(out),
        Ok(httparse::Status::Complete(out.len())),
        "the head sent on is one whole request: {shown:?}"
    );
    assert_eq!(sent.method, Some(method), "{shown:?}");
    assert_eq!(sent.path, Some(origin), "{shown:?}");
    assert_eq!(sent.version, Some(version), "{shown:?}");
    let (host, middle, last) = match sent.headers {
        [host, middle @ .., last] => (host, middle, last),
        _ => panic!("no Host and Connection: {shown:?}"),
    };
    assert!(host.name == "Host", "{shown:?}");
    let host_value = std::str::from_utf8(host.value).expect("UTF-8");
    let named = authority(host_value, Some(80)).expect("the Host sent on is an authority");
    assert_same(target, &named, host_value);
    assert!(
        last.name == "Connection" && last.value == b"close",
        "{shown:?}"
    );
    let middle: Vec<(&str, &[u8])> = middle.iter().map(|h| (h.name, h.value)).collect();
    assert_eq!(
        middle, kept,
        "the client's own headers, as they were: {shown:?}"
    );
}

/// Host and port as `http::uri::Authority` reads `text`, the port `default` when it names
/// none; None when it reads none.
fn authority(text: &str, default: Option<u16>) -> Option<(String, u16)> {
    let parsed: http::uri::Authority = text.parse().ok()?;
    let port = parsed.port_u16().or(default)?;
    Some((parsed.host().to_owned(), port))
}

/// mcpd's target is the host and port the reference read in `what`: an IP literal the
/// same address, a name the same name once lowercased and without a trailing dot.
fn assert_same(target: &Target, named: &(String, u16), what: &str) {
    let (host, port) = named;
    assert_eq!(target.port, *port, "port of {what:?}");
    let same = match &target.host {
        Host::Ip(IpAddr::V6(ip)) => {
            host.strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .and_then(|h| h.parse::<Ipv6Addr>().ok())
                == Some(*ip)
        }
        Host::Ip(IpAddr::V4(ip)) => host.parse::<Ipv4Addr>().ok() == Some(*ip),
        Host::Name(name) => {
            let lower = host.to_ascii_lowercase();
            host.parse::<Ipv4Addr>().is_err()
                && !host.starts_with('[')
                && lower.strip_suffix('.').unwrap_or(&lower) == name
        }
    };
    assert!(same, "mcpd reads {target} in {what:?}, http reads {host:?}");
}
