//! Server-sent-event response bodies.
//!
//! A POST's stream (the messages about its request, then the reply) and a session's GET
//! stream, with keep-alive comments.
//!
//! [`event`] is the one event encoder: the dashboard's streams use it too.

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
            return Some((Ok::<_, Infallible>(message(&item.line)), s));
        }
        tokio::select! {
            item = s.rx.recv() => {
                let item = item?;
                Some((Ok(message(&item.line)), s))
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
fn message(line: &str) -> Bytes {
    event("message", line)
}

/// One event: its name and data, each line of the data on a `data:` line (a trailing
/// `\r` of a line dropped). The one encoder of event streams: the HTTP listener's and
/// the dashboard's.
pub(crate) fn event(name: &str, data: &str) -> Bytes {
    let mut out = String::with_capacity(data.len() + name.len() + 24);
    out.push_str("event: ");
    out.push_str(name);
    out.push('\n');
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line.strip_suffix('\r').unwrap_or(line));
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}
