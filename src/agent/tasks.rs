//! Tasks through mcpd (the 2026-07-28 extension): `tasks/get`, `tasks/update` and `tasks/cancel` routed back to the server that made the task, by the sealed id the agent has (`task_ids.rs`).

use super::AgentContext;
use super::forward::{self, Caller, Route, Target};
use super::render::Rewrite;
use super::reply::Handled;
use super::session::Session;
use super::task_ids::{open, owner};
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
    let method: &'static str = match req.method.as_str() {
        tasks::GET => tasks::GET,
        tasks::UPDATE => tasks::UPDATE,
        tasks::CANCEL => tasks::CANCEL,
        other => return refuse(AgentError::UnknownMethod(other.to_owned()).to_error_object()),
    };
    if !modern {
        // 2025-11-25 tasks are not routed: a legacy agent made no task through mcpd.
        let e = AgentError::UnknownMethod(req.method.clone());
        return refuse(e.to_error_object());
    }
    if !tasks::declared(req.params.as_ref()) {
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
    let (server, task) = match open(&owner, sealed) {
        Ok(found) => found,
        Err(why) => return refuse(tasks::unknown_task(why)),
    };
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
        rewrite: Rewrite::Task { owner },
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
