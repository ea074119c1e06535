//! The 2024-11-05 HTTP+SSE transport: GET `/mcp` opens the session stream, which starts with
//! an `endpoint` event; POST `/messages?session=<id>` is answered 202 and the response goes on
//! the stream.

use super::http::{
    accepted, accepts, caller, failure, json_body, note_protocol_header, parse, plain,
};
use super::rpc::{self, Message, Request};
use super::sse::{self, SseWriter};
use super::state::{ListenerKind, Shared, new_session_id};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;

/// GET `/mcp`: a new session, whose stream stays open for as long as the session lives.
pub(super) fn open(shared: &Arc<Shared>, headers: &HeaderMap) -> Response {
    if !accepts(headers, &["text/event-stream"]) {
        return plain(
            StatusCode::NOT_ACCEPTABLE,
            "Accept must name text/event-stream",
        );
    }
    let session = new_session_id();
    shared.lock().stats.sessions_issued.push(session.clone());
    // This transport has no resumability, so its events never carry ids.
    let (writer, resp) = SseWriter::open(shared, None);
    writer.event("endpoint", &format!("/messages?session={session}"));
    sse::spawn_listener(shared, writer, &session, ListenerKind::Legacy);
    resp
}

/// POST `/messages?session=<id>`: one JSON-RPC message for an open session.
pub(super) async fn post(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !shared.opts.legacy_sse {
        return plain(StatusCode::NOT_FOUND, "no such endpoint");
    }
    if let Some(status) = shared.opts.fail_status {
        return failure(status);
    }
    let session = query.get("session").cloned().unwrap_or_default();
    let Some(out) = shared.lock().legacy_out(&session) else {
        return plain(StatusCode::NOT_FOUND, "unknown or expired session");
    };
    let msg = match parse(&body) {
        Ok(msg) => msg,
        Err(resp) => return *resp,
    };
    match rpc::classify(&msg) {
        Message::Request { id, method, params } => {
            if method == "initialize" {
                shared.lock().stats.initializes += 1;
            } else {
                note_protocol_header(&shared, &headers);
            }
            let req = Request {
                session,
                id,
                method,
                params,
                caller: caller(&headers),
            };
            rpc::spawn_on_stream(shared.clone(), out, req);
            accepted()
        }
        Message::Notification { method, params } => {
            note_protocol_header(&shared, &headers);
            rpc::notification(&shared, &session, &method, &params);
            accepted()
        }
        Message::Response => accepted(),
        Message::Invalid => {
            let err = rpc::error_without_id(-32600, "not a JSON-RPC message");
            json_body(StatusCode::BAD_REQUEST, &err)
        }
    }
}
