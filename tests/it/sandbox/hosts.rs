//! The sandbox's host lists and Unix sockets (issue #41).
//!
//! A server with `network = [hosts]` reaches a listed host through mcpd's proxy and
//! nothing else, through or around it (its own network namespace); without user
//! namespaces the list holds by ports only and status says so; and a confined server
//! cannot connect to a pathname Unix socket (the session bus, an agent's socket) unless
//! its profile allows Unix sockets.

use crate::projects::instances::row;
use crate::sandbox::escapes::*;
use crate::support::*;
use serde_json::{Value, json};

/// A TCP server on loopback that answers each line with `echo: LINE`; its port.
async fn line_echo() -> u16 {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listen");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut lines = BufReader::new(read).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if write
                        .write_all(format!("echo: {line}\n").as_bytes())
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
            });
        }
    });
    port
}

/// [`pair`] plus `listed`, confined to `hosts` (TOML strings).
fn with_list(s: &Secrets, hosts: &[String]) -> DaemonBuilder {
    let list: Vec<String> = hosts.iter().map(|h| format!("{h:?}")).collect();
    pair(s).fixture_with(
        "listed",
        &["--tools", ESCAPE],
        &format!("[servers.listed.sandbox]\nnetwork = [{}]", list.join(", ")),
    )
}

/// Through the proxy: `ok: HTTP/1.1 200 …; answer: echo: LINE`, or `refused: STATUS`.
async fn through(a: &mut Agent, host: &str, port: u16, line: &str) -> String {
    let args = json!({"host": host, "port": port, "line": line});
    attempt(a, "listed", "try_proxy", args).await
}

fn tunnelled(r: &str, line: &str) -> bool {
    r.starts_with("ok: HTTP/1.1 200") && r.ends_with(&format!("answer: echo: {line}"))
}

#[tokio::test]
async fn a_host_list_lets_a_listed_host_through_the_proxy_and_nothing_else_through_or_around_it() {
    let s = secrets();
    let (listed, other) = (line_echo().await, line_echo().await);
    let d = with_list(
        &s,
        &[format!("127.0.0.1:{listed}"), format!("localhost:{listed}")],
    )
    .start()
    .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    for host in ["127.0.0.1", "localhost"] {
        let r = through(&mut a, host, listed, "hi").await;
        assert!(
            tunnelled(&r, "hi"),
            "a listed host ({host}:{listed}) is reached through the proxy: {r}"
        );
    }
    let r = through(&mut a, "127.0.0.1", other, "hi").await;
    assert!(
        r.starts_with("refused: HTTP/1.1 403"),
        "an unlisted port is refused by the proxy: {r}"
    );
    // Around the proxy: the unconfined server connects; the listed one has no route out
    // of its own network namespace, not even to the listed port.
    for port in [other, listed] {
        let what = format!("a direct TCP connection to 127.0.0.1:{port}");
        escape(
            &mut a,
            "listed",
            &what,
            "try_connect",
            json!({"host": "127.0.0.1", "port": port}),
            &["ECONNREFUSED", "ENETUNREACH", "EACCES", "EPERM"],
        )
        .await;
    }
}

#[tokio::test]
async fn the_proxy_answers_a_malformed_or_oversized_head_with_a_refusal_that_says_why() {
    let s = secrets();
    let listed = line_echo().await;
    let d = with_list(&s, &[format!("127.0.0.1:{listed}")])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let connect = format!("CONNECT 127.0.0.1:{listed} HTTP/1.1\r\n");
    let lines = |n: usize| (0..n).map(|i| format!("X-{i}: y\r\n")).collect::<String>();
    let refused = |why: &str| format!("refused: HTTP/1.1 400 Bad Request; mcpd: {why}");
    let cases = [
        // At the limits (64 header lines, 8 KiB), the head goes through.
        (
            format!("{connect}{}\r\n", lines(64)),
            "ok: HTTP/1.1 200 Connection established; answer: echo: hi".to_owned(),
        ),
        (
            format!(
                "{connect}X: {}\r\n\r\n",
                "y".repeat(8192 - connect.len() - 7)
            ),
            "ok: HTTP/1.1 200 Connection established; answer: echo: hi".to_owned(),
        ),
        (
            format!("{connect}{}\r\n", lines(65)),
            refused("the request head has over 64 header lines"),
        ),
        (
            format!(
                "{connect}X: {}\r\n\r\n",
                "y".repeat(8192 - connect.len() - 6)
            ),
            refused("the request head is over 8192 bytes"),
        ),
        (
            format!("{connect}X: a\rb\r\n\r\n"),
            refused("a header value has a control character or a bare CR"),
        ),
        (
            format!("{connect} folded: x\r\n\r\n"),
            refused("a header line has no name and colon"),
        ),
        (
            format!("CONNECT 127.0.0.1:{listed}  HTTP/1.1\r\n\r\n"),
            refused("the request line does not end in HTTP/1.0 or HTTP/1.1"),
        ),
        (
            format!("CONNECT 127.0.0.1:{listed} HTTP/1.1\r\nX: \u{85}\r\n\r\n"),
            refused("the request head has a control character"),
        ),
    ];
    for (head, want) in cases {
        let args = json!({"host": "127.0.0.1", "port": listed, "line": "hi", "head": head});
        let r = attempt(&mut a, "listed", "try_proxy", args).await;
        assert_eq!(r, want, "{} bytes: {:.80?}", head.len(), head);
    }
}

#[tokio::test]
async fn with_a_host_list_no_udp_datagram_leaves_the_servers_network() {
    let s = secrets();
    let listed = line_echo().await;
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = socket.local_addr().expect("addr").port();
    let d = with_list(&s, &[format!("127.0.0.1:{listed}")])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    // `listed` first: on loopback a datagram is queued as it is sent, so once the later
    // one has arrived, one from `listed` would have too.
    for name in ["listed", "open"] {
        let args = json!({"host": "127.0.0.1", "port": port, "text": format!("from {name}")});
        attempt(&mut a, name, "try_udp", args).await;
    }
    let mut buf = [0u8; 256];
    let (n, _) = within(
        "the unconfined server's datagram",
        socket.recv_from(&mut buf),
    )
    .await
    .expect("recv");
    assert_eq!(
        String::from_utf8_lossy(&buf[..n]),
        "from open",
        "only the unconfined server's datagram arrives (the listed one's would be first)"
    );
}

#[tokio::test]
async fn without_user_namespaces_a_host_list_holds_by_ports_only_and_status_says_so() {
    let s = secrets();
    let (listed, other) = (line_echo().await, line_echo().await);
    let d = with_list(&s, &[format!("127.0.0.1:{listed}")])
        .env("MCPD_USERNS", "0")
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let r = through(&mut a, "127.0.0.1", listed, "hi").await;
    assert!(
        tunnelled(&r, "hi"),
        "the listed host through the proxy: {r}"
    );
    let r = through(&mut a, "127.0.0.1", other, "hi").await;
    assert!(r.starts_with("refused: HTTP/1.1 403"), "unlisted: {r}");
    let what = format!("a direct TCP connection to an unlisted port ({other})");
    escape(
        &mut a,
        "listed",
        &what,
        "try_connect",
        json!({"host": "127.0.0.1", "port": other}),
        &["EACCES"],
    )
    .await;
    let args = json!({"host": "127.0.0.1", "port": other, "text": "x"});
    let udp = attempt(&mut a, "listed", "try_udp", args).await;
    assert!(udp.starts_with("err: EPERM"), "no UDP socket: {udp}");
    // What "ports only" means: a listed port is open on any host.
    let direct = attempt(
        &mut a,
        "listed",
        "try_connect",
        json!({"host": "127.0.0.1", "port": listed}),
    )
    .await;
    assert!(direct.starts_with("ok"), "ports only: {direct}");
    let (code, out, err) = d.run_cli(&["ctl", "status", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let st: Value = serde_json::from_str(&out).expect("status --json prints JSON");
    let r = row(&st, "listed").expect("listed");
    assert_eq!(r["sandbox"]["network"], "hosts", "{r}");
    assert!(
        r["sandbox"]["note"]
            .as_str()
            .is_some_and(|n| n.contains("ports only")),
        "status says the list holds by ports only: {r}"
    );
}

#[tokio::test]
async fn status_and_check_config_show_a_host_list_enforced_in_the_servers_own_network() {
    let s = secrets();
    let listed = line_echo().await;
    let b = with_list(&s, &[format!("127.0.0.1:{listed}"), "*.example.com".into()]);
    let config = b.dir().join("check.toml");
    std::fs::write(&config, b.config_text()).expect("config");
    let (code, out, err) = run_mcpd(
        &["check-config", "--config", config.to_str().expect("utf-8")],
        None,
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("network only 127.0.0.1:{listed}, *.example.com"))
            && out.contains("network namespace of the server's own"),
        "check-config names the hosts and how they are enforced:\n{out}"
    );
    let d = b.start().await;
    d.wait_ready().await;
    let (code, out, err) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("network hosts") && out.contains("own network namespace"),
        "ctl status says what is enforced:\n{out}"
    );
}

#[tokio::test]
async fn a_confined_server_cannot_connect_to_a_pathname_unix_socket_unless_its_profile_allows_it() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let s = secrets();
    // A stand-in for the session bus or an agent's socket, at a path the server can name.
    let path = s.elsewhere().join("bus");
    let listener = tokio::net::UnixListener::bind(&path).expect("bind");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (read, mut write) = stream.into_split();
            let mut lines = BufReader::new(read).lines();
            if let Ok(Some(line)) = lines.next_line().await {
                let _ = write.write_all(format!("bus: {line}\n").as_bytes()).await;
            }
        }
    });
    let d = pair(&s)
        .fixture_with(
            "sockets",
            &["--tools", ESCAPE],
            "[servers.sockets.sandbox]\nunix_sockets = true",
        )
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let args = json!({"path": path.to_str().expect("utf-8"), "line": "hello"});
    escape(
        &mut a,
        "boxed",
        "connecting to a pathname Unix socket outside the profile",
        "try_unix",
        args.clone(),
        &["EPERM"],
    )
    .await;
    let r = attempt(&mut a, "sockets", "try_unix", args).await;
    assert_eq!(
        r, "ok: connected; answer: bus: hello",
        "with unix_sockets = true the profile lets it connect (the kernel cannot limit which)"
    );
}
