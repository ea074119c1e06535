//! Tasks through mcpd, both eras: `tasks/get`, `tasks/cancel`, and `tasks/update` (2026-07-28 extension) or `tasks/result` (2025-11-25), routed back to the server that made the task, by the sealed id the agent has (`task_ids.rs`).

use super::AgentContext;
use super::forward::{self, Caller, Route, Target};
use super::render::Rewrite;
use super::reply::Handled;
use super::session::Session;
use super::task_ids::{Kind, open, owner};
use crate::errors::AgentError;
use crate::jsonrpc::{self, Request};
use crate::outbox::Outbox;
use crate::protocol::tasks;
use serde_json::Value;

/// `tasks/get`, `tasks/update`, `tasks/cancel` from an agent.
pub fn handle(
    req: Request,
    ctx: &AgentContext,
    outbox: &Outbox,
    session: &Session,
    modern: bool,
) -> Handled {
    let refuse = |e: jsonrpc::ErrorObject| Handled::Now(jsonrpc::error_line(Some(&req.id), &e));
    // 2025-11-25 has `tasks/result` (no `tasks/update`) and no per-request declaration;
    // the extension has `tasks/update` and wants it declared on every request.
    let method: &'static str = match (req.method.as_str(), modern) {
        (tasks::GET, _) => tasks::GET,
        (tasks::CANCEL, _) => tasks::CANCEL,
        (tasks::UPDATE, true) => tasks::UPDATE,
        (crate::protocol::method::TASKS_RESULT, false) => crate::protocol::method::TASKS_RESULT,
        (other, _) => return refuse(AgentError::UnknownMethod(other.to_owned()).to_error_object()),
    };
    if modern && !tasks::declared(req.params.as_ref()) {
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
    if modern && opened.kind == Kind::Legacy {
        // A 2025-11-25 agent's task, presented by a modern agent of the same user.
        return refuse(tasks::unknown_task(
            "it is a 2025-11-25 task: ask for it over a 2025-11-25 connection",
        ));
    }
    let sealed: std::sync::Arc<str> = sealed.into();
    let (server, task) = (opened.server, opened.task);
    let catalog = ctx.catalog.borrow().clone();
    let Some(server) = catalog
        .servers
        .keys()
        .find(|s| ***s == *server && session.sees_server(s))
        .cloned()
    else {
        return refuse(tasks::unknown_task(
            "its server is not one this agent can reach",
        ));
    };
    let handle = match forward::ready_handle(&catalog, &server) {
        Ok(h) => h,
        Err(e) => return refuse(e.to_error_object()),
    };
    params.insert("taskId".into(), Value::String(task));
    let route = Route {
        server,
        method,
        params,
        rewrite: Rewrite::Task {
            sealed,
            // `tasks/result` and `tasks/cancel` of these are translated in `legacy_call.rs`.
            legacy_view: !modern && opened.kind == Kind::Extension,
        },
    };
    let caller = Caller::of(outbox, session, modern);
    let (id, cancel, fut) = forward::launch(req.id, Target { route, handle }, &caller);
    Handled::Later { id, cancel, fut }
}

fn invalid(method: &str, reason: &str) -> jsonrpc::ErrorObject {
    AgentError::InvalidParams {
        method: method.into(),
        reason: reason.into(),
    }
    .to_error_object()
}
