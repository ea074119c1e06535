//! Interop over HTTP: mcpd lists and calls the tools of remote MCP servers nobody here wrote,
//! started by the test on loopback: a Streamable HTTP server built on the official Python SDK
//! (`tests/interop/py_http_server.py`), and the published `@modelcontextprotocol/server-everything`
//! in its Streamable HTTP mode and in its legacy 2024-11-05 HTTP+SSE mode
//! (`tests/interop/everything_http.mjs` runs it on 127.0.0.1).
//!
//! The peers come from `.ci/install-peers`; when they are missing the tests skip, or fail
//! when `MCPD_REQUIRE_PEERS=1`, as in `sdks.rs`.

use crate::interop::sdks::{Peers, path_str, peers};
use crate::support::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Stdio;

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

/// A TCP port on loopback that was free a moment ago: the OS picks it, we release it, and the
/// peer binds it. Another process could take it in between, which is rare enough for tests.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("its address").port()
}

/// A peer server process the test started. Dropping it kills the process (kill_on_drop); the
/// peers also exit by themselves when the test process dies. When the test fails, the peer's
/// output is printed, like the daemon's log.
struct PeerServer {
    what: String,
    log: PathBuf,
    child: tokio::process::Child,
    _dir: tempfile::TempDir,
}

impl PeerServer {
    /// Starts `cmd` with its output in a log file, and waits until it accepts TCP connections
    /// on 127.0.0.1:`port`.
    async fn start(what: &str, mut cmd: tokio::process::Command, port: u16) -> PeerServer {
        let dir = tempfile::Builder::new()
            .prefix("mcpd-peer")
            .tempdir()
            .expect("temp dir");
        let log = dir.path().join("peer.log");
        let out = std::fs::File::create(&log).expect("peer log file");
        let err = out.try_clone().expect("peer log file");
        let child = cmd
            .current_dir(interop_dir())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
        let mut peer = PeerServer {
            what: what.to_owned(),
            log,
            child,
            _dir: dir,
        };
        peer.wait_listening(port).await;
        peer
    }

    async fn wait_listening(&mut self, port: u16) {
        let what = self.what.as_str();
        let child = &mut self.child;
        eventually(
            &format!("{what} accepts connections on 127.0.0.1:{port}"),
            WAIT,
            || {
                // A peer that has exited will never listen: fail now rather than at the deadline.
                let exited = child.try_wait().expect("poll the peer process");
                async move {
                    if let Some(status) = exited {
                        panic!("{what} exited with {status} before listening on port {port}");
                    }
                    tokio::net::TcpStream::connect(("127.0.0.1", port))
                        .await
                        .ok()
                        .map(|_| ())
                }
            },
        )
        .await;
    }
}

impl Drop for PeerServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- {} output ({}) ---\n{}",
                self.what,
                self.log.display(),
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
    }
}

/// `tests/interop/py_http_server.py PORT`: the Python SDK's Streamable HTTP server at
/// `http://127.0.0.1:PORT/mcp`. Returns it and that URL.
async fn python_sdk_server(peers: &Peers) -> (PeerServer, String) {
    let port = free_port();
    let mut cmd = tokio::process::Command::new(peers.python());
    cmd.arg(interop_dir().join("py_http_server.py"))
        .arg(port.to_string())
        // Unbuffered, so a failing test shows everything the server logged.
        .env("PYTHONUNBUFFERED", "1");
    let server = PeerServer::start("py_http_server.py", cmd, port).await;
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

/// server-everything in one of its HTTP modes, run on loopback by
/// `node tests/interop/everything_http.mjs ENTRY MODE PORT`. Returns it and the URL a client
/// starts at: `/mcp` for `streamableHttp`, `/sse` (the event stream) for `sse`.
async fn everything_server(peers: &Peers, mode: &str) -> (PeerServer, String) {
    let path = match mode {
        "streamableHttp" => "mcp",
        "sse" => "sse",
        other => panic!("server-everything has no HTTP mode {other:?}"),
    };
    let port = free_port();
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(interop_dir().join("everything_http.mjs"))
        .arg(path_str(&peers.everything_server()))
        .arg(mode)
        .arg(port.to_string());
    let server = PeerServer::start(&format!("server-everything {mode}"), cmd, port).await;
    (server, format!("http://127.0.0.1:{port}/{path}"))
}

/// A daemon with one remote server, `name` at `url` (with `extra` TOML lines), ready.
async fn daemon_with_remote(name: &str, url: &str, extra: &str) -> Daemon {
    let d = DaemonBuilder::new().remote(name, url, extra).start().await;
    d.wait_ready().await;
    d
}

/// The status row of `name` says ready over `transport`, and no restart happened on the way.
async fn assert_ready_over(d: &Daemon, name: &str, transport: &str) {
    let s = d.server_status(name).await;
    assert_eq!(s["transport"], transport, "{s}");
    assert_eq!(s["state"], "ready", "{s}");
    assert_eq!(s["restarts"], 0, "{s}");
}

/// Lists and calls server-everything's tools as `everything`, through `d`.
async fn everything_is_listed_and_called(d: &Daemon) {
    let mut a = d.initialized_agent().await;
    let tools = a.tool_names().await;
    for name in ["everything__echo", "everything__get-sum"] {
        assert!(tools.iter().any(|t| t == name), "no {name} in {tools:?}");
    }
    assert!(
        tools.iter().all(|t| t.starts_with("everything__")),
        "unqualified tool in {tools:?}"
    );

    let echo = a
        .call("everything__echo", json!({ "message": "over http" }))
        .await;
    assert_eq!(text(&echo), "Echo: over http", "{echo}");
    let sum = a
        .call("everything__get-sum", json!({ "a": 2, "b": 40 }))
        .await;
    assert_eq!(text(&sum), "The sum of 2 and 40 is 42.", "{sum}");
}

#[tokio::test]
async fn python_sdk_streamable_http_server_is_listed_and_called_through_mcpd() {
    let Some(peers) = peers("python_sdk_streamable_http_server_is_listed_and_called_through_mcpd")
    else {
        return;
    };
    let (_server, url) = python_sdk_server(&peers).await;
    let d = daemon_with_remote("py", &url, "").await;

    let mut a = d.initialized_agent().await;
    let mut tools = a.tool_names().await;
    tools.sort();
    assert_eq!(tools, ["py__add", "py__echo"]);

    let echo = a
        .call("py__echo", json!({ "text": "hello over http" }))
        .await;
    assert_eq!(text(&echo), "hello over http", "{echo}");
    assert_eq!(
        echo["result"]["structuredContent"],
        json!({ "result": "hello over http" }),
        "{echo}"
    );
    let add = a.call("py__add", json!({ "a": 2, "b": 40 })).await;
    assert_eq!(text(&add), "42", "{add}");
    assert_eq!(
        add["result"]["structuredContent"],
        json!({ "result": 42 }),
        "{add}"
    );

    assert_ready_over(&d, "py", "streamable-http").await;
}

#[tokio::test]
async fn server_everything_streamable_http_is_listed_and_called_through_mcpd() {
    let Some(peers) = peers("server_everything_streamable_http_is_listed_and_called_through_mcpd")
    else {
        return;
    };
    let (_server, url) = everything_server(&peers, "streamableHttp").await;
    let d = daemon_with_remote("everything", &url, "").await;
    everything_is_listed_and_called(&d).await;
    assert_ready_over(&d, "everything", "streamable-http").await;
}

#[tokio::test]
async fn server_everything_legacy_sse_is_reached_with_transport_auto() {
    let Some(peers) = peers("server_everything_legacy_sse_is_reached_with_transport_auto") else {
        return;
    };
    // No transport in the config: mcpd tries Streamable HTTP first, and server-everything
    // answers a POST to /sse with 404 (it serves only GET there), so mcpd falls back to SSE.
    let (_server, url) = everything_server(&peers, "sse").await;
    let d = daemon_with_remote("everything", &url, "").await;
    everything_is_listed_and_called(&d).await;
    assert_ready_over(&d, "everything", "sse").await;
}

#[tokio::test]
async fn server_everything_legacy_sse_with_transport_sse() {
    let Some(peers) = peers("server_everything_legacy_sse_with_transport_sse") else {
        return;
    };
    let (_server, url) = everything_server(&peers, "sse").await;
    let d = daemon_with_remote("everything", &url, "transport = \"sse\"").await;
    everything_is_listed_and_called(&d).await;
    assert_ready_over(&d, "everything", "sse").await;
}
