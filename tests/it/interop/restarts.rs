//! Interop: SDK clients' sessions through `mcpd connect` outlive a hard restart of the daemon.

use super::sdks::{Sdk, peers};
use crate::support::*;
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// `tests/interop/py_session_client.py` or `ts_session_client.mjs` running `mcpd connect`:
/// steps in, answers by tag.
struct Session {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    answers: Vec<Value>,
}

impl Session {
    async fn step(&mut self, step: Value) {
        self.stdin
            .write_all(format!("{step}\n").as_bytes())
            .await
            .expect("write a step");
    }

    async fn answer(&mut self, tag: &str) -> Value {
        within(&format!("the answer to step {tag}"), async {
            loop {
                if let Some(a) = self.answers.iter().find(|a| a["tag"] == tag) {
                    return a.clone();
                }
                let line = self
                    .lines
                    .next_line()
                    .await
                    .expect("read")
                    .expect("the client is running");
                self.answers
                    .push(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")));
            }
        })
        .await
    }

    /// Asks for the events seen until `done` holds of them.
    async fn events_until(&mut self, what: &str, done: impl Fn(&Value) -> bool) {
        within(what, async {
            for n in 0.. {
                let e = self
                    .ask(&format!("{what} {n}"), json!({"op": "events"}))
                    .await;
                if done(&e) {
                    return;
                }
                // A poll between checks, bounded by `within`'s deadline.
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await;
    }

    async fn ask(&mut self, tag: &str, step: Value) -> Value {
        let mut step = step;
        step["tag"] = json!(tag);
        self.step(step).await;
        self.answer(tag).await
    }
}

fn text_of(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_python_sdk_session_outlives_a_hard_restart_of_the_daemon() {
    outlives_a_hard_restart(
        Sdk::Python,
        "a_python_sdk_session_outlives_a_hard_restart_of_the_daemon",
    )
    .await;
}

#[tokio::test]
async fn a_typescript_sdk_session_outlives_a_hard_restart_of_the_daemon() {
    outlives_a_hard_restart(
        Sdk::TypeScript,
        "a_typescript_sdk_session_outlives_a_hard_restart_of_the_daemon",
    )
    .await;
}

/// One SDK client's session through `mcpd connect`, step by step across `kill -9` of the
/// daemon and a new daemon.
async fn outlives_a_hard_restart(sdk: Sdk, test: &str) {
    let Some(peers) = peers(test) else {
        return;
    };
    let mut d = DaemonBuilder::new()
        .daemon("pin = \"off\"")
        .fixture("s", &[])
        .start()
        .await;
    d.wait_ready().await;
    let (program, script) = match sdk {
        Sdk::Python => (peers.python(), "py_session_client.py"),
        Sdk::TypeScript => (std::path::PathBuf::from("node"), "ts_session_client.mjs"),
    };
    let mut child = tokio::process::Command::new(program)
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/interop")
                .join(script),
        )
        .env("MCPD_PEERS_DIR", &peers.dir)
        .arg("--")
        .arg(mcpd_bin())
        .args(["connect", "--no-project", "--socket"])
        .arg(&d.socket)
        .env_remove("MCPD_SOCKET")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start the Python client");
    let mut s = Session {
        stdin: child.stdin.take().expect("stdin"),
        lines: BufReader::new(child.stdout.take().expect("stdout")).lines(),
        child,
        answers: Vec::new(),
    };
    let ready = within("the session is ready", s.lines.next_line())
        .await
        .expect("read")
        .expect("a first line");
    let ready: Value = serde_json::from_str(&ready).unwrap_or_else(|e| panic!("{e}: {ready}"));
    assert_eq!(ready["ready"], true, "{ready}");
    let r = s
        .ask("sub", json!({"op": "subscribe", "uri": "fixture://alpha"}))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let r = s
        .ask(
            "before",
            json!({"op": "call", "tool": "s__echo", "args": {"text": "before"}}),
        )
        .await;
    assert_eq!(text_of(&r), "before", "{r}");
    s.step(json!({"op": "call", "tag": "slow", "tool": "s__sleep", "args": {"ms": 600000}}))
        .await;
    d.wait_call_in_flight("s__sleep").await;
    d.signal(Signal::SIGKILL);
    d.wait_exit().await;
    let r = s.answer("slow").await;
    assert_eq!(
        r["error"]["code"], -32027,
        "the call in flight is failed, not left hanging: {r}"
    );
    s.step(json!({"op": "call", "tag": "held", "tool": "s__echo", "args": {"text": "while down"}}))
        .await;
    d.start_again().await;
    let r = s.answer("held").await;
    assert_eq!(
        text_of(&r),
        "while down",
        "a call sent while down is carried: {r}"
    );
    s.events_until("the SDK hears that the tools changed", |e| {
        e["toolsListChanged"].as_u64() >= Some(1)
    })
    .await;
    let r = s.ask("list", json!({"op": "list"})).await;
    assert!(
        r["tools"]
            .as_array()
            .is_some_and(|t| t.contains(&json!("s__echo"))),
        "{r}"
    );
    let r = s
        .ask(
            "touch",
            json!({"op": "call", "tool": "s__touch", "args": {"uri": "fixture://alpha"}}),
        )
        .await;
    assert_eq!(text_of(&r), "touched", "{r}");
    s.events_until("the subscription delivers after the restart", |e| {
        e["updated"]
            .as_array()
            .is_some_and(|u| u.contains(&json!("fixture://alpha")))
    })
    .await;
    drop(s.stdin);
    let status = within("the client exits", s.child.wait())
        .await
        .expect("wait");
    assert!(status.success(), "{status}");
}
