//! The HTTP listener's edge against the real daemon, over raw TCP.
//!
//! Refusals before any body is read, the header and idle timeouts, the connection cap.

use crate::support::*;
use serde_json::json;
use std::collections::HashSet;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A refusal must come at once: well before any header or body timeout could fire.
const AT_ONCE: Duration = Duration::from_secs(5);

/// A daemon with the HTTP listener on a free port and these `[daemon]` lines; returns it
/// with the listener's `host:port`.
async fn daemon(lines: &[&str]) -> (Daemon, String) {
    let mut b = DaemonBuilder::new().daemon("http_listen = \"127.0.0.1:0\"");
    for l in lines {
        b = b.daemon(l);
    }
    let d = b.fixture("fx", &[]).start().await;
    d.wait_ready().await;
    let url = d.status().await["daemon"]["http"]
        .as_str()
        .expect("status names the HTTP URL")
        .to_owned();
    let addr = url
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix("/mcp"))
        .expect("an http://HOST:PORT/mcp URL")
        .to_owned();
    (d, addr)
}

async fn token(d: &Daemon) -> String {
    let (code, out, err) = d.run_cli(&["ctl", "http-token"]).await;
    assert_eq!(code, 0, "ctl http-token: {err}");
    out.trim().to_owned()
}

/// Reads until the end of a response head; returns it.
async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(0) | Err(_) => break,
            Ok(_) => head.push(byte[0]),
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// Reads until mcpd closes the connection; returns everything it sent.
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut all = Vec::new();
    // A reset counts as closed too.
    let _ = stream.read_to_end(&mut all).await;
    String::from_utf8_lossy(&all).into_owned()
}

/// An initialize request from a well-behaved, authenticated client.
async fn initialize(addr: &str, token: &str) -> u16 {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "edge-test", "version": "1"}}});
    http_client()
        .post(format!("http://{addr}/mcp"))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("the initialize POST is answered")
        .status()
        .as_u16()
}

/// The TCP connections mcpd has accepted and still holds (its listening socket aside):
/// its socket descriptors that appear in the kernel's TCP tables in a state other than
/// LISTEN.
fn accepted_connections(pid: u32) -> usize {
    let mut inodes = HashSet::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for row in text.lines().skip(1) {
            let cols: Vec<&str> = row.split_whitespace().collect();
            if let (Some(state), Some(inode)) = (cols.get(3), cols.get(9))
                && *state != "0A"
            {
                inodes.insert((*inode).to_owned());
            }
        }
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .filter(|inode| inodes.contains(inode))
        .count()
}

#[tokio::test]
async fn unauthenticated_requests_are_refused_before_their_body_is_read() {
    let (d, addr) = daemon(&[]).await;
    let port = addr.rsplit_once(':').map(|(_, p)| p).expect("a port");
    // A large body announced and never sent: mcpd must answer from the head alone.
    for (headers, expected) in [
        (format!("Host: 127.0.0.1:{port}\r\n"), "HTTP/1.1 401"),
        (
            format!("Host: 127.0.0.1:{port}\r\nAuthorization: Bearer wrong-token-wrong-token\r\n"),
            "HTTP/1.1 401",
        ),
        ("Host: evil.example.com\r\n".to_owned(), "HTTP/1.1 403"),
        (
            format!("Host: 127.0.0.1:{port}\r\nOrigin: http://evil.example.com\r\n"),
            "HTTP/1.1 403",
        ),
    ] {
        let mut s = TcpStream::connect(&addr).await.expect("connect");
        let head = format!(
            "POST /mcp HTTP/1.1\r\n{headers}Content-Type: application/json\r\n\
             Content-Length: 10000000\r\n\r\n"
        );
        s.write_all(head.as_bytes()).await.expect("send the head");
        let got = tokio::time::timeout(AT_ONCE, read_head(&mut s))
            .await
            .unwrap_or_else(|_| panic!("no answer to an unread body ({headers:?})"));
        assert!(got.starts_with(expected), "{headers:?}: {got}");
        // The body was never read, so the connection cannot carry another request.
        tokio::time::timeout(AT_ONCE, read_to_close(&mut s))
            .await
            .unwrap_or_else(|_| panic!("the connection stays open ({headers:?})"));
    }
    // A head too long to be any client's is refused too, and not buffered whole.
    let mut s = TcpStream::connect(&addr).await.expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Pad: {}\r\n\r\n",
        "x".repeat(100 * 1024)
    );
    // mcpd may close before taking all of it.
    let _ = s.write_all(head.as_bytes()).await;
    let got = tokio::time::timeout(AT_ONCE, read_to_close(&mut s))
        .await
        .expect("an over-long head ends the connection");
    // Closing with the rest of the head unread resets the connection, which may discard
    // the 431 before it is read; what does arrive must be the 431.
    assert!(got.is_empty() || got.starts_with("HTTP/1.1 431"), "{got}");
    // An authenticated client is still served.
    assert_eq!(initialize(&addr, &token(&d).await).await, 200);
}

#[tokio::test]
async fn stalled_and_idle_connections_are_closed_after_the_header_timeout() {
    let (d, addr) = daemon(&["http_header_timeout = \"500ms\""]).await;
    // Part of a request line, then nothing.
    let mut stalled = TcpStream::connect(&addr).await.expect("connect");
    stalled
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0")
        .await
        .expect("send part of a head");
    let started = tokio::time::Instant::now();
    let sent = within(
        "mcpd closes the stalled connection",
        read_to_close(&mut stalled),
    )
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "closed before the timeout: {sent:?}"
    );
    // A connection that got its answer and then sends nothing more is closed too.
    let mut idle = TcpStream::connect(&addr).await.expect("connect");
    idle.write_all(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .expect("send a request");
    let sent = within("mcpd closes the idle connection", read_to_close(&mut idle)).await;
    assert!(sent.starts_with("HTTP/1.1 401"), "{sent}");
    // A connection that never sends a byte.
    let mut silent = TcpStream::connect(&addr).await.expect("connect");
    let sent = within(
        "mcpd closes the silent connection",
        read_to_close(&mut silent),
    )
    .await;
    assert!(
        sent.is_empty() || sent.starts_with("HTTP/1.1 408"),
        "{sent}"
    );
    assert_eq!(initialize(&addr, &token(&d).await).await, 200);
}

#[tokio::test]
async fn idle_connections_beyond_the_cap_wait_and_cannot_shut_out_a_client() {
    // A long header timeout: only closing the idle connections frees the cap.
    let (d, addr) = daemon(&["http_max_connections = 4", "http_header_timeout = \"60s\""]).await;
    let token = token(&d).await;
    let mut idle = Vec::new();
    for _ in 0..12 {
        idle.push(TcpStream::connect(&addr).await.expect("connect"));
    }
    let pid = d.pid();
    let mut most = 0;
    eventually("mcpd holds its 4 connections", WAIT, || {
        let n = accepted_connections(pid);
        most = most.max(n);
        async move { (n == 4).then_some(()) }
    })
    .await;
    let client = tokio::spawn({
        let (addr, token) = (addr.clone(), token.clone());
        async move { initialize(&addr, &token).await }
    });
    assert!(accepted_connections(pid) <= 4);
    drop(idle);
    let status = within("the waiting client is served", client)
        .await
        .expect("the client task");
    assert_eq!(status, 200);
    assert!(most <= 4, "mcpd held {most} connections");
    let (code, out, err) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0, "{out} {err}");
    assert!(alive(pid));
}

#[tokio::test]
async fn idle_connections_that_time_out_free_the_cap_for_a_client() {
    let (d, addr) = daemon(&["http_max_connections = 4", "http_header_timeout = \"1s\""]).await;
    let token = token(&d).await;
    // Held open, never written to: only the header timeout ends them.
    let mut idle = Vec::new();
    for _ in 0..12 {
        idle.push(TcpStream::connect(&addr).await.expect("connect"));
    }
    let pid = d.pid();
    let mut client = tokio::spawn({
        let (addr, token) = (addr.clone(), token.clone());
        async move { initialize(&addr, &token).await }
    });
    // The client queues behind the idle connections, which time out four at a time.
    let mut most = 0;
    let status = within("the client is served", async {
        loop {
            most = most.max(accepted_connections(pid));
            tokio::select! {
                r = &mut client => break r.expect("the client task"),
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
    })
    .await;
    assert_eq!(status, 200);
    assert!(most <= 4, "mcpd held {most} connections");
    let (code, out, err) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0, "{out} {err}");
    assert!(alive(pid));
    drop(idle);
}

#[tokio::test]
async fn calls_and_streams_in_flight_outlast_the_header_timeout() {
    let (d, addr) = daemon(&["http_header_timeout = \"300ms\""]).await;
    let (url, token) = (format!("http://{addr}/mcp"), token(&d).await);
    let client = http_client();
    let post = |session: Option<&str>, body: serde_json::Value| {
        let mut r = client
            .post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(body.to_string());
        if let Some(s) = session {
            r = r.header("mcp-session-id", s);
        }
        r.send()
    };
    let init = post(
        None,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "edge-test", "version": "1"}}}),
    )
    .await
    .expect("initialize");
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .expect("a visible session id")
        .to_owned();
    let r = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await
    .expect("initialized");
    assert_eq!(r.status().as_u16(), 202);
    let mut stream = client
        .get(&url)
        .bearer_auth(&token)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .expect("the GET stream");
    assert_eq!(stream.status().as_u16(), 200);

    // A call that takes five header timeouts gets its answer.
    let r = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "fx__sleep", "arguments": {"ms": 1500}}}),
    )
    .await
    .expect("the slow call is answered");
    assert_eq!(r.status().as_u16(), 200);
    let reply: serde_json::Value =
        serde_json::from_str(&r.text().await.expect("body")).expect("JSON");
    assert!(reply.get("result").is_some(), "{reply}");

    // The GET stream, open all that time, still carries the session's messages: a JSON-only
    // call's progress goes there.
    let r = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "fx__progress", "arguments": {"steps": 1, "ms": 1},
            "_meta": {"progressToken": "p"}}}),
    )
    .await
    .expect("the progress call");
    assert_eq!(r.status().as_u16(), 200);
    let mut seen = String::new();
    within("progress on the GET stream", async {
        while !seen.contains("notifications/progress") {
            let chunk = stream.chunk().await.expect("the stream stays open");
            seen.push_str(&String::from_utf8_lossy(&chunk.expect("a chunk")));
        }
    })
    .await;
}
