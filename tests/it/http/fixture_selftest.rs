//! Self-tests of the HTTP MCP fixture, speaking raw HTTP with reqwest, so tests of mcpd can
//! trust what the fixture does.

use crate::http::fixture::{FixtureOptions, HttpFixture, Reply};
use crate::support::eventually;
use futures::StreamExt;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use std::future::Future;
use std::time::Duration;

/// Every await in these tests is bounded by this.
const BOUND: Duration = Duration::from_secs(2);

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(BOUND, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {BOUND:?}: {what}"),
    }
}

const ACCEPT_BOTH: &str = "application/json, text/event-stream";

fn initialize(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "selftest", "version": "1"}}})
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": {"progressToken": "tok"}}})
}

/// A POST of `msg` as a Streamable HTTP client would send it, with `session` if given.
fn request(url: &str, session: Option<&str>, msg: &Value) -> reqwest::RequestBuilder {
    let req = crate::support::http_client()
        .post(url)
        .header("accept", ACCEPT_BOTH)
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
        .body(msg.to_string());
    match session {
        Some(s) => req.header("mcp-session-id", s),
        None => req,
    }
}

async fn post(url: &str, session: Option<&str>, msg: &Value) -> reqwest::Response {
    let req = request(url, session, msg).send();
    bounded("POST", req).await.expect("POST sent")
}

async fn get_stream(url: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = crate::support::http_client()
        .get(url)
        .header("accept", "text/event-stream");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    bounded("GET", req.send()).await.expect("GET sent")
}

async fn json_body(resp: reqwest::Response) -> Value {
    let text = bounded("body", resp.text()).await.expect("body");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"))
}

/// Initializes a Streamable HTTP session and returns its id.
async fn open_session(url: &str) -> String {
    let resp = post(url, None, &initialize("2025-11-25")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let session = session_id(resp.headers());
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = post(url, Some(&session), &initialized).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    session
}

fn session_id(headers: &HeaderMap) -> String {
    let value = headers
        .get("mcp-session-id")
        .expect("Mcp-Session-Id header");
    value.to_str().expect("visible ASCII").to_owned()
}

/// One parsed SSE event (comments and `retry`-only blocks are skipped by `next`).
#[derive(Debug, Default)]
struct Event {
    event: Option<String>,
    id: Option<String>,
    data: String,
    retry: Option<String>,
}

/// A minimal SSE reader over a response body.
struct Events {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl Events {
    fn new(resp: reqwest::Response) -> Events {
        let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        Events {
            body: resp.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    /// The next event block with any field, or None when the stream ends.
    async fn next_block(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut ev = Event::default();
                let mut any = false;
                for line in block.lines().filter(|l| !l.starts_with(':')) {
                    let (field, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value).to_owned();
                    any = true;
                    match field {
                        "event" => ev.event = Some(value),
                        "id" => ev.id = Some(value),
                        "data" => ev.data.push_str(&value),
                        "retry" => ev.retry = Some(value),
                        _ => {}
                    }
                }
                if any {
                    return Some(ev);
                }
                continue;
            }
            let chunk = bounded("next SSE chunk", self.body.next()).await?;
            self.buffer
                .push_str(std::str::from_utf8(&chunk.ok()?).unwrap());
        }
    }

    /// The next event that carries data, parsed as JSON.
    async fn next_message(&mut self) -> Option<Value> {
        loop {
            let ev = self.next_block().await?;
            if !ev.data.is_empty() {
                return Some(serde_json::from_str(&ev.data).unwrap());
            }
        }
    }
}

#[tokio::test]
async fn json_mode_issues_a_session_and_lists_and_calls_tools() {
    let fx = HttpFixture::start(FixtureOptions::default()).await;
    let resp = post(&fx.url(), None, &initialize("2025-06-18")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let session = session_id(resp.headers());
    let init = json_body(resp).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(init["result"]["serverInfo"]["name"], "http-fixture");

    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let tools = json_body(post(&fx.url(), Some(&session), &list).await).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"echo") && names.contains(&"big"),
        "{names:?}"
    );
    assert_eq!(tools["result"]["tools"][0]["inputSchema"]["type"], "object");

    let sum = json_body(
        post(
            &fx.url(),
            Some(&session),
            &call(2, "add", json!({"a": 2, "b": 3})),
        )
        .await,
    )
    .await;
    assert_eq!(sum["result"]["content"][0]["text"], "5");
    let unknown =
        json_body(post(&fx.url(), Some(&session), &call(3, "nope", json!({}))).await).await;
    assert_eq!(unknown["error"]["code"], -32602);
    assert_eq!(unknown["error"]["message"], "unknown tool: nope");

    let stats = fx.stats();
    assert_eq!(stats.initializes, 1);
    assert_eq!(stats.sessions_issued, vec![session]);
    assert_eq!(stats.protocol_headers, vec!["2025-11-25"; 3]);
    fx.stop().await;
}

#[tokio::test]
async fn sse_mode_sends_related_notifications_before_the_response() {
    let fx = HttpFixture::start(FixtureOptions {
        reply: Reply::Sse,
        ..FixtureOptions::default()
    })
    .await;
    let resp = post(&fx.url(), None, &initialize("1999-01-01")).await;
    let session = session_id(resp.headers());
    let init = Events::new(resp)
        .next_message()
        .await
        .expect("initialize result");
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");

    let resp = post(
        &fx.url(),
        Some(&session),
        &call(1, "progress", json!({"steps": 2})),
    )
    .await;
    let mut events = Events::new(resp);
    for step in 1..=2 {
        let note = events.next_message().await.expect("progress");
        assert_eq!(note["method"], "notifications/progress");
        assert_eq!(
            note["params"],
            json!({"progressToken": "tok", "progress": step, "total": 2})
        );
    }
    let done = events.next_message().await.expect("response");
    assert_eq!(done["id"], 1);
    assert_eq!(done["result"]["content"][0]["text"], "progressed");
    assert!(
        events.next_block().await.is_none(),
        "the stream ends after the response"
    );
    fx.stop().await;
}

#[tokio::test]
async fn a_dropped_stream_is_replayed_by_a_get_with_its_last_event_id() {
    let fx = HttpFixture::start(FixtureOptions {
        reply: Reply::Sse,
        event_ids: true,
        retry_ms: Some(50),
        ..FixtureOptions::default()
    })
    .await;
    let session = open_session(&fx.url()).await;
    let mut events =
        Events::new(post(&fx.url(), Some(&session), &call(7, "drop", json!({}))).await);
    let retry = events.next_block().await.expect("retry field");
    assert_eq!(retry.retry.as_deref(), Some("50"));
    let priming = events.next_block().await.expect("priming event");
    assert!(
        priming.id.is_some() && priming.data.is_empty(),
        "{priming:?}"
    );
    let note = events.next_block().await.expect("log message");
    assert!(note.data.contains("notifications/message"), "{note:?}");
    assert!(
        events.next_block().await.is_none(),
        "dropped without a response"
    );

    let last = note.id.expect("event id");
    let headers = [
        ("mcp-session-id", session.as_str()),
        ("last-event-id", last.as_str()),
    ];
    let mut replay = Events::new(get_stream(&fx.url(), &headers).await);
    let resumed = replay.next_message().await.expect("replayed response");
    assert_eq!(resumed["id"], 7);
    assert_eq!(resumed["result"]["content"][0]["text"], "resumed");
    assert!(
        replay.next_block().await.is_none(),
        "a replayed request stream ends"
    );
    assert_eq!(fx.stats().last_event_ids, vec![last]);
    fx.stop().await;
}

#[tokio::test]
async fn expired_sessions_are_answered_404() {
    let fx = HttpFixture::start(FixtureOptions::default()).await;
    let session = open_session(&fx.url()).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(
        post(&fx.url(), Some(&session), &ping).await.status(),
        StatusCode::OK
    );
    fx.expire_sessions();
    assert_eq!(
        post(&fx.url(), Some(&session), &ping).await.status(),
        StatusCode::NOT_FOUND
    );
    let missing = post(&fx.url(), None, &ping).await;
    assert_eq!(missing.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        json_body(missing).await["error"]["message"],
        "missing session id"
    );
    fx.stop().await;
}

#[tokio::test]
async fn a_missing_bearer_token_is_answered_401_with_the_challenge() {
    let fx = HttpFixture::start(FixtureOptions {
        bearer: Some("s3cret".into()),
        ..FixtureOptions::default()
    })
    .await;
    let resp = post(&fx.url(), None, &initialize("2025-11-25")).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let base = format!("http://127.0.0.1:{}", fx.port());
    let challenge = format!(
        r#"Bearer realm="fixture", resource_metadata="{base}/.well-known/oauth-protected-resource""#
    );
    assert_eq!(resp.headers()["www-authenticate"], challenge.as_str());
    assert_eq!(
        resp.headers()["mcp-auth-server"],
        format!("{base}/auth").as_str()
    );
    let body = bounded("401 body", resp.text()).await.unwrap();
    assert_eq!(body, "missing or invalid bearer token");

    let resp = bounded(
        "authorised POST",
        crate::support::http_client()
            .post(fx.url())
            .header("accept", ACCEPT_BOTH)
            .header("authorization", "Bearer s3cret")
            .header("x-fixture-key", "k1")
            .body(initialize("2025-11-25").to_string())
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(fx.stats().authorization, vec!["Bearer s3cret"]);
    assert_eq!(fx.stats().custom_header, vec!["k1"]);
    fx.stop().await;
}

#[tokio::test]
async fn get_is_405_when_the_server_stream_is_off_and_carries_list_changed_when_on() {
    let off = HttpFixture::start(FixtureOptions {
        get_stream: false,
        ..FixtureOptions::default()
    })
    .await;
    let session = open_session(&off.url()).await;
    let resp = get_stream(&off.url(), &[("mcp-session-id", &session)]).await;
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    off.stop().await;

    let on = HttpFixture::start(FixtureOptions::default()).await;
    let session = open_session(&on.url()).await;
    let mut events = Events::new(get_stream(&on.url(), &[("mcp-session-id", &session)]).await);
    // The stream is registered before its response headers are sent.
    assert_eq!(on.stats().get_streams_opened, 1);
    on.notify_tools_changed().await;
    let note = events.next_message().await.expect("list_changed");
    assert_eq!(note["method"], "notifications/tools/list_changed");
    let extra =
        json_body(post(&on.url(), Some(&session), &call(1, "extra_1", json!({}))).await).await;
    assert_eq!(extra["result"]["content"][0]["text"], "extra");
    on.drop_get_streams();
    assert!(
        events.next_block().await.is_none(),
        "the server closed the stream"
    );
    on.stop().await;
}

#[tokio::test]
async fn legacy_sse_announces_its_endpoint_and_answers_on_the_stream() {
    let fx = HttpFixture::start(FixtureOptions {
        legacy_sse: true,
        ..FixtureOptions::default()
    })
    .await;
    let probe = post(&fx.url(), None, &initialize("2025-11-25")).await;
    assert_eq!(probe.status(), StatusCode::METHOD_NOT_ALLOWED);

    let mut events = Events::new(get_stream(&fx.url(), &[]).await);
    let endpoint = events.next_block().await.expect("endpoint event");
    assert_eq!(endpoint.event.as_deref(), Some("endpoint"));
    assert!(
        endpoint.data.starts_with("/messages?session="),
        "{endpoint:?}"
    );
    let messages = format!("http://127.0.0.1:{}{}", fx.port(), endpoint.data);

    let send = |msg: Value| {
        let req = crate::support::http_client()
            .post(&messages)
            .body(msg.to_string());
        async move { bounded("legacy POST", req.send()).await.unwrap().status() }
    };
    assert_eq!(send(initialize("2024-11-05")).await, StatusCode::ACCEPTED);
    let init = events.next_message().await.expect("initialize result");
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05");
    assert_eq!(
        send(call(1, "echo", json!({"text": "hi"}))).await,
        StatusCode::ACCEPTED
    );
    let echo = events.next_message().await.expect("echo result");
    assert_eq!(echo["result"]["content"][0]["text"], "hi");
    fx.notify_tools_changed().await;
    let note = events.next_message().await.expect("list_changed");
    assert_eq!(note["method"], "notifications/tools/list_changed");
    assert_eq!(fx.stats().initializes, 1);
    fx.stop().await;
}

#[tokio::test]
async fn a_cancellation_ends_a_hanging_call_and_a_vanished_client_counts_as_a_disconnect() {
    let fx = HttpFixture::start(FixtureOptions {
        reply: Reply::Sse,
        ..FixtureOptions::default()
    })
    .await;
    let session = open_session(&fx.url()).await;
    let mut hanging =
        Events::new(post(&fx.url(), Some(&session), &call(5, "hang", json!({}))).await);
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 5, "reason": "test"}});
    assert_eq!(
        post(&fx.url(), Some(&session), &cancel).await.status(),
        StatusCode::ACCEPTED
    );
    assert!(
        hanging.next_block().await.is_none(),
        "cancelled: no response"
    );
    assert_eq!(fx.stats().cancelled, vec![cancel["params"].clone()]);
    assert_eq!(fx.stats().disconnects, 0);

    let gone = post(&fx.url(), Some(&session), &call(6, "hang", json!({}))).await;
    drop(gone);
    eventually("a disconnect is counted", BOUND, || async {
        (fx.stats().disconnects == 1).then_some(())
    })
    .await;
    fx.stop().await;
}

#[tokio::test]
async fn a_json_reply_abandoned_by_its_client_counts_as_a_disconnect() {
    let fx = HttpFixture::start(FixtureOptions::default()).await;
    let session = open_session(&fx.url()).await;
    let hang = request(&fx.url(), Some(&session), &call(1, "hang", json!({})))
        .timeout(Duration::from_millis(200))
        .send();
    assert!(
        bounded("hanging POST", hang).await.is_err(),
        "hang never answers"
    );
    eventually("a disconnect is counted", BOUND, || async {
        (fx.stats().disconnects == 1).then_some(())
    })
    .await;
    fx.stop().await;
}

#[tokio::test]
async fn failures_stalls_and_stop_behave_as_configured() {
    let failing = HttpFixture::start(FixtureOptions {
        fail_status: Some(503),
        ..FixtureOptions::default()
    })
    .await;
    let resp = post(&failing.url(), None, &initialize("2025-11-25")).await;
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body = bounded("failure body", resp.text()).await.unwrap();
    assert_eq!(body, "fixture failure: upstream database unavailable");
    failing.stop().await;

    let forbidden = HttpFixture::start(FixtureOptions {
        forbidden: true,
        ..FixtureOptions::default()
    })
    .await;
    let resp = post(&forbidden.url(), None, &initialize("2025-11-25")).await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let challenge = r#"Bearer error="insufficient_scope", scope="mcp:tools""#;
    assert_eq!(resp.headers()["www-authenticate"], challenge);
    forbidden.stop().await;

    let stalled = HttpFixture::start(FixtureOptions {
        stall: true,
        ..FixtureOptions::default()
    })
    .await;
    let req = crate::support::http_client()
        .post(stalled.url())
        .body("{}")
        .timeout(Duration::from_millis(200))
        .send();
    assert!(bounded("stalled POST", req).await.unwrap_err().is_timeout());
    stalled.stop().await;

    let fx = HttpFixture::start(FixtureOptions::default()).await;
    let session = open_session(&fx.url()).await;
    let mut events = Events::new(get_stream(&fx.url(), &[("mcp-session-id", &session)]).await);
    let hang = tokio::spawn(request(&fx.url(), Some(&session), &call(1, "hang", json!({}))).send());
    eventually("the hanging call is running", BOUND, || async {
        (fx.stats().posts == 3).then_some(())
    })
    .await;
    let url = fx.url();
    bounded("stop", fx.stop()).await;
    assert!(
        events.next_block().await.is_none(),
        "stop closes open streams"
    );
    let hang = bounded("hanging POST after stop", hang).await.unwrap();
    assert!(hang.is_err(), "stop closes busy connections: {hang:?}");
    let after = crate::support::http_client().get(url).send();
    assert!(
        bounded("GET after stop", after).await.is_err(),
        "nothing listens"
    );
}
