//! Tasks (the 2026-07-28 extension) through mcpd.
//!
//! Modern agents make, poll, answer and cancel a server's tasks under sealed ids; agents
//! that cannot do tasks get the task's result as a plain call result. The helpers both
//! eras' tests share are here.

pub mod lifetimes;
pub mod made;
pub mod notices;
pub mod plain;

use crate::support::*;
use serde_json::{Value, json};
use std::path::PathBuf;

const MODERN: &str = "2026-07-28";
const EXT: &str = "io.modelcontextprotocol/tasks";

fn envelope(tasks: bool) -> Value {
    let mut caps = json!({"elicitation": {}});
    if tasks {
        caps["extensions"] = json!({ EXT: {} });
    }
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": { "name": "tasks-test", "version": "1" },
    })
}

async fn modern(a: &mut Agent, method: &str, mut params: Value, tasks: bool) -> Value {
    params["_meta"] = envelope(tasks);
    a.request(method, Some(params)).await
}

/// Polls `tasks/get` until the task's status is `want` (within `WAIT`).
async fn poll_until(a: &mut Agent, task: &str, want: &str) -> Value {
    let mut last = Value::Null;
    let start = std::time::Instant::now();
    while start.elapsed() < WAIT {
        let r = modern(a, "tasks/get", json!({"taskId": task}), true).await;
        assert_eq!(
            r["result"]["taskId"], task,
            "the agent's own id comes back: {r}"
        );
        if r["result"]["status"] == want {
            return r;
        }
        last = r;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("task {task} never reached {want}: {last}");
}

/// A modern agent's call of `tool` (without the extension) whose one input request is an
/// `input_required` round: answered with the name Ada; returns the retry's answer.
async fn answered_as_ada(a: &mut Agent, tool: &str) -> Value {
    let call = json!({"name": tool, "arguments": {}});
    let r = modern(a, "tools/call", call, false).await;
    assert_eq!(r["result"]["resultType"], "input_required", "{r}");
    let key = r["result"]["inputRequests"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .expect("one input request");
    let retry = json!({
        "name": tool, "arguments": {},
        "inputResponses": { key: {"action": "accept", "content": {"name": "Ada"}} },
        "requestState": r["result"]["requestState"],
    });
    modern(a, "tools/call", retry, false).await
}

fn daemon() -> (DaemonBuilder, PathBuf, String) {
    let b = DaemonBuilder::new();
    let dir = b.dir().join("rec");
    let arg = dir.to_str().expect("utf-8 temp path").to_owned();
    (b, dir, arg)
}

const TOOLS: &str = "echo,task_sleep,task_fail,task_error,task_ask";

/// A legacy agent at 2025-11-25, declaring elicitation.
async fn legacy_agent(d: &Daemon) -> (Agent, Value) {
    let mut a = d.agent().await;
    let r = a
        .request(
            "initialize",
            Some(json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}})),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
    a.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    (a, r)
}

const LEGACY_TOOLS: &str = "echo,ltask_sleep,ltask_ask";
