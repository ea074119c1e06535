//! Interop: the official Python and TypeScript MCP SDK clients reach published MCP servers
//! (`mcp-server-time`, `@modelcontextprotocol/server-everything`) through `mcpd connect`.
//!
//! The peers come from `.ci/install-peers` (see `tests/interop/README.md`). When they are
//! missing, the tests skip with a note on stderr, or fail when `MCPD_REQUIRE_PEERS=1` (CI).

use crate::support::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The protocol version both pinned SDKs ask for, which mcpd accepts as is.
const SDK_PROTOCOL: &str = "2025-11-25";

/// The clients' own bound on a whole run (`--timeout`); the Python SDK may need about 5 s
/// more to shut down after it fires.
const CLIENT_TIMEOUT_SECS: u64 = 30;

/// Our bound on a client process, above the client's own so its error message wins.
const CLIENT_WAIT: Duration = Duration::from_secs(30);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Where `.ci/install-peers` put the official SDKs and the published servers.
pub(crate) struct Peers {
    pub(crate) dir: PathBuf,
}

impl Peers {
    pub(crate) fn python(&self) -> PathBuf {
        self.dir.join("venv/bin/python")
    }

    pub(crate) fn time_server(&self) -> PathBuf {
        self.dir.join("venv/bin/mcp-server-time")
    }

    fn node_modules(&self) -> PathBuf {
        self.dir.join("node/node_modules/@modelcontextprotocol")
    }

    pub(crate) fn everything_server(&self) -> PathBuf {
        self.node_modules().join("server-everything/dist/index.js")
    }

    fn ts_sdk(&self) -> PathBuf {
        self.node_modules().join("sdk/package.json")
    }

    /// A daemon with `mcp-server-time` as `time` and server-everything as `everything`,
    /// both ready.
    async fn daemon(&self) -> Daemon {
        let time = self.time_server();
        let everything = self.everything_server();
        let d = DaemonBuilder::new()
            .server("time", path_str(&time), &["--local-timezone", "UTC"], "")
            .server("everything", "node", &[path_str(&everything), "stdio"], "")
            .start()
            .await;
        d.wait_ready().await;
        d
    }
}

pub(crate) fn path_str(p: &Path) -> &str {
    p.to_str()
        .unwrap_or_else(|| panic!("non-UTF-8 path {}", p.display()))
}

/// The installed peers. When something is missing: fails the test if `MCPD_REQUIRE_PEERS=1`,
/// otherwise says `skipped` on stderr and returns None (the test then returns early).
pub(crate) fn peers(test: &str) -> Option<Peers> {
    let dir = match std::env::var_os("MCPD_PEERS_DIR") {
        Some(d) if !d.is_empty() => repo().join(d),
        _ => repo().join("target/peers"),
    };
    let peers = Peers { dir };
    let mut missing: Vec<String> = [
        peers.python(),
        peers.time_server(),
        peers.everything_server(),
        peers.ts_sdk(),
    ]
    .into_iter()
    .filter(|p| !p.exists())
    .map(|p| p.display().to_string())
    .collect();
    let node_on_path = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join("node").is_file()));
    if !node_on_path {
        missing.push("`node` on PATH".to_owned());
    }
    if missing.is_empty() {
        return Some(peers);
    }
    let what = format!(
        "interop peers missing in {}: {}; run .ci/install-peers",
        peers.dir.display(),
        missing.join(", ")
    );
    if std::env::var("MCPD_REQUIRE_PEERS").as_deref() == Ok("1") {
        panic!("{test}: {what} (MCPD_REQUIRE_PEERS=1 makes this a failure)");
    }
    eprintln!("skipped: {test}: {what}");
    None
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Sdk {
    Python,
    TypeScript,
}

/// Runs one SDK client (`tests/interop/*_client.*`) with `mcpd connect` to `d` as its
/// server; it initializes, lists every tool and calls `tool`. Returns its one line of JSON.
async fn run_client(peers: &Peers, sdk: Sdk, d: &Daemon, tool: &str, args: &Value) -> Value {
    let interop = repo().join("tests/interop");
    let mut cmd = match sdk {
        Sdk::Python => {
            let mut c = tokio::process::Command::new(peers.python());
            c.arg(interop.join("py_client.py"));
            c
        }
        Sdk::TypeScript => {
            let mut c = tokio::process::Command::new("node");
            c.arg(interop.join("ts_client.mjs"));
            c
        }
    };
    cmd.arg("--timeout")
        .arg(CLIENT_TIMEOUT_SECS.to_string())
        .arg("--call")
        .arg(tool)
        .arg("--args")
        .arg(args.to_string())
        .arg("--")
        .arg(mcpd_bin())
        .arg("connect")
        .arg("--socket")
        .arg(&d.socket)
        .current_dir(repo())
        .env("MCPD_PEERS_DIR", &peers.dir)
        .env_remove("MCPD_SOCKET")
        .env_remove("MCPD_CONFIG")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let what = format!("{sdk:?} client calling {tool} {args}");
    let out = match tokio::time::timeout(CLIENT_WAIT, cmd.output()).await {
        Ok(out) => out.unwrap_or_else(|e| panic!("{what}: cannot start: {e}")),
        Err(_) => panic!("{what}: timed out after {CLIENT_WAIT:?}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what}: exited with {}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        out.status
    );
    assert_eq!(
        stdout.lines().count(),
        1,
        "{what}: expected one line of JSON\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{what}: stdout is not JSON ({e})\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
        )
    })
}

/// The qualified tool names mcpd lists to a raw agent.
async fn raw_listing(d: &Daemon) -> Vec<String> {
    let mut a = d.initialized_agent().await;
    a.tool_names().await
}

/// What every client run must show: the negotiated version, mcpd as the server, and both
/// servers' tools qualified, exactly as mcpd lists them to a raw agent.
fn assert_handshake_and_listing(sdk: Sdk, out: &Value, raw: &[String]) {
    assert_eq!(out["protocolVersion"], SDK_PROTOCOL, "{sdk:?}: {out}");
    assert_eq!(out["serverInfo"]["name"], "mcpd", "{sdk:?}: {out}");
    assert_eq!(
        out["serverInfo"]["version"],
        env!("CARGO_PKG_VERSION"),
        "{sdk:?}: {out}"
    );
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{sdk:?}: no tools in {out}"))
        .iter()
        .map(|t| t.as_str().expect("tool name"))
        .collect();
    for name in [
        "time__get_current_time",
        "time__convert_time",
        "everything__echo",
        "everything__get-sum",
        "everything__trigger-long-running-operation",
    ] {
        assert!(tools.contains(&name), "{sdk:?}: no {name} in {tools:?}");
    }
    assert!(
        tools
            .iter()
            .all(|t| t.starts_with("time__") || t.starts_with("everything__")),
        "{sdk:?}: unqualified tool in {tools:?}"
    );
    assert_eq!(
        tools.iter().filter(|t| t.starts_with("time__")).count(),
        2,
        "{sdk:?}: mcp-server-time has two tools: {tools:?}"
    );
    assert_eq!(
        tools, raw,
        "{sdk:?}: the SDK's listing differs from mcpd's raw listing"
    );
}

/// The `call` of a run succeeded (isError absent or false).
fn assert_not_error(sdk: Sdk, out: &Value) {
    assert!(
        matches!(out["call"]["isError"], Value::Null | Value::Bool(false)),
        "{sdk:?}: tool error {out}"
    );
}

async fn sdk_client_lists_and_calls_both_servers_through_mcpd_connect(sdk: Sdk, test: &str) {
    let Some(peers) = peers(test) else {
        return;
    };
    let d = peers.daemon().await;
    let raw = raw_listing(&d).await;

    let echo = run_client(
        &peers,
        sdk,
        &d,
        "everything__echo",
        &json!({ "message": "hi" }),
    )
    .await;
    assert_handshake_and_listing(sdk, &echo, &raw);
    assert_not_error(sdk, &echo);
    assert_eq!(
        echo["call"]["content"],
        json!([{ "type": "text", "text": "Echo: hi" }]),
        "{sdk:?}: {echo}"
    );

    let time = run_client(
        &peers,
        sdk,
        &d,
        "time__get_current_time",
        &json!({ "timezone": "UTC" }),
    )
    .await;
    assert_handshake_and_listing(sdk, &time, &raw);
    assert_not_error(sdk, &time);
    let call = &time["call"];
    assert_eq!(
        call["structuredContent"]["timezone"], "UTC",
        "{sdk:?}: {time}"
    );
    let datetime = call["structuredContent"]["datetime"]
        .as_str()
        .unwrap_or_else(|| panic!("{sdk:?}: no datetime in {time}"));
    assert!(datetime.ends_with("+00:00"), "{sdk:?}: {datetime}");
    assert_eq!(call["content"][0]["type"], "text", "{sdk:?}: {time}");
    let text = call["content"][0]["text"].as_str().unwrap_or_default();
    let parsed: Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("{sdk:?}: the text block is not JSON ({e}): {time}"));
    assert_eq!(parsed["timezone"], "UTC", "{sdk:?}: {time}");
    assert_eq!(parsed["datetime"], datetime, "{sdk:?}: {time}");

    // Neither server was restarted on the way.
    for name in ["time", "everything"] {
        let s = d.server_status(name).await;
        assert_eq!(
            (s["state"].as_str(), s["restarts"].as_u64()),
            (Some("ready"), Some(0)),
            "{s}"
        );
    }
}

#[tokio::test]
async fn the_python_sdk_client_lists_and_calls_published_servers_through_mcpd_connect() {
    sdk_client_lists_and_calls_both_servers_through_mcpd_connect(
        Sdk::Python,
        "the_python_sdk_client_lists_and_calls_published_servers_through_mcpd_connect",
    )
    .await;
}

#[tokio::test]
async fn the_typescript_sdk_client_lists_and_calls_published_servers_through_mcpd_connect() {
    sdk_client_lists_and_calls_both_servers_through_mcpd_connect(
        Sdk::TypeScript,
        "the_typescript_sdk_client_lists_and_calls_published_servers_through_mcpd_connect",
    )
    .await;
}

/// The server pids from `mcpd ctl status --json`, by name.
async fn server_pids(d: &Daemon) -> Vec<(String, u64)> {
    let (code, out, err) = d.run_cli(&["ctl", "status", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("status --json prints JSON");
    let mut pids: Vec<(String, u64)> = v["servers"]
        .as_array()
        .unwrap_or_else(|| panic!("no servers in {v}"))
        .iter()
        .map(|s| {
            let name = s["name"].as_str().expect("name").to_owned();
            let pid = s["pid"]
                .as_u64()
                .unwrap_or_else(|| panic!("no pid for {name} in {v}"));
            (name, pid)
        })
        .collect();
    pids.sort();
    pids
}

fn sorted_children(pid: u32) -> Vec<u64> {
    let mut c: Vec<u64> = children_of(pid).into_iter().map(u64::from).collect();
    c.sort();
    c
}

#[tokio::test]
async fn python_and_typescript_clients_at_once_share_one_process_per_server() {
    let Some(peers) = peers("python_and_typescript_clients_at_once_share_one_process_per_server")
    else {
        return;
    };
    let d = peers.daemon().await;
    let before = server_pids(&d).await;
    // The daemon's children: the two servers (and any helper of mcpd's own, such as its
    // sentinel). An agent must not add to them.
    let children_before = sorted_children(d.pid());
    for (name, pid) in &before {
        assert!(
            children_before.contains(pid),
            "server {name} (pid {pid}) is a child of the daemon: {children_before:?}"
        );
    }

    // Both clients call a tool that takes 6 s, so their calls overlap upstream even when
    // a loaded machine starts the second client seconds after the first.
    let long = json!({ "duration": 6, "steps": 3 });
    let tool = "everything__trigger-long-running-operation";
    let py = run_client(&peers, Sdk::Python, &d, tool, &long);
    let ts = run_client(&peers, Sdk::TypeScript, &d, tool, &long);
    let both_in_flight = async {
        let s = d
            .wait_server(
                "everything",
                "both clients' calls in flight on the one everything process",
                |s| s["in_flight"] == 2,
            )
            .await;
        (s, sorted_children(d.pid()))
    };
    let (py, ts, (during, children_during)) = tokio::join!(py, ts, both_in_flight);
    assert_eq!(
        children_during, children_before,
        "no extra process per agent while both calls run"
    );
    let during_pid = during["pid"].as_u64();
    assert_eq!(
        during_pid,
        before
            .iter()
            .find(|(n, _)| n == "everything")
            .map(|(_, p)| *p),
        "the two calls ran on the pre-existing process: {during}"
    );

    let raw = raw_listing(&d).await;
    let done = json!([{
        "type": "text",
        "text": "Long running operation completed. Duration: 6 seconds, Steps: 3.",
    }]);
    for (sdk, out) in [(Sdk::Python, &py), (Sdk::TypeScript, &ts)] {
        assert_handshake_and_listing(sdk, out, &raw);
        assert_not_error(sdk, out);
        assert_eq!(out["call"]["content"], done, "{sdk:?}: {out}");
    }

    let after = server_pids(&d).await;
    assert_eq!(before, after, "same server processes before and after");
    assert_eq!(
        sorted_children(d.pid()),
        children_before,
        "the daemon's children are the same after both agents left"
    );
    for name in ["time", "everything"] {
        let s = d.server_status(name).await;
        assert_eq!(s["restarts"], 0, "{s}");
    }
}

/// The last `lines` lines of the daemon's log, for failure messages.
fn log_tail(d: &Daemon, lines: usize) -> String {
    let log = d.log_text();
    let all: Vec<&str> = log.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Runs `tests/interop/py_surface_client.py` with `mcpd connect` to `d` as its server and
/// `args` as its own arguments (prompts to get, resources to read). Returns its one line
/// of JSON; on failure, shows its output and the end of the daemon's log.
async fn run_py_surface_client(peers: &Peers, d: &Daemon, args: &[&str]) -> Value {
    let mut cmd = tokio::process::Command::new(peers.python());
    cmd.arg(repo().join("tests/interop/py_surface_client.py"))
        .arg("--timeout")
        .arg(CLIENT_TIMEOUT_SECS.to_string())
        .args(args)
        .arg("--")
        .arg(mcpd_bin())
        .arg("connect")
        .arg("--socket")
        .arg(&d.socket)
        .current_dir(repo())
        .env("MCPD_PEERS_DIR", &peers.dir)
        .env_remove("MCPD_SOCKET")
        .env_remove("MCPD_CONFIG")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let what = format!("Python surface client {args:?}");
    let out = match tokio::time::timeout(CLIENT_WAIT, cmd.output()).await {
        Ok(out) => out.unwrap_or_else(|e| panic!("{what}: cannot start: {e}")),
        Err(_) => panic!(
            "{what}: timed out after {CLIENT_WAIT:?}\n--- daemon log ---\n{}",
            log_tail(d, 60)
        ),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let shown = || {
        format!(
            "--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}\n--- daemon log ---\n{}",
            log_tail(d, 60)
        )
    };
    assert!(
        out.status.success(),
        "{what}: exited with {}\n{}",
        out.status,
        shown()
    );
    assert_eq!(
        stdout.lines().count(),
        1,
        "{what}: expected one line of JSON\n{}",
        shown()
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{what}: stdout is not JSON ({e})\n{}", shown()))
}

/// The `field` of every item of the array `out[key]`, as strings.
fn strings_at<'a>(out: &'a Value, key: &str, field: &str) -> Vec<&'a str> {
    out[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {out}"))
        .iter()
        .map(|v| {
            v[field]
                .as_str()
                .unwrap_or_else(|| panic!("no {field} in {v}"))
        })
        .collect()
}

/// The one content item of a `resources/read` result the client printed, after checking
/// that it was read by `uri` and answered under that same URI.
fn read_content<'a>(out: &'a Value, i: usize, uri: &str) -> &'a Value {
    let read = &out["reads"][i];
    assert_eq!(read["uri"], uri, "read {i}: {out}");
    let contents = read["result"]["contents"]
        .as_array()
        .unwrap_or_else(|| panic!("read {i}: no contents in {read}"));
    assert_eq!(contents.len(), 1, "read {i}: one content item: {read}");
    assert_eq!(
        contents[0]["uri"], uri,
        "read {i}: the URI the agent asked for: {read}"
    );
    &contents[0]
}

/// The prompts part of the Python SDK client's surface test: server-everything's four
/// prompts listed under their qualified names, and three of them got.
fn everything_prompts_listed_and_got(out: &Value) {
    // Prompts: server-everything's four, qualified; mcp-server-time has none.
    let mut prompts = strings_at(out, "prompts", "name");
    prompts.sort_unstable();
    assert_eq!(
        prompts,
        [
            "everything__args-prompt",
            "everything__completable-prompt",
            "everything__resource-prompt",
            "everything__simple-prompt",
        ],
        "{out}"
    );
    let args_prompt = out["prompts"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == "everything__args-prompt"))
        .unwrap_or_else(|| panic!("no args-prompt in {out}"));
    assert_eq!(
        (
            &args_prompt["arguments"][0]["name"],
            &args_prompt["arguments"][0]["required"],
            &args_prompt["arguments"][1]["name"],
        ),
        (&json!("city"), &json!(true), &json!("state")),
        "{args_prompt}"
    );
    assert_ne!(
        args_prompt["arguments"][1]["required"], true,
        "{args_prompt}"
    );

    let user_text =
        |text: &str| json!([{ "role": "user", "content": { "type": "text", "text": text } }]);
    assert_eq!(out["gets"][0]["name"], "everything__args-prompt", "{out}");
    assert_eq!(
        out["gets"][0]["result"]["messages"],
        user_text("What's weather in Paris, Texas?"),
        "{out}"
    );
    assert_eq!(out["gets"][1]["name"], "everything__simple-prompt", "{out}");
    assert_eq!(
        out["gets"][1]["result"]["messages"],
        user_text("This is a simple prompt without arguments."),
        "{out}"
    );
    // A prompt that embeds a resource: the resource arrives whole, under its own URI.
    let messages = &out["gets"][2]["result"]["messages"];
    assert_eq!(
        messages[0]["content"]["text"],
        "This prompt includes the Text resource with id: 3. Please analyze the following resource:",
        "{out}"
    );
    let embedded = &messages[1]["content"];
    assert_eq!(embedded["type"], "resource", "{out}");
    assert_eq!(
        embedded["resource"]["uri"], "demo://resource/dynamic/text/3",
        "{out}"
    );
    let embedded_text = embedded["resource"]["text"].as_str().unwrap_or_default();
    assert!(
        embedded_text.starts_with("Resource 3: This is a plaintext resource created at "),
        "{out}"
    );
}

#[tokio::test]
async fn the_python_sdk_client_gets_prompts_and_reads_resources_of_a_published_server_through_mcpd_connect()
 {
    let Some(peers) = peers(
        "the_python_sdk_client_gets_prompts_and_reads_resources_of_a_published_server_through_mcpd_connect",
    ) else {
        return;
    };
    let d = peers.daemon().await;
    let docs = peers
        .everything_server()
        .parent()
        .expect("dist/")
        .join("docs");
    let features = "demo://resource/static/document/features.md";
    let text_42 = "demo://resource/dynamic/text/42";
    let blob_7 = "demo://resource/dynamic/blob/7";
    let out = run_py_surface_client(
        &peers,
        &d,
        &[
            "--get-prompt",
            "everything__args-prompt",
            r#"{"city":"Paris","state":"Texas"}"#,
            "--get-prompt",
            "everything__simple-prompt",
            "{}",
            "--get-prompt",
            "everything__resource-prompt",
            r#"{"resourceType":"Text","resourceId":"3"}"#,
            "--read-listed",
            "/features.md",
            "--read",
            text_42,
            "--read",
            blob_7,
        ],
    )
    .await;

    assert_eq!(out["protocolVersion"], SDK_PROTOCOL, "{out}");
    assert_eq!(out["serverInfo"]["name"], "mcpd", "{out}");
    for cap in ["prompts", "resources"] {
        assert!(
            out["capabilities"][cap].is_object(),
            "no {cap} capability: {out}"
        );
    }

    everything_prompts_listed_and_got(&out);

    // Resources: one per file in server-everything's docs/, URIs kept as they are since
    // only one server lists them; and its two templates.
    let mut expected: Vec<String> = std::fs::read_dir(&docs)
        .unwrap_or_else(|e| panic!("{}: {e}", docs.display()))
        .map(|e| e.expect("docs entry"))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| {
            format!(
                "demo://resource/static/document/{}",
                e.file_name().to_str().expect("UTF-8 file name")
            )
        })
        .collect();
    expected.sort();
    assert!(expected.iter().any(|u| u == features), "{expected:?}");
    let mut listed = strings_at(&out, "resources", "uri");
    listed.sort_unstable();
    assert_eq!(listed, expected, "{out}");
    let mut templates = strings_at(&out, "resourceTemplates", "uriTemplate");
    templates.sort_unstable();
    assert_eq!(
        templates,
        [
            "demo://resource/dynamic/blob/{resourceId}",
            "demo://resource/dynamic/text/{resourceId}",
        ],
        "{out}"
    );

    // Read by the URI mcpd listed: the file's text, under that URI.
    assert_eq!(out["reads"][0]["listed"], "/features.md", "{out}");
    let content = read_content(&out, 0, features);
    assert_eq!(content["mimeType"], "text/markdown", "{out}");
    let on_disk = std::fs::read_to_string(docs.join("features.md")).expect("features.md");
    assert!(!on_disk.is_empty());
    assert_eq!(content["text"], on_disk.as_str(), "{out}");

    // Read through the templates: URIs no server lists, routed by the templates.
    for uri in [text_42, blob_7] {
        assert!(!listed.contains(&uri), "{uri} is not listed: {listed:?}");
    }
    let content = read_content(&out, 1, text_42);
    let text = content["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("Resource 42: This is a plaintext resource created at "),
        "{out}"
    );
    let content = read_content(&out, 2, blob_7);
    let blob = content["blob"]
        .as_str()
        .unwrap_or_else(|| panic!("no blob in {content}"));
    let decoded = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, blob)
        .unwrap_or_else(|e| panic!("blob is not base64 ({e}): {content}"));
    assert!(
        String::from_utf8_lossy(&decoded)
            .starts_with("Resource 7: This is a base64 blob created at "),
        "{}",
        String::from_utf8_lossy(&decoded)
    );

    // Neither server was restarted on the way.
    for name in ["time", "everything"] {
        let s = d.server_status(name).await;
        assert_eq!(
            (s["state"].as_str(), s["restarts"].as_u64()),
            (Some("ready"), Some(0)),
            "{s}"
        );
    }
}

#[tokio::test]
async fn published_servers_survive_ctl_call_and_a_huge_template_uri() {
    let Some(peers) = peers("published_servers_survive_ctl_call_and_a_huge_template_uri") else {
        return;
    };
    let d = peers.daemon().await;
    // mcp-server-time answers in whichever era mcpd chose for it; `ctl call` never
    // initializes, and must work all the same.
    let (code, out, err) = d
        .run_cli(&[
            "ctl",
            "call",
            "time__get_current_time",
            r#"{"timezone":"UTC"}"#,
        ])
        .await;
    assert_eq!(code, 0, "{out} {err}");
    assert!(out.contains("UTC"), "{out}");
    // server-everything lists `demo://resource/dynamic/text/{resourceId}`: a million
    // characters once kept the daemon from answering anyone for minutes.
    let mut agent = d.initialized_agent().await;
    let huge = format!("demo://resource/dynamic/text/{}", "a".repeat(1_000_000));
    let r = agent
        .request("resources/read", Some(json!({"uri": huge})))
        .await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    let (code, _, err) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0, "{err}");
}
