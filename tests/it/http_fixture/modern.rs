//! Streamable HTTP of the stateless 2026-07-28 era (the `modern` option): every POST is checked
//! for the `_meta` envelope and the request-metadata headers before it is answered; no
//! sessions; `server/discover`; `subscriptions/listen` streams; GET and DELETE are 405.

use super::http::{accepted, caller, header_str, json_body, note_protocol_header, plain};
use super::rpc::{self, Message, Request};
use super::sse::{self, SseWriter};
use super::state::{ListenerKind, Shared};
use super::{streamable, tools};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use base64::Engine;
use serde_json::{Value, json};
use std::sync::Arc;

/// The only protocol version the modern fixture serves.
pub(super) const VERSION: &str = "2026-07-28";
const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";

/// `HeaderMismatch`: a request-metadata header is missing or disagrees with the body.
const HEADER_MISMATCH: i64 = -32020;
/// `UnsupportedProtocolVersionError`.
const UNSUPPORTED_VERSION: i64 = -32022;

/// The methods this server knows; anything else is 404 with -32601.
const METHODS: [&str; 4] = [
    "server/discover",
    "tools/list",
    "tools/call",
    "subscriptions/listen",
];

/// The session every modern request runs in, as far as the shared request bookkeeping
/// (cancellation by `notifications/cancelled`) needs one: there are no real sessions.
const NO_SESSION: &str = "";

/// Answers one POSTed message (its `Accept` header already checked). `Mcp-Session-Id` and
/// `Last-Event-ID` are ignored, as the spec says.
pub(super) async fn handle(shared: Arc<Shared>, headers: &HeaderMap, msg: &Value) -> Response {
    match rpc::classify(msg) {
        Message::Request { id, method, params } => {
            request(shared, headers, id, method, params).await
        }
        Message::Notification { method, params } => {
            note_protocol_header(&shared, headers);
            rpc::notification(&shared, NO_SESSION, &method, &params);
            accepted()
        }
        Message::Response => {
            let err = rpc::error_without_id(-32600, "a 2026-07-28 client sends no responses");
            json_body(StatusCode::BAD_REQUEST, &err)
        }
        Message::Invalid => {
            let err = rpc::error_without_id(-32600, "not a JSON-RPC message");
            json_body(StatusCode::BAD_REQUEST, &err)
        }
    }
}

async fn request(
    shared: Arc<Shared>,
    headers: &HeaderMap,
    id: Value,
    method: String,
    params: Value,
) -> Response {
    if method == "initialize" {
        // A legacy client: its handshake is an unknown method without the envelope.
        let requested = params.get("protocolVersion").cloned();
        return refuse(StatusCode::BAD_REQUEST, &id, unsupported(requested));
    }
    note_protocol_header(&shared, headers);
    if !METHODS.contains(&method.as_str()) {
        let err = error(-32601, format!("method not found: {method}"), None);
        return refuse(StatusCode::NOT_FOUND, &id, err);
    }
    if let Err(err) = envelope(&params) {
        return refuse(StatusCode::BAD_REQUEST, &id, err);
    }
    if let Err(why) = check_headers(headers, &method, &params) {
        shared.lock().stats.header_errors += 1;
        let err = error(HEADER_MISMATCH, format!("header mismatch: {why}"), None);
        return refuse(StatusCode::BAD_REQUEST, &id, err);
    }
    if method == "subscriptions/listen" {
        return listen(&shared, id, &params);
    }
    let req = Request {
        session: NO_SESSION.to_owned(),
        id,
        method,
        params,
        caller: caller(headers),
    };
    streamable::respond(shared, req).await
}

/// A JSON-RPC error object (the part under `"error"`).
fn error(code: i64, message: String, data: Option<Value>) -> Value {
    let mut e = json!({"code": code, "message": message});
    if let Some(data) = data {
        e["data"] = data;
    }
    e
}

fn unsupported(requested: Option<Value>) -> Value {
    let data = json!({"supported": [VERSION], "requested": requested.unwrap_or(Value::Null)});
    error(
        UNSUPPORTED_VERSION,
        "Unsupported protocol version".into(),
        Some(data),
    )
}

/// An HTTP error status whose body answers request `id` with `err`.
fn refuse(status: StatusCode, id: &Value, err: Value) -> Response {
    json_body(status, &json!({"jsonrpc": "2.0", "id": id, "error": err}))
}

/// Checks the required `_meta` keys: missing is -32602, another version -32022.
fn envelope(params: &Value) -> Result<(), Value> {
    let meta = params.get("_meta");
    let field = |key: &str| meta.and_then(|m| m.get(key)).filter(|v| !v.is_null());
    for key in [PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY] {
        if field(key).is_none() {
            return Err(error(
                -32602,
                format!("missing params._meta[\"{key}\"]"),
                None,
            ));
        }
    }
    if !field(CLIENT_CAPABILITIES_KEY).is_some_and(Value::is_object) {
        let message = format!("params._meta[\"{CLIENT_CAPABILITIES_KEY}\"] must be an object");
        return Err(error(-32602, message, None));
    }
    let version = field(PROTOCOL_VERSION_KEY).cloned();
    if version.as_ref().and_then(Value::as_str) != Some(VERSION) {
        return Err(unsupported(version));
    }
    Ok(())
}

/// Checks the request-metadata headers against the body (whose `_meta` version is already
/// known to be `VERSION`); the error says which header is wrong.
fn check_headers(headers: &HeaderMap, method: &str, params: &Value) -> Result<(), String> {
    let version = header_str(headers, "mcp-protocol-version");
    if version.as_deref() != Some(VERSION) {
        return Err(format!(
            "MCP-Protocol-Version is {version:?}, the body's _meta says {VERSION}"
        ));
    }
    let sent = header_str(headers, "mcp-method");
    if sent.as_deref() != Some(method) {
        return Err(format!(
            "Mcp-Method is {sent:?}, the body's method is {method}"
        ));
    }
    if method == "tools/call" {
        let name = params["name"].as_str().unwrap_or_default();
        let sent = header_str(headers, "mcp-name").map(|v| decode(&v));
        if !matches!(&sent, Some(Ok(n)) if n == name) {
            return Err(format!("Mcp-Name is {sent:?}, the body's name is {name:?}"));
        }
        check_params(headers, name, &params["arguments"])?;
    }
    Ok(())
}

/// Checks `Mcp-Param-{Name}` for every argument of tool `name` whose property carries
/// `"x-mcp-header": "{Name}"` (string, integer or boolean) and is present and not null.
fn check_params(headers: &HeaderMap, name: &str, args: &Value) -> Result<(), String> {
    let tools = tools::list(0, true);
    let Some(tool) = tools.iter().find(|t| t["name"] == name) else {
        return Ok(());
    };
    let Some(props) = tool["inputSchema"]["properties"].as_object() else {
        return Ok(());
    };
    for (arg, prop) in props {
        let Some(header) = prop["x-mcp-header"].as_str() else {
            continue;
        };
        let Some(value) = args.get(arg).filter(|v| !v.is_null()) else {
            continue;
        };
        let field = format!("mcp-param-{}", header.to_ascii_lowercase());
        let Some(sent) = header_str(headers, &field) else {
            return Err(format!("Mcp-Param-{header} is missing for argument {arg}"));
        };
        let matches = match prop["type"].as_str() {
            Some("string") => decode(&sent).ok().as_deref() == value.as_str(),
            Some("integer") => sent.parse::<i64>().ok() == value.as_i64(),
            Some("boolean") => value.as_bool().map(|b| b.to_string()) == Some(sent.clone()),
            // Not a type a header may carry (`badheader`): a client must not call it at all.
            _ => true,
        };
        if !matches {
            return Err(format!(
                "Mcp-Param-{header} is {sent:?}, argument {arg} is {value}"
            ));
        }
    }
    Ok(())
}

/// A header value as it was meant: `=?base64?{b64(utf8)}?=` unwrapped, anything else as it
/// is; an error when the wrapped form does not decode to UTF-8.
pub(super) fn decode(value: &str) -> Result<String, String> {
    let Some(b64) = value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    else {
        return Ok(value.to_owned());
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| format!("bad base64 in {value:?}: {e}"))?;
    String::from_utf8(bytes).map_err(|e| format!("{value:?} is not UTF-8: {e}"))
}

/// `subscriptions/listen`: an SSE response that acknowledges the subscription, then stays
/// open (with keepalive comments) for the notifications it asked for.
fn listen(shared: &Arc<Shared>, id: Value, params: &Value) -> Response {
    let Some(filter) = params.get("notifications").and_then(Value::as_object) else {
        let err = error(-32602, "missing params.notifications".into(), None);
        return refuse(StatusCode::BAD_REQUEST, &id, err);
    };
    // Only tool-list changes exist here, so that is all a subscription is ever granted.
    let tools = filter.get("toolsListChanged") == Some(&json!(true));
    let honoured = if tools {
        json!({"toolsListChanged": true})
    } else {
        json!({})
    };
    let (writer, resp) = SseWriter::open(shared, None);
    writer.message(&json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": honoured, "_meta": {SUBSCRIPTION_ID_KEY: id}},
    }));
    sse::spawn_listener(
        shared,
        writer,
        NO_SESSION,
        ListenerKind::Listen { id, tools },
    );
    resp
}

/// The `notifications/tools/list_changed` of the subscription whose listen request had `id`.
pub(super) fn list_changed(id: &Value) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": {SUBSCRIPTION_ID_KEY: id}},
    })
}

/// The answer to GET and DELETE: the modern era has no server stream and no sessions.
pub(super) fn no_get_or_delete() -> Response {
    plain(
        StatusCode::METHOD_NOT_ALLOWED,
        "2026-07-28: POST only, no sessions",
    )
}

/// The `DiscoverResult`, before [`decorate`].
pub(super) fn discover_result(ttl_ms: u64) -> Value {
    let mut result = json!({
        "supportedVersions": [VERSION],
        "capabilities": {"tools": {"listChanged": true}},
        "instructions": "the in-process HTTP fixture",
    });
    cacheable(&mut result, ttl_ms);
    result
}

/// Adds the cache hints a modern list or `server/discover` result must carry.
pub(super) fn cacheable(result: &mut Value, ttl_ms: u64) {
    result["ttlMs"] = json!(ttl_ms);
    result["cacheScope"] = json!("public");
}

/// Adds what every modern result carries: `resultType` and the serverInfo `_meta`.
pub(super) fn decorate(mut result: Value) -> Value {
    if let Some(obj) = result.as_object_mut() {
        obj.entry("resultType").or_insert_with(|| json!("complete"));
        let meta = obj.entry("_meta").or_insert_with(|| json!({}));
        meta[SERVER_INFO_KEY] = json!({"name": "http-fixture", "version": "1.0.0"});
    }
    result
}
