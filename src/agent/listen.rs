//! A 2026-07-28 agent's `subscriptions/listen`.
//!
//! The caps on how many and how large, and the acknowledgement of what mcpd honours.

use super::session::{Listen, Session};
use crate::errors::AgentError;
use mcpd_wire::jsonrpc::{self, ErrorObject, Request};
use mcpd_wire::protocol::era::key;
use mcpd_wire::protocol::method;
use serde_json::{Value, json};

/// Open `subscriptions/listen` requests one connection may have at once.
pub const MAX_LISTENS: usize = 32;
/// Resources one `subscriptions/listen` may name.
pub const MAX_LISTEN_URIS: usize = 1024;

/// Refuses a subscription beyond the caps: too many open on this connection, or too
/// many resources in it.
pub fn may_listen(req: &Request, session: &Session) -> Result<(), ErrorObject> {
    if session.listens().len() >= MAX_LISTENS {
        return Err(AgentError::TooManyListens(MAX_LISTENS).to_error_object());
    }
    let uris = req
        .params
        .as_ref()
        .and_then(|p| p.pointer("/notifications/resourceSubscriptions"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if uris > MAX_LISTEN_URIS {
        let max = MAX_LISTEN_URIS;
        return Err(AgentError::TooManyListenUris { uris, max }.to_error_object());
    }
    Ok(())
}

/// Starts a subscription: returns the acknowledgement to send. The request itself stays
/// open (unanswered) until the agent cancels it.
pub fn listen(req: &Request, task_ids: Vec<Value>) -> (Listen, String) {
    let wanted = req.params.as_ref().and_then(|p| p.get("notifications"));
    let flag = |k: &str| {
        wanted
            .and_then(|w| w.get(k))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let listen = Listen {
        tools: flag("toolsListChanged"),
        prompts: flag("promptsListChanged"),
        resources: flag("resourcesListChanged"),
        tasks: None,
        watching: 0,
    };
    let mut honoured = serde_json::Map::new();
    for (k, on) in [
        ("toolsListChanged", listen.tools),
        ("promptsListChanged", listen.prompts),
        ("resourcesListChanged", listen.resources),
    ] {
        if on {
            honoured.insert(k.into(), json!(true));
        }
    }
    if let Some(uris) = wanted.and_then(|w| w.get("resourceSubscriptions")) {
        honoured.insert("resourceSubscriptions".into(), uris.clone());
    }
    if wanted.and_then(|w| w.get("taskIds")).is_some() {
        // The ids mcpd watches (tasks it can route for this agent).
        honoured.insert("taskIds".into(), Value::Array(task_ids));
    }
    let ack = jsonrpc::notification_line(
        method::SUBSCRIPTIONS_ACKNOWLEDGED,
        Some(&json!({
            "notifications": honoured,
            "_meta": { key::SUBSCRIPTION_ID: req.id },
        })),
    );
    (listen, ack)
}
