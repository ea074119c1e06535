//! A modern agent's view of a 2025-11-25 task.
//!
//! A tool that runs only as a 2025-11-25 task, called by a modern agent that declared the
//! Tasks extension, becomes an extension task; its `tasks/get`, `tasks/update` and
//! `tasks/cancel` are translated here.
//!
//! `tasks/get` asks the server for the task and, once it ended, for its result
//! (`tasks/result`, which no longer waits then), and shows both as the extension's
//! detailed task. A task waiting for input shows the requests `inputs.rs` holds;
//! `tasks/update` answers them. A tool error is `completed` with an `isError` result, as
//! the extension counts it.

use super::ids::{RELATED, modern_task};
use super::inputs::{TaskInputs, Upstream};
use crate::upstream::{CallOptions, RawReply, RawResult};
use mcpd_wire::jsonrpc::{self, code};
use mcpd_wire::protocol::{method, tasks};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// `tasks/get`: the server's task, with its result, error or input requests inlined.
pub async fn get(up: Upstream, sealed: Arc<str>, inputs: TaskInputs) -> RawReply {
    let about = json!({ "taskId": up.task });
    let status = match up
        .handle
        .call(
            up.call,
            tasks::GET,
            Some(about.clone()),
            CallOptions::default(),
        )
        .await
    {
        Ok(Ok(raw)) => match raw.to_value() {
            Ok(v) => v,
            Err(e) => return Err(e),
        },
        other => return other,
    };
    let mut detailed = modern_task(&status);
    match status.get("status").and_then(Value::as_str) {
        Some("completed" | "failed") => {
            let ended = up
                .handle
                .call(
                    up.call,
                    method::TASKS_RESULT,
                    Some(about),
                    CallOptions::default(),
                )
                .await;
            match ended {
                Ok(Ok(raw)) => {
                    let mut result = match raw.to_value() {
                        Ok(v) => v,
                        Err(e) => return Err(e),
                    };
                    if let Some(meta) = result.get_mut("_meta").and_then(Value::as_object_mut) {
                        meta.remove(RELATED);
                    }
                    jsonrpc::set_member(&mut detailed, "status", json!("completed"));
                    jsonrpc::set_member(&mut detailed, "result", result);
                }
                Ok(Err(e)) => {
                    jsonrpc::set_member(&mut detailed, "status", json!("failed"));
                    jsonrpc::set_member(
                        &mut detailed,
                        "error",
                        serde_json::to_value(&e).unwrap_or(Value::Null),
                    );
                }
                Err(e) => return Err(e),
            }
        }
        Some("input_required") => {
            let start = Upstream {
                handle: up.handle.clone(),
                call: crate::agent::forward::next_call(),
                task: up.task.clone(),
            };
            let requests = inputs.pending(sealed, start).await;
            jsonrpc::set_member(&mut detailed, "inputRequests", Value::Object(requests));
        }
        _ => {}
    }
    Ok(Ok(RawResult::from_value(&detailed)))
}

/// `tasks/update`: the agent's answers go to the server's held requests.
pub async fn update(
    inputs: TaskInputs,
    sealed: Arc<str>,
    responses: Map<String, Value>,
) -> RawReply {
    inputs.answer(sealed, responses).await;
    Ok(Ok(RawResult::from_value(&json!({}))))
}

/// `tasks/cancel`: the extension acknowledges with an empty result, also for a task that
/// ended already (which 2025-11-25 refuses with -32602).
pub async fn cancel(up: Upstream) -> RawReply {
    let about = json!({ "taskId": up.task });
    match up
        .handle
        .call(up.call, tasks::CANCEL, Some(about), CallOptions::default())
        .await
    {
        Ok(Ok(_)) => Ok(Ok(RawResult::from_value(&json!({})))),
        Ok(Err(e)) if e.code == code::INVALID_PARAMS => Ok(Ok(RawResult::from_value(&json!({})))),
        other => other,
    }
}
