//! Interop for discovery mode.
//!
//! The official SDK clients (Python, TypeScript v1, TypeScript v2 in both eras) list,
//! find, describe (and so activate) and call tools through `mcpd connect`, with progress,
//! elicitation, list-change notifications, a narrowing profile and `discover_above`
//! across a reload.
//!
//! Each test runs one of `tests/interop/*_discovery_client.*` with a plan of steps (see
//! the header of `ts_discovery_client.mjs`) and checks the one line of JSON it prints. The
//! peers come from `.ci/install-peers`; without them the tests skip with a note, or fail
//! when `MCPD_REQUIRE_PEERS=1`.

use crate::interop::eras::{era_peers, peers_dir};
use crate::interop::sdks::{Peers, path_str};
use crate::support::*;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

const FIND: &str = "mcpd__find_tools";
const DESCRIBE: &str = "mcpd__describe_tools";
const CALL: &str = "mcpd__call_tool";
const META: [&str; 3] = [FIND, DESCRIBE, CALL];

/// The clients' own bound on a whole run (`--timeout`), and on each wait for a list change
/// (`--wait`).
const CLIENT_TIMEOUT_SECS: u64 = 30;
const CHANGE_WAIT_SECS: u64 = 10;

/// Our bound on a client process: above the client's own (and the Python SDK's hard stop at
/// timeout + 10 s), so its message wins.
const CLIENT_WAIT: Duration = Duration::from_secs(50);

/// The fixture tools of the main catalog, with their descriptions in `tests/fixture/tools.rs`.
const FX_TOOLS: &str = "echo,add,sleep,progress,ask,pid,crash,big";

/// Plain-words queries (none is a tool's name) and the tool each should rank first.
const QUERIES: [(&str, &str); 4] = [
    ("adding up a pair of numbers", "fx__add"),
    ("pause and wait some milliseconds", "fx__sleep"),
    ("ask the person for their name", "fx__ask"),
    ("which process id does the server run as", "fx__pid"),
];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Client {
    /// `py_discovery_client.py`: Python SDK `ClientSession`, 2025-11-25.
    Py,
    /// `ts_discovery_client.mjs`: TypeScript SDK v1, 2025-11-25.
    Ts,
    /// `ts2_discovery_client.mjs --mode legacy`: TypeScript SDK v2, 2025-11-25.
    Ts2Legacy,
    /// `ts2_discovery_client.mjs --mode modern`: TypeScript SDK v2, 2026-07-28.
    Ts2Modern,
}

impl Client {
    fn modern(self) -> bool {
        self == Client::Ts2Modern
    }
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn interop(file: &str) -> String {
    path_str(&repo().join("tests/interop").join(file)).to_owned()
}

/// SIGKILLs a client's process group (the client, its `mcpd connect`, a probe sibling)
/// however the run ends.
struct Group(u32);

impl Drop for Group {
    fn drop(&mut self) {
        let pgid = nix::unistd::Pid::from_raw(self.0 as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    }
}

/// A plan of steps for a discovery client; `push` says where a step's result will be.
#[derive(Default)]
struct Plan(Vec<Value>);

impl Plan {
    fn push(&mut self, step: Value) -> usize {
        self.0.push(step);
        self.0.len() - 1
    }

    fn list(&mut self) -> usize {
        self.push(json!({"op": "list"}))
    }

    fn call(&mut self, name: &str, arguments: Value) -> usize {
        self.push(json!({"op": "call", "name": name, "arguments": arguments}))
    }

    fn find(&mut self, query: &str) -> usize {
        self.call(FIND, json!({"query": query}))
    }

    fn changed(&mut self, count: u32) -> usize {
        self.push(json!({"op": "changed", "count": count}))
    }
}

/// What a client printed, with the context for messages.
struct Run {
    what: String,
    out: Value,
}

impl Run {
    fn step(&self, i: usize) -> &Value {
        let s = &self.out["steps"][i];
        assert!(s.is_object(), "{}: no step {i}: {}", self.what, self.out);
        s
    }

    fn listed(&self, i: usize) -> Vec<&str> {
        let s = self.step(i);
        s["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: step {i} is not a list: {s}", self.what))
            .iter()
            .map(|t| t.as_str().unwrap_or_default())
            .collect()
    }

    /// The result of call step `i`; fails if it was an error.
    fn result(&self, i: usize) -> &Value {
        let s = self.step(i);
        let r = &s["result"];
        assert!(r.is_object(), "{}: step {i} failed: {s}", self.what);
        assert_ne!(r["isError"], true, "{}: step {i}: {s}", self.what);
        r
    }

    fn text(&self, i: usize) -> &str {
        self.result(i)["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: step {i} has no text: {}", self.what, self.step(i)))
    }

    /// The names a find step returned, best first.
    fn found(&self, i: usize) -> Vec<&str> {
        self.result(i)["structuredContent"]["tools"]
            .as_array()
            .unwrap_or_else(|| {
                panic!(
                    "{}: step {i} has no found tools: {}",
                    self.what,
                    self.step(i)
                )
            })
            .iter()
            .map(|t| t["name"].as_str().unwrap_or_default())
            .collect()
    }

    /// The JSON-RPC error of call step `i`; fails if it was a result.
    fn error(&self, i: usize) -> &Value {
        let s = self.step(i);
        assert!(
            s["error"].is_object(),
            "{}: step {i} should be a JSON-RPC error: {s}",
            self.what
        );
        &s["error"]
    }

    /// A changed step reached its count.
    fn changed(&self, i: usize, count: u32) {
        let s = self.step(i);
        assert_eq!(
            s,
            &json!({"op": "changed", "count": count}),
            "{}: the SDK should have reported {count} tool list change(s) by step {i}: {}",
            self.what,
            self.out
        );
    }
}

/// Runs `client` with `mcpd connect [--profile P]` to `d` as its server and `plan`.
async fn run(peers: &Peers, client: Client, d: &Daemon, profile: Option<&str>, plan: &Plan) -> Run {
    let mut cmd = match client {
        Client::Py => {
            let mut c = tokio::process::Command::new(peers.python());
            c.arg(interop("py_discovery_client.py"));
            c
        }
        Client::Ts => {
            let mut c = tokio::process::Command::new("node");
            c.arg(interop("ts_discovery_client.mjs"));
            c
        }
        Client::Ts2Legacy | Client::Ts2Modern => {
            let mut c = tokio::process::Command::new("node");
            c.arg(interop("ts2_discovery_client.mjs"))
                .args(["--mode", if client.modern() { "modern" } else { "legacy" }]);
            c
        }
    };
    let plan_json = Value::Array(plan.0.clone()).to_string();
    cmd.args(["--timeout", &CLIENT_TIMEOUT_SECS.to_string()])
        .args(["--wait", &CHANGE_WAIT_SECS.to_string()])
        .args(["--plan", &plan_json, "--"])
        .arg(mcpd_bin())
        .arg("connect")
        .arg("--socket")
        .arg(&d.socket);
    if let Some(p) = profile {
        cmd.args(["--profile", p]);
    }
    cmd.current_dir(repo())
        .env("MCPD_PEERS_DIR", peers_dir(peers))
        .env_remove("MCPD_SOCKET")
        .env_remove("MCPD_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let what = match profile {
        Some(p) => format!("{client:?} client (profile {p})"),
        None => format!("{client:?} client"),
    };
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
    assert_eq!(v["serverInfo"]["name"], "mcpd", "{what}: {v}");
    let (era, version) = if client.modern() {
        ("modern", "2026-07-28")
    } else {
        ("legacy", "2025-11-25")
    };
    assert_eq!(v["era"], era, "{what}: {v}");
    assert_eq!(v["protocolVersion"], version, "{what}: {v}");
    assert_eq!(
        v["steps"].as_array().map(Vec::len),
        Some(plan.0.len()),
        "{what}: one result per step: {v}"
    );
    Run { what, out: v }
}

/// A daemon in discover mode with the fixture as `fx` (legacy era, `fx__echo` pinned) and
/// as `mx` (modern era only: its `ask` answers `input_required`).
async fn discover_daemon(peers: &Peers) -> Daemon {
    let d = DaemonBuilder::new()
        .env("MCPD_PEERS_DIR", path_str(&peers_dir(peers)))
        .daemon("tools = \"discover\"\npinned = [\"fx__echo\"]")
        .fixture("fx", &["--tools", FX_TOOLS])
        .fixture("mx", &["--era", "modern", "--tools", "ask,progress"])
        .start()
        .await;
    d.wait_ready().await;
    d
}

/// Step 4 of [`finds_describes_activates_and_calls`]: `call_tool` with progress and with
/// elicitation, from a legacy and a modern upstream, reaches the client as a direct call
/// would.
fn progress_and_elicitation_reach_the_client(r: &Run, client: Client, steps: [usize; 4]) {
    let [progress, modern_progress, ask, modern_ask] = steps;
    let w = &r.what;
    assert_eq!(r.text(progress), "done 3", "{w}");
    let got: Vec<f64> = r.step(progress)["progress"]
        .as_array()
        .unwrap_or_else(|| panic!("{w}: no progress: {}", r.step(progress)))
        .iter()
        .filter_map(|p| p["progress"].as_f64())
        .collect();
    assert_eq!(
        got,
        [1.0, 2.0, 3.0],
        "{w}: the SDK's progress callback saw every step, under the token it sent: {}",
        r.step(progress)
    );
    assert_eq!(r.text(modern_progress), "done 2", "{w}");
    assert_eq!(
        r.step(modern_progress)["progress"].as_array().map(Vec::len),
        Some(2),
        "{w}: progress from a modern upstream too: {}",
        r.step(modern_progress)
    );
    assert_eq!(r.out["wire"]["progressNotifications"], 5, "{w}: {}", r.out);
    // One elicitation per ask, from a legacy upstream (a real request) and from a modern
    // one (input_required), each reaching the client by its own era's path.
    assert_eq!(r.text(ask), "hello, Ada", "{w}");
    assert_eq!(r.text(modern_ask), "hello, Ada", "{w}");
    let asked = json!({"mode": "form", "message": "What is your name?"});
    assert_eq!(
        r.out["elicitations"],
        json!([asked, asked]),
        "{w}: one elicitation per ask, answered by the SDK's handler: {}",
        r.out
    );
    let (requests, input_required) = if client.modern() { (0, 2) } else { (2, 0) };
    assert_eq!(
        (
            &r.out["wire"]["elicitationRequests"],
            &r.out["wire"]["inputRequiredResults"]
        ),
        (&json!(requests), &json!(input_required)),
        "{w}: the elicitation came by the agent's own era's path: {}",
        r.out
    );
}

/// List, find, describe (activate), list-change, direct and meta calls, progress and
/// elicitation, for one client.
async fn finds_describes_activates_and_calls(peers: &Peers, d: &Daemon, client: Client) {
    let mut p = Plan::default();
    let first_list = p.list();
    let finds: Vec<(usize, &str, &str)> = QUERIES
        .iter()
        .map(|(q, want)| (p.find(q), *q, *want))
        .collect();
    let everything = p.call(FIND, json!({"query": "*", "limit": 50, "server": "fx"}));
    let described = p.call(DESCRIBE, json!({"names": ["fx__add", "fx__nosuch"]}));
    let changed = p.changed(1);
    let second_list = p.list();
    let direct_add = p.call("fx__add", json!({"a": 2, "b": 3}));
    // 20 ms between steps: the TypeScript SDK v2 (2.4.0) in the legacy era drops a
    // progress notification that arrives just before its request's response (it is
    // handled after the response, as "unknown token"); seen against the fixture alone.
    let progress = p.push(json!({"op": "call", "name": CALL, "progress": true,
        "arguments": {"name": "fx__progress", "arguments": {"steps": 3, "ms": 20}}}));
    let ask = p.call(CALL, json!({"name": "fx__ask", "arguments": {}}));
    let modern_ask = p.call(CALL, json!({"name": "mx__ask", "arguments": {}}));
    let modern_progress = p.push(json!({"op": "call", "name": CALL, "progress": true,
        "arguments": {"name": "mx__progress", "arguments": {"steps": 2, "ms": 20}}}));
    let via_echo = p.call(
        CALL,
        json!({"name": "fx__echo", "arguments": {"text": "hi"}}),
    );
    let direct_echo = p.call("fx__echo", json!({"text": "hi"}));
    let misspelt = p.call(
        CALL,
        json!({"name": "fx__ad", "arguments": {"a": 1, "b": 2}}),
    );
    let described_again = p.call(DESCRIBE, json!({"names": ["fx__sleep"]}));
    let changed_again = p.changed(2);
    let third_list = p.list();
    let direct_sleep = p.call("fx__sleep", json!({"ms": 1}));

    let r = run(peers, client, d, None, &p).await;
    let w = &r.what;

    // 1. The pinned tool and the meta-tools, nothing else.
    assert_eq!(
        r.listed(first_list),
        ["fx__echo", FIND, DESCRIBE, CALL],
        "{w}"
    );

    // 2. Plain-words queries rank the tool meant first.
    for (i, query, want) in finds {
        let found = r.found(i);
        assert_eq!(found.first(), Some(&want), "{w}: {query:?}: {}", r.step(i));
        let first = &r.result(i)["structuredContent"]["tools"][0];
        assert_eq!(first["server"], "fx", "{w}: {first}");
        assert!(
            first["score"].as_f64().is_some_and(|s| s > 0.0),
            "{w}: {first}"
        );
        assert!(r.text(i).contains(want), "{w}: the text block names it too");
    }
    let mut all: Vec<String> = FX_TOOLS.split(',').map(|t| format!("fx__{t}")).collect();
    all.sort();
    assert_eq!(
        r.found(everything),
        all,
        "{w}: \"*\" lists every tool of the server"
    );

    // 3. describe: the definition, the unknown name with its nearest; the tool joins the
    // list, the SDK hears of it, and it can be called directly.
    let sc = &r.result(described)["structuredContent"];
    assert_eq!(sc["tools"].as_array().map(Vec::len), Some(1), "{w}: {sc}");
    assert_eq!(sc["tools"][0]["name"], "fx__add", "{w}: {sc}");
    assert_eq!(
        sc["tools"][0]["inputSchema"]["required"],
        json!(["a", "b"]),
        "{w}: {sc}"
    );
    assert_eq!(sc["unknown"][0]["name"], "fx__nosuch", "{w}: {sc}");
    assert!(sc["unknown"][0]["nearest"].is_array(), "{w}: {sc}");
    r.changed(changed, 1);
    assert_eq!(
        r.listed(second_list),
        ["fx__echo", "fx__add", FIND, DESCRIBE, CALL],
        "{w}: the described tool joined the list"
    );
    assert_eq!(r.text(direct_add), "5", "{w}");

    // 4. call_tool with progress and with elicitation, the same as a direct call.
    progress_and_elicitation_reach_the_client(
        &r,
        client,
        [progress, modern_progress, ask, modern_ask],
    );
    assert_eq!(
        r.result(via_echo)["content"],
        r.result(direct_echo)["content"],
        "{w}: call_tool gives the direct call's result"
    );
    let e = r.error(misspelt);
    assert_eq!(e["code"], -32602, "{w}: {e}");
    assert!(
        e["data"]["nearest"]
            .as_array()
            .is_some_and(|n| n.iter().any(|x| x == "fx__add")),
        "{w}: the error names the nearest tools: {e}"
    );

    // Another describe: a second change, most recently described first.
    assert_eq!(
        r.result(described_again)["structuredContent"]["tools"][0]["name"],
        "fx__sleep",
        "{w}"
    );
    r.changed(changed_again, 2);
    assert_eq!(
        r.listed(third_list),
        ["fx__echo", "fx__sleep", "fx__add", FIND, DESCRIBE, CALL],
        "{w}"
    );
    assert_eq!(r.text(direct_sleep), "slept 1", "{w}");
    assert_eq!(
        r.out["wire"]["toolsListChanged"], 2,
        "{w}: one notification per activation on the wire: {}",
        r.out
    );
    if client.modern() {
        assert_eq!(
            r.out["subscription"],
            json!({"toolsListChanged": true}),
            "{w}: the SDK's subscriptions/listen was honoured: {}",
            r.out
        );
    }
    if matches!(client, Client::Ts2Legacy | Client::Ts2Modern) {
        // The SDK refetched the list on each change; the last one holds both tools.
        let last = r.out["refreshed"]
            .as_array()
            .and_then(|a| a.last())
            .cloned()
            .unwrap_or_default();
        assert!(
            ["fx__add", "fx__sleep"]
                .iter()
                .all(|t| last.as_array().is_some_and(|l| l.iter().any(|x| x == t))),
            "{w}: the SDK's refreshed list: {}",
            r.out
        );
    }
}

#[tokio::test]
async fn interop_discovery_each_sdk_client_finds_describes_activates_and_calls_tools() {
    let Some(peers) =
        era_peers("interop_discovery_each_sdk_client_finds_describes_activates_and_calls_tools")
    else {
        return;
    };
    let d = discover_daemon(&peers).await;
    for client in [Client::Py, Client::Ts, Client::Ts2Modern, Client::Ts2Legacy] {
        finds_describes_activates_and_calls(&peers, &d, client).await;
    }
}

#[tokio::test]
async fn interop_discovery_a_profile_hides_the_other_servers_tools_from_every_sdk_client() {
    let Some(peers) = era_peers(
        "interop_discovery_a_profile_hides_the_other_servers_tools_from_every_sdk_client",
    ) else {
        return;
    };
    // `other` has tools `fx` lacks; the daemon pins one of them, which the profile
    // inherits but must not show.
    let d = DaemonBuilder::new()
        .env("MCPD_PEERS_DIR", path_str(&peers_dir(&peers)))
        .daemon("tools = \"discover\"\npinned = [\"fx__echo\", \"other__pid\"]")
        .profile("narrow", "servers = [\"fx\"]\ntools = \"discover\"")
        .fixture("fx", &["--tools", "echo,add"])
        .fixture("other", &["--tools", "echo,add,sleep,pid"])
        .start()
        .await;
    d.wait_ready().await;
    for client in [Client::Py, Client::Ts, Client::Ts2Modern] {
        let mut p = Plan::default();
        let listed = p.list();
        let wait = p.find("wait some milliseconds");
        let pid = p.find("process id of the server");
        let add = p.find("add two numbers");
        let everything = p.call(FIND, json!({"query": "*", "limit": 50}));
        let only_other = p.call(FIND, json!({"query": "*", "server": "other"}));
        let described = p.call(DESCRIBE, json!({"names": ["other__sleep", "fx__add"]}));
        let via = p.call(
            CALL,
            json!({"name": "other__sleep", "arguments": {"ms": 1}}),
        );
        let via_add = p.call(
            CALL,
            json!({"name": "other__add", "arguments": {"a": 1, "b": 2}}),
        );
        let direct = p.call("other__sleep", json!({"ms": 1}));
        let own = p.call(
            CALL,
            json!({"name": "fx__add", "arguments": {"a": 1, "b": 2}}),
        );
        let r = run(&peers, client, &d, Some("narrow"), &p).await;
        let w = &r.what;

        assert_eq!(
            r.listed(listed),
            ["fx__echo", FIND, DESCRIBE, CALL],
            "{w}: the pinned tool of the other server is not listed"
        );
        for i in [wait, pid, add, everything, only_other] {
            assert!(
                r.found(i).iter().all(|n| n.starts_with("fx__")),
                "{w}: only the profile's tools are found: {}",
                r.step(i)
            );
        }
        assert_eq!(r.found(add).first(), Some(&"fx__add"), "{w}");
        assert_eq!(r.found(everything), ["fx__add", "fx__echo"], "{w}");
        assert_eq!(r.found(only_other), Vec::<&str>::new(), "{w}");
        let sc = &r.result(described)["structuredContent"];
        assert_eq!(sc["tools"].as_array().map(Vec::len), Some(1), "{w}: {sc}");
        assert_eq!(sc["tools"][0]["name"], "fx__add", "{w}: {sc}");
        assert_eq!(sc["unknown"][0]["name"], "other__sleep", "{w}: {sc}");
        assert!(
            sc["unknown"][0]["nearest"].as_array().is_some_and(|n| n
                .iter()
                .all(|x| x.as_str().is_some_and(|x| x.starts_with("fx__")))),
            "{w}: the nearest names are the profile's own: {sc}"
        );
        for (i, asked) in [
            (via, "other__sleep"),
            (via_add, "other__add"),
            (direct, "other__sleep"),
        ] {
            let e = r.error(i);
            assert_eq!(e["code"], -32602, "{w}: {e}");
            assert_eq!(e["data"]["tool"], asked, "{w}: {e}");
            assert!(
                !e.to_string().replace(asked, "").contains("other__"),
                "{w}: the error names no other tool of the hidden server: {e}"
            );
            assert!(
                e["data"]["nearest"].as_array().is_some_and(|n| n
                    .iter()
                    .all(|x| x.as_str().is_some_and(|x| x.starts_with("fx__")))),
                "{w}: {e}"
            );
        }
        assert_eq!(r.text(own), "3", "{w}");
    }
}

#[tokio::test]
async fn interop_discovery_discover_above_switches_an_sdk_clients_list_after_a_reload() {
    let Some(peers) =
        era_peers("interop_discovery_discover_above_switches_an_sdk_clients_list_after_a_reload")
    else {
        return;
    };
    for client in [Client::Ts2Modern, Client::Py] {
        let d = DaemonBuilder::new()
            .env("MCPD_PEERS_DIR", path_str(&peers_dir(&peers)))
            .daemon("tools = \"discover\"\ndiscover_above = 2")
            .fixture("fx", &["--tools", "echo,add"])
            .start()
            .await;
        d.wait_ready().await;
        // The next config, applied by the client's own `mcpd ctl reload` mid-run.
        let mut cfg = std::fs::read_to_string(&d.config).expect("config");
        cfg.push_str(&format!(
            "[servers.b]\ncommand = {:?}\nargs = [\"--tools\", \"echo\"]\n",
            fixture_bin()
        ));
        std::fs::write(&d.config, cfg).expect("write config");

        let mut p = Plan::default();
        let before = p.list();
        let direct = p.call("fx__add", json!({"a": 1, "b": 1}));
        let reload = p.push(json!({"op": "run", "argv": [
            mcpd_bin(), "ctl", "reload", "--socket", path_str(&d.socket)]}));
        let changed = p.changed(1);
        let after = p.list();
        let found = p.call(FIND, json!({"query": "*"}));
        let r = run(&peers, client, &d, None, &p).await;
        let w = &r.what;

        assert_eq!(
            r.listed(before),
            ["fx__add", "fx__echo"],
            "{w}: 2 tools: all of them"
        );
        assert_eq!(r.text(direct), "2", "{w}");
        assert_eq!(r.step(reload)["code"], 0, "{w}: {}", r.step(reload));
        let seen = r.step(changed);
        assert!(
            seen["count"].as_u64().is_some_and(|n| n >= 1) && seen.get("timedOut").is_none(),
            "{w}: the SDK hears that the list changed: {}",
            r.out
        );
        assert_eq!(
            r.listed(after),
            META,
            "{w}: 3 tools after the reload: the discovery list"
        );
        assert_eq!(r.found(found), ["b__echo", "fx__add", "fx__echo"], "{w}");
    }
}
