//! Tests of the proxy over real loopback sockets.
//!
//! Tunnels and plain HTTP through listed hosts, refusals of everything else, the
//! connection cap, and stopping.

use super::*;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::timeout;

/// Every wait in these tests ends by this deadline, so a failure fails instead of hanging.
const DEADLINE: Duration = Duration::from_secs(10);
const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";

/// A server on loopback that sends back every byte it receives, on every connection.
async fn echo() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    mcpd_runtime::tracker::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            mcpd_runtime::tracker::spawn(async move {
                let (mut r, mut w) = stream.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    port
}

/// A loopback port nothing listens on.
async fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

struct Running {
    addr: SocketAddr,
    cancel: CancellationToken,
    done: JoinHandle<()>,
}

/// The proxy for server "demo" with `entries` as its network list.
async fn proxy(entries: &[String], resolver: Resolver) -> Running {
    let rules = entries
        .iter()
        .map(|e| HostRule::parse(e).unwrap())
        .collect();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cancel = CancellationToken::new();
    let proxy = Proxy::new(Arc::new(Allow::new(rules)), "demo".to_owned(), resolver);
    let done = mcpd_runtime::tracker::spawn(serve_with(listener, proxy, cancel.clone()));
    Running { addr, cancel, done }
}

/// Sends `request` on a new connection to the proxy, ends the sending side, and returns
/// everything the proxy answers until it closes.
async fn ask(proxy: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(request).await.unwrap();
    s.shutdown().await.unwrap();
    let mut answer = Vec::new();
    timeout(DEADLINE, s.read_to_end(&mut answer))
        .await
        .expect("the proxy answers and closes")
        .unwrap();
    String::from_utf8(answer).unwrap()
}

async fn read_exactly(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut buf = vec![0; n];
    timeout(DEADLINE, s.read_exact(&mut buf))
        .await
        .expect("the bytes arrive")
        .unwrap();
    buf
}

#[tokio::test]
async fn connect_to_a_listed_address_tunnels_bytes_both_ways_with_pipelined_ones_first() {
    let port = echo().await;
    let p = proxy(&[format!("127.0.0.1:{port}")], Resolver::System).await;
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    let head = format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\nearly");
    s.write_all(head.as_bytes()).await.unwrap();
    assert_eq!(read_exactly(&mut s, ESTABLISHED.len()).await, ESTABLISHED);
    assert_eq!(read_exactly(&mut s, 5).await, b"early");
    let big = vec![7u8; 256 * 1024];
    let (mut r, mut w) = s.split();
    let (sent, got) = tokio::join!(w.write_all(&big), async {
        let mut back = vec![0; big.len()];
        timeout(DEADLINE, r.read_exact(&mut back))
            .await
            .unwrap()
            .map(|_| back)
    });
    sent.unwrap();
    assert!(got.unwrap() == big, "the echo comes back whole");
}

#[tokio::test]
async fn localhost_named_on_the_list_reaches_loopback() {
    let port = echo().await;
    let p = proxy(&[format!("localhost:{port}")], Resolver::System).await;
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    let head = format!("CONNECT LocalHost.:{port} HTTP/1.1\r\n\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    assert_eq!(read_exactly(&mut s, ESTABLISHED.len()).await, ESTABLISHED);
    s.write_all(b"ping").await.unwrap();
    assert_eq!(read_exactly(&mut s, 4).await, b"ping");
}

#[tokio::test]
async fn hosts_and_ports_off_the_list_are_forbidden_naming_the_server() {
    let port = echo().await;
    let p = proxy(
        &[format!("127.0.0.1:{port}"), format!("localhost:{port}")],
        Resolver::System,
    )
    .await;
    let other = closed_port().await;
    for (target, shown) in [
        (format!("127.0.0.1:{other}"), format!("127.0.0.1:{other}")),
        ("evil.example:443".to_owned(), "evil.example:443".to_owned()),
        (
            "EVIL.example.:443".to_owned(),
            "evil.example:443".to_owned(),
        ),
        (format!("[::1]:{port}"), format!("[::1]:{port}")),
        (format!("127.0.0.2:{port}"), format!("127.0.0.2:{port}")),
        (
            format!("[::ffff:127.0.0.1]:{port}"),
            format!("[::ffff:127.0.0.1]:{port}"),
        ),
    ] {
        let answer = ask(
            p.addr,
            format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes(),
        )
        .await;
        assert!(
            answer.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "{target}: {answer}"
        );
        assert!(answer.contains("Connection: close\r\n"), "{answer}");
        assert!(answer.contains("Content-Type: text/plain"), "{answer}");
        let body = format!("mcpd: \"{shown}\" is not on the network list of server \"demo\"\n");
        assert!(answer.ends_with(&body), "{target}: {answer}");
    }
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_forbidden_unless_it_is_localhost() {
    let port = echo().await;
    let resolver = Resolver::Fixed(vec![
        ("evil.example", "127.0.0.1".parse().unwrap()),
        ("a.evil.example", "::1".parse().unwrap()),
        ("meta.example", "169.254.169.254".parse().unwrap()),
        ("lan.example", "::ffff:192.168.1.1".parse().unwrap()),
    ]);
    let p = proxy(
        &[
            format!("evil.example:{port}"),
            format!("*.evil.example:{port}"),
            "meta.example".to_owned(),
            "lan.example".to_owned(),
        ],
        resolver,
    )
    .await;
    for target in [
        format!("evil.example:{port}"),
        format!("a.evil.example:{port}"),
        "meta.example:80".to_owned(),
        "lan.example:443".to_owned(),
    ] {
        let answer = ask(
            p.addr,
            format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes(),
        )
        .await;
        assert!(
            answer.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "{target}: {answer}"
        );
        assert!(
            answer.contains(&format!("\"{target}\" resolves only to private")),
            "{answer}"
        );
    }
    // The same through plain HTTP.
    let get = format!("GET http://evil.example:{port}/ HTTP/1.1\r\n\r\n");
    assert!(
        ask(p.addr, get.as_bytes())
            .await
            .starts_with("HTTP/1.1 403")
    );
}

#[tokio::test]
async fn a_listed_host_that_cannot_be_reached_or_resolved_gets_a_bad_gateway() {
    let port = closed_port().await;
    let p = proxy(
        &[format!("127.0.0.1:{port}"), "nowhere.example".to_owned()],
        Resolver::Fixed(Vec::new()),
    )
    .await;
    let answer = ask(
        p.addr,
        format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(
        answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
        "{answer}"
    );
    assert!(
        answer.contains(&format!("\"127.0.0.1:{port}\": cannot connect")),
        "{answer}"
    );
    let answer = ask(p.addr, b"CONNECT nowhere.example:443 HTTP/1.1\r\n\r\n").await;
    assert!(
        answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
        "{answer}"
    );
    assert!(
        answer.contains("\"nowhere.example:443\": it has no address"),
        "{answer}"
    );
}

/// A log writer that keeps what it is given.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

#[tokio::test]
async fn refusals_are_warned_of_twenty_times_then_logged_at_debug_level() {
    let log = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(log.clone())
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .finish();
    // The test's runtime has one thread, so every connection task logs through this.
    let _guard = tracing::subscriber::set_default(subscriber);
    let p = proxy(&["example.com".to_owned()], Resolver::System).await;
    for _ in 0..tunnel::MAX_WARNINGS + 5 {
        let answer = ask(p.addr, b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    }
    p.cancel.cancel();
    timeout(DEADLINE, p.done).await.unwrap().unwrap();
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let count = |level: &str| {
        text.lines()
            .filter(|l| l.contains(level) && l.contains("\"evil.example:443\" is not on"))
            .count()
    };
    assert_eq!(count(" WARN "), tunnel::MAX_WARNINGS, "{text}");
    assert_eq!(count("DEBUG "), 5, "{text}");
    assert!(text.contains("upstream=demo"), "{text}");
    assert!(text.contains("host=evil.example:443"), "{text}");
    assert_eq!(
        text.matches("further ones are logged at debug level")
            .count(),
        1
    );
}

#[tokio::test]
async fn a_plain_http_request_is_sent_on_in_origin_form_without_proxy_headers() {
    let port = echo().await;
    let p = proxy(&[format!("127.0.0.1:{port}")], Resolver::System).await;
    let request = format!(
        "POST http://127.0.0.1:{port}/path?q=1 HTTP/1.1\r\nHost: elsewhere.example\r\n\
         Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\
         Content-Length: 4\r\n\r\nbody"
    );
    let seen = ask(p.addr, request.as_bytes()).await;
    assert_eq!(
        seen,
        format!(
            "POST /path?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 4\r\n\
             Connection: close\r\n\r\nbody"
        )
    );
}

#[tokio::test]
async fn garbage_and_origin_form_requests_are_bad_requests() {
    let p = proxy(&["example.com".to_owned()], Resolver::System).await;
    for request in [
        &b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"[..],
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n",
        b"hello\n\n",
        b"CONNECT example.com:443 HTTP/1.1\r\nX: \xff\xfe\r\n\r\n",
        b"CONNECT https://example.com:443 HTTP/1.1\r\n\r\n",
    ] {
        let answer = ask(p.addr, request).await;
        assert!(
            answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{request:?}: {answer}"
        );
    }
    // A head that ends before its blank line gets no answer: nobody waits for one.
    assert_eq!(
        ask(p.addr, b"CONNECT example.com:443 HTTP/1.1\r\n").await,
        ""
    );
}

#[tokio::test]
async fn an_oversized_head_is_a_bad_request() {
    let p = proxy(&["example.com".to_owned()], Resolver::System).await;
    let mut request = b"CONNECT example.com:443 HTTP/1.1\r\n".to_vec();
    for i in 0..300 {
        request.extend_from_slice(format!("X-Filler-{i}: {}\r\n", "y".repeat(20)).as_bytes());
    }
    request.extend_from_slice(b"\r\n");
    assert!(request.len() > request::MAX_HEAD);
    let answer = ask(p.addr, &request).await;
    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    assert!(answer.contains("over 8192 bytes"), "{answer}");
}

#[tokio::test]
async fn cancelling_ends_open_tunnels_and_serve_returns() {
    let port = echo().await;
    let p = proxy(&[format!("127.0.0.1:{port}")], Resolver::System).await;
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    s.write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nx").as_bytes())
        .await
        .unwrap();
    assert_eq!(
        read_exactly(&mut s, ESTABLISHED.len() + 1).await.last(),
        Some(&b'x')
    );
    // A second connection still sending its head.
    let mut idle = TcpStream::connect(p.addr).await.unwrap();
    idle.write_all(b"CONNECT 127.0.0.1").await.unwrap();
    p.cancel.cancel();
    timeout(DEADLINE, p.done)
        .await
        .expect("serve returns once cancelled")
        .unwrap();
    for stream in [&mut s, &mut idle] {
        let mut rest = Vec::new();
        let end = timeout(DEADLINE, stream.read_to_end(&mut rest))
            .await
            .expect("the proxy closed the connection");
        assert!(end.is_err() || rest.is_empty(), "{rest:?}");
    }
    // The listener is gone with it.
    assert!(TcpStream::connect(p.addr).await.is_err());
}

#[tokio::test]
async fn past_the_connection_cap_the_next_client_waits_until_one_closes() {
    let port = echo().await;
    let p = proxy(&[format!("127.0.0.1:{port}")], Resolver::System).await;
    let mut open = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        let mut s = TcpStream::connect(p.addr).await.unwrap();
        s.write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        assert_eq!(read_exactly(&mut s, ESTABLISHED.len()).await, ESTABLISHED);
        open.push(s);
    }
    let mut waiting = TcpStream::connect(p.addr).await.unwrap();
    waiting
        .write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut first = [0u8; 1];
    assert!(
        timeout(Duration::from_millis(300), waiting.read(&mut first))
            .await
            .is_err(),
        "no answer while every permit is taken"
    );
    drop(open.pop());
    assert_eq!(
        read_exactly(&mut waiting, ESTABLISHED.len()).await,
        ESTABLISHED
    );
    p.cancel.cancel();
    timeout(DEADLINE, p.done).await.unwrap().unwrap();
}
