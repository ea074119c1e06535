//! Interop with mcpd as the HTTP server: the official SDK clients (`py_http_client.py` with
//! the Python SDK, `ts2_http_client.mjs` with the TypeScript SDK v2) reach mcpd's Streamable
//! HTTP listener with the bearer token, and list and call the fixture server `fx` behind it:
//! echo, progress notifications, and an elicitation round trip, in both protocol eras.
//!
//! The peers come from `.ci/install-peers` (see `tests/interop/README.md`). When they are
//! missing, the tests skip with a note on stderr, or fail when `MCPD_REQUIRE_PEERS=1` (CI).

use crate::interop::sdks::{Peers, path_str, peers};
use crate::support::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

const LEGACY_VERSION: &str = "2025-11-25";
const MODERN_VERSION: &str = "2026-07-28";

/// The clients' own bound on a whole run (`--timeout`).
const CLIENT_TIMEOUT_SECS: u64 = 20;

/// Our bound on a client process, above the client's own (and the Python client's hard stop
/// at timeout + 10 s) so its error message wins.
const CLIENT_WAIT: Duration = Duration::from_secs(40);

/// What the fixture's `ask` tool asks.
const ASK_MESSAGE: &str = "What is your name?";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The directory `.ci/install-peers` filled (`<dir>/venv/bin/python`).
fn peers_dir(peers: &Peers) -> PathBuf {
    peers
        .python()
        .ancestors()
        .nth(3)
        .expect("the peers directory")
        .to_owned()
}

/// `peers()`, plus the TypeScript SDK v2 client package `ts2_http_client.mjs` imports.
fn v2_peers(test: &str) -> Option<Peers> {
    let peers = peers(test)?;
    let client =
        peers_dir(&peers).join("node/node_modules/@modelcontextprotocol/client/package.json");
    if client.exists() {
        return Some(peers);
    }
    let what = format!(
        "TypeScript SDK v2 missing: {}; run .ci/install-peers",
        client.display()
    );
    if std::env::var("MCPD_REQUIRE_PEERS").as_deref() == Ok("1") {
        panic!("{test}: {what} (MCPD_REQUIRE_PEERS=1 makes this a failure)");
    }
    eprintln!("skipped: {test}: {what}");
    None
}

/// A daemon with the HTTP listener on a free loopback port and the fixture as `fx`, ready.
/// Returns it, the listener's URL, and the bearer token.
async fn http_daemon() -> (Daemon, String, String) {
    let d = DaemonBuilder::new()
        .daemon("http_listen = \"127.0.0.1:0\"")
        .fixture("fx", &[])
        .start()
        .await;
    d.wait_ready().await;
    let url = d.status().await["daemon"]["http"]
        .as_str()
        .expect("status names the HTTP URL")
        .to_owned();
    let (code, out, err) = d.run_cli(&["ctl", "http-token"]).await;
    assert_eq!(code, 0, "ctl http-token: {err}");
    let token = out.trim().to_owned();
    assert!(!token.is_empty(), "ctl http-token printed nothing");
    (d, url, token)
}

#[derive(Clone, Copy, Debug)]
enum Sdk {
    /// `py_http_client.py` (Python SDK).
    Py,
    /// `ts2_http_client.mjs` (TypeScript SDK v2).
    Ts2,
}

/// What a client run printed or how it failed.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn shown(&self) -> String {
        format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout, self.stderr
        )
    }

    /// The one line of JSON of a successful run.
    fn json(&self, what: &str) -> Value {
        assert_eq!(
            self.code,
            Some(0),
            "{what}: exited with {:?}\n{}",
            self.code,
            self.shown()
        );
        assert_eq!(
            self.stdout.lines().count(),
            1,
            "{what}: not one line\n{}",
            self.shown()
        );
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("{what}: stdout is not JSON ({e})\n{}", self.shown()))
    }
}

/// Runs one client in `mode` against `url` with `token`.
async fn run_client(peers: &Peers, sdk: Sdk, mode: &str, url: &str, token: &str) -> Run {
    let interop = repo().join("tests/interop");
    let mut cmd = match sdk {
        Sdk::Py => {
            let mut c = tokio::process::Command::new(peers.python());
            c.arg(interop.join("py_http_client.py"))
                .env("PYTHONUNBUFFERED", "1");
            c
        }
        Sdk::Ts2 => {
            let mut c = tokio::process::Command::new("node");
            c.arg(interop.join("ts2_http_client.mjs"));
            c
        }
    };
    let timeout = CLIENT_TIMEOUT_SECS.to_string();
    cmd.args(["--mode", mode, "--timeout", &timeout, url])
        .current_dir(repo())
        .env("MCPD_PEERS_DIR", path_str(&peers_dir(peers)))
        .env("MCPD_INTEROP_TOKEN", token)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let what = format!("{sdk:?} HTTP client --mode {mode}");
    let out = match tokio::time::timeout(CLIENT_WAIT, cmd.output()).await {
        Ok(out) => out.unwrap_or_else(|e| panic!("{what}: cannot start: {e}")),
        Err(_) => panic!("{what}: timed out after {CLIENT_WAIT:?}"),
    };
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// mcpd identified itself, and lists the fixture's tools qualified with `fx__`.
fn assert_mcpd_and_fixture_tools(what: &str, out: &Value, server_info_expected: bool) {
    if server_info_expected {
        assert_eq!(out["serverInfo"]["name"], "mcpd", "{what}: {out}");
        assert_eq!(
            out["serverInfo"]["version"],
            env!("CARGO_PKG_VERSION"),
            "{what}: {out}"
        );
    }
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no tools in {out}"))
        .iter()
        .map(|t| t.as_str().expect("tool name"))
        .collect();
    for name in ["fx__echo", "fx__progress", "fx__ask"] {
        assert!(tools.contains(&name), "{what}: no {name} in {tools:?}");
    }
    assert!(
        tools.iter().all(|t| t.starts_with("fx__")),
        "{what}: unqualified tool in {tools:?}"
    );
}

/// The text of a CallToolResult's only content block; the result is not an error.
fn only_text<'a>(what: &str, call: &'a Value) -> &'a str {
    assert_ne!(call["isError"], true, "{what}: {call}");
    let content = call["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no content in {call}"));
    assert_eq!(content.len(), 1, "{what}: {call}");
    assert_eq!(content[0]["type"], "text", "{what}: {call}");
    content[0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no text in {call}"))
}

/// What both eras share in a Python client run: the tools, echo, three progress steps in
/// order, and `ask` answered by the client's elicitation callback exactly once.
fn assert_python_run(what: &str, out: &Value) {
    assert_eq!(only_text(what, &out["echo"]), "hello over http", "{what}");

    assert_eq!(
        only_text(what, &out["progress"]["call"]),
        "done 3",
        "{what}"
    );
    let updates: Vec<Value> = (1..=3)
        .map(|i| json!({"progress": f64::from(i), "total": 3.0, "message": format!("step {i}")}))
        .collect();
    assert_eq!(
        out["progress"]["updates"],
        Value::Array(updates),
        "{what}: progress callback calls: {out}"
    );
    assert_eq!(
        out["wire"]["progressNotifications"], 3,
        "{what}: progress notifications read: {out}"
    );

    assert_eq!(only_text(what, &out["ask"]["call"]), "hello, Ada", "{what}");
    assert_eq!(
        out["ask"]["elicitations"],
        json!([{"mode": "form", "message": ASK_MESSAGE}]),
        "{what}: {out}"
    );

    let http = &out["http"];
    assert_eq!(http["unauthorized"], 0, "{what}: {http}");
    let posts = http["statuses"]["POST"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no POSTs in {http}"));
    assert!(
        posts.iter().all(|s| s == 200 || s == 202),
        "{what}: a POST failed: {http}"
    );
}

#[tokio::test]
async fn python_sdk_http_client_uses_a_legacy_session_with_progress_and_elicitation() {
    let test = "python_sdk_http_client_uses_a_legacy_session_with_progress_and_elicitation";
    let Some(peers) = peers(test) else {
        return;
    };
    let (_d, url, token) = http_daemon().await;
    let what = "py legacy";
    let out = run_client(&peers, Sdk::Py, "legacy", &url, &token)
        .await
        .json(what);

    assert_eq!(out["era"], "legacy", "{what}: {out}");
    assert_eq!(out["protocolVersion"], LEGACY_VERSION, "{what}: {out}");
    assert_mcpd_and_fixture_tools(what, &out, true);
    assert_python_run(what, &out);
    // Legacy elicitation: a real server->client request during the call, answered by POST.
    assert_eq!(
        out["wire"],
        json!({"elicitationRequests": 1, "inputRequiredResults": 0, "progressNotifications": 3}),
        "{what}: {out}"
    );
    // One session, named on the initialize answer, ended by the SDK's DELETE on close.
    let http = &out["http"];
    assert_eq!(
        http["sessionIds"].as_array().map(Vec::len),
        Some(1),
        "{what}: {http}"
    );
    let deletes = http["statuses"]["DELETE"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: the session was not deleted: {http}"));
    assert_eq!(deletes.len(), 1, "{what}: {http}");
    assert!(
        deletes[0] == 200 || deletes[0] == 204,
        "{what}: DELETE answered {}: {http}",
        deletes[0]
    );
}

#[tokio::test]
async fn python_sdk_http_client_in_auto_mode_goes_modern_with_progress_and_input_required() {
    let test = "python_sdk_http_client_in_auto_mode_goes_modern_with_progress_and_input_required";
    let Some(peers) = peers(test) else {
        return;
    };
    let (_d, url, token) = http_daemon().await;
    let what = "py auto";
    let out = run_client(&peers, Sdk::Py, "auto", &url, &token)
        .await
        .json(what);

    assert_eq!(out["era"], "modern", "{what}: {out}");
    assert_eq!(out["protocolVersion"], MODERN_VERSION, "{what}: {out}");
    assert_mcpd_and_fixture_tools(what, &out, true);
    assert_python_run(what, &out);
    // Modern elicitation: an input_required result, fulfilled and retried by the SDK.
    assert_eq!(
        out["wire"],
        json!({"elicitationRequests": 0, "inputRequiredResults": 1, "progressNotifications": 3}),
        "{what}: {out}"
    );
    // Stateless: no session was handed out.
    assert_eq!(out["http"]["sessionIds"], json!([]), "{what}: {out}");
}

#[tokio::test]
async fn python_sdk_http_client_with_a_wrong_token_is_refused() {
    let test = "python_sdk_http_client_with_a_wrong_token_is_refused";
    let Some(peers) = peers(test) else {
        return;
    };
    let (_d, url, token) = http_daemon().await;
    let wrong = format!("{token}x");
    let run = run_client(&peers, Sdk::Py, "legacy", &url, &wrong).await;
    assert_eq!(run.code, Some(1), "{}", run.shown());
    assert!(run.stdout.is_empty(), "{}", run.shown());
    // The client's error report ends with the HTTP exchanges it saw: only 401s.
    assert!(
        run.stderr.contains("\"unauthorized\": 1") && run.stderr.contains("\"POST\": [401]"),
        "{}",
        run.shown()
    );
}

/// The HTTP exchanges a TypeScript client run logged, one JSON object each.
fn ts_exchanges<'a>(what: &str, out: &'a Value) -> &'a [Value] {
    out["http"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no HTTP log in {out}"))
}

/// The TypeScript run listed the tools, echoed, and got `hello, Ada` from one elicitation,
/// with the token on every request and no request refused.
fn assert_ts_run(what: &str, out: &Value) {
    assert_eq!(only_text(what, &out["echo"]), "hello over http", "{what}");
    assert_eq!(only_text(what, &out["ask"]["call"]), "hello, Ada", "{what}");
    assert_eq!(
        out["ask"]["elicitations"],
        json!([{"mode": "form", "message": ASK_MESSAGE}]),
        "{what}: {out}"
    );
    for x in ts_exchanges(what, out) {
        assert_eq!(x["authorized"], true, "{what}: {x}");
        let status = x["status"].as_u64().unwrap_or(0);
        assert!(
            (200..300).contains(&status) || (x["method"] == "GET" && status == 405),
            "{what}: refused: {x}\n{out}"
        );
    }
}

#[tokio::test]
async fn typescript_v2_http_client_pinned_to_2026_07_28_lists_and_calls_statelessly() {
    let test = "typescript_v2_http_client_pinned_to_2026_07_28_lists_and_calls_statelessly";
    let Some(peers) = v2_peers(test) else {
        return;
    };
    let (_d, url, token) = http_daemon().await;
    let what = "ts2 modern";
    let out = run_client(&peers, Sdk::Ts2, "modern", &url, &token)
        .await
        .json(what);

    assert_eq!(out["era"], "modern", "{what}: {out}");
    assert_eq!(out["protocolVersion"], MODERN_VERSION, "{what}: {out}");
    assert_mcpd_and_fixture_tools(what, &out, true);
    assert_ts_run(what, &out);

    // Stateless 2026-07-28 on the wire: every request names the version, no session at all,
    // and each call names its method and tool in the headers.
    let exchanges = ts_exchanges(what, &out);
    for x in exchanges {
        assert_eq!(x["sessionId"], Value::Null, "{what}: {x}");
        assert_eq!(x["responseSessionId"], Value::Null, "{what}: {x}");
        if x["method"] == "POST" {
            assert_eq!(x["protocolVersion"], MODERN_VERSION, "{what}: {x}");
        }
    }
    let methods: Vec<&str> = exchanges
        .iter()
        .filter_map(|x| x["mcpMethod"].as_str())
        .collect();
    assert!(
        !methods.contains(&"initialize"),
        "{what}: initialize sent: {methods:?}"
    );
    assert!(
        methods.contains(&"tools/list"),
        "{what}: no tools/list in {methods:?}"
    );
    // echo, then ask twice: its first answer is input_required, which the SDK fulfils with
    // the elicitation handler and retries with the answer.
    let calls = methods.iter().filter(|m| **m == "tools/call").count();
    assert_eq!(calls, 3, "{what}: {methods:?}");
}

#[tokio::test]
async fn typescript_v2_http_client_in_legacy_mode_uses_a_session() {
    let test = "typescript_v2_http_client_in_legacy_mode_uses_a_session";
    let Some(peers) = v2_peers(test) else {
        return;
    };
    let (_d, url, token) = http_daemon().await;
    let what = "ts2 legacy";
    let out = run_client(&peers, Sdk::Ts2, "legacy", &url, &token)
        .await
        .json(what);

    assert_eq!(out["era"], "legacy", "{what}: {out}");
    assert_eq!(out["protocolVersion"], LEGACY_VERSION, "{what}: {out}");
    assert_mcpd_and_fixture_tools(what, &out, true);
    assert_ts_run(what, &out);

    // The initialize answer names the session, and every later request carries it.
    let exchanges = ts_exchanges(what, &out);
    let first = &exchanges[0];
    let session = first["responseSessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no session on the first answer: {first}"));
    for x in &exchanges[1..] {
        assert_eq!(x["sessionId"], session, "{what}: {x}");
    }
}
