//! `notifications/tasks` for a modern agent's `subscriptions/listen` that names `taskIds`.
//!
//! mcpd watches each task it can route (polling its server as the task asks) and sends
//! the agent the task's detailed status whenever it changes, until it ends or the listen
//! does.
//!
//! Watching by polling works for every server mcpd reaches: an extension server's own
//! `notifications/tasks` would need mcpd's upstream listen per agent, and a 2025-11-25
//! server's `notifications/tasks/status` are optional there. A watcher is a task per
//! watched id, ended by the listen's drop guard (the listen cancelled, the connection
//! closed), by the task's end, by the agent no longer reading, or after a day.

use super::ids::{Kind, open, owner};
use super::inputs::{TaskInputs, Upstream};
use crate::agent::AgentContext;
use crate::agent::session::Session;
use crate::errors::TaskError;
use crate::upstream::{CallOptions, RawReply, UpstreamHandle};
use mcpd_runtime::outbox::Outbox;
use mcpd_wire::jsonrpc::{self, ErrorObject, Id, Request};
use mcpd_wire::protocol::era::key;
use mcpd_wire::protocol::tasks;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::{CancellationToken, DropGuard};

/// Tasks one connection's listens may watch together.
pub const MAX_WATCHED: usize = 64;
const POLL_DEFAULT: Duration = Duration::from_secs(1);
const POLL_MIN: Duration = Duration::from_millis(250);
const POLL_MAX: Duration = Duration::from_secs(30);
const WATCH_MAX: Duration = Duration::from_secs(24 * 3600);

/// The extension's notification of a task's status.
pub const NOTIFICATION: &str = "notifications/tasks";

/// Starts watching the listen's `taskIds`: the guard that ends the watchers, and the ids
/// honoured (those mcpd can route for this agent). None and no ids: it names none.
pub fn start(
    req: &Request,
    ctx: &AgentContext,
    outbox: &Outbox,
    session: &Session,
) -> Result<(Option<DropGuard>, Vec<Value>), ErrorObject> {
    let Some(ids) = req
        .params
        .as_ref()
        .and_then(|p| p.pointer("/notifications/taskIds"))
    else {
        return Ok((None, Vec::new()));
    };
    if !tasks::declared(req.params.as_ref()) {
        return Err(tasks::not_declared("subscriptions/listen with taskIds"));
    }
    let Some(ids) = ids.as_array() else {
        return Err(TaskError::TaskIdsNotList.to_error_object());
    };
    let already: usize = session.listens().values().map(|l| l.watching).sum();
    if already + ids.len() > MAX_WATCHED {
        let named = ids.len();
        let max = MAX_WATCHED;
        return Err(TaskError::TooManyWatched {
            named,
            already,
            max,
        }
        .to_error_object());
    }
    let owner = owner(ctx);
    let catalog = ctx.catalog.borrow().clone();
    let stop = CancellationToken::new();
    let mut honoured = Vec::new();
    for id in ids.iter().filter_map(Value::as_str) {
        let Ok(opened) = open(&owner, id) else {
            continue;
        };
        let Some(server) = catalog
            .servers()
            .map(|(s, _)| s)
            .find(|s| ***s == *opened.server && session.sees_server(s))
            .cloned()
        else {
            continue;
        };
        let Ok(handle) = crate::agent::resolve::ready_handle(&catalog, &server) else {
            continue;
        };
        honoured.push(Value::String(id.to_owned()));
        let watch = Watch {
            handle,
            task: opened.task,
            kind: opened.kind,
            sealed: id.into(),
            outbox: outbox.clone(),
            listen: req.id.clone(),
            inputs: ctx.task_inputs.clone(),
        };
        mcpd_runtime::tracker::spawn(watch.run(stop.child_token()));
    }
    Ok((Some(stop.drop_guard()), honoured))
}

struct Watch {
    handle: UpstreamHandle,
    /// The server's id, and the agent's.
    task: String,
    kind: Kind,
    sealed: Arc<str>,
    outbox: Outbox,
    listen: Id,
    inputs: TaskInputs,
}

impl Watch {
    async fn run(self, stop: CancellationToken) {
        let until = tokio::time::Instant::now() + WATCH_MAX;
        let mut last: Option<(String, Vec<String>)> = None;
        loop {
            let wait = match self.status().await {
                Ok(Ok(raw)) => {
                    let Ok(mut status) = raw.to_value() else {
                        return;
                    };
                    let state = status
                        .get("status")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned();
                    let mut keys: Vec<String> = status
                        .get("inputRequests")
                        .and_then(Value::as_object)
                        .map(|m| m.keys().cloned().collect())
                        .unwrap_or_default();
                    keys.sort();
                    let now = (state.clone(), keys);
                    if last.as_ref() != Some(&now) {
                        jsonrpc::set_member(&mut status, "taskId", json!(&*self.sealed));
                        if let Some(s) = status.as_object_mut() {
                            s.remove("resultType");
                            s.insert("_meta".into(), json!({ key::SUBSCRIPTION_ID: self.listen }));
                        }
                        let line = jsonrpc::notification_line(NOTIFICATION, Some(&status));
                        if !self.outbox.send_about(&self.listen, line) {
                            return;
                        }
                        last = Some(now);
                    }
                    if matches!(state.as_str(), "completed" | "failed" | "cancelled") {
                        return;
                    }
                    status
                        .get("pollIntervalMs")
                        .and_then(Value::as_u64)
                        .map_or(POLL_DEFAULT, Duration::from_millis)
                        .clamp(POLL_MIN, POLL_MAX)
                }
                // The server no longer knows the task: nothing more will change.
                Ok(Err(e)) if e.code == jsonrpc::code::INVALID_PARAMS => return,
                // A server that is down now may be back: try again later.
                _ => POLL_DEFAULT,
            };
            if tokio::time::Instant::now() >= until {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = stop.cancelled() => return,
            }
        }
    }

    /// The task's detailed status, in the extension's shape.
    async fn status(&self) -> RawReply {
        let call = crate::agent::forward::next_call();
        match self.kind {
            // Dressed for its server, a task request declares the extension itself.
            Kind::Extension => {
                let params = json!({ "taskId": self.task });
                self.handle
                    .call(call, tasks::GET, Some(params), CallOptions::default())
                    .await
            }
            Kind::Legacy => {
                let up = Upstream {
                    handle: self.handle.clone(),
                    call,
                    task: self.task.clone(),
                };
                super::view::get(up, self.sealed.clone(), self.inputs.clone()).await
            }
        }
    }
}
