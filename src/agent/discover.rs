//! Discovery mode for large catalogs.
//!
//! `tools/list` shows the pinned tools, the tools the agent activated and three
//! meta-tools (`mcpd__find_tools`, `mcpd__describe_tools`, `mcpd__call_tool`) instead of
//! every tool; this file lists them and answers them.
//!
//! Everything an agent finds, describes or calls here is limited to what its profile
//! lets it see. `find_tools` ranks with the catalog's search index (`discovery/`), which
//! is rebuilt per server when a list changes, never per query. `describe_tools` returns
//! full definitions and activates them: they join the agent's `tools/list` (at most
//! `max_active`, least recently described leave first) and the agent is told its list
//! changed. `call_tool` is a direct call of the named tool, through the same path
//! (`calls::start`), so results, progress, cancellation, input and tasks are the same.

use super::AgentContext;
use super::params::PlainArguments;
use super::reply::Handled;
use super::session::Session;
use crate::config::{Discovery, RESERVED};
use crate::errors::AgentError;
use crate::registry::Catalog;
use mcpd_runtime::outbox::Outbox;
use mcpd_wire::jsonrpc::{self, Id, Request};
use mcpd_wire::protocol::era::Era;
use mcpd_wire::protocol::method;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use std::sync::{Arc, LazyLock};

pub const FIND: &str = "mcpd__find_tools";
pub const DESCRIBE: &str = "mcpd__describe_tools";
pub const CALL: &str = "mcpd__call_tool";

const DEFAULT_LIMIT: usize = 8;
const MAX_LIMIT: usize = 50;
const MAX_DESCRIBE: usize = 20;

/// The meta-tools' definitions as listed: JSON text, like the catalog's.
static META: LazyLock<Vec<Box<RawValue>>> = LazyLock::new(|| {
    [
        json!({
            "name": FIND,
            "title": "Find tools",
            "description": "Search all tools available through mcpd by what you want to do; returns the best matches with their qualified names (SERVER__tool). Use it when the tool you need is not in your list: describe the task in plain words, e.g. \"read a file\" or \"open a GitHub pull request\". Then call mcpd__describe_tools with the names you want (they join your tool list) and run one with mcpd__call_tool or directly. An empty query or \"*\" lists tools by server.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you want to do, in plain words."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT, "description": "How many tools to return."},
                    "server": {"type": "string", "description": "Only tools of this server."}
                },
                "required": ["query"]
            },
            "outputSchema": {
                "type": "object",
                "properties": {"tools": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "server": {"type": "string"},
                        "description": {"type": "string"},
                        "score": {"type": "number"}
                    },
                    "required": ["name", "server", "description", "score"]
                }}},
                "required": ["tools"]
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }),
        json!({
            "name": DESCRIBE,
            "title": "Describe tools",
            "description": "Full definitions (input and output schema, annotations) of tools by qualified name, as found by mcpd__find_tools. The described tools are added to your tool list, so you can call them directly once your client reloads it, or through mcpd__call_tool at once.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "names": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MAX_DESCRIBE, "description": "Qualified tool names (SERVER__tool)."}
                },
                "required": ["names"]
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "tools": {"type": "array", "items": {"type": "object"}},
                    "unknown": {"type": "array", "items": {"type": "object", "properties": {
                        "name": {"type": "string"},
                        "nearest": {"type": "array", "items": {"type": "string"}}
                    }}}
                },
                "required": ["tools", "unknown"]
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }),
        json!({
            "name": CALL,
            "title": "Call a tool",
            "description": "Call any tool available through mcpd by its qualified name (SERVER__tool, as mcpd__find_tools returns it), with its arguments. The result is the tool's own, exactly as a direct call gives it.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The qualified tool name (SERVER__tool)."},
                    "arguments": {"type": "object", "description": "The tool's arguments, as its inputSchema describes them."}
                },
                "required": ["name"]
            }
        }),
    ]
    .iter()
    .filter_map(|m| serde_json::value::to_raw_value(m).ok()) // a `Value` always serialises
    .collect()
});

/// Whether a `tools/call` is one of the meta-tools.
pub fn is_meta(req: &Request) -> bool {
    let name = req
        .params
        .as_ref()
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str);
    matches!(name, Some(FIND | DESCRIBE | CALL))
}

/// The discovery settings that apply to this agent.
pub fn settings<'a>(ctx: &'a AgentContext, session: &'a Session) -> &'a Discovery {
    session.profile().map_or(&ctx.discovery, |p| &p.discovery)
}

/// Whether this agent's `tools/list` is the discovery list now.
pub fn discovers(ctx: &AgentContext, session: &Session, catalog: &Catalog) -> bool {
    let d = settings(ctx, session);
    if d.mode != crate::config::ToolMode::Discover {
        return false;
    }
    let visible = || {
        catalog
            .all_tools()
            .iter()
            .filter(|t| session.sees_tool(&t.server, &t.qualified))
            .count()
    };
    d.discover_above.is_none_or(|_| d.discovers(visible()))
}

/// The discovery `tools/list`: pinned tools, then activated ones (most recent first),
/// then the meta-tools. One page: it is short by design.
pub fn list<'a>(
    ctx: &AgentContext,
    session: &'a Session,
    catalog: &'a Catalog,
) -> Vec<&'a RawValue> {
    let d = settings(ctx, session);
    let mut names: Vec<&str> = d.pinned.iter().map(String::as_str).collect();
    for a in session.active().iter().rev() {
        if !names.contains(&a.as_str()) {
            names.push(a);
        }
    }
    let mut out: Vec<&RawValue> = names
        .into_iter()
        .filter_map(|n| catalog.tool(n))
        .filter(|t| session.sees_tool(&t.server, &t.qualified))
        .map(|t| &*t.definition)
        .collect();
    out.extend(META.iter().map(|m| &**m));
    out
}

/// A meta-tool call. `plain` holds its arguments as the agent's text when the request
/// was read without parsing them (`jsonrpc::peek_tool_call`).
pub fn call(
    mut req: Request,
    plain: Option<PlainArguments>,
    ctx: &AgentContext,
    outbox: &Outbox,
    session: &mut Session,
    era: Era,
) -> Handled {
    let mut params = match req.params.take() {
        Some(Value::Object(params)) => params,
        _ => Map::new(),
    };
    let name = match params.get("name") {
        Some(Value::String(name)) => name.clone(),
        _ => String::new(),
    };
    if name == CALL {
        return call_tool(req.id, params, plain, ctx, outbox, session, era);
    }
    if let Some(plain) = plain {
        params = plain.merged(params);
    }
    let args = params.remove("arguments").unwrap_or_else(|| json!({}));
    let catalog = ctx.catalog.borrow().clone();
    let answer = match name.as_str() {
        FIND => find(&args, &catalog, session),
        _ => describe(&args, &catalog, ctx, outbox, session),
    };
    let mut result = match answer {
        Ok(r) => r,
        Err(reason) => {
            let e = AgentError::InvalidParams {
                method: format!("{} {name}", method::TOOLS_CALL),
                reason,
            };
            return Handled::Now(jsonrpc::error_line(Some(&req.id), &e.to_error_object()));
        }
    };
    if era == Era::Modern {
        mcpd_wire::protocol::era::modernize_result(&mut result);
    }
    Handled::Now(jsonrpc::result_line(&req.id, &result))
}

/// A tool result with both a text and a structured form.
fn both(text: String, structured: Value) -> Value {
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
    })
}

fn find(args: &Value, catalog: &Catalog, session: &Session) -> Result<Value, String> {
    let query = match args.get("query") {
        Some(Value::String(q)) => q.as_str(),
        None | Some(Value::Null) => "",
        Some(_) => return Err("\"query\" must be a string".into()),
    };
    let limit = match args.get("limit") {
        None | Some(Value::Null) => DEFAULT_LIMIT,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MAX_LIMIT as u64).contains(&n) => n as usize,
            _ => {
                return Err(format!(
                    "\"limit\" must be an integer from 1 to {MAX_LIMIT}"
                ));
            }
        },
    };
    let server = match args.get("server") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err("\"server\" must be a string".into()),
    };
    let hits = catalog.search().search(query, limit, |s, q| {
        server.is_none_or(|want| want == s) && session.sees_tool(s, q)
    });
    let mut text = String::new();
    let tools: Vec<Value> = hits
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let score = (f64::from(h.score) * 1000.0).round() / 1000.0;
            text.push_str(&format!(
                "{}. {} ({}): {}\n",
                i + 1,
                h.qualified,
                h.server,
                h.summary
            ));
            json!({"name": h.qualified, "server": &**h.server, "description": h.summary, "score": score})
        })
        .collect();
    if tools.is_empty() {
        text.push_str("No tool matches. Try other words, or \"*\" to list tools by server.\n");
    } else {
        text.push_str(&format!(
            "Call {DESCRIBE} with the names you want for their full definitions, then {CALL} to run one.\n"
        ));
    }
    Ok(both(text, json!({ "tools": tools })))
}

fn describe(
    args: &Value,
    catalog: &Catalog,
    ctx: &AgentContext,
    outbox: &Outbox,
    session: &mut Session,
) -> Result<Value, String> {
    let names: Vec<&str> = match args.get("names") {
        Some(Value::Array(a)) if !a.is_empty() && a.len() <= MAX_DESCRIBE => a
            .iter()
            .map(|n| n.as_str().ok_or("\"names\" must hold strings"))
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(format!(
                "\"names\" must be a list of 1 to {MAX_DESCRIBE} qualified tool names"
            ));
        }
    };
    let mut tools = Vec::new();
    let mut unknown = Vec::new();
    let mut found = Vec::new();
    for n in names {
        match catalog
            .tool(n)
            .filter(|t| session.sees_tool(&t.server, &t.qualified))
        {
            Some(t) => {
                tools.push(t.parsed());
                found.push(t.qualified.clone());
            }
            None => {
                unknown.push(json!({"name": n, "nearest": session.nearest_tools(catalog, n)}));
            }
        }
    }
    // Stateless HTTP clients share one connection: there is no session of theirs to
    // activate tools in (they call through mcpd__call_tool).
    let stateless =
        ctx.peer.over_http && session.era() == Some(mcpd_wire::protocol::era::Era::Modern);
    let changed = !stateless && session.activate(settings(ctx, session).max_active, found);
    if changed && discovers(ctx, session, catalog) {
        session.notify_list_changed(outbox, method::TOOLS_LIST_CHANGED);
    }
    let mut text = String::new();
    for t in &tools {
        text.push_str(&serde_json::to_string_pretty(t).unwrap_or_default());
        text.push('\n');
    }
    for u in &unknown {
        text.push_str(&format!(
            "unknown tool '{}'; nearest: {}\n",
            u["name"].as_str().unwrap_or(""),
            u["nearest"]
                .as_array()
                .map(|a| a
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default()
        ));
    }
    Ok(both(text, json!({"tools": tools, "unknown": unknown})))
}

/// `mcpd__call_tool`: the named tool's call, with the rest of the request as it came
/// (its `_meta`, and a modern agent's `inputResponses` and `requestState` on a retry).
/// `params` are the request's but for the arguments when they are in `plain`: then the
/// named tool's arguments stay the agent's text too, as in a direct call.
fn call_tool(
    id: Id,
    mut params: Map<String, Value>,
    plain: Option<PlainArguments>,
    ctx: &AgentContext,
    outbox: &Outbox,
    session: &mut Session,
    era: Era,
) -> Handled {
    let refuse = |reason: &str| {
        let e = AgentError::InvalidParams {
            method: format!("{} {CALL}", method::TOOLS_CALL),
            reason: reason.to_owned(),
        };
        Handled::Now(jsonrpc::error_line(Some(&id), &e.to_error_object()))
    };
    let text = plain
        .as_ref()
        .and_then(|PlainArguments(text)| text.as_deref());
    let (target, arguments) = match text.and_then(jsonrpc::peek_name_and_arguments) {
        Some((target, arguments)) => {
            let arguments = Arc::from(arguments.unwrap_or("{}"));
            (target, Some(PlainArguments(Some(arguments))))
        }
        None => {
            // Read as values: arguments that were not plain, or an object this path
            // leaves to the checks below (a name that is not a string, say).
            if let Some(plain) = plain {
                params = plain.merged(params);
            }
            let mut args = match params.remove("arguments") {
                Some(Value::Object(args)) => args,
                _ => Map::new(),
            };
            let Some(Value::String(target)) = args.remove("name") else {
                return refuse("\"name\" must be the qualified name of a tool");
            };
            let arguments = match args.remove("arguments") {
                None | Some(Value::Null) => json!({}),
                Some(a @ Value::Object(_)) => a,
                Some(_) => return refuse("\"arguments\" must be an object"),
            };
            params.insert("arguments".into(), arguments);
            (target, None)
        }
    };
    if target.starts_with(&format!("{RESERVED}__")) {
        return refuse("call mcpd's own tools directly, not through mcpd__call_tool");
    }
    params.insert("name".into(), Value::String(target));
    let inner = Request {
        id,
        method: method::TOOLS_CALL.into(),
        params: Some(Value::Object(params)),
    };
    match super::calls::start(inner, arguments, ctx, outbox, session, era) {
        Ok((id, cancel, fut)) => Handled::Later { id, cancel, fut },
        Err(refusal) => Handled::Now(refusal.line()),
    }
}
