//! JSON-RPC without HTTP: classifying a message, building replies, answering a request (ended
//! early by a cancellation), and answering on a stream in a task of its own.

use super::modern;
use super::sse::SseWriter;
use super::state::Shared;
use super::tools::{self, ToolOutcome};
use serde_json::{Value, json};
use std::future::Future;
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;

/// The protocol versions `initialize` echoes back; any other gets the newest.
const VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
const NEWEST: &str = "2025-11-25";

pub(super) enum Message {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    Response,
    Invalid,
}

/// What kind of JSON-RPC message `msg` is.
pub(super) fn classify(msg: &Value) -> Message {
    let Some(obj) = msg.as_object() else {
        return Message::Invalid;
    };
    let params = obj.get("params").cloned().unwrap_or(Value::Null);
    match (obj.get("method").and_then(Value::as_str), obj.get("id")) {
        (Some(method), Some(id)) => Message::Request {
            id: id.clone(),
            method: method.to_owned(),
            params,
        },
        (Some(method), None) => Message::Notification {
            method: method.to_owned(),
            params,
        },
        (None, Some(_)) if obj.contains_key("result") || obj.contains_key("error") => {
            Message::Response
        }
        _ => Message::Invalid,
    }
}

pub(super) fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub(super) fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// An error body for an HTTP rejection that answers no particular request.
pub(super) fn error_without_id(code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "error": {"code": code, "message": message}})
}

/// Who sent a request, as `whoami` reports it.
#[derive(Clone, Debug, Default)]
pub(super) struct Caller {
    pub authorization: Option<String>,
    pub key: Option<String>,
}

/// One request to answer, with what the transport knew about it.
pub(super) struct Request {
    pub session: String,
    pub id: Value,
    pub method: String,
    pub params: Value,
    pub caller: Caller,
}

pub(super) enum Outcome {
    /// Send this response.
    Reply(Value),
    /// End the stream without a response; this one is delivered only by a replay.
    HoldBack(Value),
    /// A cancellation (or the fixture stopping) ended the request: send nothing.
    Cancelled,
}

/// Answers `req`, sending related notifications through `emit`. Ends early with `Cancelled`
/// when a `notifications/cancelled` names it or the fixture stops.
pub(super) async fn answer(
    shared: &Shared,
    req: &Request,
    emit: &(dyn Fn(Value) + Send + Sync),
) -> Outcome {
    let token = shared.shutdown.child_token();
    let key = (req.session.clone(), req.id.to_string());
    shared.lock().running.insert(key.clone(), token.clone());
    let _running = Running { shared, key };
    tokio::select! {
        outcome = dispatch(shared, req, emit) => outcome,
        _ = token.cancelled() => Outcome::Cancelled,
    }
}

/// Unregisters a running request however its future ends, including by being dropped.
struct Running<'a> {
    shared: &'a Shared,
    key: (String, String),
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.shared.lock().running.remove(&self.key);
    }
}

/// Answers one request. In the modern era (which `modern` has already checked) every result
/// carries `resultType` and the serverInfo `_meta`, and lists carry cache hints.
async fn dispatch(shared: &Shared, req: &Request, emit: &(dyn Fn(Value) + Send + Sync)) -> Outcome {
    let is_modern = shared.opts.modern;
    let complete = |r| {
        if is_modern { modern::decorate(r) } else { r }
    };
    let reply = |r| Outcome::Reply(result(&req.id, complete(r)));
    match req.method.as_str() {
        "initialize" => reply(initialize_result(&req.params)),
        "ping" => reply(json!({})),
        "server/discover" if is_modern => {
            shared.lock().stats.discovers += 1;
            reply(modern::discover_result(shared.opts.ttl_ms))
        }
        "tools/list" => {
            let extras = {
                let mut inner = shared.lock();
                inner.stats.tools_lists += 1;
                inner.extras
            };
            let mut list = json!({"tools": tools::list(extras, is_modern)});
            if is_modern {
                modern::cacheable(&mut list, shared.opts.ttl_ms);
            }
            reply(list)
        }
        "tools/call" => match tools::call(shared, req, emit).await {
            ToolOutcome::Done(r) => reply(r),
            ToolOutcome::Failed(code, message) => Outcome::Reply(error(&req.id, code, &message)),
            ToolOutcome::Dropped => {
                Outcome::HoldBack(result(&req.id, complete(tools::text("resumed"))))
            }
        },
        other => Outcome::Reply(error(
            &req.id,
            -32601,
            &format!("method not found: {other}"),
        )),
    }
}

fn initialize_result(params: &Value) -> Value {
    let asked = params["protocolVersion"].as_str().unwrap_or_default();
    let version = VERSIONS.into_iter().find(|v| *v == asked).unwrap_or(NEWEST);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": true}},
        "serverInfo": {"name": "http-fixture", "version": "1.0.0"},
    })
}

/// Takes note of a notification from the client: a cancellation is recorded and ends the
/// request it names, if that request is still running in `session`.
pub(super) fn notification(shared: &Shared, session: &str, method: &str, params: &Value) {
    if method != "notifications/cancelled" {
        return;
    }
    let mut inner = shared.lock();
    inner.stats.cancelled.push(params.clone());
    if let Some(id) = params.get("requestId")
        && let Some(token) = inner.running.get(&(session.to_owned(), id.to_string()))
    {
        token.cancel();
    }
}

/// Where a request answered on a stream sends its notifications and its response.
pub(super) trait Sink: Send + Sync + 'static {
    /// Sends `msg`; false when the client has gone away.
    fn send(&self, msg: &Value) -> bool;
    /// Keeps `msg` for a replay instead of sending it.
    fn hold_back(&self, msg: &Value);
    /// Resolves when the client has gone away.
    fn closed(&self) -> impl Future<Output = ()> + Send;
}

/// A request's own SSE response stream (Streamable HTTP).
impl Sink for SseWriter {
    fn send(&self, msg: &Value) -> bool {
        self.message(msg)
    }
    fn hold_back(&self, msg: &Value) {
        SseWriter::hold_back(self, msg)
    }
    fn closed(&self) -> impl Future<Output = ()> + Send {
        SseWriter::closed(self)
    }
}

/// The queue of a 2024-11-05 session stream; it has no replay, so a held-back message is lost.
impl Sink for UnboundedSender<Value> {
    fn send(&self, msg: &Value) -> bool {
        UnboundedSender::send(self, msg.clone()).is_ok()
    }
    fn hold_back(&self, _msg: &Value) {}
    fn closed(&self) -> impl Future<Output = ()> + Send {
        UnboundedSender::closed(self)
    }
}

/// Answers `req` on `sink` in a task of its own: related notifications first, then the
/// response. A client that goes away before the answer counts as a disconnect.
pub(super) fn spawn_on_stream<S: Sink>(shared: Arc<Shared>, sink: S, req: Request) {
    tokio::spawn(async move {
        let emit = |msg: Value| {
            // A client that went away is noticed by `closed` below; nothing to do here.
            let _ = sink.send(&msg);
        };
        let outcome = tokio::select! {
            biased;
            outcome = answer(&shared, &req, &emit) => outcome,
            _ = sink.closed() => {
                shared.count_disconnect();
                return;
            }
        };
        match outcome {
            Outcome::Reply(msg) => {
                // The client may have gone away at the last moment; it gets nothing either way.
                let _ = sink.send(&msg);
            }
            Outcome::HoldBack(msg) => sink.hold_back(&msg),
            Outcome::Cancelled => {}
        }
    });
}
