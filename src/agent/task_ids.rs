//! The task ids agents see: a server's task id, sealed to that server and to the client that may use it, so mcpd needs no table of tasks.
//!
//! The id carries the server's name and the server's own id under the daemon's seal (the
//! same key as a sealed `requestState`), together with who may use it: the socket user's
//! uid, or "http" for the HTTP listener, whose clients share one token and cannot be
//! told apart. A task outlives the connection that made it (a client may poll from a new
//! connection), forged or edited ids do not open, an id cannot be turned to another
//! server, and there is nothing to expire: the server forgets its tasks, and then answers
//! -32602 itself. Ids die with the daemon (the key is made anew at each start).

use super::AgentContext;
use super::request_state::{open_payload, seal_payload};
use crate::jsonrpc;
use serde_json::Value;
use std::sync::Arc;

/// Marks a task id mcpd issued.
const PREFIX: &str = "mcpdt1.";

/// Who may use the tasks an agent makes.
pub fn owner(ctx: &AgentContext) -> Arc<str> {
    match (ctx.over_http, ctx.peer_uid) {
        (true, _) => Arc::from("http"),
        (false, Some(uid)) => Arc::from(format!("uid:{uid}")),
        (false, None) => Arc::from("socket"),
    }
}

/// The id an agent sees for `server`'s task `task`.
pub fn seal(owner: &str, server: &str, task: &str) -> String {
    // Three strings always serialise.
    let payload = serde_json::to_string(&[owner, server, task]).unwrap_or_default();
    seal_payload(PREFIX, &payload)
}

/// The server and its own id behind a task id `owner` presented, or why there is none.
pub fn open(owner: &str, sealed: &str) -> Result<(String, String), &'static str> {
    let payload = match open_payload(PREFIX, sealed) {
        None => return Err("mcpd did not issue this task id"),
        Some(Err(why)) => return Err(why),
        Some(Ok(p)) => p,
    };
    let Ok([who, server, task]) = serde_json::from_str::<[String; 3]>(&payload) else {
        return Err("it is malformed");
    };
    if who != owner {
        return Err("it belongs to another client");
    }
    Ok((server, task))
}

/// Replaces the server's task id in a result with the one the agent sees: a 2026-07-28
/// task's `taskId`, a 2025-11-25 `CreateTaskResult`'s `task.taskId`, and the related-task
/// `_meta` of a 2025-11-25 `tasks/result`.
pub fn present(result: &mut Value, owner: &str, server: &str) {
    let reseal = |v: &mut Value| {
        if let Some(id) = v.get("taskId").and_then(Value::as_str) {
            let sealed = seal(owner, server, id);
            jsonrpc::set_member(v, "taskId", Value::String(sealed));
        }
    };
    reseal(result);
    if let Some(task) = result.get_mut("task") {
        reseal(task);
    }
    if let Some(related) = result.pointer_mut(&format!("/_meta/{}", RELATED.replace('/', "~1"))) {
        reseal(related);
    }
}

/// Whether a `tools/call` result is a task rather than the call's result.
pub fn is_task(result: &Value) -> bool {
    crate::protocol::era::result_type(result) == "task"
        || result
            .get("task")
            .is_some_and(|t| t.get("taskId").is_some())
}

/// The `_meta` key that ties a 2025-11-25 message to its task.
pub const RELATED: &str = "io.modelcontextprotocol/related-task";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_id_opens_only_for_its_owner_and_names_its_server() {
        let id = seal("uid:1000", "build", "t-1");
        assert!(id.starts_with(PREFIX));
        assert!(
            id.bytes().all(|b| (0x21..=0x7e).contains(&b)),
            "header-safe: {id}"
        );
        assert_eq!(open("uid:1000", &id), Ok(("build".into(), "t-1".into())));
        assert_eq!(open("uid:1001", &id), Err("it belongs to another client"));
        assert_eq!(
            open("uid:1000", "t-1"),
            Err("mcpd did not issue this task id")
        );
        let forged = seal("uid:1000", "other", "t-1");
        let (head, _) = id.rsplit_once('.').unwrap();
        let (_, forged_tag) = forged.rsplit_once('.').unwrap();
        assert!(open("uid:1000", &format!("{head}.{forged_tag}")).is_err());
    }
}
