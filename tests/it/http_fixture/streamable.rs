//! Streamable HTTP (2025-03-26 … 2025-11-25) at `/mcp`: POST answered as JSON or SSE, the GET
//! stream with resumption by `Last-Event-ID`, DELETE, and sessions. In the `modern` option the
//! POSTs go to `modern` and GET and DELETE are refused.

use super::http::{
    Rejection, SESSION_HEADER, accepted, accepts, caller, failure, header_str, json_body,
    note_protocol_header, parse, plain, value,
};
use super::rpc::{self, Message, Outcome, Request};
use super::sse::{self, SseWriter};
use super::state::{ListenerKind, Shared, StreamKind, new_session_id};
use super::{Reply, legacy, modern};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use serde_json::Value;
use std::sync::Arc;

pub(super) async fn post(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if shared.opts.legacy_sse {
        // A client probing for Streamable HTTP falls back to the GET on a 405.
        return plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "this server speaks HTTP+SSE",
        );
    }
    if let Some(status) = shared.opts.fail_status {
        return failure(status);
    }
    if !accepts(&headers, &["application/json", "text/event-stream"]) {
        let why = "Accept must name application/json and text/event-stream";
        return plain(StatusCode::NOT_ACCEPTABLE, why);
    }
    let msg = match parse(&body) {
        Ok(msg) => msg,
        Err(resp) => return *resp,
    };
    if shared.opts.modern {
        return modern::handle(shared, &headers, &msg).await;
    }
    match rpc::classify(&msg) {
        Message::Request { id, method, params } if method == "initialize" => {
            initialize(shared, id, params, caller(&headers)).await
        }
        message => in_session(shared, &headers, message).await,
    }
}

/// Handles a POST other than `initialize`: checks its session, then answers it.
async fn in_session(shared: Arc<Shared>, headers: &HeaderMap, message: Message) -> Response {
    note_protocol_header(&shared, headers);
    let session = match session(&shared, headers) {
        Ok(s) => s,
        Err(resp) => return *resp,
    };
    match message {
        Message::Request { id, method, params } => {
            let req = Request {
                session,
                id,
                method,
                params,
                caller: caller(headers),
            };
            respond(shared, req).await
        }
        Message::Notification { method, params } => {
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

async fn initialize(
    shared: Arc<Shared>,
    id: Value,
    params: Value,
    caller: rpc::Caller,
) -> Response {
    let session = new_session_id();
    {
        let mut inner = shared.lock();
        inner.sessions.insert(session.clone());
        inner.stats.initializes += 1;
        inner.stats.sessions_issued.push(session.clone());
    }
    let req = Request {
        session: session.clone(),
        id,
        method: "initialize".to_owned(),
        params,
        caller,
    };
    let mut resp = respond(shared, req).await;
    resp.headers_mut().insert(SESSION_HEADER, value(&session));
    resp
}

/// Answers a request as the fixture's `reply` option says: one JSON body, or an SSE stream
/// with related notifications before the response (events without ids in the modern era).
pub(super) async fn respond(shared: Arc<Shared>, req: Request) -> Response {
    match shared.opts.reply {
        Reply::Json => {
            let mut watch = DisconnectWatch {
                shared: &shared,
                answered: false,
            };
            let outcome = rpc::answer(&shared, &req, &|_: Value| {}).await;
            watch.answered = true;
            match outcome {
                Outcome::Reply(msg) => json_body(StatusCode::OK, &msg),
                // `drop`, or a cancelled request: a 200 whose body is not a JSON-RPC message.
                Outcome::HoldBack(_) | Outcome::Cancelled => {
                    let mut resp = plain(StatusCode::OK, "");
                    resp.headers_mut()
                        .insert(header::CONTENT_TYPE, value("application/json"));
                    resp
                }
            }
        }
        Reply::Sse => {
            let ids = (!shared.opts.modern).then_some((req.session.as_str(), StreamKind::Request));
            let (writer, resp) = SseWriter::open(&shared, ids);
            writer.prime();
            rpc::spawn_on_stream(shared.clone(), writer, req);
            resp
        }
    }
}

/// Counts a disconnect when a JSON-mode handler is dropped before it answered: hyper drops the
/// handler's future when the client closes the connection.
struct DisconnectWatch<'a> {
    shared: &'a Shared,
    answered: bool,
}

impl Drop for DisconnectWatch<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.shared.count_disconnect();
        }
    }
}

/// The session a request names: missing gives 400, unknown or expired gives 404.
fn session(shared: &Shared, headers: &HeaderMap) -> Result<String, Rejection> {
    let Some(id) = header_str(headers, SESSION_HEADER) else {
        let err = rpc::error_without_id(-32600, "missing session id");
        return Err(Box::new(json_body(StatusCode::BAD_REQUEST, &err)));
    };
    if shared.lock().sessions.contains(&id) {
        Ok(id)
    } else {
        let resp = plain(StatusCode::NOT_FOUND, "unknown or expired session");
        Err(Box::new(resp))
    }
}

pub(super) async fn get(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if shared.opts.modern {
        return modern::no_get_or_delete();
    }
    if shared.opts.legacy_sse {
        return legacy::open(&shared, &headers);
    }
    if !accepts(&headers, &["text/event-stream"]) {
        return plain(
            StatusCode::NOT_ACCEPTABLE,
            "Accept must name text/event-stream",
        );
    }
    let last = header_str(&headers, "last-event-id");
    if last.is_none() && !shared.opts.get_stream {
        return plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "no server-initiated stream here",
        );
    }
    let session = match session(&shared, &headers) {
        Ok(s) => s,
        Err(resp) => return *resp,
    };
    match last {
        Some(last) => resume(&shared, &session, last),
        None => listen(&shared, &session),
    }
}

/// Opens a server-initiated stream for `session`.
fn listen(shared: &Arc<Shared>, session: &str) -> Response {
    let (writer, resp) = SseWriter::open(shared, Some((session, StreamKind::Get)));
    sse::spawn_listener(shared, writer, session, ListenerKind::Get);
    resp
}

/// Replays what came after event `last` on its stream. A request's stream then ends; a GET
/// stream carries on live. An id the fixture does not know opens a fresh GET stream.
fn resume(shared: &Arc<Shared>, session: &str, last: String) -> Response {
    let found = {
        let mut inner = shared.lock();
        inner.stats.last_event_ids.push(last.clone());
        sse::parse_event_id(&last).and_then(|(stream, seq)| {
            let history = inner.history.get(&stream)?;
            (history.session == session).then_some((stream, seq, history.kind))
        })
    };
    match found {
        Some((stream, seq, kind)) => {
            let (writer, resp) = SseWriter::resume(shared, stream);
            writer.replay(seq);
            if kind == StreamKind::Get {
                sse::spawn_listener(shared, writer, session, ListenerKind::Get);
            }
            resp
        }
        None if shared.opts.get_stream => listen(shared, session),
        None => plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "no server-initiated stream here",
        ),
    }
}

pub(super) async fn delete(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if shared.opts.modern {
        return modern::no_get_or_delete();
    }
    if shared.opts.legacy_sse {
        return plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "this server speaks HTTP+SSE",
        );
    }
    let Some(id) = header_str(&headers, SESSION_HEADER) else {
        let err = rpc::error_without_id(-32600, "missing session id");
        return json_body(StatusCode::BAD_REQUEST, &err);
    };
    let mut inner = shared.lock();
    inner.stats.deletes.push(id.clone());
    if inner.sessions.remove(&id) {
        inner.close_listeners(|l| l.session == id);
        plain(StatusCode::OK, "")
    } else {
        plain(StatusCode::NOT_FOUND, "unknown or expired session")
    }
}
