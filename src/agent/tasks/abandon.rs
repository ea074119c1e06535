//! A call the agent cancelled that may have made a task.
//!
//! Its answer is awaited in the background and a task it brings is cancelled, since no
//! one would ever learn that task's id.

use crate::upstream::{CallId, CallOptions, RawReply, UpstreamHandle};
use mcpd_wire::protocol::tasks;
use serde_json::{Value, json};
use std::time::Duration;

/// How long an abandoned call that may make a task is waited for.
const ABANDON_WAIT: Duration = Duration::from_secs(30);

/// The agent cancelled a call. A call that may make a task (the agent asked for one)
/// is not cancelled at its server: the server may make the task anyway, and then no one
/// would ever learn its id. Its answer is awaited in the background instead (at most
/// [`ABANDON_WAIT`]), and a task it brings is cancelled; any other call is cancelled.
pub async fn abandon(
    handle: UpstreamHandle,
    call: CallId,
    reply: futures::future::BoxFuture<'static, RawReply>,
    rewrite: &crate::agent::render::Rewrite,
) {
    let may_make_task = matches!(
        rewrite,
        crate::agent::render::Rewrite::ToolResult {
            tasks: crate::agent::render::TaskMode::Owned { .. },
            ..
        }
    );
    if !may_make_task {
        handle.cancel(call, "cancelled by the agent").await;
        return;
    }
    mcpd_runtime::tracker::spawn(async move {
        let answer = match tokio::time::timeout(ABANDON_WAIT, reply).await {
            Ok(Ok(Ok(raw))) => raw.to_value().ok(),
            Ok(_) => None,
            Err(_) => {
                handle.cancel(call, "cancelled by the agent").await;
                None
            }
        };
        let task = answer.as_ref().and_then(|v| {
            v.get("taskId")
                .filter(|_| mcpd_wire::protocol::era::result_type(v) == "task")
                .or_else(|| v.pointer("/task/taskId"))
                .and_then(Value::as_str)
        });
        if let Some(task) = task {
            tracing::info!(
                task,
                "cancelling a task whose call the agent cancelled while it was made"
            );
            let params = json!({ "taskId": task });
            let cancel = handle.call(call, tasks::CANCEL, Some(params), CallOptions::default());
            // Best effort: the agent is gone from this call either way.
            let _ = tokio::time::timeout(Duration::from_secs(5), cancel).await;
        }
    });
}
