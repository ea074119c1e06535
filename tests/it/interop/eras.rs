//! Interop across protocol eras: the official era-aware SDK clients (`ts2_client.mjs`,
//! `py_era_client.py`) reach the era servers (`ts2_server.mjs`, `py_era_server.py`) and
//! server-everything through `mcpd connect`, with every agent era against every upstream
//! era, including the `ask` elicitation bridged between the two mechanisms.
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

/// Our bound on a client process, above the client's own (and the Python SDK's hard stop
/// at timeout + 10 s) so its error message wins.
const CLIENT_WAIT: Duration = Duration::from_secs(40);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn interop(file: &str) -> String {
    path_str(&repo().join("tests/interop").join(file)).to_owned()
}

/// The directory `.ci/install-peers` filled (`<dir>/venv/bin/python`).
pub(crate) fn peers_dir(peers: &Peers) -> PathBuf {
    peers
        .python()
        .ancestors()
        .nth(3)
        .expect("the peers directory")
        .to_owned()
}

/// `peers()`, plus the TypeScript SDK v2 packages the era peers import.
pub(crate) fn era_peers(test: &str) -> Option<Peers> {
    let peers = peers(test)?;
    let sdk = peers_dir(&peers).join("node/node_modules/@modelcontextprotocol");
    let missing: Vec<String> = ["client", "server"]
        .iter()
        .map(|p| sdk.join(p).join("package.json"))
        .filter(|p| !p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if missing.is_empty() {
        return Some(peers);
    }
    let what = format!(
        "TypeScript SDK v2 missing: {}; run .ci/install-peers",
        missing.join(", ")
    );
    if std::env::var("MCPD_REQUIRE_PEERS").as_deref() == Ok("1") {
        panic!("{test}: {what} (MCPD_REQUIRE_PEERS=1 makes this a failure)");
    }
    eprintln!("skipped: {test}: {what}");
    None
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Era {
    Legacy,
    Modern,
}

impl Era {
    fn name(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }

    fn version(self) -> &'static str {
        match self {
            Era::Legacy => LEGACY_VERSION,
            Era::Modern => MODERN_VERSION,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Sdk {
    /// `ts2_client.mjs` (TypeScript SDK v2).
    Ts2,
    /// `py_era_client.py` (Python SDK 2.x).
    Py,
}

/// SIGKILLs a client's process group (the client, its `mcpd connect`, a TS probe sibling)
/// when the run ends in any way.
struct Group(u32);

impl Drop for Group {
    fn drop(&mut self) {
        let pgid = nix::unistd::Pid::from_raw(self.0 as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    }
}

/// Runs an era client in `mode` with `mcpd connect` to `d` as its server; it connects,
/// lists every tool and calls `tool`. Returns its one line of JSON.
async fn run_client(
    peers: &Peers,
    sdk: Sdk,
    mode: &str,
    d: &Daemon,
    tool: &str,
    args: &Value,
) -> Value {
    let mut cmd = match sdk {
        Sdk::Ts2 => {
            let mut c = tokio::process::Command::new("node");
            c.arg(interop("ts2_client.mjs"));
            c
        }
        Sdk::Py => {
            let mut c = tokio::process::Command::new(peers.python());
            c.arg(interop("py_era_client.py"));
            c
        }
    };
    let timeout = CLIENT_TIMEOUT_SECS.to_string();
    cmd.args(["--mode", mode, "--timeout", &timeout])
        .args(["--call", tool, "--args", &args.to_string(), "--"])
        .arg(mcpd_bin())
        .arg("connect")
        .arg("--socket")
        .arg(&d.socket)
        .current_dir(repo())
        .env("MCPD_PEERS_DIR", peers_dir(peers))
        .env_remove("MCPD_SOCKET")
        .env_remove("MCPD_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let what = format!("{sdk:?} client --mode {mode} calling {tool} {args}");
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let _group = Group(child.id().expect("a running client has a pid"));
    let out = match tokio::time::timeout(CLIENT_WAIT, child.wait_with_output()).await {
        Ok(out) => out.unwrap_or_else(|e| panic!("{what}: {e}")),
        Err(_) => panic!("{what}: timed out after {CLIENT_WAIT:?}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let shown = format!("--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}");
    assert!(
        out.status.success(),
        "{what}: exited with {}\n{shown}",
        out.status
    );
    assert_eq!(stdout.lines().count(), 1, "{what}: not one line\n{shown}");
    let v: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{what}: stdout is not JSON ({e})\n{shown}"));
    // The client reached mcpd, in the era it was asked for (auto is checked by the caller).
    assert_eq!(v["serverInfo"]["name"], "mcpd", "{what}: {v}");
    v
}

/// `node ts2_server.mjs [--legacy reject]` as an mcpd server entry.
fn ts2_server(modern_only: bool) -> Vec<String> {
    let mut args = vec![interop("ts2_server.mjs")];
    if modern_only {
        args.extend(["--legacy".to_owned(), "reject".to_owned()]);
    }
    args
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// A daemon with the environment the era servers need to find the SDKs.
fn builder(peers: &Peers) -> DaemonBuilder {
    let dir = peers_dir(peers);
    DaemonBuilder::new().env("MCPD_PEERS_DIR", path_str(&dir))
}

/// A daemon with `ts` (ts2_server) and `py` (py_era_server), both ready in `upstream`'s
/// era: legacy by `protocol = "legacy"` (ts2_server dual-era), modern by auto probing
/// (ts2_server modern-only, py_era_server dual-era).
async fn era_daemon(peers: &Peers, upstream: Era) -> Daemon {
    let (ts_args, extra) = match upstream {
        Era::Legacy => (ts2_server(false), "protocol = \"legacy\""),
        Era::Modern => (ts2_server(true), ""),
    };
    let py = peers.python();
    let py_args = [interop("py_era_server.py")];
    let d = builder(peers)
        .server("ts", "node", &strs(&ts_args), extra)
        .server("py", path_str(&py), &strs(&py_args), extra)
        .start()
        .await;
    d.wait_ready().await;
    d
}

/// The row of `name` in `mcpd ctl status --json`.
async fn ctl_row(d: &Daemon, name: &str) -> Value {
    let (code, out, err) = d.run_cli(&["ctl", "status", "--json"]).await;
    assert_eq!(code, 0, "ctl status: {err}");
    let v: Value = serde_json::from_str(&out).expect("status --json prints JSON");
    v["servers"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == name).cloned())
        .unwrap_or_else(|| panic!("no server {name} in {v}"))
}

/// `ctl status` shows `name` ready, never restarted, in `era`, decided as `reason` says.
async fn assert_upstream(d: &Daemon, name: &str, era: Era, reason: &str) {
    let row = ctl_row(d, name).await;
    assert_eq!(row["state"], "ready", "{row}");
    assert_eq!(row["restarts"], 0, "{row}");
    assert_eq!(row["era"], era.name(), "{row}");
    assert_eq!(row["protocol_version"], era.version(), "{row}");
    let why = row["era_reason"].as_str().unwrap_or_default();
    assert!(
        why.contains(reason),
        "era_reason should say {reason:?}: {row}"
    );
}

/// Why `era` was chosen for a server: the config, or mcpd's own probe.
fn reason(configured: bool) -> &'static str {
    if configured {
        "protocol = \"legacy\""
    } else {
        "server/discover"
    }
}

/// An `ask` run: `hello, Ada`, with exactly one elicitation, which reached the client by
/// the mechanism of its own era.
fn assert_asked_once(what: &str, out: &Value, agent: Era) {
    assert_eq!(out["era"], agent.name(), "{what}: {out}");
    assert_eq!(out["protocolVersion"], agent.version(), "{what}: {out}");
    let call = &out["call"];
    assert_ne!(call["isError"], true, "{what}: {out}");
    assert_eq!(call["content"][0]["text"], "hello, Ada", "{what}: {out}");
    assert_eq!(
        out["elicitations"],
        json!([{ "mode": "form", "message": "What is your name?" }]),
        "{what}: exactly one elicitation reached the client: {out}"
    );
    let (requests, input_required) = match agent {
        Era::Legacy => (1, 0),
        Era::Modern => (0, 1),
    };
    assert_eq!(
        out["wire"],
        json!({ "elicitationRequests": requests, "inputRequiredResults": input_required }),
        "{what}: a {agent:?} agent gets the elicitation by its own era's path: {out}"
    );
}

/// Both SDK clients in `agent`'s era call `ask` of both servers in `upstream`'s era.
async fn ask_round_trip(test: &str, agent: Era, upstream: Era) {
    let Some(peers) = era_peers(test) else {
        return;
    };
    let d = era_daemon(&peers, upstream).await;
    let configured = upstream == Era::Legacy;
    for server in ["ts", "py"] {
        assert_upstream(&d, server, upstream, reason(configured)).await;
    }
    for sdk in [Sdk::Ts2, Sdk::Py] {
        for server in ["ts", "py"] {
            let tool = format!("{server}__ask");
            let out = run_client(&peers, sdk, agent.name(), &d, &tool, &json!({})).await;
            let what = format!("{sdk:?} {agent:?} agent -> {upstream:?} {server}");
            assert_asked_once(&what, &out, agent);
            assert_eq!(
                out["tools"],
                json!(["py__ask", "py__echo", "ts__ask", "ts__echo"]),
                "{what}: {out}"
            );
        }
    }
    // The bridging neither restarted a server nor changed its era.
    for server in ["ts", "py"] {
        assert_upstream(&d, server, upstream, reason(configured)).await;
    }
}

#[tokio::test]
async fn a_legacy_agent_gets_a_real_elicitation_request_from_a_legacy_upstream() {
    ask_round_trip(
        "a_legacy_agent_gets_a_real_elicitation_request_from_a_legacy_upstream",
        Era::Legacy,
        Era::Legacy,
    )
    .await;
}

#[tokio::test]
async fn a_modern_agent_gets_the_input_required_of_a_modern_upstream_passed_through() {
    ask_round_trip(
        "a_modern_agent_gets_the_input_required_of_a_modern_upstream_passed_through",
        Era::Modern,
        Era::Modern,
    )
    .await;
}

#[tokio::test]
async fn mcpd_fulfils_a_modern_upstreams_input_required_with_a_real_request_to_a_legacy_agent() {
    ask_round_trip(
        "mcpd_fulfils_a_modern_upstreams_input_required_with_a_real_request_to_a_legacy_agent",
        Era::Legacy,
        Era::Modern,
    )
    .await;
}

#[tokio::test]
async fn mcpd_turns_a_legacy_upstreams_elicitation_request_into_input_required_for_a_modern_agent()
{
    ask_round_trip(
        "mcpd_turns_a_legacy_upstreams_elicitation_request_into_input_required_for_a_modern_agent",
        Era::Modern,
        Era::Legacy,
    )
    .await;
}

/// An SDK client in auto mode against mcpd, with a modern upstream (`ts`, ts2_server
/// modern-only) and a legacy one (`everything`, server-everything), both in auto mode:
/// mcpd answers the client's `server/discover` as a modern server, so the client settles
/// on 2026-07-28, and both upstreams' tools work from there.
async fn auto_client_reaches_both_eras(test: &str, sdk: Sdk) {
    let Some(peers) = era_peers(test) else {
        return;
    };
    let everything = peers.everything_server();
    let ts_args = ts2_server(true);
    let d = builder(&peers)
        .server("ts", "node", &strs(&ts_args), "")
        .server("everything", "node", &[path_str(&everything), "stdio"], "")
        .start()
        .await;
    d.wait_ready().await;
    assert_upstream(&d, "ts", Era::Modern, reason(false)).await;
    assert_upstream(&d, "everything", Era::Legacy, reason(false)).await;

    let mut raw = d.initialized_agent().await.tool_names().await;
    raw.sort();
    assert!(raw.iter().any(|t| t == "everything__echo"), "{raw:?}");
    assert!(raw.iter().any(|t| t == "ts__echo"), "{raw:?}");

    let calls = [
        ("ts__echo", json!({ "text": "hi" }), "hi"),
        ("everything__echo", json!({ "message": "hi" }), "Echo: hi"),
    ];
    for (tool, args, text) in calls {
        let out = run_client(&peers, sdk, "auto", &d, tool, &args).await;
        let what = format!("{sdk:?} auto calling {tool}");
        assert_eq!(out["era"], "modern", "{what}: {out}");
        assert_eq!(out["protocolVersion"], MODERN_VERSION, "{what}: {out}");
        assert_eq!(
            out["tools"],
            json!(raw),
            "{what}: same tools as a raw agent"
        );
        assert_ne!(out["call"]["isError"], true, "{what}: {out}");
        assert_eq!(out["call"]["content"][0]["text"], text, "{what}: {out}");
        assert_eq!(out["elicitations"], json!([]), "{what}: {out}");
        assert_eq!(
            out["wire"],
            json!({ "elicitationRequests": 0, "inputRequiredResults": 0 }),
            "{what}: {out}"
        );
    }
    assert_upstream(&d, "ts", Era::Modern, reason(false)).await;
    assert_upstream(&d, "everything", Era::Legacy, reason(false)).await;
}

#[tokio::test]
async fn the_python_sdk_client_in_auto_mode_probes_mcpd_in_place_and_calls_both_eras_upstream() {
    auto_client_reaches_both_eras(
        "the_python_sdk_client_in_auto_mode_probes_mcpd_in_place_and_calls_both_eras_upstream",
        Sdk::Py,
    )
    .await;
}

#[tokio::test]
async fn the_typescript_v2_client_in_auto_mode_negotiates_modern_with_mcpd_and_calls_both_eras() {
    auto_client_reaches_both_eras(
        "the_typescript_v2_client_in_auto_mode_negotiates_modern_with_mcpd_and_calls_both_eras",
        Sdk::Ts2,
    )
    .await;
}

#[tokio::test]
async fn a_modern_only_upstream_forced_to_legacy_fails_clearly_while_another_server_keeps_working()
{
    let test =
        "a_modern_only_upstream_forced_to_legacy_fails_clearly_while_another_server_keeps_working";
    let Some(peers) = era_peers(test) else {
        return;
    };
    let py = peers.python();
    let bad_args = ts2_server(true);
    let good_args = [interop("py_era_server.py")];
    let d = builder(&peers)
        .server("bad", "node", &strs(&bad_args), "protocol = \"legacy\"")
        .server("good", path_str(&py), &strs(&good_args), "")
        .start()
        .await;
    d.wait_server("good", "good ready", |s| s["state"] == "ready")
        .await;
    let bad = d
        .wait_server("bad", "bad has a last_error", |s| {
            s["last_error"].is_string()
        })
        .await;
    let error = bad["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("-32022") || error.contains(LEGACY_VERSION),
        "last_error names the version refusal: {bad}"
    );

    let row = ctl_row(&d, "bad").await;
    assert_ne!(row["state"], "ready", "{row}");
    assert_eq!(row["era"], "legacy", "{row}");
    assert_eq!(row["protocol_version"], Value::Null, "{row}");
    assert_eq!(row["tools"], 0, "{row}");
    assert!(
        row["era_reason"]
            .as_str()
            .is_some_and(|r| r.contains(reason(true))),
        "{row}"
    );
    let (code, text, err) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("-32022") || text.contains("protocol version"),
        "ctl status says why bad fails:\n{text}"
    );

    // The other server serves both eras' agents meanwhile.
    for (sdk, mode) in [(Sdk::Ts2, "legacy"), (Sdk::Py, "auto")] {
        let args = json!({ "text": "still here" });
        let out = run_client(&peers, sdk, mode, &d, "good__echo", &args).await;
        assert_eq!(out["call"]["content"][0]["text"], "still here", "{out}");
        assert_eq!(out["tools"], json!(["good__ask", "good__echo"]), "{out}");
    }
    assert_upstream(&d, "good", Era::Modern, reason(false)).await;
}
