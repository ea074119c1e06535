//! HTTP plumbing shared by both transports: the router, the auth gate in front of it (with a
//! wrapping fixture's check), and helpers for reading headers and building plain responses.

use super::state::Shared;
use super::{Wrap, legacy, modern, rpc, streamable};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;
use std::sync::Arc;

pub(super) const SESSION_HEADER: &str = "mcp-session-id";

/// `/mcp` for both transports (each handler checks which one the fixture speaks), the same
/// at `/moved` (where `redirect` may send clients), and the 2024-11-05 message endpoint;
/// every request passes the gate first. A `wrap`'s routes are served beside them.
pub(super) fn router(shared: Arc<Shared>) -> Router {
    let mcp = || {
        post(streamable::post)
            .get(streamable::get)
            .delete(streamable::delete)
    };
    let wrapped = shared.opts.wrap.as_ref().map(|w| w.routes.clone());
    let router = Router::new()
        .route("/mcp", mcp())
        .route("/moved", mcp())
        .route("/messages", post(legacy::post))
        .layer(middleware::from_fn_with_state(shared.clone(), gate))
        .with_state(shared);
    match wrapped {
        Some(routes) => router.merge(routes),
        None => router,
    }
}

/// The most of a request body a `wrap` check reads.
const WRAP_BODY_LIMIT: usize = 16 * 1024 * 1024;

/// Records the headers every test may ask about, then applies `wrap`, `redirect`, `bearer`
/// and `forbidden`.
async fn gate(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    record(&shared, &req);
    let req = match &shared.opts.wrap {
        Some(wrap) => match wrapped(wrap, req).await {
            Ok(req) => req,
            Err(resp) => return *resp,
        },
        None => req,
    };
    if let Some(to) = &shared.opts.redirect
        && req.uri().path() == "/mcp"
    {
        let mut resp = plain(StatusCode::TEMPORARY_REDIRECT, "moved");
        resp.headers_mut().insert(header::LOCATION, value(to));
        return resp;
    }
    let authorization = header_str(req.headers(), "authorization");
    if let Some(token) = &shared.opts.bearer
        && authorization.as_deref() != Some(format!("Bearer {token}").as_str())
    {
        return unauthorized(shared.port);
    }
    if shared.opts.forbidden {
        let challenge = r#"Bearer error="insufficient_scope", scope="mcp:tools""#;
        let mut resp = plain(StatusCode::FORBIDDEN, "insufficient scope");
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(challenge),
        );
        return resp;
    }
    next.run(req).await
}

/// Counts the request and keeps the headers `Stats` lists.
fn record(shared: &Shared, req: &Request) {
    let headers = req.headers();
    let mut inner = shared.lock();
    let stats = &mut inner.stats;
    match *req.method() {
        Method::POST => stats.posts += 1,
        Method::GET => stats.get_requests += 1,
        Method::DELETE => stats.delete_requests += 1,
        _ => {}
    }
    stats
        .authorization
        .extend(header_str(headers, "authorization"));
    stats
        .custom_header
        .extend(header_str(headers, "x-fixture-key"));
    stats.methods.extend(header_str(headers, "mcp-method"));
    if let Some(name) = header_str(headers, "mcp-name") {
        stats.names.push(modern::decode(&name).unwrap_or(name));
    }
    for (name, value) in headers {
        if let Some(param) = name.as_str().strip_prefix("mcp-param-") {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            stats.param_headers.push((param.to_owned(), value));
        }
    }
}

/// Reads the body, runs `wrap`'s check on the request, and rebuilds the request for the
/// handlers when the check lets it through.
async fn wrapped(wrap: &Wrap, req: Request) -> Result<Request, Rejection> {
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, WRAP_BODY_LIMIT).await else {
        let resp = plain(StatusCode::BAD_REQUEST, "unreadable or oversized body");
        return Err(Box::new(resp));
    };
    match (wrap.check)(&parts, &bytes) {
        Some(resp) => Err(Box::new(resp)),
        None => Ok(Request::from_parts(parts, Body::from(bytes))),
    }
}

fn unauthorized(port: u16) -> Response {
    let base = format!("http://127.0.0.1:{port}");
    let challenge = format!(
        r#"Bearer realm="fixture", resource_metadata="{base}/.well-known/oauth-protected-resource""#
    );
    let mut resp = plain(StatusCode::UNAUTHORIZED, "missing or invalid bearer token");
    let headers = resp.headers_mut();
    headers.insert(header::WWW_AUTHENTICATE, value(&challenge));
    headers.insert("mcp-auth-server", value(&format!("{base}/auth")));
    resp
}

/// The value of header `name` as text, if present and visible ASCII.
pub(super) fn header_str(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name)?.to_str().ok().map(str::to_owned)
}

/// A header value from text the fixture made itself (always visible ASCII).
pub(super) fn value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).expect("fixture header values are visible ASCII")
}

/// Whether the `Accept` headers name every media type in `wanted`.
pub(super) fn accepts(headers: &HeaderMap, wanted: &[&str]) -> bool {
    let all: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let all = all.join(",");
    wanted.iter().all(|w| all.contains(w))
}

/// Who sent the request, as `whoami` reports it.
pub(super) fn caller(headers: &HeaderMap) -> rpc::Caller {
    rpc::Caller {
        authorization: header_str(headers, "authorization"),
        key: header_str(headers, "x-fixture-key"),
    }
}

/// Records the `MCP-Protocol-Version` header of a POST other than `initialize`.
pub(super) fn note_protocol_header(shared: &Shared, headers: &HeaderMap) {
    if let Some(v) = header_str(headers, "mcp-protocol-version") {
        shared.lock().stats.protocol_headers.push(v);
    }
}

/// A response that rejects a request, boxed because it is large and usually absent.
pub(super) type Rejection = Box<Response>;

/// The body of a POST as one JSON-RPC message, or the 400 that rejects it.
pub(super) fn parse(body: &[u8]) -> Result<Value, Rejection> {
    let msg: Value = serde_json::from_slice(body).map_err(|e| {
        let err = rpc::error_without_id(-32700, &format!("parse error: {e}"));
        Box::new(json_body(StatusCode::BAD_REQUEST, &err))
    })?;
    if msg.is_array() {
        let err = rpc::error_without_id(-32600, "batches are not supported");
        return Err(Box::new(json_body(StatusCode::BAD_REQUEST, &err)));
    }
    Ok(msg)
}

pub(super) fn plain(status: StatusCode, text: &str) -> Response {
    (status, text.to_owned()).into_response()
}

pub(super) fn json_body(status: StatusCode, msg: &Value) -> Response {
    let mut resp = (status, msg.to_string()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// 202 with an empty body: a notification or response was accepted.
pub(super) fn accepted() -> Response {
    Response::builder()
        .status(StatusCode::ACCEPTED)
        .body(Body::empty())
        .expect("static response parts are valid")
}

/// The answer to every POST when `fail_status` is set.
pub(super) fn failure(status: u16) -> Response {
    let status = StatusCode::from_u16(status).expect("fail_status is a valid HTTP status");
    plain(status, "fixture failure: upstream database unavailable")
}
