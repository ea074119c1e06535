//! Server-sent events on the wire: the streaming response body, event framing with optional ids,
//! and the task that keeps a server-initiated stream (GET, 2024-11-05 session stream or modern
//! listen stream) open.

use super::state::{History, ListenerKind, Shared, StreamKind};
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use serde_json::Value;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio_util::sync::CancellationToken;

/// How often an idle server-initiated stream sends a `: keepalive` comment.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// The writing end of one SSE response. Dropping every clone of it ends the response body.
pub(super) struct SseWriter {
    shared: Arc<Shared>,
    tx: UnboundedSender<Bytes>,
    /// The stream number the event ids name (`<stream>-<seq>`); None when events carry no ids.
    stream: Option<u64>,
}

impl SseWriter {
    /// A new SSE response. Its events carry ids (recorded for replay) when the fixture's
    /// `event_ids` option is on and `ids` says which session and kind of stream it is.
    /// Sends the `retry` field first when the options ask for one.
    pub fn open(shared: &Arc<Shared>, ids: Option<(&str, StreamKind)>) -> (SseWriter, Response) {
        let stream = match ids {
            Some((session, kind)) if shared.opts.event_ids => {
                let mut inner = shared.lock();
                let n = inner.next_number();
                let history = History {
                    session: session.to_owned(),
                    kind,
                    events: Vec::new(),
                };
                inner.history.insert(n, history);
                Some(n)
            }
            _ => None,
        };
        Self::with_stream(shared, stream)
    }

    /// A response that continues stream `stream` (already in the history) after a `Last-Event-ID`.
    pub fn resume(shared: &Arc<Shared>, stream: u64) -> (SseWriter, Response) {
        Self::with_stream(shared, Some(stream))
    }

    fn with_stream(shared: &Arc<Shared>, stream: Option<u64>) -> (SseWriter, Response) {
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = SseWriter {
            shared: shared.clone(),
            tx,
            stream,
        };
        if let Some(ms) = shared.opts.retry_ms {
            writer.raw(format!("retry: {ms}\n\n"));
        }
        (writer, response(rx))
    }

    /// The priming event of SEP-1699: an id and empty data. Nothing when events carry no ids.
    pub fn prime(&self) {
        if let Some(id) = self.record(String::new()) {
            self.raw(format!("id: {id}\ndata: \n\n"));
        }
    }

    /// Sends `msg` as a `message` event; false when the client has gone away.
    pub fn message(&self, msg: &Value) -> bool {
        let data = msg.to_string();
        match self.record(data.clone()) {
            Some(id) => self.raw(format!("id: {id}\nevent: message\ndata: {data}\n\n")),
            None => self.raw(format!("event: message\ndata: {data}\n\n")),
        }
    }

    /// Records `msg` as the stream's next event without sending it, so only a replay delivers it.
    pub fn hold_back(&self, msg: &Value) {
        let _ = self.record(msg.to_string());
    }

    /// Sends the recorded events of this stream that come after sequence number `after`.
    pub fn replay(&self, after: u64) {
        let Some(stream) = self.stream else { return };
        let events: Vec<(usize, String)> = match self.shared.lock().history.get(&stream) {
            Some(h) => h.events.iter().cloned().enumerate().collect(),
            None => return,
        };
        for (seq, data) in events.into_iter().skip(after as usize + 1) {
            if !data.is_empty() {
                self.raw(format!(
                    "id: {stream}-{seq}\nevent: message\ndata: {data}\n\n"
                ));
            }
        }
    }

    /// Sends an event with a name other than `message` (the 2024-11-05 `endpoint` event).
    pub fn event(&self, name: &str, data: &str) -> bool {
        self.raw(format!("event: {name}\ndata: {data}\n\n"))
    }

    pub fn comment(&self, text: &str) -> bool {
        self.raw(format!(": {text}\n\n"))
    }

    /// Resolves when the client has gone away (the response body was dropped).
    pub async fn closed(&self) {
        self.tx.closed().await
    }

    fn raw(&self, frame: String) -> bool {
        self.tx.send(Bytes::from(frame)).is_ok()
    }

    /// Appends `data` to this stream's history; returns its event id.
    fn record(&self, data: String) -> Option<String> {
        let stream = self.stream?;
        let mut inner = self.shared.lock();
        let events = &mut inner.history.get_mut(&stream)?.events;
        events.push(data);
        Some(format!("{stream}-{}", events.len() - 1))
    }
}

/// Parses a `Last-Event-ID` of this fixture's form into (stream, sequence number).
pub(super) fn parse_event_id(id: &str) -> Option<(u64, u64)> {
    let (stream, seq) = id.split_once('-')?;
    Some((stream.parse().ok()?, seq.parse().ok()?))
}

/// A 200 `text/event-stream` response whose body is whatever arrives on `rx`, ending when every
/// sender is gone.
fn response(rx: UnboundedReceiver<Bytes>) -> Response {
    let chunks = futures::stream::unfold(rx, |mut rx| async move {
        let chunk = rx.recv().await?;
        Some((Ok::<Bytes, Infallible>(chunk), rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(chunks))
        .expect("static response parts are valid")
}

/// Registers a server-initiated stream and spawns the task that feeds it: messages from the
/// listener's queue, keepalive comments, until the server closes it, the client goes away or
/// the fixture stops. Returns the queue's sender.
pub(super) fn spawn_listener(
    shared: &Arc<Shared>,
    writer: SseWriter,
    session: &str,
    kind: ListenerKind,
) -> UnboundedSender<Value> {
    let (out, out_rx) = mpsc::unbounded_channel();
    let close = CancellationToken::new();
    let number = {
        let mut inner = shared.lock();
        match kind {
            ListenerKind::Get | ListenerKind::Legacy => inner.stats.get_streams_opened += 1,
            ListenerKind::Listen { .. } => inner.stats.listens_opened += 1,
        }
        let number = inner.next_number();
        let listener = super::state::Listener {
            session: session.to_owned(),
            out: out.clone(),
            close: close.clone(),
            kind,
        };
        inner.listeners.insert(number, listener);
        number
    };
    tokio::spawn(run_listener(shared.clone(), writer, out_rx, close, number));
    out
}

async fn run_listener(
    shared: Arc<Shared>,
    writer: SseWriter,
    mut out: UnboundedReceiver<Value>,
    close: CancellationToken,
    number: u64,
) {
    let start = tokio::time::Instant::now() + KEEPALIVE;
    let mut keepalive = tokio::time::interval_at(start, KEEPALIVE);
    loop {
        tokio::select! {
            _ = shared.shutdown.cancelled() => break,
            _ = close.cancelled() => break,
            _ = writer.closed() => break,
            msg = out.recv() => match msg {
                Some(msg) if writer.message(&msg) => {}
                _ => break,
            },
            _ = keepalive.tick() => {
                if !writer.comment("keepalive") {
                    break;
                }
            }
        }
    }
    // The server may already have forgotten this listener (drop_get_streams, DELETE).
    shared.lock().listeners.remove(&number);
}
