//! Server-sent-event response bodies: a POST's stream (the messages about its request, then the reply) and a session's GET stream, with keep-alive comments.

use super::relay::{Item, StreamGuard};
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::mpsc;

/// How often an idle stream gets a comment line, so proxies and clients keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// A POST's stream, starting with `first`. The stream ends after the reply (its sender
/// is dropped); `guard` goes with the body, so a client that disconnects cancels what is
/// still unanswered.
pub fn response(first: Item, rx: mpsc::Receiver<Item>, guard: StreamGuard) -> Response {
    respond(Some(first), rx, Some(guard))
}

/// A session's GET stream: messages not about any one request.
pub fn listen_response(rx: mpsc::Receiver<Item>) -> Response {
    respond(None, rx, None)
}

fn respond(first: Option<Item>, rx: mpsc::Receiver<Item>, guard: Option<StreamGuard>) -> Response {
    struct State {
        first: Option<Item>,
        rx: mpsc::Receiver<Item>,
        _guard: Option<StreamGuard>,
        tick: tokio::time::Interval,
    }
    let mut tick = tokio::time::interval(KEEP_ALIVE);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.reset();
    let state = State {
        first,
        rx,
        _guard: guard,
        tick,
    };
    let events = futures::stream::unfold(state, |mut s| async move {
        if let Some(item) = s.first.take() {
            return Some((Ok::<_, Infallible>(event(&item.line)), s));
        }
        tokio::select! {
            item = s.rx.recv() => {
                let item = item?;
                Some((Ok(event(&item.line)), s))
            }
            _ = s.tick.tick() => Some((Ok(Bytes::from_static(b": keep-alive\n\n")), s)),
        }
    });
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        Body::from_stream(events),
    )
        .into_response()
}

/// One SSE event carrying one JSON-RPC message. Serialised JSON has no raw newlines,
/// so one `data:` line holds it.
fn event(line: &str) -> Bytes {
    let mut b = Vec::with_capacity(line.len() + 24);
    b.extend_from_slice(b"event: message\ndata: ");
    b.extend_from_slice(line.as_bytes());
    b.extend_from_slice(b"\n\n");
    Bytes::from(b)
}
