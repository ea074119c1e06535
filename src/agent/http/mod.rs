//! The optional Streamable HTTP listener (`[daemon] http_listen`).
//!
//! One `/mcp` endpoint serving legacy sessions and stateless 2026-07-28 requests to the
//! same agent connections as the socket.
//!
//! - The edge is `accept.rs` (connection cap, header and idle timeouts) and a layer
//!   stack: every request first passes `security::Gate` on its head alone, before any
//!   body is read: `Host` and `Origin` must name this machine (DNS-rebinding defence,
//!   403), then the bearer token (401); then the body limit.
//! - A legacy `initialize` opens a session (`Mcp-Session-Id`): an agent connection
//!   (`conn::run`) with a relay (`relay.rs`) in front of it. Later POSTs, the GET stream
//!   and DELETE find it by id (`sessions.rs`).
//! - A 2026-07-28 request (its `_meta` or its `MCP-Protocol-Version` says so) is
//!   stateless: its headers are checked against its body (`stateless.rs`) and it goes to the
//!   one shared stateless agent connection, whose relay renames ids.
//! - A POST's reply goes back as JSON when it is the first message ready, or else as an
//!   SSE stream of the messages about the request followed by the reply. A client that
//!   closes the response cancels the request upstream.

mod relay;
mod security;
mod sessions;
pub(crate) mod sse;
mod stateless;
pub mod token;
pub(crate) mod wire;

use super::AgentContext;
use crate::config::HttpListen;
use crate::errors::EdgeError;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcpd_wire::jsonrpc::{self, ErrorObject, Id};
use mcpd_wire::protocol::era::Era;
use relay::{Inbound, Posted};
use serde_json::Value;
use sessions::Sessions;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceBuilder;
use tower_http::validate_request::ValidateRequestHeaderLayer;

/// The endpoint path.
pub const PATH: &str = "/mcp";
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// Why the HTTP listener could not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot listen for HTTP on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot keep the HTTP token in {path}: {source}")]
    Token {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// What every HTTP request handler shares.
struct Shared {
    sessions: Sessions,
    /// The tools' schemas, for checking `Mcp-Param-*` headers.
    catalog: tokio::sync::watch::Receiver<Arc<crate::registry::Catalog>>,
    max_body: usize,
}

/// Binds the listener's address; done before the daemon reports ready.
pub async fn bind(cfg: &HttpListen) -> Result<TcpListener, HttpError> {
    TcpListener::bind(cfg.addr)
        .await
        .map_err(|source| HttpError::Bind {
            addr: cfg.addr,
            source,
        })
}

/// Serves HTTP agents until `shutdown` fires. Agent connections run in `tracker`, like
/// socket agents, and drain the same way. `also` serves every other path (the
/// dashboard's pages, behind their own guard) instead of a 404.
pub async fn run(
    listener: TcpListener,
    cfg: HttpListen,
    token: Option<crate::config::Secret>,
    (ctx, also): (AgentContext, Option<Router>),
    tracker: TaskTracker,
    shutdown: CancellationToken,
) {
    let max_body = ctx.max_line;
    let max_sessions = ctx.daemon.max_agents;
    let limits = crate::http_accept::Limits {
        name: "HTTP listener (daemon.http_max_connections)",
        max_connections: cfg.max_connections,
        header_timeout: cfg.header_timeout,
    };
    let gate = security::Gate::new(security::Policy::new(&cfg, token));
    let shared = Arc::new(Shared {
        catalog: ctx.catalog.clone(),
        sessions: Sessions::spawn(ctx, tracker, shutdown.clone(), max_sessions),
        max_body,
    });
    let mcp = Router::new()
        .route(PATH, axum::routing::post(post).get(get).delete(delete))
        .with_state(shared)
        // Outermost first. The gate sees only the head; the body limit is mcpd's own
        // message limit (checked again in `post` with a JSON-RPC error), not axum's
        // smaller default.
        .layer(
            ServiceBuilder::new()
                .layer(ValidateRequestHeaderLayer::custom(gate))
                .layer(axum::extract::DefaultBodyLimit::max(
                    max_body.saturating_add(1),
                )),
        );
    // Layered before the fallback is set, so the token and the limits above are the MCP
    // path's alone, and the fallback has only its own.
    let app = match also {
        Some(pages) => mcp.fallback_service(pages),
        None => mcp.fallback(not_found),
    };
    crate::http_accept::serve(listener, app, limits, shutdown).await;
}

async fn not_found() -> Response {
    plain(
        StatusCode::NOT_FOUND,
        "mcpd serves MCP at /mcp only".to_owned(),
    )
}

async fn post(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    // A body over the limit is refused while it is read (the layer in `run`), never
    // buffered whole.
    let too_large = || {
        let mut r = rpc_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            crate::errors::AgentError::MessageTooLarge(shared.max_body).to_error_object(),
        );
        // The rest of the body is never read, so the connection closes after this
        // answer: said so, the client sends its next request on a new one instead of
        // losing it on this one.
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        r
    };
    let body = match body {
        Ok(b) if b.len() > shared.max_body => return too_large(),
        Ok(b) => b,
        Err(r) if r.status() == StatusCode::PAYLOAD_TOO_LARGE => return too_large(),
        Err(r) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                EdgeError::UnreadableBody(r.body_text()).to_error_object(),
            );
        }
    };
    let message: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                EdgeError::NotJson(e.to_string()).to_error_object(),
            );
        }
    };
    let kind = match stateless::kind(&message) {
        Ok(k) => k,
        Err(e) => return rpc_error(StatusCode::BAD_REQUEST, e),
    };
    let version = header_str(&headers, VERSION_HEADER);
    if stateless::is_modern(&message, version) {
        let message = Inbound::new(message, &body);
        return stateless(&shared, &headers, message, kind, remote).await;
    }
    let sse = accepts_sse(&headers);
    let is_initialize = message.get("method").and_then(Value::as_str)
        == Some(mcpd_wire::protocol::method::INITIALIZE);
    let (relay, new_session) = if is_initialize {
        match shared.sessions.open(remote).await {
            Some((id, relay)) => (relay, Some(id)),
            None => {
                return plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "mcpd serves as many HTTP sessions as daemon.max_agents allows; end one (DELETE) and retry".to_owned(),
                );
            }
        }
    } else {
        let Some(id) = header_str(&headers, SESSION_HEADER) else {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                EdgeError::NoSessionHeader.to_error_object(),
            );
        };
        match shared.sessions.find(id).await {
            Some(relay) => (relay, None),
            None => return session_not_found(),
        }
    };
    let Some(posted) = relay.post(vec![Inbound::new(message, &body)], sse).await else {
        return session_not_found();
    };
    let mut response = answer(posted, Era::Legacy, sse).await;
    if let Some(id) = new_session
        && let Ok(v) = HeaderValue::from_str(&id)
    {
        response.headers_mut().insert(SESSION_HEADER, v);
    }
    response
}

/// A 2026-07-28 request: no session; checked headers; the shared stateless connection.
async fn stateless(
    shared: &Shared,
    headers: &HeaderMap,
    inbound: Inbound,
    kind: stateless::MessageKind,
    remote: SocketAddr,
) -> Response {
    let message = &inbound.value;
    match kind {
        stateless::MessageKind::Response => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                EdgeError::StatelessResponse.to_error_object(),
            );
        }
        // No client notification means anything over stateless HTTP (closing the
        // response stream is the cancellation).
        stateless::MessageKind::Notification => return StatusCode::ACCEPTED.into_response(),
        stateless::MessageKind::Request => {}
    }
    let id = message.get("id").and_then(Id::from_value);
    // Stateless requests share one connection: a profile chosen there would be chosen
    // for every stateless client.
    if message.get("method").and_then(Value::as_str) == Some("mcpd/profile") {
        let e = EdgeError::StatelessProfile.to_error_object();
        return rpc_error_for(StatusCode::BAD_REQUEST, id.as_ref(), e);
    }
    if let Some(e) = stateless::removed_method(message) {
        return rpc_error_for(StatusCode::NOT_FOUND, id.as_ref(), e);
    }
    if let Err((status, e)) = stateless::check_headers(headers, message) {
        return rpc_error_for(status, id.as_ref(), e);
    }
    let checked = stateless::check_param_headers(headers, message, &shared.catalog.borrow());
    if let Err(e) = checked {
        return rpc_error_for(StatusCode::BAD_REQUEST, id.as_ref(), e);
    }
    let Some(relay) = shared.sessions.stateless(remote).await else {
        return plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "mcpd is shutting down".into(),
        );
    };
    let sse = accepts_sse(headers);
    match relay.post(vec![inbound], sse).await {
        Some(posted) => answer(posted, Era::Modern, sse).await,
        None => plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "mcpd is shutting down".to_owned(),
        ),
    }
}

/// Turns what the relay gave a POST into the HTTP response: 202; an SSE stream when the
/// client accepts one; JSON otherwise, and for a stateless error whose HTTP status
/// must say what went wrong (the status is sent before the body).
async fn answer(posted: Posted, era: Era, sse: bool) -> Response {
    let (mut rx, guard) = match posted {
        Posted::Accepted => return StatusCode::ACCEPTED.into_response(),
        Posted::Unavailable(why) => return plain(StatusCode::SERVICE_UNAVAILABLE, why.into()),
        Posted::Stream { rx, guard } => (rx, guard),
    };
    // While this waits, `guard` is held: a client that disconnects drops this future
    // and with it the guard, which cancels the request upstream.
    let Some(first) = rx.recv().await else {
        return rpc_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            EdgeError::ConnectionEnded.to_error_object(),
        );
    };
    if first.last {
        let status = if era == Era::Modern {
            stateless::status_of(&first.line)
        } else {
            StatusCode::OK
        };
        if !sse || status != StatusCode::OK {
            drop(guard);
            return json_response(status, first.line);
        }
    }
    sse::response(first, rx, guard)
}

async fn get(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if header_str(&headers, VERSION_HEADER).is_some_and(stateless::is_modern_version) {
        return method_not_allowed("2026-07-28 has no GET stream; use POST");
    }
    let Some(id) = header_str(&headers, SESSION_HEADER) else {
        return method_not_allowed(
            "GET needs an Mcp-Session-Id from initialize (2026-07-28 has no GET stream)",
        );
    };
    if !accepts_sse(&headers) {
        return plain(
            StatusCode::NOT_ACCEPTABLE,
            "the GET stream is text/event-stream; send Accept: text/event-stream".to_owned(),
        );
    }
    let Some(relay) = shared.sessions.find(id).await else {
        return session_not_found();
    };
    match relay.listen().await {
        None => session_not_found(),
        Some(None) => plain(
            StatusCode::CONFLICT,
            "this session already has a GET stream open".to_owned(),
        ),
        Some(Some(rx)) => sse::listen_response(rx),
    }
}

async fn delete(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if header_str(&headers, VERSION_HEADER).is_some_and(stateless::is_modern_version) {
        return method_not_allowed("2026-07-28 has no sessions to delete");
    }
    let Some(id) = header_str(&headers, SESSION_HEADER) else {
        return method_not_allowed("DELETE needs an Mcp-Session-Id");
    };
    match shared.sessions.find(id).await {
        Some(relay) => {
            relay.close().await;
            shared.sessions.forget(id).await;
            StatusCode::NO_CONTENT.into_response()
        }
        None => session_not_found(),
    }
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn accepts_sse(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream") || v.contains("*/*"))
}

fn session_not_found() -> Response {
    rpc_error(
        StatusCode::NOT_FOUND,
        EdgeError::UnknownSession.to_error_object(),
    )
}

fn method_not_allowed(why: &str) -> Response {
    let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, why.to_owned());
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    r
}

fn json_response(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(body),
    )
        .into_response()
}

/// A JSON-RPC error with no id, for requests refused before their id is known.
fn rpc_error(status: StatusCode, e: ErrorObject) -> Response {
    json_response(status, jsonrpc::error_line(None, &e))
}

/// A JSON-RPC error answering request `id`, refused before reaching a connection.
fn rpc_error_for(status: StatusCode, id: Option<&Id>, e: ErrorObject) -> Response {
    json_response(status, jsonrpc::error_line(id, &e))
}

fn plain(status: StatusCode, text: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        text,
    )
        .into_response()
}
