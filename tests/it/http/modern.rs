//! Modern (2026-07-28) remote upstreams.
//!
//! The real `mcpd` against the in-process HTTP fixture in its stateless era.

use crate::http::fixture::{FixtureOptions, HttpFixture, Reply, Stats};
use crate::support::*;
use serde_json::{Value, json};

const MODERN: &str = "2026-07-28";

fn modern() -> FixtureOptions {
    FixtureOptions {
        modern: true,
        ..FixtureOptions::default()
    }
}

/// A daemon with the fixture as server `remote` (protocol `auto`), ready.
async fn daemon_for(fx: &HttpFixture) -> Daemon {
    daemon_with(fx, "").await
}

/// [`daemon_for`] with pinning off: for tests of list changes reaching agents, which
/// pinning would hold (`pins/held.rs`).
async fn daemon_unpinned(fx: &HttpFixture) -> Daemon {
    daemon_with(fx, "pin = \"off\"").await
}

async fn daemon_with(fx: &HttpFixture, extra: &str) -> Daemon {
    let d = DaemonBuilder::new()
        .remote("remote", &fx.url(), extra)
        .start()
        .await;
    d.wait_ready().await;
    d
}

/// Whether the fixture received `Mcp-Param-{name}: {value}` (header names compare
/// case-insensitively, values exactly as sent).
fn saw_param(stats: &Stats, name: &str, value: &str) -> bool {
    stats
        .param_headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case(name) && v == value)
}

/// Reads the agent's messages until a `notifications/tools/list_changed`, counting one
/// that already arrived while the agent waited for a response.
async fn list_changed(a: &mut Agent) {
    let method = "notifications/tools/list_changed";
    if let Some(i) = a.notifications.iter().position(|m| m["method"] == method) {
        a.notifications.remove(i);
        return;
    }
    within("a tools/list_changed notification", async {
        loop {
            let m = a.recv().await.expect("agent connection open");
            if m["method"] == method {
                break;
            }
        }
    })
    .await;
}

/// Waits until a new agent sees `tool` in the catalog.
async fn listed(d: &Daemon, tool: &str) {
    eventually(&format!("{tool} is listed"), WAIT, || async {
        let mut b = d.initialized_agent().await;
        b.tool_names()
            .await
            .contains(&tool.to_owned())
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_modern_http_server_is_detected_in_place_and_called_with_request_headers() {
    let fx = HttpFixture::start(modern()).await;
    let mut d = daemon_for(&fx).await;
    let s = d.server_status("remote").await;
    assert_eq!(s["era"], "modern", "{s}");
    assert_eq!(s["protocol_version"], MODERN, "{s}");
    assert_eq!(s["transport"], "streamable-http", "{s}");

    let mut a = d.initialized_agent().await;
    let names = a.tool_names().await;
    assert!(names.contains(&"remote__region".to_owned()), "{names:?}");
    assert!(
        !names.contains(&"remote__badheader".to_owned()),
        "a tool with an invalid x-mcp-header must be dropped: {names:?}"
    );
    let r = a.call("remote__echo", json!({"text": "stateless"})).await;
    assert_eq!(text(&r), "stateless", "{r}");
    let r = a
        .call("remote__region", json!({"region": "eu-west", "n": 7}))
        .await;
    assert_eq!(text(&r), "region=eu-west n=7", "{r}");

    let stats = fx.stats();
    // Found in place: the very first request was server/discover; nothing initialized.
    assert_eq!(
        stats.methods.first().map(String::as_str),
        Some("server/discover"),
        "{stats:?}"
    );
    assert!(stats.discovers >= 1, "{stats:?}");
    assert_eq!(stats.initializes, 0, "{stats:?}");
    assert!(stats.sessions_issued.is_empty(), "{stats:?}");
    assert!(
        stats.protocol_headers.iter().all(|v| v == MODERN),
        "{:?}",
        stats.protocol_headers
    );
    // The call carried its method, its upstream (unprefixed) name and its annotated arguments.
    assert!(stats.methods.iter().any(|m| m == "tools/call"), "{stats:?}");
    assert!(stats.names.iter().any(|n| n == "region"), "{stats:?}");
    assert!(saw_param(&stats, "Region", "eu-west"), "{stats:?}");
    assert!(saw_param(&stats, "N", "7"), "{stats:?}");
    assert_eq!(stats.header_errors, 0, "{stats:?}");

    // No GET stream and, once the daemon stops, no DELETE: there is no session to end.
    d.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(d.wait_exit().await, Some(0));
    let stats = fx.stats();
    assert_eq!(stats.get_requests, 0, "{stats:?}");
    assert_eq!(stats.delete_requests, 0, "{stats:?}");
}

#[tokio::test]
async fn non_ascii_and_padded_argument_values_travel_base64_wrapped_and_arrive_intact() {
    // SSE replies too: a modern reply stream has no event ids and ends with the answer.
    let fx = HttpFixture::start(FixtureOptions {
        reply: Reply::Sse,
        ..modern()
    })
    .await;
    let d = daemon_for(&fx).await;
    let mut a = d.initialized_agent().await;
    let r = a
        .call("remote__region", json!({"region": "zürich", "n": 1}))
        .await;
    assert_eq!(text(&r), "region=zürich n=1", "{r}");
    let r = a
        .call("remote__region", json!({"region": " padded ", "n": -3}))
        .await;
    assert_eq!(text(&r), "region= padded  n=-3", "{r}");

    let stats = fx.stats();
    assert!(
        saw_param(&stats, "Region", "=?base64?esO8cmljaA==?="),
        "{stats:?}"
    );
    assert!(
        saw_param(&stats, "Region", "=?base64?IHBhZGRlZCA=?="),
        "{stats:?}"
    );
    assert!(saw_param(&stats, "N", "-3"), "{stats:?}");
    assert_eq!(stats.header_errors, 0, "{stats:?}");
}

#[tokio::test]
async fn list_changed_on_a_modern_subscription_updates_the_catalog() {
    let fx = HttpFixture::start(modern()).await;
    let d = daemon_unpinned(&fx).await;
    // The server declared tools.listChanged: mcpd subscribes instead of opening a GET stream.
    eventually("mcpd subscribes to tool-list changes", WAIT, || async {
        (fx.stats().listens_opened >= 1).then_some(())
    })
    .await;
    let mut a = d.initialized_agent().await;
    fx.notify_tools_changed().await;
    list_changed(&mut a).await;
    let names = a.tool_names().await;
    assert!(names.contains(&"remote__extra_1".to_owned()), "{names:?}");

    // The server ends the subscription: mcpd subscribes again and still hears news on it.
    fx.drop_get_streams();
    eventually("mcpd subscribes again", WAIT, || async {
        (fx.stats().listens_opened >= 2).then_some(())
    })
    .await;
    fx.notify_tools_changed().await;
    listed(&d, "remote__extra_2").await;
    let stats = fx.stats();
    assert_eq!(stats.get_requests, 0, "{stats:?}");
    assert_eq!(stats.header_errors, 0, "{stats:?}");
}

#[tokio::test]
async fn a_lapsed_ttl_refreshes_the_catalog() {
    let fx = HttpFixture::start(FixtureOptions {
        ttl_ms: 300,
        ..modern()
    })
    .await;
    let d = daemon_unpinned(&fx).await;
    let first = fx.stats().tools_lists;
    eventually("mcpd fetches the tool list again", WAIT, || async {
        (fx.stats().tools_lists >= first + 2).then_some(())
    })
    .await;
    // A tool added without any notification shows up by the next refetch alone.
    fx.add_tool_quietly();
    listed(&d, "remote__extra_1").await;
}

#[tokio::test]
async fn a_legacy_http_server_is_still_detected_by_auto_and_initialized() {
    let fx = HttpFixture::start(FixtureOptions::default()).await;
    let d = daemon_for(&fx).await;
    let s = d.server_status("remote").await;
    assert_eq!(s["era"], "legacy", "{s}");
    assert_eq!(s["protocol_version"], "2025-11-25", "{s}");
    let mut a = d.initialized_agent().await;
    let r = a.call("remote__echo", json!({"text": "old"})).await;
    assert_eq!(text(&r), "old", "{r}");
    let stats = fx.stats();
    assert_eq!(stats.initializes, 1, "{stats:?}");
    // Only the probe carried modern request-metadata headers.
    assert_eq!(stats.methods, ["server/discover"], "{stats:?}");
    assert!(stats.names.is_empty(), "{stats:?}");
}

#[tokio::test]
async fn a_modern_server_pinned_to_legacy_fails_clearly_without_retries_while_others_work() {
    let pinned = HttpFixture::start(modern()).await;
    let good = HttpFixture::start(modern()).await;
    let d = DaemonBuilder::new()
        .remote("pinned", &pinned.url(), "protocol = \"legacy\"")
        .remote("good", &good.url(), "")
        .start()
        .await;
    // Retrying cannot help until the config changes: the server is failed at once.
    let s = d
        .wait_server("pinned", "the pinned server is failed", |s| {
            s["state"] == "failed"
        })
        .await;
    let err = s["last_error"].as_str().unwrap_or_default();
    assert!(
        err.contains("-32022") && err.contains("protocol = \"legacy\""),
        "the error must name the version refusal and the setting to fix: {s}"
    );
    assert_eq!(s["restarts"], 0, "{s}");
    // Pinned to legacy: never probed, one refused initialize.
    assert_eq!(pinned.stats().discovers, 0, "{:?}", pinned.stats());
    assert_eq!(pinned.stats().posts, 1, "{:?}", pinned.stats());

    d.wait_server("good", "the other server is ready", |s| {
        s["state"] == "ready"
    })
    .await;
    let mut a = d.initialized_agent().await;
    let r = a
        .call("good__region", json!({"region": "ap-south", "n": 2}))
        .await;
    assert_eq!(text(&r), "region=ap-south n=2", "{r}");
}

/// The modern envelope mcpd would send.
fn envelope() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

/// POSTs a request with these headers (nothing added); returns the status and JSON body.
async fn raw(url: &str, method: &str, params: Value, headers: &[(&str, &str)]) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
    let mut req = crate::support::http_client()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let resp = within("a raw POST", req.send()).await.expect("POST sent");
    let status = resp.status().as_u16();
    let text = within("its body", resp.text()).await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test]
async fn the_modern_fixture_refuses_what_a_2026_07_28_server_must_refuse() {
    let fx = HttpFixture::start(modern()).await;
    let url = fx.url();
    let call = |region: &str, n: i64| {
        let arguments = json!({"region": region, "n": n});
        json!({"name": "region", "arguments": arguments, "_meta": envelope()})
    };
    let good = [
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "tools/call"),
        ("mcp-name", "=?base64?cmVnaW9u?="),
        ("mcp-param-region", "eu"),
        ("mcp-param-n", "7"),
    ];
    let (status, body) = raw(&url, "tools/call", call("eu", 7), &good).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(text(&body), "region=eu n=7", "{body}");
    assert_eq!(body["result"]["resultType"], "complete", "{body}");

    // Each header missing or disagreeing with the body: 400 with -32020 and the request's id.
    let wrong = [
        ("mcp-protocol-version", "2025-11-25"),
        ("mcp-method", "tools/list"),
        ("mcp-name", "echo"),
        ("mcp-param-region", "us"),
        ("mcp-param-n", "8"),
    ];
    for (i, bad) in wrong.into_iter().enumerate() {
        for replace in [None, Some(bad)] {
            let mut headers: Vec<_> = good.to_vec();
            headers.remove(i);
            headers.extend(replace);
            let (status, body) = raw(&url, "tools/call", call("eu", 7), &headers).await;
            assert_eq!((status, error_code(&body)), (400, Some(-32020)), "{body}");
            assert_eq!(body["id"], 9, "{body}");
        }
    }
    assert_eq!(fx.stats().header_errors, 2 * good.len());

    let (status, body) = raw(&url, "tools/list", json!({}), &good[..2]).await;
    assert_eq!((status, error_code(&body)), (400, Some(-32602)), "{body}");
    assert!(error_message(&body).contains("protocolVersion"), "{body}");
    let old = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2025-11-25",
        "io.modelcontextprotocol/clientCapabilities": {}}});
    let (status, body) = raw(&url, "tools/list", old, &good[..2]).await;
    assert_eq!((status, error_code(&body)), (400, Some(-32022)), "{body}");
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}});
    let (status, body) = raw(&url, "initialize", init, &[]).await;
    assert_eq!((status, error_code(&body)), (400, Some(-32022)), "{body}");
    assert_eq!(
        body["error"]["data"]["supported"],
        json!([MODERN]),
        "{body}"
    );
    assert_eq!(body["error"]["data"]["requested"], "2025-11-25", "{body}");

    let headers = [
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "server/discover"),
    ];
    let params = json!({"_meta": envelope()});
    let (status, body) = raw(&url, "server/discover", params, &headers).await;
    assert_eq!(status, 200, "{body}");
    let r = &body["result"];
    assert_eq!(r["supportedVersions"], json!([MODERN]), "{body}");
    assert_eq!(r["capabilities"]["tools"]["listChanged"], true, "{body}");
    assert_eq!(
        (r["ttlMs"].as_u64(), r["cacheScope"].as_str()),
        (Some(60_000), Some("public"))
    );
    assert!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"].is_object(),
        "{body}"
    );

    let client = crate::support::http_client();
    for req in [client.get(&url), client.delete(&url)] {
        let resp = within("GET or DELETE", req.send()).await.expect("sent");
        assert_eq!(resp.status().as_u16(), 405);
    }
}
