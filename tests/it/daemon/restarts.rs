//! `mcpd connect` across daemon restarts: the agent's session survives a stop and start, a `kill -9`, and the bridge says what it could not keep.

use crate::support::*;
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// An agent speaking through `mcpd connect`: what it writes, and every line it read
/// (responses by id; notifications in order).
struct Bridged {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    seen: Vec<Value>,
}

impl Bridged {
    fn start(d: &Daemon, extra: &[&str]) -> Bridged {
        let mut child = tokio::process::Command::new(mcpd_bin())
            .args(["connect", "--no-project", "--socket"])
            .arg(&d.socket)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start mcpd connect");
        let stdin = child.stdin.take().expect("stdin");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Bridged {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    async fn send(&mut self, msg: Value) {
        self.stdin
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .expect("write to the bridge");
    }

    async fn next(&mut self) -> Option<Value> {
        let line = within("a line from the bridge", self.lines.next_line())
            .await
            .expect("read")?;
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        self.seen.push(v.clone());
        Some(v)
    }

    /// Reads until the answer to `id` (other lines are kept in `seen`).
    async fn answer(&mut self, id: Value) -> Value {
        loop {
            let m = self.next().await.expect("the bridge is open");
            if m.get("method").is_none() && m["id"] == id {
                return m;
            }
        }
    }

    async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.answer(json!(id)).await
    }

    async fn initialize(&mut self) {
        let r = self
            .request(
                0,
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "restarts", "version": "1"}}),
            )
            .await;
        assert!(r.get("result").is_some(), "{r}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    /// Reads until a notification `method`, or the answer to a ping sent first says it
    /// has not come (within `WAIT`).
    async fn notified(&mut self, method: &str) -> Value {
        if let Some(n) = self.seen.iter().find(|m| m["method"] == method) {
            return n.clone();
        }
        within(&format!("the notification {method}"), async {
            loop {
                let m = self.next().await.expect("the bridge is open");
                if m["method"] == method {
                    return m;
                }
            }
        })
        .await
    }

    fn answers_to(&self, id: &Value) -> usize {
        self.seen
            .iter()
            .filter(|m| m.get("method").is_none() && &m["id"] == id)
            .count()
    }
}

fn daemon() -> DaemonBuilder {
    DaemonBuilder::new()
        .daemon("pin = \"off\"")
        .fixture("s", &[])
}

#[tokio::test]
async fn a_bridged_session_survives_a_daemon_restart() {
    let mut d = daemon().start().await;
    d.wait_ready().await;
    let mut a = Bridged::start(&d, &[]);
    a.initialize().await;
    let r = a
        .request(1, "resources/subscribe", json!({"uri": "fixture://alpha"}))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let r = a
        .request(
            2,
            "tools/call",
            json!({"name": "s__echo", "arguments": {"text": "before"}}),
        )
        .await;
    assert_eq!(text(&r), "before", "{r}");
    // A call in flight when the daemon stops.
    a.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "s__sleep", "arguments": {"ms": 600000}}}))
        .await;
    d.wait_call_in_flight("s__sleep").await;
    d.signal(Signal::SIGTERM);
    assert_eq!(d.wait_exit().await, Some(0));
    let r = a.answer(json!(3)).await;
    let code = error_code(&r);
    assert!(
        code == Some(-32014) || code == Some(-32027),
        "the call in flight is answered with an error: {r}"
    );
    // A request sent while no daemon runs waits for the next one.
    a.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "s__echo", "arguments": {"text": "held"}}}))
        .await;
    d.start_again().await;
    let r = a.answer(json!(4)).await;
    assert_eq!(
        text(&r),
        "held",
        "the held request went to the new daemon: {r}"
    );
    a.notified("notifications/tools/list_changed").await;
    // The subscription was made again: an update reaches the agent.
    let r = a
        .request(
            5,
            "tools/call",
            json!({"name": "s__touch", "arguments": {"uri": "fixture://alpha"}}),
        )
        .await;
    assert_eq!(text(&r), "touched", "{r}");
    let n = a.notified("notifications/resources/updated").await;
    assert_eq!(n["params"]["uri"], "fixture://alpha", "{n}");
    // The agent saw one answer to its initialize, and none to the bridge's own requests.
    assert_eq!(a.answers_to(&json!(0)), 1);
    assert!(
        !a.seen.iter().any(|m| m["id"]
            .as_str()
            .is_some_and(|s| s.starts_with("mcpd-connect"))),
        "{:?}",
        a.seen
    );
    drop(a.stdin);
    let status = within("the bridge exits at stdin's end", a.child.wait())
        .await
        .expect("wait");
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn after_kill_9_the_bridge_answers_what_was_in_flight_and_reconnects() {
    let mut d = daemon().start().await;
    d.wait_ready().await;
    let server = status_pid(&d.server_status("s").await).expect("server pid");
    let mut a = Bridged::start(&d, &[]);
    a.initialize().await;
    a.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "s__sleep", "arguments": {"ms": 600000}}}))
        .await;
    d.wait_call_in_flight("s__sleep").await;
    d.signal(Signal::SIGKILL);
    d.wait_exit().await;
    let r = a.answer(json!(1)).await;
    assert_eq!(error_code(&r), Some(-32027), "{r}");
    assert!(error_message(&r).contains("call again"), "{r}");
    eventually("no server outlives the daemon", WAIT, || async move {
        (!alive(server)).then_some(())
    })
    .await;
    d.start_again().await;
    let r = a
        .request(
            2,
            "tools/call",
            json!({"name": "s__echo", "arguments": {"text": "again"}}),
        )
        .await;
    assert_eq!(text(&r), "again", "{r}");
}

#[tokio::test]
async fn no_reconnect_ends_the_bridge_with_the_daemon() {
    let mut d = daemon().start().await;
    d.wait_ready().await;
    let mut off = Bridged::start(&d, &["--no-reconnect"]);
    off.initialize().await;
    d.signal(Signal::SIGTERM);
    assert_eq!(d.wait_exit().await, Some(0));
    let status = within("--no-reconnect exits with the daemon", off.child.wait())
        .await
        .expect("wait");
    assert!(status.success(), "{status}");
    assert!(off.next().await.is_none(), "nothing after the end");
}

#[tokio::test]
async fn a_modern_listen_is_carried_to_the_new_daemon() {
    let mut d = daemon().start().await;
    d.wait_ready().await;
    let mut a = Bridged::start(&d, &[]);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "restarts", "version": "1"},
    });
    a.send(json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": {"notifications": {"toolsListChanged": true}, "_meta": meta}}))
        .await;
    let ack = a.notified("notifications/subscriptions/acknowledged").await;
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    d.restart_daemon().await;
    let n = a.notified("notifications/tools/list_changed").await;
    assert_eq!(
        n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 7,
        "{n}"
    );
    // The listen is not failed, and its stream carries the new daemon's changes.
    let r = a
        .request(8, "tools/call", json!({"name": "s__set_tools", "arguments": {"tools": ["echo", "fresh"]}, "_meta": meta}))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let before = a
        .seen
        .iter()
        .filter(|m| m["method"] == "notifications/tools/list_changed")
        .count();
    within("a change on the carried listen", async {
        while a
            .seen
            .iter()
            .filter(|m| m["method"] == "notifications/tools/list_changed")
            .count()
            == before
        {
            a.next().await.expect("open");
        }
    })
    .await;
    assert_eq!(
        a.answers_to(&json!(7)),
        0,
        "the listen was not ended: {:?}",
        a.seen
    );
    let acks = a
        .seen
        .iter()
        .filter(|m| m["method"] == "notifications/subscriptions/acknowledged")
        .count();
    assert_eq!(acks, 1, "one acknowledgement: {:?}", a.seen);
}
