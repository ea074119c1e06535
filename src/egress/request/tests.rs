//! Tests of the head reader and parser.
//!
//! Where a head ends, the two request forms, the rewritten head of plain HTTP, and
//! refusals of everything else.

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
    // The space around a header value is not part of it (RFC 9110, 5.5): what goes on
    // is the value httparse read.
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
         X-Long: spaced\tvalue\r\nConnection: close\r\n\r\n"
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
        b"CONNECT a.example:443 HTTP/1.1\r\nX : a\r\n\r\n",
        b"CONNECT a.example:443 HTTP/1.1\r\nX: a\xc2\x85b\r\n\r\n",
        b"CONNECT\ta.example:443 HTTP/1.1\r\n\r\n",
        b"CONNECT a.example:443 HTTP/1.1\r\r\n\r\n",
        b"GET http://a.example/\xc2\x9b HTTP/1.1\r\n\r\n",
        b"GET http://a.example#/ HTTP/1.1\r\n\r\n",
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

#[test]
fn a_head_has_at_most_max_headers_header_lines() {
    let head = |n: usize| {
        let lines: String = (0..n).map(|i| format!("X-{i}: y\r\n")).collect();
        format!("GET http://a.example/ HTTP/1.1\r\n{lines}\r\n")
    };
    let Ok(Request::Forward { head: out, .. }) = parse(head(MAX_HEADERS).as_bytes()) else {
        panic!("{MAX_HEADERS} header lines are refused");
    };
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains(&format!("X-{}: y\r\n", MAX_HEADERS - 1)),
        "{out}"
    );
    assert_eq!(
        parse(head(MAX_HEADERS + 1).as_bytes()),
        Err(TOO_MANY_HEADERS)
    );
    assert!(TOO_MANY_HEADERS.contains(&format!(" {MAX_HEADERS} ")));
}

#[test]
fn a_head_arriving_in_pieces_is_cut_where_the_whole_is() {
    let input = b"GET http://a/ HTTP/1.1\r\nX: y\r\n\r\nbody";
    for size in 1..input.len() {
        let mut incoming = Incoming::default();
        let mut got = None;
        let mut pieces = input.chunks(size);
        for piece in pieces.by_ref() {
            got = incoming.push(piece);
            if got.is_some() {
                break;
            }
        }
        let Some(Ok(mut head)) = got else {
            panic!("{size}: {got:?}");
        };
        head.rest.extend(pieces.flatten());
        assert_eq!(head.head, &input[..input.len() - 4], "{size}");
        assert_eq!(head.rest, b"body", "{size}");
    }
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
