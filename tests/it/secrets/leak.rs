//! A secret's value in none of mcpd's outputs.
//!
//! A canary value is put in a local server's environment and a remote server's header,
//! both starts are made to fail and succeed, and then every channel mcpd speaks on is
//! searched for it: its log at the most verbose level, `ctl status` (text and JSON), `ctl
//! logs`, `ctl metrics`, `ctl agents`, `ctl tools`, `ctl secret list`, `check-config`,
//! what agents are told (lists and errors), and the daemon's own command line and
//! environment. The same search finds the value where it belongs (the server's
//! environment, the header on the wire), so it can fail.

use crate::secrets::stores::{ctl_with_input, server_env};
use crate::support::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CANARY: &str = "CANARY-7f3a9c2e51b04d68";

/// An HTTP listener that records each request's head and answers 500: a remote server
/// that fails, so its error goes through mcpd's error paths.
async fn failing_remote() -> (String, tokio::sync::mpsc::Receiver<String>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = tx.try_send(String::from_utf8_lossy(&head).into_owned());
                let _ = conn
                    .write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\nconnection: close\r\n\r\nnope")
                    .await;
            });
        }
    });
    (url, rx)
}

#[tokio::test]
async fn the_value_of_a_secret_appears_in_no_output_of_mcpd() {
    let (url, mut heads) = failing_remote().await;
    let d = DaemonBuilder::new()
        .daemon("secrets = \"file\"")
        .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .env("RUST_LOG", "trace")
        .fixture_with(
            "s",
            &["--tools", "env_json"],
            "env = { TOKEN = \"${secret:canary}\" }",
        )
        .remote(
            "r",
            &url,
            "headers = { X-Api-Key = \"key ${secret:canary}\" }\noauth = false\nrestart = { backoff_initial = \"100ms\", backoff_max = \"200ms\" }",
        )
        .start()
        .await;
    d.wait_server("s", "s waits for its secret", |s| s["state"] == "failed")
        .await;
    let (code, _, err) = ctl_with_input(&d.socket, &["secret", "set", "canary"], CANARY).await;
    assert_eq!(code, 0, "{err}");
    d.wait_server("s", "s starts", |s| s["state"] == "ready")
        .await;
    // The remote server got the header and failed, more than once.
    d.run_cli(&["ctl", "restart", "r"]).await;
    let head = within("the remote server's request", heads.recv())
        .await
        .expect("a request");
    assert!(
        head.contains(&format!("key {CANARY}")),
        "the header reached the wire: {head}"
    );
    d.wait_server("r", "r failed and is retried", |s| {
        s["restarts"].as_u64() >= Some(1)
    })
    .await;
    // Where the value belongs, it is.
    assert_eq!(server_env(&d, "s").await["TOKEN"], CANARY);

    // Everything an agent is told.
    let mut agent = d.initialized_agent().await;
    let mut told = agent.request("tools/list", None).await.to_string();
    told += &agent.call("r__anything", json!({})).await.to_string();
    told += &agent.call("s__missing", json!({})).await.to_string();
    let mut outputs = vec![("agent answers".to_owned(), told)];
    for args in [
        &["ctl", "status"][..],
        &["ctl", "status", "--json"],
        &["ctl", "logs", "s"],
        &["ctl", "logs", "r"],
        &["ctl", "metrics"],
        &["ctl", "agents", "--json"],
        &["ctl", "tools"],
        &["ctl", "secret", "list"],
    ] {
        let (code, out, err) = d.run_cli(args).await;
        assert_eq!(code, 0, "{args:?}: {err}");
        outputs.push((args.join(" "), out + &err));
    }
    let config = d.config.to_string_lossy().into_owned();
    let (_, out, err) = run_mcpd(&["check-config", "--config", &config], None).await;
    outputs.push(("check-config".into(), out + &err));
    let proc = |what: &str| {
        let raw = std::fs::read(format!("/proc/{}/{what}", d.pid())).unwrap_or_default();
        String::from_utf8_lossy(&raw).into_owned()
    };
    outputs.push(("the daemon's command line".into(), proc("cmdline")));
    outputs.push(("the daemon's environment".into(), proc("environ")));
    outputs.push(("the daemon's log (RUST_LOG=trace)".into(), d.log_text()));
    assert!(
        d.log_text().contains("secret set") && d.log_text().contains("TRACE"),
        "the log is the verbose one"
    );
    for (what, text) in &outputs {
        assert!(!text.is_empty(), "{what} said nothing");
        assert!(
            !text.contains(CANARY),
            "the secret's value is in {what}:\n{text}"
        );
    }
}

/// What a server prints of a secret: masked. `s` has the canary as a secret and `plain`
/// has another canary as a plain `env` value; both print theirs to stderr. The plain one
/// reaches `ctl logs` and the daemon's log as printed (so the search can find a value
/// there), the secret one only as `[secret canary]`.
#[tokio::test]
async fn a_secret_a_server_prints_to_its_stderr_is_masked_in_the_logs() {
    const PLAIN: &str = "PLAIN-2b8e41c07d9a35f6";
    let d = DaemonBuilder::new()
        .daemon("secrets = \"file\"")
        .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .fixture_with(
            "s",
            &["--tools", "stderr"],
            "env = { K = \"${secret:canary}\" }",
        )
        .fixture_with(
            "plain",
            &["--tools", "stderr"],
            &format!("env = {{ K = \"{PLAIN}\" }}"),
        )
        .start()
        .await;
    let (code, _, err) = ctl_with_input(&d.socket, &["secret", "set", "canary"], CANARY).await;
    assert_eq!(code, 0, "{err}");
    d.wait_ready().await;
    let mut agent = d.initialized_agent().await;
    for server in ["s", "plain"] {
        let r = agent
            .call(&format!("{server}__stderr"), json!({"env": "K"}))
            .await;
        assert_eq!(r["result"]["content"][0]["text"], "ok", "{r}");
    }
    let logs = |server: &'static str, needle: String| {
        let d = &d;
        async move {
            eventually(&format!("ctl logs {server} shows {needle}"), WAIT, || {
                let needle = needle.clone();
                async move {
                    let (_, out, _) = d.run_cli(&["ctl", "logs", server]).await;
                    out.contains(&needle).then_some(out)
                }
            })
            .await
        }
    };
    let plain = logs("plain", ", said the server".into()).await;
    assert!(plain.contains(PLAIN), "a plain value is shown: {plain}");
    let masked = logs("s", ", said the server".into()).await;
    assert!(
        !masked.contains(CANARY),
        "the secret in ctl logs s:\n{masked}"
    );
    assert!(
        masked.contains("K is [secret canary], said the server"),
        "ctl logs s:\n{masked}"
    );
    let log = d.log_text();
    assert!(
        log.contains(&format!("K is {PLAIN}")),
        "the daemon's log has the plain value (else the search proves nothing):\n{log}"
    );
    assert!(
        log.contains("K is [secret canary], said the server"),
        "the daemon's log has the mask:\n{log}"
    );
    assert!(
        !log.contains(CANARY),
        "the secret in the daemon's log:\n{log}"
    );
}
