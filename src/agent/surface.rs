//! Prompts, resources, templates, completion, resource subscriptions and logging levels for agents.
//!
//! Each is served as an agent asks for it: listing from the catalog, routing to the right
//! server.

use super::AgentContext;
use super::forward::{self, Caller, Route};
use super::render::{self, Rewrite};
use super::reply::{Handled, Step};
use super::resolve::Reach;
use super::session::Session;
use crate::errors::AgentError;
use crate::registry;
use crate::registry::surface::RouteError;
use crate::upstream::Subscription;
use futures::FutureExt;
use mcpd_runtime::outbox::Outbox;
use mcpd_wire::jsonrpc::{self, Id, Request};
use mcpd_wire::protocol::ListKind;
use mcpd_wire::protocol::era::{self, Era};
use mcpd_wire::protocol::method;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Resource subscriptions one agent connection may hold at once.
pub const MAX_SUBSCRIPTIONS: usize = 1024;

fn too_many_subscriptions(id: &Id, m: &str) -> Handled {
    invalid(
        id,
        m,
        format!(
            "this connection already holds {MAX_SUBSCRIPTIONS} resource subscriptions; unsubscribe from some first"
        ),
    )
}

fn invalid(id: &Id, m: &str, reason: impl Into<String>) -> Handled {
    let e = AgentError::InvalidParams {
        method: m.to_owned(),
        reason: reason.into(),
    };
    Handled::Now(jsonrpc::error_line(Some(id), &e.to_error_object()))
}

/// `prompts/list`, `resources/list` and `resources/templates/list`, paginated.
pub fn list(
    req: &Request,
    ctx: &AgentContext,
    kind: ListKind,
    era: Era,
    session: &Session,
) -> Handled {
    let cursor = match req.params.as_ref().and_then(|p| p.get("cursor")) {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => Some(c.as_str()),
        Some(_) => return invalid(&req.id, kind.list().0, "cursor must be a string"),
    };
    let catalog = ctx.catalog.borrow().clone();
    let items = match kind {
        ListKind::Prompts => &catalog.surface().prompts,
        ListKind::Resources => &catalog.surface().resources,
        ListKind::Templates => &catalog.surface().templates,
    };
    let (page, next) = match registry::page_entries(items, cursor) {
        Ok(p) => p,
        Err(why) => return invalid(&req.id, kind.list().0, why),
    };
    let mut result = Map::new();
    result.insert(
        kind.list().1.into(),
        Value::Array(
            page.iter()
                .filter(|e| session.sees_server(&e.server))
                .map(|e| e.definition.clone())
                .collect(),
        ),
    );
    if let Some(next) = next {
        result.insert("nextCursor".into(), Value::String(next));
    }
    let mut result = Value::Object(result);
    if era == Era::Modern {
        era::modernize_result(&mut result);
        let scope = if catalog.cache().private {
            "private"
        } else {
            "public"
        };
        jsonrpc::set_member(&mut result, "ttlMs", json!(catalog.cache().ttl_ms));
        jsonrpc::set_member(&mut result, "cacheScope", json!(scope));
    }
    Handled::Now(jsonrpc::result_line(&req.id, &result))
}

fn params_of(req: &Request) -> Option<Map<String, Value>> {
    match &req.params {
        Some(Value::Object(m)) => Some(m.clone()),
        _ => None,
    }
}

/// The params object and its required string `field`, or the error to answer.
fn params_with(
    req: &Request,
    m: &str,
    field: &str,
) -> Result<(Map<String, Value>, String), Handled> {
    let Some(params) = params_of(req) else {
        return Err(invalid(
            &req.id,
            m,
            format!("params must be an object with a \"{field}\""),
        ));
    };
    match params.get(field).and_then(Value::as_str).map(str::to_owned) {
        Some(v) => Ok((params, v)),
        None => Err(invalid(&req.id, m, format!("\"{field}\" must be a string"))),
    }
}

/// `prompts/get`: routed by the prompt's qualified name.
pub fn prompts_get(
    req: Request,
    ctx: &AgentContext,
    outbox: &Outbox,
    session: &Session,
    era: Era,
) -> Handled {
    let (mut params, name) = match params_with(&req, method::PROMPTS_GET, "name") {
        Ok(p) => p,
        Err(refusal) => return refusal,
    };
    let catalog = ctx.catalog.borrow().clone();
    let prompt = catalog
        .surface()
        .prompt(&name)
        .filter(|p| session.sees_server(&p.server));
    let Some(prompt) = prompt else {
        if let Some(server) = catalog.held().prompts.get(name.as_str())
            && session.sees_server(server)
        {
            let e = AgentError::Held {
                kind: "prompt",
                name,
                server: server.to_string(),
            };
            return Handled::Now(jsonrpc::error_line(Some(&req.id), &e.to_error_object()));
        }
        return invalid(
            &req.id,
            method::PROMPTS_GET,
            format!("unknown prompt '{name}'; call prompts/list to see the prompts mcpd offers"),
        );
    };
    params.insert("name".into(), Value::String(prompt.original.clone()));
    let server = prompt.server.clone();
    let route = Route {
        server,
        method: method::PROMPTS_GET,
        params: params.into(),
        rewrite: Rewrite::None,
    };
    send(req.id, ctx, &catalog, route, outbox, session, era)
}

/// `resources/read`: routed by URI (see `registry::surface` for the scheme).
pub fn resources_read(
    req: Request,
    ctx: &AgentContext,
    outbox: &Outbox,
    session: &Session,
    era: Era,
) -> Handled {
    let (mut params, uri) = match params_with(&req, method::RESOURCES_READ, "uri") {
        Ok(p) => p,
        Err(refusal) => return refusal,
    };
    let catalog = ctx.catalog.borrow().clone();
    let (server, original) = match route(&catalog, &uri, session) {
        Ok(r) => r,
        Err(why) => return not_found(&req.id, &uri, why, era),
    };
    if catalog
        .held()
        .resources
        .contains(&(server.clone(), original.clone()))
    {
        let e = AgentError::Held {
            kind: "resource",
            name: uri,
            server: server.to_string(),
        };
        return Handled::Now(jsonrpc::error_line(Some(&req.id), &e.to_error_object()));
    }
    params.insert("uri".into(), Value::String(original));
    let route = Route {
        server,
        method: method::RESOURCES_READ,
        params: params.into(),
        rewrite: Rewrite::ContentUris {
            surface: catalog.surface().clone(),
        },
    };
    send(req.id, ctx, &catalog, route, outbox, session, era)
}

/// Routes a URI among the servers the agent's profile includes.
fn route(
    catalog: &registry::Catalog,
    uri: &str,
    session: &Session,
) -> Result<(Arc<str>, String), RouteError> {
    let servers: Vec<&str> = catalog.servers().map(|(s, _)| s).map(|s| &**s).collect();
    let (server, original) = catalog.surface().route_uri(uri, &servers)?;
    if !session.sees_server(&server) {
        return Err(RouteError::NotInProfile(uri.to_owned()));
    }
    Ok((server, original))
}

/// A URI that could not be routed. A resource no server offers is -32602 for a modern
/// agent (SEP-2164) and -32002 (the code of the legacy revisions) for a legacy one; a URI
/// over the length cap is -32602 in both eras, and is not echoed back.
fn not_found(id: &Id, uri: &str, why: RouteError, era: Era) -> Handled {
    let uri = uri.to_owned();
    let e = AgentError::Unroutable { uri, why, era };
    Handled::Now(jsonrpc::error_line(Some(id), &e.to_error_object()))
}

/// `completion/complete`: routed by the prompt or resource it refers to.
pub fn complete(
    req: Request,
    ctx: &AgentContext,
    outbox: &Outbox,
    session: &Session,
    era: Era,
) -> Handled {
    let Some(mut params) = params_of(&req) else {
        return invalid(
            &req.id,
            method::COMPLETE,
            "params must be an object with a \"ref\"",
        );
    };
    let catalog = ctx.catalog.borrow().clone();
    let reference = params.get("ref").cloned().unwrap_or(Value::Null);
    let (server, rewritten) = match reference.get("type").and_then(Value::as_str) {
        Some("ref/prompt") => {
            let name = reference.get("name").and_then(Value::as_str).unwrap_or("");
            let prompt = catalog
                .surface()
                .prompt(name)
                .filter(|p| session.sees_server(&p.server));
            let Some(prompt) = prompt else {
                return invalid(
                    &req.id,
                    method::COMPLETE,
                    format!("unknown prompt '{name}'"),
                );
            };
            let mut r = reference.clone();
            jsonrpc::set_member(&mut r, "name", Value::String(prompt.original.clone()));
            (prompt.server.clone(), r)
        }
        Some("ref/resource") => {
            let uri = reference.get("uri").and_then(Value::as_str).unwrap_or("");
            let found = catalog
                .surface()
                .templates
                .iter()
                .find(|t| t.presented == uri && session.sees_server(&t.server))
                .map(|t| (t.server.clone(), t.original.clone()));
            let (server, original) = match found {
                Some(f) => f,
                None => match route(&catalog, uri, session) {
                    Ok(r) => r,
                    Err(why) => return not_found(&req.id, uri, why, era),
                },
            };
            let mut r = reference.clone();
            jsonrpc::set_member(&mut r, "uri", Value::String(original));
            (server, r)
        }
        _ => {
            return invalid(
                &req.id,
                method::COMPLETE,
                "\"ref\" must be a ref/prompt or ref/resource",
            );
        }
    };
    params.insert("ref".into(), rewritten);
    let route = Route {
        server,
        method: method::COMPLETE,
        params: params.into(),
        rewrite: Rewrite::None,
    };
    send(req.id, ctx, &catalog, route, outbox, session, era)
}

/// `resources/subscribe` and `resources/unsubscribe` of a legacy agent.
pub fn subscribe(
    req: Request,
    ctx: &AgentContext,
    outbox: &Outbox,
    session: &mut Session,
    on: bool,
) -> Handled {
    let m = if on {
        method::RESOURCES_SUBSCRIBE
    } else {
        method::RESOURCES_UNSUBSCRIBE
    };
    let Some(uri) = req
        .params
        .as_ref()
        .and_then(|p| p.get("uri"))
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return invalid(&req.id, m, "\"uri\" must be a string");
    };
    let catalog = ctx.catalog.borrow().clone();
    let (server, original) = match route(&catalog, &uri, session) {
        // Subscriptions are legacy-only (modern agents use subscriptions/listen).
        Ok(r) => r,
        Err(why) => return not_found(&req.id, &uri, why, Era::Legacy),
    };
    let handle = match reach(ctx, &catalog, session, &server) {
        Ok(r) => r,
        Err(e) => return Handled::Now(jsonrpc::error_line(Some(&req.id), &e.to_error_object())),
    };
    let key = (server.clone(), original.clone());
    if !session.subscribe(key, on, MAX_SUBSCRIPTIONS) {
        return too_many_subscriptions(&req.id, m);
    }
    let sub = Subscription {
        uri: original,
        presented: uri,
        agent: session.agent(),
        outbox: outbox.clone(),
        listen: None,
    };
    let id = req.id;
    let reply_id = id.clone();
    let fut = async move {
        let handle = match handle {
            Reach::Now(h) => Ok(h),
            Reach::Later(h) => h.await,
        };
        let reply = match handle {
            Ok(h) => h.subscribe(sub, on).await,
            Err(e) => {
                let line = jsonrpc::error_line(Some(&reply_id), &e.to_error_object());
                return (reply_id, Step::Reply(line));
            }
        };
        let line = render::render(&reply_id, &server, m, reply, Era::Legacy, &Rewrite::None);
        (reply_id, Step::Reply(line))
    };
    Handled::Later {
        id,
        cancel: CancellationToken::new(),
        fut: fut.boxed(),
    }
}

/// A modern agent's `subscriptions/listen` with `resourceSubscriptions`: subscribes each
/// URI on its server; updates come tagged with the listen's id. Refused (with the line to
/// answer) when the agent would hold more than `MAX_SUBSCRIPTIONS`.
pub fn listen_resources(
    req: &Request,
    ctx: &AgentContext,
    outbox: &Outbox,
    session: &mut Session,
) -> Result<(), Handled> {
    let uris = req
        .params
        .as_ref()
        .and_then(|p| p.pointer("/notifications/resourceSubscriptions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let catalog = ctx.catalog.borrow().clone();
    let mut wanted = Vec::new();
    for uri in uris.iter().filter_map(Value::as_str) {
        let Ok((server, original)) = route(&catalog, uri, session) else {
            tracing::debug!(
                agent = session.agent(),
                uri,
                "a subscription to a resource no server offers"
            );
            continue;
        };
        // Only servers that can take it now: a listen does not wait for one to start.
        let Ok(Reach::Now(handle)) = reach(ctx, &catalog, session, &server) else {
            continue;
        };
        wanted.push((server, original, uri, handle));
    }
    // All or none: a subscription is refused whole if its resources would pass the limit.
    let keys = wanted
        .iter()
        .map(|(server, original, ..)| (server.clone(), original.clone()))
        .collect();
    if !session.subscribe_all(keys, MAX_SUBSCRIPTIONS) {
        return Err(too_many_subscriptions(&req.id, method::LISTEN));
    }
    for (_, original, uri, handle) in wanted {
        let sub = Subscription {
            uri: original,
            presented: uri.to_owned(),
            agent: session.agent(),
            outbox: outbox.about(&req.id),
            listen: Some(req.id.clone()),
        };
        // The acknowledgement does not wait for the servers; a failure is only logged.
        mcpd_runtime::tracker::spawn(async move {
            if let Err(e) = handle.subscribe(sub, true).await {
                tracing::debug!("a resource subscription failed: {e}");
            }
        });
    }
    Ok(())
}

/// `logging/setLevel` of a legacy agent: applies to that agent's own calls. A shared
/// server is not told (other agents share it); mcpd passes on only the messages at or
/// above the agent's level, and asks modern servers for that level per request.
pub fn set_level(req: &Request, session: &mut Session) -> Handled {
    let level = req
        .params
        .as_ref()
        .and_then(|p| p.get("level"))
        .and_then(Value::as_str);
    match level {
        Some(l) if mcpd_wire::protocol::logging::rank(l).is_some() => {
            session.set_log_level(l.to_owned());
            Handled::Now(jsonrpc::result_line(&req.id, &json!({})))
        }
        _ => invalid(
            &req.id,
            method::SET_LEVEL,
            "\"level\" must be one of debug, info, notice, warning, error, critical, alert, emergency",
        ),
    }
}

fn later((id, cancel, fut): (Id, CancellationToken, super::reply::ReplyFuture)) -> Handled {
    Handled::Later { id, cancel, fut }
}

/// Sends a routed request to its server (if it can take requests now) and returns its
/// answer as a call of the agent's.
fn send(
    id: Id,
    ctx: &AgentContext,
    catalog: &registry::Catalog,
    route: Route,
    outbox: &Outbox,
    session: &Session,
    era: Era,
) -> Handled {
    let reach = match reach(ctx, catalog, session, &route.server) {
        Ok(r) => r,
        Err(e) => return Handled::Now(jsonrpc::error_line(Some(&id), &e.to_error_object())),
    };
    let caller = Caller::of(outbox, session, era);
    later(forward::go(id, route, reach, &caller))
}

/// How this agent's request reaches `server` (`resolve.rs`).
fn reach(
    ctx: &AgentContext,
    catalog: &registry::Catalog,
    session: &Session,
    server: &std::sync::Arc<str>,
) -> Result<Reach, crate::errors::AgentError> {
    super::resolve::reach(catalog, &ctx.catalog, &ctx.supervisor, session, server)
}
