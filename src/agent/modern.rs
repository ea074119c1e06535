//! The modern (2026-07-28) side of an agent connection: era pinning, `server/discover`, request envelopes, and `subscriptions/listen`.

use super::AgentContext;
use super::session::{Listen, Session};
use crate::jsonrpc::{self, ErrorObject, Id, Request};
use crate::protocol::era::{self, Era, RequestEra, key};
use crate::protocol::method;
use serde_json::{Value, json};

/// What `handle` should do with a request after looking at its era.
pub enum EraCheck {
    /// Serve it; `modern` says whether its result gets the modern shape.
    Serve { modern: bool },
    /// Refuse it with this line.
    Refuse(String),
}

/// Decides a request's era and pins the connection on its first decisive exchange:
/// `initialize` pins legacy, a valid modern request pins modern; `server/discover` pins
/// nothing, so a client can still fall back to `initialize`.
pub fn check(req: &Request, session: &mut Session) -> EraCheck {
    // Checked before anything else, so that every connection (socket or HTTP, pinned
    // to either era or not yet) gives the same answer.
    if era::declares_version(req.params.as_ref())
        && let Some(e) = removed(&req.method)
    {
        return EraCheck::Refuse(jsonrpc::error_line(Some(&req.id), &e));
    }
    if req.method == method::INITIALIZE {
        if session.era == Some(Era::Modern) {
            let requested = req
                .params
                .as_ref()
                .and_then(|p| p.get("protocolVersion"))
                .and_then(Value::as_str);
            return EraCheck::Refuse(unsupported(
                &req.id,
                requested,
                "this connection already speaks 2026-07-28; initialize is not part of it",
            ));
        }
        return EraCheck::Serve { modern: false };
    }
    match era::request_era(req.params.as_ref()) {
        // `server/discover` is answered without pinning, so a client can still fall
        // back to `initialize` afterwards.
        RequestEra::Modern | RequestEra::Legacy if req.method == method::DISCOVER => {
            EraCheck::Serve { modern: true }
        }
        RequestEra::Modern => {
            if session.era.is_none() {
                session.era = Some(Era::Modern);
                let info = req
                    .params
                    .as_ref()
                    .and_then(|p| p.get("_meta"))
                    .and_then(|m| m.get(key::CLIENT_INFO));
                let field = |k: &str| {
                    info.and_then(|i| i.get(k))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                };
                session.client_name = field("name");
                session.client_version = field("version");
                tracing::info!(agent = session.agent, "agent speaks 2026-07-28");
            }
            EraCheck::Serve { modern: true }
        }
        RequestEra::UnsupportedVersion(v) => EraCheck::Refuse(unsupported(
            &req.id,
            Some(&v),
            "Unsupported protocol version",
        )),
        RequestEra::MissingKey(k) => EraCheck::Refuse(missing_key(&req.id, k)),
        RequestEra::Legacy if session.era == Some(Era::Modern) && !is_mcpd_method(&req.method) => {
            EraCheck::Refuse(missing_key(&req.id, key::PROTOCOL_VERSION))
        }
        RequestEra::Legacy => EraCheck::Serve { modern: false },
    }
}

/// The answer to a method that 2026-07-28 removed (`initialize`, `ping`,
/// `logging/setLevel`, `resources/subscribe`, `resources/unsubscribe`) in a request meant
/// for that era: -32601. The one definition for the socket and the HTTP listener (which
/// sends it with 404, also when only its header names a modern version).
pub fn removed(m: &str) -> Option<ErrorObject> {
    era::is_removed_method(m).then(|| {
        ErrorObject::new(
            jsonrpc::code::METHOD_NOT_FOUND,
            format!("{m} is not part of 2026-07-28"),
        )
    })
}

fn is_mcpd_method(m: &str) -> bool {
    m.starts_with("mcpd/")
}

fn unsupported(id: &Id, requested: Option<&str>, message: &str) -> String {
    let e = ErrorObject::new(era::code::UNSUPPORTED_VERSION, message.to_owned())
        .with_data(era::unsupported_version_data(requested));
    jsonrpc::error_line(Some(id), &e)
}

fn missing_key(id: &Id, k: &str) -> String {
    let e = ErrorObject::new(
        jsonrpc::code::INVALID_PARAMS,
        format!("the request's _meta lacks the required key \"{k}\""),
    )
    .with_data(json!({ "missing": k }));
    jsonrpc::error_line(Some(id), &e)
}

/// mcpd's own capabilities, the same in both eras.
pub fn capabilities() -> Value {
    json!({
        "tools": { "listChanged": true },
        "prompts": { "listChanged": true },
        "resources": { "subscribe": true, "listChanged": true },
        "completions": {},
        "logging": {},
    })
}

pub const INSTRUCTIONS: &str = "mcpd multiplexes several MCP servers. Tool names are SERVER__TOOL: the part before the double underscore names the server that provides the tool.";

/// The cache hints mcpd puts on its listings.
pub fn cache_hints(ctx: &AgentContext) -> (u64, &'static str) {
    let c = ctx.catalog.borrow();
    (
        c.cache().ttl_ms,
        if c.cache().private {
            "private"
        } else {
            "public"
        },
    )
}

/// Answers `server/discover`.
pub fn discover(req: &Request, ctx: &AgentContext) -> String {
    let (ttl, scope) = cache_hints(ctx);
    // Tasks pass through to the servers that make them (the extension is declared per
    // request, and each server decides per call).
    let mut caps = capabilities();
    crate::protocol::tasks::declare(&mut caps);
    let result = json!({
        "resultType": "complete",
        "supportedVersions": era::supported_versions(),
        "capabilities": caps,
        "instructions": INSTRUCTIONS,
        "ttlMs": ttl,
        "cacheScope": scope,
        "_meta": era::handshake_meta(ctx.catalog.borrow().mcpd_behind()),
    });
    jsonrpc::result_line(&req.id, &result)
}

/// Open `subscriptions/listen` requests one connection may have at once.
pub const MAX_LISTENS: usize = 32;
/// Resources one `subscriptions/listen` may name.
pub const MAX_LISTEN_URIS: usize = 1024;

/// Refuses a subscription beyond the caps: too many open on this connection, or too
/// many resources in it.
pub fn may_listen(req: &Request, session: &Session) -> Result<(), ErrorObject> {
    if session.listens.len() >= MAX_LISTENS {
        return Err(ErrorObject::new(
            crate::jsonrpc::mcpd_code::BUSY,
            format!(
                "this connection already has {MAX_LISTENS} open subscriptions/listen requests; cancel one first"
            ),
        ));
    }
    let uris = req
        .params
        .as_ref()
        .and_then(|p| p.pointer("/notifications/resourceSubscriptions"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if uris > MAX_LISTEN_URIS {
        return Err(ErrorObject::new(
            jsonrpc::code::INVALID_PARAMS,
            format!(
                "resourceSubscriptions names {uris} resources; one subscriptions/listen may name at most {MAX_LISTEN_URIS}"
            ),
        ));
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
