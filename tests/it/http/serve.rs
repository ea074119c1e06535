//! The HTTP listener: legacy sessions and stateless requests against the real daemon.
//!
//! Also the security checks, the token, cancellation by a closed response.

use crate::support::*;
use serde_json::{Value, json};
use std::path::Path;

const MODERN: &str = "2026-07-28";

/// A daemon with the HTTP listener on a free port and one fixture server `fx`.
async fn daemon(fixture_args: &[&str]) -> (Daemon, String) {
    daemon_in(DaemonBuilder::new(), fixture_args).await
}

async fn token(d: &Daemon) -> String {
    let (code, out, err) = d.run_cli(&["ctl", "http-token"]).await;
    assert_eq!(code, 0, "ctl http-token: {err}");
    out.trim().to_owned()
}

struct Http {
    client: reqwest::Client,
    url: String,
    token: String,
}

impl Http {
    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        self.client
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("content-type", "application/json")
            .body(body.to_string())
    }

    /// A POST in a session, accepting only JSON.
    async fn json(&self, session: &str, body: Value) -> (u16, Value) {
        let r = self
            .post(&body)
            .header("accept", "application/json")
            .header("mcp-session-id", session)
            .send()
            .await
            .expect("POST");
        let status = r.status().as_u16();
        let text = r.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Opens a legacy session; returns its id.
    async fn initialize(&self, capabilities: Value) -> String {
        let r = self
            .post(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": capabilities,
                "clientInfo": {"name": "http-test", "version": "1"}}}),
            )
            .header("accept", "application/json")
            .send()
            .await
            .expect("initialize");
        assert_eq!(r.status().as_u16(), 200);
        let session = r
            .headers()
            .get("mcp-session-id")
            .expect("a session id")
            .to_str()
            .unwrap()
            .to_owned();
        let body: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
        assert_eq!(body["result"]["protocolVersion"], "2025-11-25", "{body}");
        let (status, _) = self
            .json(
                &session,
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            )
            .await;
        assert_eq!(status, 202);
        session
    }

    /// A stateless 2026-07-28 request with the headers the spec requires.
    fn modern(&self, id: Value, method: &str, mut params: Value) -> reqwest::RequestBuilder {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "http-test", "version": "1"},
        });
        let mut r = self
            .post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", method);
        if let Some(name) = params.get("name").and_then(Value::as_str) {
            r = r.header("mcp-name", name);
        }
        r
    }
}

/// Reads an SSE body event by event.
struct Events {
    resp: reqwest::Response,
    buf: String,
}

impl Events {
    fn new(resp: reqwest::Response) -> Events {
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream"),
            "{:?}",
            resp.headers()
        );
        Events {
            resp,
            buf: String::new(),
        }
    }

    /// The next message, or None when the stream ends.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let event: String = self.buf.drain(..end + 2).collect();
                let data: String = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data: "))
                    .collect();
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                return Some(serde_json::from_str(&data).expect("JSON in an SSE event"));
            }
            let chunk = within("an SSE chunk", self.resp.chunk()).await.ok()??;
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

async fn http(d: &Daemon, url: String) -> Http {
    Http {
        client: crate::support::http_client(),
        url,
        token: token(d).await,
    }
}

#[tokio::test]
async fn a_legacy_session_lists_and_calls_tools_and_ends_with_delete() {
    let (d, url) = daemon(&[]).await;
    let h = http(&d, url).await;
    let s = h.initialize(json!({})).await;
    let (status, list) = h
        .json(
            &s,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .await;
    assert_eq!(status, 200);
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"fx__echo"), "{names:?}");
    let (_, r) = h
        .json(
            &s,
            json!({"jsonrpc": "2.0", "id": "c", "method": "tools/call",
                   "params": {"name": "fx__echo", "arguments": {"text": "over http"}}}),
        )
        .await;
    assert_eq!(r["id"], "c");
    assert_eq!(text(&r), "over http");

    let (code, out, _) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0);
    assert!(out.contains(&format!("serving HTTP at {}", h.url)), "{out}");

    // The session is an agent like any other.
    let (code, out, _) = d.run_cli(&["ctl", "agents"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("http session 127.0.0.1:"), "{out}");
    assert!(out.contains("http-test 1"), "{out}");

    // A GET stream opens once per session.
    let get = || {
        h.client
            .get(&h.url)
            .bearer_auth(&h.token)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &s)
            .send()
    };
    let first = get().await.unwrap();
    assert_eq!(first.status().as_u16(), 200);
    assert_eq!(get().await.unwrap().status().as_u16(), 409);
    drop(first);

    let del = h
        .client
        .delete(&h.url)
        .bearer_auth(&h.token)
        .header("mcp-session-id", &s)
        .send()
        .await
        .unwrap();
    assert_eq!(del.status().as_u16(), 204);
    let (status, r) = h
        .json(
            &s,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        )
        .await;
    assert_eq!(status, 404, "{r}");
    // Without a session, only initialize is accepted.
    let (status, r) = h
        .json(
            "",
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
        )
        .await;
    assert!(status == 400 || status == 404, "{status} {r}");
}

#[tokio::test]
async fn progress_and_server_requests_come_on_the_calls_own_stream() {
    let (d, url) = daemon(&[]).await;
    let h = http(&d, url).await;
    let s = h.initialize(json!({"elicitation": {}})).await;
    let sse = |body: Value| {
        h.post(&body)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &s)
            .send()
    };

    // Progress, then the reply, on the POST's stream, which then ends.
    let r = sse(
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "fx__progress", "arguments": {"steps": 3, "ms": 1},
        "_meta": {"progressToken": "tok"}}}),
    )
    .await
    .unwrap();
    let mut ev = Events::new(r);
    let mut progress = 0;
    let reply = loop {
        let m = ev.next().await.expect("the stream carries the reply");
        if m["method"] == "notifications/progress" {
            assert_eq!(m["params"]["progressToken"], "tok", "{m}");
            progress += 1;
        } else {
            break m;
        }
    };
    assert_eq!(progress, 3);
    assert_eq!(reply["id"], 7);
    assert!(reply.get("result").is_some(), "{reply}");
    assert!(ev.next().await.is_none(), "the stream ends after the reply");

    // A server's request during a call comes on that call's stream; the answer is POSTed.
    let r = sse(json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                       "params": {"name": "fx__ask", "arguments": {}}}))
    .await
    .unwrap();
    let mut ev = Events::new(r);
    let ask = ev.next().await.expect("the server's request");
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    let (status, _) = h
        .json(
            &s,
            json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}),
        )
        .await;
    assert_eq!(status, 202);
    let reply = ev.next().await.expect("the reply");
    assert_eq!(reply["id"], 8);
    assert_eq!(text(&reply), "hello, Ada");
}

#[tokio::test]
async fn stateless_requests_are_served_with_their_headers_checked() {
    let (d, url) = daemon(&[]).await;
    let h = http(&d, url).await;
    let r = h
        .modern(
            json!(1),
            "tools/call",
            json!({"name": "fx__echo", "arguments": {"text": "hi"}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let mut ev = Events::new(r);
    let reply = ev.next().await.unwrap();
    assert_eq!(reply["id"], 1);
    assert_eq!(reply["result"]["resultType"], "complete", "{reply}");
    assert_eq!(text(&reply), "hi");

    // Two clients may use the same id at once: each gets its own answer.
    let slow = h
        .modern(
            json!(5),
            "tools/call",
            json!({"name": "fx__sleep", "arguments": {"ms": 300}}),
        )
        .send();
    let fast = h
        .modern(
            json!(5),
            "tools/call",
            json!({"name": "fx__echo", "arguments": {"text": "second"}}),
        )
        .send();
    let (slow, fast) = tokio::join!(slow, fast);
    let fast = Events::new(fast.unwrap()).next().await.unwrap();
    let slow = Events::new(slow.unwrap()).next().await.unwrap();
    assert_eq!(
        (fast["id"].clone(), slow["id"].clone()),
        (json!(5), json!(5))
    );
    assert_eq!(text(&fast), "second");
    assert!(slow.get("result").is_some(), "{slow}");

    // A name header that disagrees with the body: 400 and HeaderMismatch, with the id.
    let r = h
        .modern(
            json!(2),
            "tools/call",
            json!({"name": "fx__other", "arguments": {"text": "x"}}),
        )
        .body(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "fx__echo", "arguments": {"text": "x"},
                "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                          "io.modelcontextprotocol/clientCapabilities": {}}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let body: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(
        (error_code(&body), body["id"].clone()),
        (Some(-32020), json!(2))
    );

    // A method 2026-07-28 removed: 404 and -32601.
    let r = h.modern(json!(3), "ping", json!({})).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let body: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(error_code(&body), Some(-32601));

    // Stateless clients share one connection, so none may choose its profile.
    let r = h
        .modern(json!(4), "mcpd/profile", json!({"name": "any"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let body: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert!(error_message(&body).contains("session"), "{body}");

    // No GET stream and no sessions in 2026-07-28.
    for req in [h.client.get(&h.url), h.client.delete(&h.url)] {
        let r = req
            .bearer_auth(&h.token)
            .header("mcp-protocol-version", MODERN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 405);
    }
}

#[tokio::test]
async fn requests_without_the_token_or_from_foreign_hosts_are_refused() {
    let (d, url) = daemon(&[]).await;
    let h = http(&d, url.clone()).await;
    let token_file = d.dir().join("mcpd-http-token");
    let file_token = std::fs::read_to_string(&token_file).expect("the token file");
    assert_eq!(file_token.trim(), h.token);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}});
    let body = body.to_string();
    let send = |r: reqwest::RequestBuilder| {
        let body = body.clone();
        async move {
            r.header("content-type", "application/json")
                .header("accept", "application/json")
                .body(body)
                .send()
                .await
                .unwrap()
        }
    };
    let r = send(h.client.post(&url)).await;
    assert_eq!(r.status().as_u16(), 401);
    assert!(r.headers().contains_key("www-authenticate"));
    let r = send(h.client.post(&url).bearer_auth("not-the-token-at-all")).await;
    assert_eq!(r.status().as_u16(), 401);
    // Host and Origin must name this machine; a local web origin is fine.
    for (header, value, expected) in [
        ("host", "evil.example.com", 403),
        ("origin", "http://evil.example.com", 403),
        ("origin", "http://localhost:3000", 200),
    ] {
        let r = send(
            h.client
                .post(&url)
                .bearer_auth(&h.token)
                .header(header, value),
        )
        .await;
        assert_eq!(r.status().as_u16(), expected, "{header}: {value}");
    }

    // The token survives a restart (it is generated once).
    let mut d = d;
    d.restart_daemon().await;
    assert_eq!(token(&d).await, h.token);
}

#[tokio::test]
async fn closing_the_response_cancels_the_call_upstream() {
    let d = DaemonBuilder::new();
    let record = d.dir().join("rec");
    let rec = record.to_str().unwrap().to_owned();
    let (d, url) = daemon_in(d, &["--tools", "hang,pid", "--record", &rec]).await;
    let h = http(&d, url).await;
    let pid = {
        let r = h.modern(
            json!(1),
            "tools/call",
            json!({"name": "fx__pid", "arguments": {}}),
        );
        let reply = Events::new(r.send().await.unwrap()).next().await.unwrap();
        text(&reply).to_owned()
    };
    let log = record.join(format!("received-{pid}.log"));
    let call = h
        .modern(
            json!(2),
            "tools/call",
            json!({"name": "fx__hang", "arguments": {}}),
        )
        .send();
    let pending = tokio::spawn(call);
    wait_for_line(&log, "\"hang\"").await;
    pending.abort();
    let cancelled: Value =
        serde_json::from_str(&wait_for_line(&log, "notifications/cancelled").await).unwrap();
    let hang: Value = read_lines(&log)
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["params"]["name"] == "hang")
        .unwrap();
    assert_eq!(cancelled["params"]["requestId"], hang["id"]);
    d.wait_server("fx", "no calls in flight", |s| s["in_flight"] == 0)
        .await;
    // The agent's token never goes upstream.
    for line in read_lines(&log) {
        assert!(!line.contains(&h.token), "{line}");
    }
}

async fn daemon_in(b: DaemonBuilder, fixture_args: &[&str]) -> (Daemon, String) {
    let d = b
        .daemon("http_listen = \"127.0.0.1:0\"")
        .fixture("fx", fixture_args)
        .start()
        .await;
    d.wait_ready().await;
    let url = d.status().await["daemon"]["http"]
        .as_str()
        .expect("status names the HTTP URL")
        .to_owned();
    (d, url)
}

#[tokio::test]
async fn oversized_and_malformed_bodies_get_clear_errors_and_the_daemon_goes_on() {
    let (d, url) = daemon_in(
        DaemonBuilder::new().daemon("max_message_bytes = 65536"),
        &[],
    )
    .await;
    let h = http(&d, url).await;
    let send = |body: String| {
        h.client
            .post(&h.url)
            .bearer_auth(&h.token)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(body)
            .send()
    };
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                     "params": {"pad": "x".repeat(70_000)}});
    let r = send(big.to_string()).await.unwrap();
    assert_eq!(r.status().as_u16(), 413);
    let body: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert!(error_message(&body).contains("65536"), "{body}");
    let r = send("{not json".into()).await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let body: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(error_code(&body), Some(-32700));
    let r = send("[]".into()).await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let r = send(json!({"jsonrpc": "2.0", "id": 1}).to_string())
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    // Still serving.
    let s = h.initialize(json!({})).await;
    let (status, _) = h
        .json(
            &s,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        )
        .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn listener_settings_are_checked_when_the_config_loads() {
    let dir = tempfile::tempdir().unwrap();
    let check = |body: &str, file: &Path| {
        std::fs::write(file, body).unwrap();
        let file = file.to_str().unwrap().to_owned();
        async move { run_mcpd(&["check-config", "--config", &file], None).await }
    };
    let f = dir.path().join("c.toml");
    let (code, _, err) = check("[daemon]\nhttp_listen = \"0.0.0.0:8765\"\n", &f).await;
    assert_eq!(code, 78, "{err}");
    assert!(err.contains("http_allow_remote"), "{err}");
    let (code, _, err) = check(
        "[daemon]\nhttp_listen = \"0.0.0.0:8765\"\nhttp_allow_remote = true\nhttp_auth = \"none\"\n",
        &f,
    )
    .await;
    assert_eq!(code, 78, "{err}");
    assert!(err.contains("loopback"), "{err}");
    let (code, _, err) = check("[daemon]\nhttp_auth = \"none\"\n", &f).await;
    assert_eq!(code, 78, "{err}");
    assert!(err.contains("http_listen"), "{err}");
    let (code, _, err) = check("[daemon]\nhttp_listen = \"127.0.0.1:8765\"\n", &f).await;
    assert_eq!(code, 0, "{err}");
}

#[tokio::test]
async fn http_clients_never_get_control_methods() {
    let (d, url) = daemon(&[]).await;
    let h = http(&d, url).await;
    let session = h.initialize(json!({})).await;
    for (i, method) in ["mcpd/status", "mcpd/agents", "mcpd/metrics", "mcpd/reload"]
        .into_iter()
        .enumerate()
    {
        let (status, body) = h
            .json(
                &session,
                json!({"jsonrpc": "2.0", "id": i + 1, "method": method}),
            )
            .await;
        assert_eq!(status, 200, "{method}: {body}");
        assert_eq!(body["error"]["code"], -32018, "{method}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains("HTTP clients cannot use them"), "{body}");
        assert!(!body.to_string().contains("mcpd-fixture"), "{body}");
        // Statelessly too.
        let r = h
            .modern(json!(100 + i), method, json!({}))
            .send()
            .await
            .expect("POST");
        let text = r.text().await.expect("body");
        assert!(text.contains("-32018"), "{method}: {text}");
    }
}

#[tokio::test]
async fn stateless_clients_in_discover_mode_find_describe_and_call_without_activating() {
    let b = DaemonBuilder::new().daemon("tools = \"discover\"");
    let (d, url) = daemon_in(b, &["--tools", "echo,add"]).await;
    let h = http(&d, url).await;
    let post = async |id: u64, method: &str, params: Value| {
        let r = h.modern(json!(id), method, params).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200);
        Events::new(r).next().await.unwrap()
    };
    let names = |r: &Value| -> Vec<String> {
        r["result"]["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    };
    let meta = [
        "mcpd__find_tools",
        "mcpd__describe_tools",
        "mcpd__call_tool",
    ];
    let r = post(1, "tools/list", json!({})).await;
    assert_eq!(names(&r), meta, "{r}");
    assert_eq!(
        r["result"]["ttlMs"], 0,
        "the discovery list is not cached: {r}"
    );
    let r = post(
        2,
        "tools/call",
        json!({"name": "mcpd__find_tools", "arguments": {"query": "add two numbers"}}),
    )
    .await;
    assert_eq!(
        r["result"]["structuredContent"]["tools"][0]["name"], "fx__add",
        "{r}"
    );
    let r = post(
        3,
        "tools/call",
        json!({"name": "mcpd__describe_tools", "arguments": {"names": ["fx__add"]}}),
    )
    .await;
    assert_eq!(
        r["result"]["structuredContent"]["tools"][0]["name"], "fx__add",
        "{r}"
    );
    // No session to activate it in: the shared stateless list stays as it was.
    let r = post(4, "tools/list", json!({})).await;
    assert_eq!(names(&r), meta, "{r}");
    let r = post(
        5,
        "tools/call",
        json!({"name": "mcpd__call_tool", "arguments": {"name": "fx__echo", "arguments": {"text": "via"}}}),
    )
    .await;
    assert_eq!(text(&r), "via", "{r}");
}
