//! Tasks through mcpd, both eras.
//!
//! `tasks/get`, `tasks/cancel`, and `tasks/update` (2026-07-28 extension) or
//! `tasks/result` (2025-11-25), routed back to the server that made the task, by the
//! sealed id the agent has (`ids.rs`).
//!
//! The rest of the agent side of tasks, in this folder: `ids.rs` seals the task ids agents
//! see; `book.rs` remembers which tasks each owner made, for `tasks/list`; `follow.rs`
//! makes and follows the task of a task-only tool for an agent that asked for none;
//! `abandon.rs` cancels the task a cancelled call made anyway; `view.rs` is a modern
//! agent's view of a 2025-11-25 task, whose input requests `inputs.rs` holds; `watch.rs`
//! sends `notifications/tasks` for the `taskIds` a modern listen names; `status.rs` routes
//! a 2025-11-25 server's `notifications/tasks/status` to the legacy agent whose task it is.

pub(super) mod abandon;
pub(super) mod book;
pub(super) mod follow;
pub(super) mod ids;
mod inputs;
pub(super) mod status;
mod view;
pub(super) mod watch;

pub use book::TaskBook;
pub use inputs::TaskInputs;

use ids::{Kind, open, owner};
use inputs::Upstream;

use super::AgentContext;
use super::forward::{self, Caller, Route, Target};
use super::render::{self, Rewrite};
use super::reply::{Handled, Step};
use super::session::Session;
use crate::errors::AgentError;
use crate::upstream::{CallOptions, UpstreamHandle};
use futures::FutureExt;
use mcpd_runtime::outbox::Outbox;
use mcpd_wire::jsonrpc::{self, Request};
use mcpd_wire::protocol::era::Era;
use mcpd_wire::protocol::method;
use mcpd_wire::protocol::tasks;
use serde_json::Value;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

/// `tasks/get`, `tasks/update`, `tasks/cancel` from an agent.
pub fn handle(
    req: Request,
    ctx: &AgentContext,
    outbox: &Outbox,
    session: &Session,
    era: Era,
) -> Handled {
    let refuse = |e: jsonrpc::ErrorObject| Handled::Now(jsonrpc::error_line(Some(&req.id), &e));
    // 2025-11-25 has `tasks/result` (no `tasks/update`) and no per-request declaration;
    // the extension has `tasks/update` and wants it declared on every request.
    let method: &'static str = match (req.method.as_str(), era) {
        (tasks::GET, _) => tasks::GET,
        (tasks::CANCEL, _) => tasks::CANCEL,
        (tasks::UPDATE, Era::Modern) => tasks::UPDATE,
        (mcpd_wire::protocol::method::TASKS_RESULT, Era::Legacy) => {
            mcpd_wire::protocol::method::TASKS_RESULT
        }
        (other, _) => return refuse(AgentError::UnknownMethod(other.to_owned()).to_error_object()),
    };
    if era == Era::Modern && !tasks::declared(req.params.as_ref()) {
        return refuse(tasks::not_declared(method));
    }
    let Some(Value::Object(mut params)) = req.params.clone() else {
        return refuse(invalid(
            method,
            "params must be an object with a \"taskId\"",
        ));
    };
    let Some(sealed) = params.get("taskId").and_then(Value::as_str) else {
        return refuse(invalid(method, "\"taskId\" must be a string"));
    };
    let owner = owner(ctx);
    let opened = match open(&owner, sealed) {
        Ok(found) => found,
        Err(why) => return refuse(tasks::unknown_task(why)),
    };
    let sealed: std::sync::Arc<str> = sealed.into();
    let (server, task) = (opened.server, opened.task);
    let catalog = ctx.catalog.borrow().clone();
    let Some(server) = catalog
        .servers()
        .map(|(s, _)| s)
        .find(|s| ***s == *server && session.sees_server(s))
        .cloned()
    else {
        return refuse(tasks::unknown_task(
            "its server is not one this agent can reach",
        ));
    };
    let handle = match crate::agent::resolve::now(&catalog, session, &server) {
        Ok(h) => h,
        Err(e) => return refuse(e.to_error_object()),
    };
    if era == Era::Modern && opened.kind == Kind::Legacy {
        // A 2025-11-25 task a modern agent holds: translated here.
        let up = Upstream {
            handle,
            call: forward::next_call(),
            task,
        };
        let rewrite = Rewrite::Task {
            sealed: sealed.clone(),
            legacy_view: false,
        };
        let fut = match method {
            tasks::GET => view::get(up, sealed, ctx.task_inputs.clone()).boxed(),
            tasks::UPDATE => {
                let responses = match params.remove("inputResponses") {
                    Some(Value::Object(r)) => r,
                    _ => return refuse(invalid(method, "\"inputResponses\" must be an object")),
                };
                view::update(ctx.task_inputs.clone(), sealed, responses).boxed()
            }
            _ => view::cancel(up).boxed(),
        };
        return later(req.id, server, method, rewrite, fut);
    }
    params.insert("taskId".into(), Value::String(task));
    let route = Route {
        server,
        method,
        params: params.into(),
        rewrite: Rewrite::Task {
            sealed,
            // `tasks/result` and `tasks/cancel` of these are translated in `call/fulfil.rs`.
            legacy_view: era == Era::Legacy && opened.kind == Kind::Extension,
        },
    };
    let caller = Caller::of(outbox, session, era);
    let (id, cancel, fut) = forward::launch(req.id, Target { route, handle }, &caller);
    Handled::Later { id, cancel, fut }
}

/// A 2025-11-25 agent's `tasks/list`: the tasks its owner made through mcpd, newest
/// first, each as its server reports it now, a page at a time. A task whose server
/// cannot be reached now is left out of the page; one its server forgot leaves the book.
pub fn list(req: Request, ctx: &AgentContext, session: &Session) -> Handled {
    let owner = owner(ctx);
    let before = match req.params.as_ref().and_then(|p| p.get("cursor")) {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => match ids::open_cursor(&owner, c) {
            Ok(seq) => Some(seq),
            Err(why) => {
                let e = invalid(
                    method::TASKS_LIST,
                    &format!("the cursor cannot be used: {why}"),
                );
                return Handled::Now(jsonrpc::error_line(Some(&req.id), &e));
            }
        },
        Some(_) => {
            let e = invalid(method::TASKS_LIST, "\"cursor\" must be a string");
            return Handled::Now(jsonrpc::error_line(Some(&req.id), &e));
        }
    };
    let catalog = ctx.catalog.borrow().clone();
    let reachable: HashMap<Arc<str>, UpstreamHandle> = catalog
        .servers()
        .map(|(s, _)| s)
        .filter(|s| session.sees_server(s))
        .filter_map(|s| {
            Some((
                s.clone(),
                crate::agent::resolve::now(&catalog, session, s).ok()?,
            ))
        })
        .collect();
    let book = ctx.task_book.clone();
    let id = req.id.clone();
    let cancel = tokio_util::sync::CancellationToken::new();
    let fut = async move {
        let (entries, more) = book.page(owner.clone(), before).await;
        let shown = entries.iter().map(|e| {
            let (book, owner) = (book.clone(), owner.clone());
            let handle = reachable.get(&e.server).cloned();
            async move {
                let params = json!({ "taskId": e.task });
                let reply = handle?
                    .call(
                        forward::next_call(),
                        tasks::GET,
                        Some(params),
                        CallOptions::default(),
                    )
                    .await;
                match reply {
                    Ok(Ok(raw)) => {
                        let status = raw.to_value().ok()?;
                        let mut task = match e.kind {
                            Kind::Extension => ids::legacy_task(&status),
                            Kind::Legacy => status,
                        };
                        ids::present(&mut task, &e.sealed);
                        Some(task)
                    }
                    Ok(Err(err)) if err.code == jsonrpc::code::INVALID_PARAMS => {
                        book.forget(owner, e.seq);
                        None
                    }
                    _ => None,
                }
            }
        });
        let tasks: Vec<Value> = futures::future::join_all(shown)
            .await
            .into_iter()
            .flatten()
            .collect();
        let mut result = json!({ "tasks": tasks });
        if more && let Some(last) = entries.last() {
            let cursor = ids::seal_cursor(&owner, last.seq);
            jsonrpc::set_member(&mut result, "nextCursor", Value::String(cursor));
        }
        let line = jsonrpc::result_line(&id, &result);
        (id, Step::Reply(line))
    }
    .boxed();
    Handled::Later {
        id: req.id,
        cancel,
        fut,
    }
}

/// A translated task request's future, rendered for a modern agent.
fn later(
    id: jsonrpc::Id,
    server: std::sync::Arc<str>,
    method: &'static str,
    rewrite: Rewrite,
    reply: futures::future::BoxFuture<'static, crate::upstream::RawReply>,
) -> Handled {
    let cancel = tokio_util::sync::CancellationToken::new();
    let (c, reply_id) = (cancel.clone(), id.clone());
    let fut = async move {
        let reply = tokio::select! {
            r = reply => r,
            () = c.cancelled() => return (reply_id, Step::Cancelled),
        };
        let line = render::render_raw(&reply_id, &server, method, reply, Era::Modern, &rewrite);
        (reply_id, Step::Reply(line))
    }
    .boxed();
    Handled::Later { id, cancel, fut }
}

fn invalid(method: &str, reason: &str) -> jsonrpc::ErrorObject {
    AgentError::InvalidParams {
        method: method.into(),
        reason: reason.into(),
    }
    .to_error_object()
}
