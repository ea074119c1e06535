//! The task ids agents see.
//!
//! A server's task id, sealed to that server and to the client that may use it, so mcpd
//! needs no table of tasks.
//!
//! The id carries the server's name and the server's own id under the daemon's seal (the
//! same key as a sealed `requestState`), together with who may use it: the socket user's
//! uid, or "http" for the HTTP listener, whose clients share one token and cannot be
//! told apart. A task outlives the connection that made it (a client may poll from a new
//! connection), forged or edited ids do not open, an id cannot be turned to another
//! server, and there is nothing to expire: the server forgets its tasks, and then answers
//! -32602 itself. Ids die with the daemon (the key is made anew at each start).

use crate::agent::AgentContext;
use crate::agent::request_state::{open_payload, seal_payload};
use mcpd_wire::jsonrpc;
use serde_json::Value;
use std::sync::Arc;

/// Marks a task id mcpd issued.
const PREFIX: &str = "mcpdt1.";

/// Who may use the tasks an agent makes.
pub fn owner(ctx: &AgentContext) -> Arc<str> {
    match (ctx.peer.over_http, ctx.peer.uid) {
        (true, _) => Arc::from("http"),
        (false, Some(uid)) => Arc::from(format!("uid:{uid}")),
        (false, None) => Arc::from("socket"),
    }
}

/// How the server that made a task speaks of it: the 2026-07-28 extension, or
/// 2025-11-25's core tasks. A 2025-11-25 agent's task on an extension server is
/// translated on every request (`tasks/get` fields, `tasks/result` followed by mcpd).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Extension,
    Legacy,
}

impl Kind {
    fn tag(self) -> &'static str {
        match self {
            Kind::Extension => "x",
            Kind::Legacy => "l",
        }
    }
}

/// A task just made, to record.
pub struct Made {
    pub sealed: Arc<str>,
    pub server: Arc<str>,
    pub task: String,
    pub kind: Kind,
    pub ttl_ms: Option<u64>,
}

/// What a task id an agent presented stands for.
#[derive(Debug, PartialEq, Eq)]
pub struct Opened {
    pub server: String,
    /// The server's own id.
    pub task: String,
    pub kind: Kind,
}

/// The id an agent sees for `server`'s task `task`.
pub fn seal(owner: &str, server: &str, task: &str, kind: Kind) -> String {
    // Four strings always serialise.
    let payload = serde_json::to_string(&[owner, server, task, kind.tag()]).unwrap_or_default();
    seal_payload(PREFIX, &payload)
}

/// The server and its own id behind a task id `owner` presented, or why there is none.
pub fn open(owner: &str, sealed: &str) -> Result<Opened, &'static str> {
    let payload = match open_payload(PREFIX, sealed) {
        None => return Err("mcpd did not issue this task id"),
        Some(Err(why)) => return Err(why),
        Some(Ok(p)) => p,
    };
    let Ok([who, server, task, kind]) = serde_json::from_str::<[String; 4]>(&payload) else {
        return Err("it is malformed");
    };
    if who != owner {
        return Err("it belongs to another client");
    }
    let kind = match kind.as_str() {
        "x" => Kind::Extension,
        "l" => Kind::Legacy,
        _ => return Err("it is malformed"),
    };
    Ok(Opened { server, task, kind })
}

/// Marks a `tasks/list` cursor mcpd issued.
const CURSOR_PREFIX: &str = "mcpdc1.";

/// The `nextCursor` of a page of `owner`'s tasks that ended at `seq`.
pub fn seal_cursor(owner: &str, seq: u64) -> String {
    let payload = serde_json::json!([owner, seq]).to_string();
    seal_payload(CURSOR_PREFIX, &payload)
}

/// Where a cursor `owner` presented goes on from, or why it cannot be used.
pub fn open_cursor(owner: &str, cursor: &str) -> Result<u64, &'static str> {
    let payload = match open_payload(CURSOR_PREFIX, cursor) {
        None => return Err("mcpd did not issue this cursor"),
        Some(Err(why)) => return Err(why),
        Some(Ok(p)) => p,
    };
    match serde_json::from_str::<(String, u64)>(&payload) {
        Ok((who, seq)) if who == owner => Ok(seq),
        Ok(_) => Err("it belongs to another client"),
        Err(_) => Err("it is malformed"),
    }
}

/// A `tools/call` result that is a task, given the id the agent sees: a 2026-07-28
/// task's `taskId`, or a 2025-11-25 `CreateTaskResult`'s `task.taskId`. A 2025-11-25
/// agent (`legacy_agent`) gets an extension server's task as a 2025-11-25 one.
pub fn present_created(
    result: &mut Value,
    owner: &str,
    server: &str,
    legacy_agent: bool,
) -> Option<Made> {
    let made = |sealed: &str, task: &str, kind, ttl_ms| Made {
        sealed: sealed.into(),
        server: server.into(),
        task: task.to_owned(),
        kind,
        ttl_ms,
    };
    if mcpd_wire::protocol::era::result_type(result) == "task" {
        let id = result.get("taskId").and_then(Value::as_str)?.to_owned();
        let sealed = seal(owner, server, &id, Kind::Extension);
        jsonrpc::set_member(result, "taskId", Value::String(sealed.clone()));
        let ttl = result.get("ttlMs").and_then(Value::as_u64);
        if legacy_agent {
            let task = legacy_task(result);
            let mut created = serde_json::json!({ "task": task });
            if let Some(meta) = result.get("_meta") {
                jsonrpc::set_member(&mut created, "_meta", meta.clone());
            }
            *result = created;
        }
        return Some(made(&sealed, &id, Kind::Extension, ttl));
    }
    let task = result.get_mut("task")?;
    let id = task.get("taskId").and_then(Value::as_str)?.to_owned();
    let sealed = seal(owner, server, &id, Kind::Legacy);
    jsonrpc::set_member(task, "taskId", Value::String(sealed.clone()));
    let ttl = task.get("ttl").and_then(Value::as_u64);
    if !legacy_agent {
        let mut created = modern_task(task);
        jsonrpc::set_member(&mut created, "resultType", Value::String("task".into()));
        *result = created;
    }
    Some(made(&sealed, &id, Kind::Legacy, ttl))
}

/// Puts the agent's id `sealed` back in a task request's result: the task's `taskId`, and
/// the related-task `_meta` of a 2025-11-25 `tasks/result`.
pub fn present(result: &mut Value, sealed: &str) {
    if result.get("taskId").is_some_and(Value::is_string) {
        jsonrpc::set_member(result, "taskId", Value::String(sealed.to_owned()));
    }
    if let Some(related) = result.pointer_mut(&format!("/_meta/{}", RELATED.replace('/', "~1")))
        && related.get("taskId").is_some()
    {
        jsonrpc::set_member(related, "taskId", Value::String(sealed.to_owned()));
    }
}

/// The fields a `Task` has in both eras, with its `ttl` and poll interval under the
/// names `(ttl, poll)` of the era it is shown in, read from those `from` names.
fn task_fields(
    task: &Value,
    from: (&str, &str),
    to: (&str, &str),
) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    for key in [
        "taskId",
        "status",
        "statusMessage",
        "createdAt",
        "lastUpdatedAt",
    ] {
        if let Some(v) = task.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    out.insert(
        to.0.into(),
        task.get(from.0).cloned().unwrap_or(Value::Null),
    );
    if let Some(poll) = task.get(from.1) {
        out.insert(to.1.into(), poll.clone());
    }
    out
}

/// A 2025-11-25 `Task` as the extension's: `ttl` and `pollInterval` become `ttlMs` and
/// `pollIntervalMs`.
pub fn modern_task(task: &Value) -> Value {
    Value::Object(task_fields(
        task,
        ("ttl", "pollInterval"),
        ("ttlMs", "pollIntervalMs"),
    ))
}

/// An extension task (a `CreateTaskResult` or a `tasks/get` answer) as a 2025-11-25
/// `Task`: `ttlMs` and `pollIntervalMs` become `ttl` and `pollInterval`, the inlined
/// result, error and input requests go (a 2025-11-25 client gets those from
/// `tasks/result`), and a tool error is status `failed`, as 2025-11-25 counts it.
pub fn legacy_task(task: &Value) -> Value {
    let mut out = task_fields(task, ("ttlMs", "pollIntervalMs"), ("ttl", "pollInterval"));
    let tool_error = task
        .pointer("/result/isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if tool_error && task.get("status").and_then(Value::as_str) == Some("completed") {
        out.insert("status".into(), Value::String("failed".into()));
    }
    Value::Object(out)
}

/// Whether a `tools/call` result is a task rather than the call's result.
pub fn is_task(result: &Value) -> bool {
    mcpd_wire::protocol::era::result_type(result) == "task"
        || result
            .get("task")
            .is_some_and(|t| t.get("taskId").is_some())
}

pub use mcpd_wire::protocol::tasks::RELATED;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_id_opens_only_for_its_owner_and_names_its_server() {
        let id = seal("uid:1000", "build", "t-1", Kind::Extension);
        assert!(id.starts_with(PREFIX));
        assert!(
            id.bytes().all(|b| (0x21..=0x7e).contains(&b)),
            "header-safe: {id}"
        );
        let opened = Opened {
            server: "build".into(),
            task: "t-1".into(),
            kind: Kind::Extension,
        };
        assert_eq!(open("uid:1000", &id), Ok(opened));
        assert_eq!(open("uid:1001", &id), Err("it belongs to another client"));
        assert_eq!(
            open("uid:1000", "t-1"),
            Err("mcpd did not issue this task id")
        );
        let forged = seal("uid:1000", "other", "t-1", Kind::Extension);
        let (head, _) = id.rsplit_once('.').unwrap();
        let (_, forged_tag) = forged.rsplit_once('.').unwrap();
        assert!(open("uid:1000", &format!("{head}.{forged_tag}")).is_err());
    }

    #[test]
    fn an_extension_task_reads_as_a_2025_11_25_task() {
        let detailed = serde_json::json!({"resultType": "complete", "taskId": "t", "status": "completed",
            "createdAt": "a", "lastUpdatedAt": "b", "ttlMs": 60000, "pollIntervalMs": 100,
            "result": {"content": [], "isError": true}});
        let task = legacy_task(&detailed);
        assert_eq!(
            task,
            serde_json::json!({"taskId": "t", "status": "failed", "createdAt": "a",
                "lastUpdatedAt": "b", "ttl": 60000, "pollInterval": 100})
        );
    }
}
