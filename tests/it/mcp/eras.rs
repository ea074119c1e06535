//! Both protocol eras.
//!
//! Probing local servers, modern upstreams, dual-era agent connections, and bridging
//! server requests across eras.

use crate::support::*;
use serde_json::{Value, json};
use std::path::PathBuf;

const MODERN: &str = "2026-07-28";

fn record(b: &DaemonBuilder) -> (PathBuf, String) {
    let dir = b.dir().join("rec");
    let arg = dir.to_str().expect("utf-8 temp path").to_owned();
    (dir, arg)
}

/// The modern `_meta` envelope of an agent's request.
fn envelope(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": { "name": "eras-test", "version": "1" },
    })
}

/// A modern agent's `tools/call`.
async fn modern_call(a: &mut Agent, tool: &str, args: Value, caps: Value) -> Value {
    let params = json!({ "name": tool, "arguments": args, "_meta": envelope(caps) });
    a.request("tools/call", Some(params)).await
}

/// A legacy agent connection that declares `capabilities` in `initialize`.
async fn legacy_agent(d: &Daemon, capabilities: Value) -> Agent {
    let mut a = d.agent().await;
    let r = a
        .request(
            "initialize",
            Some(json!({
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": { "name": "eras-test", "version": "1" },
            })),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
    a.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    a
}

/// A server's era is found on the process that serves it (as the SDKs' auto mode does),
/// so a server is started once: a package runner installing on its first start is never
/// a second, disposable copy killed half-way. The verdict is remembered: later starts
/// speak `initialize` at once.
#[tokio::test]
async fn a_legacy_server_is_asked_its_era_on_its_own_process_and_started_once() {
    let b = DaemonBuilder::new();
    let (rec, arg) = record(&b);
    let mut d = b.fixture("old", &["--record", &arg]).start().await;
    d.wait_ready().await;
    let s = d.server_status("old").await;
    assert_eq!(s["era"], "legacy", "{s}");
    assert!(
        s["era_reason"].as_str().unwrap_or("").contains("-32601"),
        "{s}"
    );
    let serving = status_pid(&s).expect("pid");
    assert_eq!(recorded_starts(&rec), vec![serving], "one process");
    let methods = recorded_methods(&rec, serving);
    assert_eq!(
        methods.get(..2),
        Some(&["server/discover".to_owned(), "initialize".to_owned()][..]),
        "{methods:?}"
    );

    // A restart of the server and of the daemon reuse the remembered verdict.
    let (code, _, err) = d.run_cli(&["ctl", "restart", "old"]).await;
    assert_eq!(code, 0, "{err}");
    d.wait_server("old", "a new process is ready", |r| {
        r["state"] == "ready" && status_pid(r) != Some(serving)
    })
    .await;
    d.restart_daemon().await;
    d.wait_ready().await;
    let starts = recorded_starts(&rec);
    assert_eq!(starts.len(), 3, "three processes in all");
    for pid in &starts[1..] {
        let methods = recorded_methods(&rec, *pid);
        assert_eq!(
            methods.first().map(String::as_str),
            Some("initialize"),
            "{methods:?}"
        );
        assert!(
            !methods.iter().any(|m| m == "server/discover"),
            "{methods:?}"
        );
    }
    let s = d.server_status("old").await;
    assert!(
        s["era_reason"]
            .as_str()
            .unwrap_or("")
            .starts_with("remembered from an earlier start"),
        "{s}"
    );
}

/// A legacy server that quits on a first request other than `initialize` (rmcp 2.x) is
/// started again at once speaking `initialize`; one that ignores `server/discover` is sent
/// `initialize` on the same process after `probe_timeout`. A modern server slower than
/// `probe_timeout` gets both requests and is still served as modern.
#[tokio::test]
async fn servers_that_exit_on_or_ignore_discover_are_served_as_legacy() {
    let b = DaemonBuilder::new();
    let (rec, arg) = record(&b);
    let d = b
        .fixture("exits", &["--discover-exit"])
        .fixture_with(
            "silent",
            &["--discover-silent", "--record", &arg],
            "[servers.silent.health]\nprobe_timeout = \"300ms\"",
        )
        .fixture_with(
            "slow",
            &["--era", "modern", "--startup-delay-ms", "1500"],
            "[servers.slow.health]\nprobe_timeout = \"300ms\"",
        )
        .start()
        .await;
    d.wait_ready().await;
    let exits = d.server_status("exits").await;
    assert_eq!(exits["era"], "legacy", "{exits}");
    assert!(
        exits["era_reason"]
            .as_str()
            .unwrap_or("")
            .contains("ended when asked server/discover"),
        "{exits}"
    );
    let silent = d.server_status("silent").await;
    assert_eq!(silent["era"], "legacy", "{silent}");
    assert!(
        silent["era_reason"]
            .as_str()
            .unwrap_or("")
            .contains("within 300ms"),
        "{silent}"
    );
    assert_eq!(
        recorded_starts(&rec).len(),
        1,
        "the silent server started once"
    );
    let slow = d.server_status("slow").await;
    assert_eq!(slow["era"], "modern", "{slow}");
    let mut a = d.initialized_agent().await;
    for tool in ["exits__echo", "silent__echo", "slow__echo"] {
        let r = a.call(tool, json!({"text": "ok"})).await;
        assert_eq!(text(&r), "ok", "{tool}: {r}");
    }
}

#[tokio::test]
async fn a_modern_server_gets_the_envelope_and_its_subscription_updates_every_agent() {
    // Pinning would hold the changed lists (pins.rs); this test is about them reaching agents.
    let b = DaemonBuilder::new().daemon("pin = \"off\"");
    let (rec, arg) = record(&b);
    let d = b
        .fixture("new", &["--era", "modern", "--record", &arg])
        .start()
        .await;
    d.wait_ready().await;
    let s = d.server_status("new").await;
    assert_eq!(s["era"], "modern", "{s}");
    assert_eq!(s["protocol_version"], MODERN, "{s}");
    let mut legacy = d.initialized_agent().await;
    let r = legacy.call("new__echo", json!({"text": "hi"})).await;
    assert_eq!(text(&r), "hi", "{r}");
    // A legacy agent gets a legacy result: no resultType, no modern _meta keys.
    assert!(r["result"].get("resultType").is_none(), "{r}");
    assert!(
        r["result"]
            .pointer("/_meta/io.modelcontextprotocol~1serverInfo")
            .is_none(),
        "{r}"
    );
    let serving = status_pid(&s).expect("pid");
    let call = recorded_requests(&rec, serving)
        .into_iter()
        .find(|m| m["method"] == "tools/call")
        .expect("the call reached the server");
    assert_eq!(
        call["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        MODERN
    );
    assert!(call["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"].is_object());

    // A modern agent subscribes; a tool-list change reaches both agents.
    let mut modern = d.agent().await;
    let listen = json!({"notifications": {"toolsListChanged": true}, "_meta": envelope(json!({}))});
    let listen_id = json!(modern.fresh_id());
    modern
        .send(json!({"jsonrpc": "2.0", "id": listen_id, "method": "subscriptions/listen", "params": listen}))
        .await;
    let ack = within("the acknowledgement", modern.recv())
        .await
        .expect("open");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        listen_id
    );
    let r = legacy
        .call("new__set_tools", json!({"tools": ["echo", "fresh"]}))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let note = within("a list change on the subscription", async {
        loop {
            let m = modern.recv().await.expect("open");
            if m["method"] == "notifications/tools/list_changed" {
                break m;
            }
        }
    })
    .await;
    assert_eq!(
        note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        listen_id
    );
    within("a list change for the legacy agent", async {
        loop {
            let m = legacy.recv().await.expect("open");
            if m["method"] == "notifications/tools/list_changed" {
                break;
            }
        }
    })
    .await;
    assert!(legacy.tool_names().await.contains(&"new__fresh".to_owned()));
}

#[tokio::test]
async fn agent_connections_are_pinned_by_their_first_decisive_exchange() {
    let d = DaemonBuilder::new().fixture("x", &[]).start().await;
    d.wait_ready().await;

    // server/discover pins nothing: initialize still works afterwards.
    let mut a = d.agent().await;
    let r = a
        .request(
            "server/discover",
            Some(json!({"_meta": envelope(json!({}))})),
        )
        .await;
    let versions = r["result"]["supportedVersions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        versions.contains(&json!(MODERN)) && versions.contains(&json!("2025-11-25")),
        "{r}"
    );
    assert!(
        r["result"]["ttlMs"].is_u64() && r["result"]["cacheScope"].is_string(),
        "{r}"
    );
    assert!(a.initialize().await.get("result").is_some());

    // A modern request pins modern: initialize is refused, a bare request too.
    let mut m = d.agent().await;
    let r = m
        .request("tools/list", Some(json!({"_meta": envelope(json!({}))})))
        .await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert!(r["result"]["ttlMs"].is_u64(), "{r}");
    let r = m.request("initialize", Some(json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}))).await;
    assert_eq!(error_code(&r), Some(-32022), "{r}");
    assert!(r["error"]["data"]["supported"].is_array(), "{r}");
    let r = m.request("tools/list", None).await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    assert!(
        error_message(&r).contains("io.modelcontextprotocol/protocolVersion"),
        "{r}"
    );

    // Malformed modern requests get the errors the spec names.
    let mut bad = d.agent().await;
    let r = bad
        .request(
            "tools/list",
            Some(json!({"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}})),
        )
        .await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    assert!(error_message(&r).contains("clientCapabilities"), "{r}");
    let mut meta = envelope(json!({}));
    meta["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let r = bad
        .request("tools/list", Some(json!({"_meta": meta})))
        .await;
    assert_eq!(error_code(&r), Some(-32022), "{r}");
    assert_eq!(r["error"]["data"]["requested"], "2099-01-01", "{r}");
}

#[tokio::test]
async fn elicitation_crosses_every_pair_of_eras() {
    let d = DaemonBuilder::new()
        .fixture("old", &[])
        .fixture("new", &["--era", "modern"])
        .start()
        .await;
    d.wait_ready().await;
    let caps = json!({"elicitation": {}});
    let accept = json!({"action": "accept", "content": {"name": "Ada"}});

    // Legacy agent: both servers' requests arrive as real elicitation/create requests.
    let mut legacy = legacy_agent(&d, caps.clone()).await;
    for tool in ["old__ask", "new__ask"] {
        let id = legacy.start_call(tool, json!({})).await;
        let ask = within("mcpd's elicitation request", async {
            loop {
                let m = legacy.recv().await.expect("open");
                if m["method"] == "elicitation/create" {
                    break m;
                }
            }
        })
        .await;
        assert!(
            ask["id"].as_str().unwrap_or("").starts_with("mcpd-"),
            "{ask}"
        );
        legacy
            .send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": accept}))
            .await;
        let r = legacy.response(&id).await;
        assert_eq!(text(&r), "hello, Ada", "{tool}: {r}");
    }

    // Modern agent: both servers' requests arrive as input_required; the retry answers.
    let mut modern = d.agent().await;
    for tool in ["old__ask", "new__ask"] {
        let r = modern_call(&mut modern, tool, json!({}), caps.clone()).await;
        let result = &r["result"];
        assert_eq!(result["resultType"], "input_required", "{tool}: {r}");
        let (key, request) = result["inputRequests"]
            .as_object()
            .and_then(|m| m.iter().next())
            .map(|(k, v)| (k.clone(), v.clone()))
            .expect("one input request");
        assert_eq!(request["method"], "elicitation/create", "{r}");
        let state = result["requestState"].clone();
        if tool == "old__ask" {
            assert!(
                state.as_str().unwrap_or("").starts_with("mcpd1."),
                "mcpd's own state: {r}"
            );
        }
        let params = json!({
            "name": tool, "arguments": {}, "_meta": envelope(caps.clone()),
            "inputResponses": { key: accept }, "requestState": state,
        });
        let r = modern.request("tools/call", Some(params)).await;
        assert_eq!(text(&r), "hello, Ada", "{tool}: {r}");
    }
}

#[tokio::test]
async fn request_states_cannot_be_forged_or_used_by_another_connection() {
    let d = DaemonBuilder::new().fixture("old", &[]).start().await;
    d.wait_ready().await;
    let caps = json!({"elicitation": {}});
    let mut a = d.agent().await;
    let r = modern_call(&mut a, "old__ask", json!({}), caps.clone()).await;
    let state = r["result"]["requestState"]
        .as_str()
        .expect("state")
        .to_owned();
    let retry = |state: &str| {
        json!({
            "name": "old__ask", "arguments": {}, "_meta": envelope(caps.clone()),
            "inputResponses": { "mcpd-1": {"action": "accept", "content": {"name": "Eve"}} },
            "requestState": state,
        })
    };
    let mut other = d.agent().await;
    let r = other.request("tools/call", Some(retry(&state))).await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    assert!(error_message(&r).contains("another connection"), "{r}");
    let forged = format!("{}x", &state[..state.len() - 1]);
    let r = a.request("tools/call", Some(retry(&forged))).await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    // The real retry still works afterwards.
    let r = a.request("tools/call", Some(retry(&state))).await;
    assert_eq!(text(&r), "hello, Eve", "{r}");
}

#[tokio::test]
async fn an_agent_without_the_capability_gets_a_clear_error_and_so_does_the_server() {
    let d = DaemonBuilder::new()
        .fixture("old", &[])
        .fixture("new", &["--era", "modern"])
        .start()
        .await;
    d.wait_ready().await;
    let mut legacy = legacy_agent(&d, json!({})).await;
    let r = legacy.call("new__ask", json!({})).await;
    assert_eq!(error_code(&r), Some(-32021), "{r}");
    assert!(error_message(&r).contains("elicitation"), "{r}");
    // The legacy server hears that mcpd cannot ask this agent; its tool says so.
    let r = legacy.call("old__ask", json!({})).await;
    assert!(
        r.to_string().contains("elicitation") && r["result"]["isError"] == true,
        "{r}"
    );
}

#[tokio::test]
async fn a_server_pinned_to_the_wrong_era_fails_clearly_and_others_keep_working() {
    let d = DaemonBuilder::new()
        .fixture_with("new", &["--era", "modern"], "protocol = \"legacy\"")
        .fixture_with("old", &[], "protocol = \"modern\"")
        .fixture("fine", &[])
        .start()
        .await;
    // An era set in the config that the server does not speak is not retried.
    let new = d
        .wait_server("new", "the mismatch fails the server", |s| {
            s["state"] == "failed"
        })
        .await;
    assert!(
        new["last_error"].as_str().unwrap_or("").contains("-32022"),
        "{new}"
    );
    let old = d
        .wait_server("old", "the mismatch fails the server", |s| {
            s["state"] == "failed"
        })
        .await;
    assert!(
        old["last_error"]
            .as_str()
            .unwrap_or("")
            .contains("does not speak 2026-07-28"),
        "{old}"
    );
    d.wait_server("fine", "the other server is ready", |s| {
        s["state"] == "ready"
    })
    .await;
    let mut a = d.initialized_agent().await;
    assert_eq!(
        text(&a.call("fine__echo", json!({"text": "ok"})).await),
        "ok"
    );
}

#[tokio::test]
async fn a_server_that_refuses_the_first_version_with_one_it_lists_is_asked_again_at_once() {
    let b = DaemonBuilder::new();
    let (rec, arg) = record(&b);
    let refusing = [
        "--era",
        "modern",
        "--refuse-first-request",
        "--record",
        &arg,
    ];
    let d = b
        .fixture_with("pinned", &refusing, "protocol = \"modern\"")
        .fixture("auto", &refusing)
        .start()
        .await;
    for name in ["pinned", "auto"] {
        let s = d
            .wait_server(name, "the server is ready after one retry", |s| {
                s["state"] == "ready" || s["state"] == "failed"
            })
            .await;
        assert_eq!(s["state"], "ready", "{name}: {s}");
        assert_eq!(s["era"], "modern", "{name}: {s}");
        assert!(s["last_error"].is_null(), "{name}: no failed start: {s}");
        // The serving process saw server/discover twice: refused, then answered.
        let pid = status_pid(&s).expect("pid");
        let discovers = recorded_requests(&rec, pid)
            .iter()
            .filter(|r| r["method"] == "server/discover")
            .count();
        assert_eq!(discovers, 2, "{name}");
    }
    // No restart: one process each.
    assert_eq!(recorded_starts(&rec).len(), 2, "no failed start");
    let mut a = d.initialized_agent().await;
    for tool in ["pinned__echo", "auto__echo"] {
        let r = a.call(tool, json!({"text": "ok"})).await;
        assert_eq!(text(&r), "ok", "{tool}: {r}");
    }
}

/// A plain `tools/call` (a name and arguments) reaches a legacy server with its arguments
/// exactly as the agent wrote them: numbers beyond a double's precision, key order and
/// escapes included. A call with more in its params (here `_meta`) still arrives whole.
/// Arguments a parse and a rewrite would change: a number beyond a double's precision,
/// a trailing zero, key order, escapes.
const AWKWARD_ARGS: &str =
    r#"{"z": 12345678901234567890123456789, "a": 1.50, "s": "caf\u00e9 \/"}"#;

/// A daemon with one fixture server `name` (`flags`) recording what it receives, and an
/// agent that has sent it a plain `tools/call` of `echo` with [`AWKWARD_ARGS`].
async fn plain_call_to(name: &str, flags: &[&str]) -> (Daemon, PathBuf, Agent) {
    let b = DaemonBuilder::new();
    let (rec, arg) = record(&b);
    let mut flags = flags.to_vec();
    flags.extend(["--record", &arg]);
    let d = b.fixture(name, &flags).start().await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    answered(
        &mut a,
        "plain",
        format!(
            r#"{{"jsonrpc":"2.0","id":"plain","method":"tools/call","params":{{"name":"{name}__echo","arguments":{AWKWARD_ARGS}}}}}"#
        ),
    )
    .await;
    (d, rec, a)
}

/// Sends `line` (a request with id `id`) and checks that it was answered with a result.
async fn answered(a: &mut Agent, id: &str, line: String) {
    a.send_raw(&line).await;
    let r = a.response(&json!(id)).await;
    assert!(r.get("result").is_some(), "{r}");
}

/// The `tools/call` lines server `name` received, as it read them.
async fn received_calls(d: &Daemon, rec: &std::path::Path, name: &str) -> Vec<String> {
    let pid = status_pid(&d.server_status(name).await).expect("pid");
    read_lines(&rec.join(format!("received-{pid}.log")))
        .into_iter()
        .filter(|l| l.contains("tools/call"))
        .collect()
}

/// A `tools/call` of `echo` dressed by mcpd (`_meta` added) whose arguments are
/// [`AWKWARD_ARGS`] as the agent wrote them, after the rest of its params; as JSON.
fn dressed_with_awkward_args(line: &str) -> Value {
    assert!(
        line.ends_with(&format!(r#","arguments":{AWKWARD_ARGS}}}}}"#)),
        "the server got {line}"
    );
    let call: Value = serde_json::from_str(line).expect("JSON");
    assert_eq!(call["params"]["name"], "echo");
    call
}

/// [`dressed_with_awkward_args`], whose agent asked for progress: the server got mcpd's
/// own (numeric) progress token.
fn with_mcpds_token(line: &str) {
    let call = dressed_with_awkward_args(line);
    assert!(
        call["params"]["_meta"]["progressToken"].is_number(),
        "{call}"
    );
}

#[tokio::test]
async fn a_plain_calls_arguments_reach_a_legacy_server_as_the_agent_wrote_them() {
    let (d, rec, mut a) = plain_call_to("old", &[]).await;
    // With `_meta` (a progress token, which the server gets as mcpd's own), the
    // arguments still go as written.
    answered(
        &mut a,
        "meta",
        format!(
            r#"{{"jsonrpc":"2.0","id":"meta","method":"tools/call","params":{{"_meta":{{"progressToken":"p"}},"name":"old__echo","arguments":{AWKWARD_ARGS}}}}}"#
        ),
    )
    .await;

    let calls = received_calls(&d, &rec, "old").await;
    assert_eq!(calls.len(), 2, "{calls:?}");
    let plain = &calls[0];
    assert!(
        plain.contains(&format!(
            r#""params":{{"name":"echo","arguments":{AWKWARD_ARGS}}}"#
        )),
        "the server got {plain}"
    );
    with_mcpds_token(&calls[1]);
}

#[tokio::test]
async fn arguments_through_call_tool_reach_the_server_as_the_agent_wrote_them() {
    let (d, rec, mut a) = plain_call_to("old", &[]).await;
    // The same arguments, named to mcpd__call_tool: the server gets the direct call's line.
    answered(
        &mut a,
        "via",
        format!(
            r#"{{"jsonrpc":"2.0","id":"via","method":"tools/call","params":{{"name":"mcpd__call_tool","arguments":{{"arguments":{AWKWARD_ARGS},"name":"old__echo"}}}}}}"#
        ),
    )
    .await;
    // And with `_meta`, dressed as a direct call with `_meta` is.
    answered(
        &mut a,
        "meta",
        format!(
            r#"{{"jsonrpc":"2.0","id":"meta","method":"tools/call","params":{{"_meta":{{"progressToken":"p"}},"name":"mcpd__call_tool","arguments":{{"name":"old__echo","arguments":{AWKWARD_ARGS}}}}}}}"#
        ),
    )
    .await;

    let calls = received_calls(&d, &rec, "old").await;
    assert_eq!(calls.len(), 3, "{calls:?}");
    let params = |line: &str| line.split_once(r#""params":"#).map(|(_, p)| p.to_owned());
    assert_eq!(params(&calls[1]), params(&calls[0]), "{calls:?}");
    with_mcpds_token(&calls[2]);
}

#[tokio::test]
async fn arguments_posted_over_http_reach_the_server_as_the_agent_wrote_them() {
    let b = DaemonBuilder::new().daemon("http_listen = \"127.0.0.1:0\"");
    let (rec, arg) = record(&b);
    let d = b.fixture("old", &["--record", &arg]).start().await;
    d.wait_ready().await;
    let url = d.status().await["daemon"]["http"]
        .as_str()
        .expect("status names the HTTP URL")
        .to_owned();
    let (code, token, err) = d.run_cli(&["ctl", "http-token"]).await;
    assert_eq!(code, 0, "{err}");
    let client = http_client();
    let post = |session: Option<&str>, body: String| {
        let mut r = client
            .post(&url)
            .bearer_auth(token.trim())
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(body);
        if let Some(s) = session {
            r = r.header("mcp-session-id", s);
        }
        r.send()
    };
    let r = post(
        None,
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.into(),
    )
    .await
    .expect("initialize");
    assert_eq!(r.status().as_u16(), 200);
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let r = post(
        Some(&session),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into(),
    )
    .await
    .expect("initialized");
    assert_eq!(r.status().as_u16(), 202);
    // One line as the client wrote it, then the same call written over several lines
    // (which goes on as values, since the connection reads one message a line).
    for body in [
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"old__echo","arguments":{AWKWARD_ARGS}}}}}"#
        ),
        format!(
            "{{\n \"jsonrpc\": \"2.0\",\n \"id\": 2,\n \"method\": \"tools/call\",\n \"params\": {{\"name\": \"old__echo\", \"arguments\": {AWKWARD_ARGS}}}\n}}"
        ),
    ] {
        let r = post(Some(&session), body.clone()).await.expect("call");
        assert_eq!(r.status().as_u16(), 200, "{body}");
        let reply: Value = serde_json::from_str(&r.text().await.unwrap()).expect("JSON");
        assert!(reply.get("result").is_some(), "{body}: {reply}");
    }
    // A stateless 2026-07-28 request: its id is renamed in the text, the rest kept.
    let meta = envelope(json!({}));
    let r = client
        .post(&url)
        .bearer_auth(token.trim())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "old__echo")
        .body(format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"old__echo","_meta":{meta},"arguments":{AWKWARD_ARGS}}}}}"#
        ))
        .send()
        .await
        .expect("stateless call");
    assert_eq!(r.status().as_u16(), 200);
    let text = r.text().await.unwrap();
    assert!(text.contains(r#""id":3"#), "{text}");
    let calls = received_calls(&d, &rec, "old").await;
    assert_eq!(calls.len(), 3, "{calls:?}");
    dressed_with_awkward_args(&calls[2]);
    assert!(
        calls[0].contains(&format!(
            r#""params":{{"name":"echo","arguments":{AWKWARD_ARGS}}}"#
        )),
        "the server got {}",
        calls[0]
    );
    let as_values: Value = serde_json::from_str(&calls[1]).expect("JSON");
    assert_eq!(as_values["params"]["arguments"]["a"], 1.5, "{}", calls[1]);
}

#[tokio::test]
async fn a_modern_agents_arguments_reach_either_server_as_it_wrote_them() {
    let b = DaemonBuilder::new();
    let (rec, arg) = record(&b);
    let d = b
        .fixture("old", &["--record", &arg])
        .fixture("new", &["--era", "modern", "--record", &arg])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.agent().await;
    let meta = envelope(json!({}));
    for server in ["old", "new"] {
        answered(
            &mut a,
            server,
            format!(
                r#"{{"jsonrpc":"2.0","id":"{server}","method":"tools/call","params":{{"name":"{server}__echo","_meta":{meta},"arguments":{AWKWARD_ARGS}}}}}"#
            ),
        )
        .await;
    }
    for server in ["old", "new"] {
        let calls = received_calls(&d, &rec, server).await;
        assert_eq!(calls.len(), 1, "{calls:?}");
        dressed_with_awkward_args(&calls[0]);
    }
}

#[tokio::test]
async fn a_plain_calls_arguments_reach_a_modern_server_as_the_agent_wrote_them() {
    let (d, rec, _a) = plain_call_to("new", &["--era", "modern"]).await;
    let calls = received_calls(&d, &rec, "new").await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    // The envelope is there as for any modern request.
    let call = dressed_with_awkward_args(&calls[0]);
    assert_eq!(
        call["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        MODERN
    );
}
