//! Remote upstreams: the real `mcpd` against our in-process HTTP fixture server, over loopback.

use crate::http::fixture::{FixtureOptions, HttpFixture, Reply};
use crate::support::*;
use serde_json::{Value, json};

fn sse() -> FixtureOptions {
    FixtureOptions {
        reply: Reply::Sse,
        ..FixtureOptions::default()
    }
}

/// A daemon with the fixture as server `remote`, ready.
/// A server's `pin = "off"`: for tests of list changes reaching agents, which pinning
/// would hold (`pins/held.rs`).
const UNPINNED: &str = "pin = \"off\"";

async fn daemon_for(fx: &HttpFixture, extra: &str) -> Daemon {
    let d = DaemonBuilder::new()
        .remote("remote", &fx.url(), extra)
        .start()
        .await;
    d.wait_ready().await;
    d
}

#[tokio::test]
async fn remote_tools_are_listed_called_and_shown_in_status_with_secrets_from_the_environment() {
    let fx = HttpFixture::start(FixtureOptions {
        bearer: Some("tok-123".into()),
        ..FixtureOptions::default()
    })
    .await;
    let d = DaemonBuilder::new()
        .env("FIXTURE_TOKEN", "tok-123")
        .env("FIXTURE_KEY", "key-456")
        .remote(
            "remote",
            &fx.url(),
            "bearer_token_env = \"FIXTURE_TOKEN\"\nheaders = { X-Fixture-Key = \"k:${FIXTURE_KEY}\" }",
        )
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let names = a.tool_names().await;
    assert!(names.contains(&"remote__echo".to_owned()), "{names:?}");
    assert!(names.contains(&"remote__add".to_owned()), "{names:?}");
    let r = a.call("remote__echo", json!({"text": "over http"})).await;
    assert_eq!(text(&r), "over http", "{r}");
    let r = a.call("remote__add", json!({"a": 2, "b": 3})).await;
    assert_eq!(text(&r), "5", "{r}");
    // The server's own JSON-RPC error comes through as it is.
    let r = a.call("remote__add", json!({})).await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    assert!(
        error_message(&r).contains("invalid arguments for tool add"),
        "{r}"
    );

    let who: Value = serde_json::from_str(text(&a.call("remote__whoami", json!({})).await))
        .expect("whoami answers JSON");
    assert_eq!(who["authorization"], "Bearer tok-123");
    assert_eq!(who["key"], "k:key-456");

    let s = d.server_status("remote").await;
    assert_eq!(s["transport"], "streamable-http", "{s}");
    assert_eq!(s["url"], fx.url(), "{s}");
    assert_eq!(s["state"], "ready", "{s}");
    assert_eq!(s["http"]["session"], true, "{s}");
    assert_eq!(s["protocol_version"], "2025-11-25", "{s}");
    let stats = fx.stats();
    assert_eq!(stats.initializes, 1);
    // The first POST is the era probe (server/discover, 2026-07-28); every request after
    // initialize carries the negotiated version.
    let (probe, rest) = stats
        .protocol_headers
        .split_first()
        .expect("protocol headers recorded");
    assert_eq!(probe, "2026-07-28", "{:?}", stats.protocol_headers);
    assert!(
        !rest.is_empty() && rest.iter().all(|v| v == "2025-11-25"),
        "MCP-Protocol-Version on every request after initialize: {:?}",
        stats.protocol_headers
    );

    // Secrets never show: not in status, not in the log, not in check-config.
    let (_, status_text, _) = d.run_cli(&["ctl", "status", "--json"]).await;
    let (_, table, _) = d.run_cli(&["ctl", "status"]).await;
    assert!(table.contains("streamable-http"), "{table}");
    for shown in [status_text, table, d.log_text()] {
        assert!(
            !shown.contains("tok-123") && !shown.contains("key-456"),
            "a secret leaked: {shown}"
        );
    }
}

#[tokio::test]
async fn sse_replies_route_progress_and_notifications_to_the_calling_agent() {
    let fx = HttpFixture::start(sse()).await;
    let d = daemon_for(&fx, "").await;
    let mut a = d.initialized_agent().await;
    let mut other = d.initialized_agent().await;
    let id = a
        .start_call_with_progress("remote__progress", json!({"steps": 3}), json!("mine"))
        .await;
    let mut progress = Vec::new();
    let reply = within("the progress call's answer", async {
        loop {
            let m = a.recv().await.expect("agent connection open");
            if m.get("id") == Some(&id) {
                break m;
            }
            if m["method"] == "notifications/progress" {
                progress.push(m["params"].clone());
            }
        }
    })
    .await;
    assert_eq!(text(&reply), "progressed", "{reply}");
    assert_eq!(progress.len(), 3, "{progress:?}");
    assert!(
        progress.iter().all(|p| p["progressToken"] == "mine"),
        "{progress:?}"
    );
    assert_eq!(progress[2]["progress"], 3);
    // The other agent got nothing of it.
    let r = other.call("remote__echo", json!({"text": "x"})).await;
    assert_eq!(text(&r), "x");
}

#[tokio::test]
async fn a_reply_stream_that_ends_before_the_answer_fails_only_that_call_clearly() {
    let fx = HttpFixture::start(sse()).await;
    let d = daemon_for(&fx, "").await;
    let mut a = d.initialized_agent().await;
    let r = a.call("remote__drop", json!({})).await;
    assert_eq!(error_code(&r), Some(-32012), "{r}");
    let msg = error_message(&r);
    assert!(msg.contains("no response received for request"), "{msg}");
    assert!(msg.contains("closed the stream before answering"), "{msg}");
    // The connection is fine: the next call works, nothing restarted.
    let r = a.call("remote__echo", json!({"text": "still here"})).await;
    assert_eq!(text(&r), "still here");
    let s = d.server_status("remote").await;
    assert_eq!(s["restarts"], 0, "{s}");
}

#[tokio::test]
async fn a_broken_reply_stream_with_event_ids_is_resumed_with_last_event_id() {
    let fx = HttpFixture::start(FixtureOptions {
        event_ids: true,
        retry_ms: Some(50),
        ..sse()
    })
    .await;
    let d = daemon_for(&fx, "").await;
    let mut a = d.initialized_agent().await;
    let r = a.call("remote__drop", json!({})).await;
    assert_eq!(text(&r), "resumed", "{r}");
    assert!(!fx.stats().last_event_ids.is_empty(), "{:?}", fx.stats());
}

#[tokio::test]
async fn an_expired_session_is_renewed_once_and_the_call_still_succeeds() {
    let fx = HttpFixture::start(FixtureOptions::default()).await;
    let d = daemon_for(&fx, "").await;
    let mut a = d.initialized_agent().await;
    let first = fx.stats().sessions_issued.clone();
    fx.expire_sessions();
    let r = a
        .call("remote__echo", json!({"text": "after expiry"}))
        .await;
    assert_eq!(text(&r), "after expiry", "{r}");
    let stats = fx.stats();
    assert_eq!(stats.initializes, 2, "{stats:?}");
    assert_eq!(stats.sessions_issued.len(), first.len() + 1);
    let s = d.server_status("remote").await;
    assert_eq!(s["session_renewals"], 1, "{s}");
    assert_eq!(s["restarts"], 0, "{s}");
    assert!(d.log_text().contains("forgot the HTTP session"));
}

#[tokio::test]
async fn list_changed_on_the_get_stream_updates_every_agent_and_a_dropped_stream_is_reopened() {
    let fx = HttpFixture::start(FixtureOptions::default()).await;
    let d = daemon_for(&fx, UNPINNED).await;
    d.wait_server("remote", "the GET stream is open", |s| {
        s["http"]["listen"] == "open"
    })
    .await;
    let mut a = d.initialized_agent().await;
    fx.notify_tools_changed().await;
    within("a tools/list_changed notification", async {
        loop {
            let m = a.recv().await.expect("agent connection open");
            if m["method"] == "notifications/tools/list_changed" {
                break;
            }
        }
    })
    .await;
    assert!(a.tool_names().await.contains(&"remote__extra_1".to_owned()));

    // The server closes its stream: mcpd opens it again and still hears news on it.
    let opened = fx.stats().get_streams_opened;
    fx.drop_get_streams();
    eventually("the GET stream is reopened", WAIT, || async {
        (fx.stats().get_streams_opened > opened).then_some(())
    })
    .await;
    d.wait_server("remote", "the GET stream is open again", |s| {
        s["http"]["listen"] == "open"
    })
    .await;
    fx.notify_tools_changed().await;
    eventually("the second new tool is listed", WAIT, || async {
        let mut b = d.initialized_agent().await;
        b.tool_names()
            .await
            .contains(&"remote__extra_2".to_owned())
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_server_without_a_get_stream_is_served_quietly() {
    let fx = HttpFixture::start(FixtureOptions {
        get_stream: false,
        ..FixtureOptions::default()
    })
    .await;
    let d = daemon_for(&fx, "").await;
    d.wait_server("remote", "the GET stream is marked unsupported", |s| {
        s["http"]["listen"] == "unsupported"
    })
    .await;
    let mut a = d.initialized_agent().await;
    let r = a.call("remote__echo", json!({"text": "ok"})).await;
    assert_eq!(text(&r), "ok");
    let log = d.log_text();
    assert!(
        !log.lines().any(|l| l.contains("WARN") && l.contains("GET")),
        "405 on GET is not worth a warning:\n{log}"
    );
}

#[tokio::test]
async fn refused_credentials_mark_the_server_failed_with_the_hint_and_stop_retrying() {
    let fx = HttpFixture::start(FixtureOptions {
        bearer: Some("right".into()),
        ..FixtureOptions::default()
    })
    .await;
    let d = DaemonBuilder::new()
        .env("FIXTURE_TOKEN", "wrong")
        .remote(
            "remote",
            &fx.url(),
            "bearer_token_env = \"FIXTURE_TOKEN\"\n[servers.remote.restart]\nbackoff_initial = \"20ms\"\nbackoff_max = \"20ms\"",
        )
        .clock("20ms")
        .start()
        .await;
    let s = d
        .wait_server("remote", "the server is failed", |s| s["state"] == "failed")
        .await;
    let err = s["last_error"].as_str().unwrap_or_default();
    assert!(err.contains("HTTP 401"), "{err}");
    assert!(err.contains("WWW-Authenticate: Bearer"), "{err}");
    assert!(err.contains("resource_metadata"), "{err}");
    assert!(
        err.contains("authorization server: http://127.0.0.1"),
        "{err}"
    );
    assert!(!err.contains("wrong"), "the token leaked: {err}");
    // Twenty of the clock's 20 ms backoffs: a retrying daemon would have sent as many
    // POSTs by then.
    let posts = fx.stats().posts;
    d.clock_ticks(20).await;
    assert_eq!(
        fx.stats().posts,
        posts,
        "a refused server must not be hammered"
    );
    let mut a = d.initialized_agent().await;
    let r = a.call("remote__echo", json!({"text": "x"})).await;
    assert_eq!(error_code(&r), Some(-32010), "{r}");
    assert!(error_message(&r).contains("HTTP 401"), "{r}");

    let forbidden = HttpFixture::start(FixtureOptions {
        forbidden: true,
        ..FixtureOptions::default()
    })
    .await;
    // Without a static credential, a server that asks for a scope wants an OAuth login.
    let d = daemon_for_state(&forbidden, "needs-login").await;
    let s = d.server_status("remote").await;
    assert!(
        s["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("run `mcpd ctl login remote`"),
        "{s}"
    );
}

/// A daemon with the fixture as server `remote`, once the server reaches `state`.
async fn daemon_for_state(fx: &HttpFixture, state: &str) -> Daemon {
    let d = DaemonBuilder::new()
        .remote("remote", &fx.url(), "")
        .start()
        .await;
    d.wait_server("remote", &format!("the server is {state}"), |s| {
        s["state"] == state
    })
    .await;
    d
}

#[tokio::test]
async fn http_errors_and_unreachable_servers_are_named_and_retried_with_backoff() {
    let fx = HttpFixture::start(FixtureOptions {
        fail_status: Some(500),
        ..FixtureOptions::default()
    })
    .await;
    let d = daemon_for_state(&fx, "backoff").await;
    let err = d.server_status("remote").await["last_error"].to_string();
    assert!(err.contains("HTTP 500"), "{err}");
    assert!(err.contains("upstream database unavailable"), "{err}");

    // TLS spoken to a plain HTTP server, and a host that does not exist.
    let tls_url = format!("https://127.0.0.1:{}/mcp", fx.port());
    let d = DaemonBuilder::new()
        .remote("tls", &tls_url, "")
        .remote("nx", "http://nonexistent.invalid/mcp", "")
        .start()
        .await;
    for (name, want) in [
        ("tls", "TLS failed with"),
        ("nx", "cannot resolve the host of"),
    ] {
        let s = d
            .wait_server(name, "the failure is reported", |s| {
                s["last_error"].is_string()
            })
            .await;
        let err = s["last_error"].as_str().unwrap_or_default();
        assert!(err.contains(want), "{name}: {err}");
    }

    // Nothing listens on this port any more.
    let closed = HttpFixture::start(FixtureOptions::default()).await;
    let url = closed.url();
    closed.stop().await;
    let d = DaemonBuilder::new()
        .remote("remote", &url, "connect_timeout = \"2s\"")
        .fixture("local", &[])
        .start()
        .await;
    let s = d
        .wait_server("remote", "the server is retried", |s| {
            s["state"] == "backoff" && s["restarts"].as_u64() >= Some(1)
        })
        .await;
    let err = s["last_error"].as_str().unwrap_or_default();
    assert!(err.contains("cannot connect to"), "{err}");
    let mut a = d.initialized_agent().await;
    let r = a.call("remote__echo", json!({"text": "x"})).await;
    assert_eq!(error_code(&r), Some(-32010), "{r}");
    assert!(error_message(&r).contains("restarting"), "{r}");
    // Other servers are unaffected.
    d.wait_server("local", "the local server is ready", |s| {
        s["state"] == "ready"
    })
    .await;
    let r = a.call("local__echo", json!({"text": "fine"})).await;
    assert_eq!(text(&r), "fine", "{r}");
}

#[tokio::test]
async fn a_stalled_server_fails_its_startup_with_a_timeout() {
    let fx = HttpFixture::start(FixtureOptions {
        stall: true,
        ..FixtureOptions::default()
    })
    .await;
    let d = DaemonBuilder::new()
        .remote(
            "remote",
            &fx.url(),
            "[servers.remote.health]\nstartup_timeout = \"500ms\"",
        )
        .start()
        .await;
    let s = d
        .wait_server("remote", "the startup timed out", |s| {
            s["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("did not complete initialize within 500ms"))
        })
        .await;
    assert_ne!(s["state"], "ready", "{s}");
}

#[tokio::test]
async fn a_hung_call_times_out_and_an_agent_cancel_drops_the_post_and_tells_the_server() {
    let fx = HttpFixture::start(sse()).await;
    let d = daemon_for(&fx, "timeout = \"500ms\"").await;
    let mut a = d.initialized_agent().await;
    let r = a.call("remote__hang", json!({})).await;
    assert_eq!(error_code(&r), Some(-32011), "{r}");
    // The server hears of it by `notifications/cancelled` and by the POST going away,
    // whichever reaches it first ends the call there.
    eventually("the server hears of the timeout", WAIT, || async {
        let s = fx.stats();
        (s.cancelled.len() == 1).then_some(())
    })
    .await;

    let d = daemon_for(&fx, "").await;
    let mut a = d.initialized_agent().await;
    let base = fx.stats().posts;
    let id = a.start_call("remote__hang", json!({})).await;
    eventually("the call reaches the server", WAIT, || async {
        (fx.stats().posts > base).then_some(())
    })
    .await;
    let before = fx.stats();
    a.send(json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": { "requestId": id, "reason": "user pressed stop" },
    }))
    .await;
    let after = eventually("the server hears of the cancellation", WAIT, || async {
        let s = fx.stats();
        (s.cancelled.len() > before.cancelled.len()).then_some(s)
    })
    .await;
    let last = after.cancelled.last().cloned().unwrap_or_default();
    assert!(last["requestId"].is_u64(), "mcpd's own request id: {last}");
    assert!(last["reason"].is_string(), "{last}");
}

#[tokio::test]
async fn an_oversized_reply_fails_the_call_and_the_connection_goes_on() {
    for opts in [FixtureOptions::default(), sse()] {
        let fx = HttpFixture::start(opts).await;
        let d = DaemonBuilder::new()
            .daemon("max_message_bytes = 65536")
            .remote("remote", &fx.url(), "")
            .start()
            .await;
        d.wait_ready().await;
        let mut a = d.initialized_agent().await;
        let r = a.call("remote__big", json!({"bytes": 200_000})).await;
        assert!(error_message(&r).contains("max_message_bytes"), "{r}");
        let r = a.call("remote__big", json!({"bytes": 1000})).await;
        assert_eq!(text(&r).len(), 1000, "{r}");
    }
}

#[tokio::test]
async fn a_legacy_sse_server_is_found_by_auto_and_lists_calls_and_notifies() {
    let fx = HttpFixture::start(FixtureOptions {
        legacy_sse: true,
        ..FixtureOptions::default()
    })
    .await;
    let d = daemon_for(&fx, UNPINNED).await;
    let s = d.server_status("remote").await;
    assert_eq!(s["transport"], "sse", "{s}");
    let mut a = d.initialized_agent().await;
    let r = a.call("remote__echo", json!({"text": "old school"})).await;
    assert_eq!(text(&r), "old school", "{r}");
    fx.notify_tools_changed().await;
    eventually("the new tool is listed", WAIT, || async {
        let mut b = d.initialized_agent().await;
        b.tool_names()
            .await
            .contains(&"remote__extra_1".to_owned())
            .then_some(())
    })
    .await;
    assert!(d.log_text().contains("trying the HTTP+SSE transport"));

    // The session stream going away ends the connection; mcpd connects again.
    fx.expire_sessions();
    d.wait_server("remote", "the server reconnects", |s| {
        s["state"] == "ready" && s["restarts"].as_u64() >= Some(1)
    })
    .await;
    let r = a.call("remote__echo", json!({"text": "again"})).await;
    assert_eq!(text(&r), "again", "{r}");
}

#[tokio::test]
async fn stopping_a_remote_server_or_the_daemon_ends_its_session_with_delete() {
    let fx = HttpFixture::start(FixtureOptions::default()).await;
    let mut d = daemon_for(&fx, "").await;
    let (code, _, err) = d.run_cli(&["ctl", "stop", "remote"]).await;
    assert_eq!(code, 0, "{err}");
    let first = fx.stats().sessions_issued[0].clone();
    eventually("the session is deleted on stop", WAIT, || async {
        fx.stats().deletes.contains(&first).then_some(())
    })
    .await;
    let (code, _, err) = d.run_cli(&["ctl", "start", "remote"]).await;
    assert_eq!(code, 0, "{err}");
    d.wait_ready().await;
    let second = fx.stats().sessions_issued[1].clone();
    d.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(d.wait_exit().await, Some(0));
    assert!(fx.stats().deletes.contains(&second), "{:?}", fx.stats());
}
