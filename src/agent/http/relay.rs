//! The actor between HTTP requests and one agent connection.
//!
//! It feeds POSTed messages to the connection and puts each outgoing message on the
//! response stream it belongs to.
//!
//! An HTTP agent is served by the same connection actor as a socket agent
//! (`conn::run`); only the transport differs. The relay owns the transport side: the
//! connection's inbound frames and its outbound queue. Each POST that carries requests
//! gets a stream of its own; the replies and the messages about those requests (progress,
//! logs, tagged by the connection) go on it, and the stream ends after the last reply.
//! Everything else goes on the session's GET stream when one is open.
//!
//! Two kinds of relay exist: one per legacy session (`Mcp-Session-Id`), where request
//! ids are the client's own, and one shared by all stateless 2026-07-28 requests, where
//! ids are renamed to `h<N>` on the way in and restored on the way out, since unrelated
//! clients may use the same ids at once.

use super::wire::{Peek, restore_id, restore_subscription};
use mcpd_runtime::budget::{Charge, Charged};
use mcpd_runtime::framing::Frame;
use mcpd_runtime::outbox::Out;
use mcpd_wire::jsonrpc::{self, Id};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// Messages queued on one response stream before its client counts as not reading.
const STREAM_QUEUE: usize = 256;
/// Requests to the relay queued at once.
const MAILBOX: usize = 64;
/// A session with no open stream and no request for this long is closed.
pub const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);

/// One message on a response stream; `last` marks the final reply of a POST's stream.
#[derive(Debug)]
pub struct Item {
    pub line: String,
    pub last: bool,
    /// The message's share of its connection's byte budget, given back once written.
    pub _charge: Charge,
}

/// One POSTed message: as values, and as the client's text when it can go on as is.
pub struct Inbound {
    pub value: Value,
    /// The body's text when it is one line (JSON-RPC over the connection is one message
    /// a line): the message goes on as the client wrote it (a stateless request with its
    /// id renamed in the text), so a `tools/call`'s arguments reach the server unchanged,
    /// as a socket agent's do (`agent/params.rs`).
    pub text: Option<String>,
}

impl Inbound {
    /// `value`, parsed from `body`: the text is kept when it is valid UTF-8 (it is, when
    /// serde_json read it) with no line break (JSON allows them between tokens).
    pub fn new(value: Value, body: &[u8]) -> Inbound {
        let text = std::str::from_utf8(body)
            .ok()
            .filter(|t| memchr::memchr2(b'\n', b'\r', t.as_bytes()).is_none())
            .map(str::to_owned);
        Inbound { value, text }
    }
}

/// What a POST gets back.
pub enum Posted {
    /// The body had no request: `202 Accepted`.
    Accepted,
    /// The messages for the POST's requests, ending after the last reply. `guard`
    /// tells the relay when the client stops listening, which cancels what is left.
    Stream {
        rx: mpsc::Receiver<Item>,
        guard: StreamGuard,
    },
    /// The connection is gone or too busy.
    Unavailable(&'static str),
}

/// Dropped when the HTTP response (or the wait for it) ends; tells the relay.
pub struct StreamGuard {
    stream: u64,
    closed: mpsc::UnboundedSender<u64>,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        // The relay may be gone already; then there is nothing to cancel.
        let _ = self.closed.send(self.stream);
    }
}

enum Msg {
    Post {
        messages: Vec<Inbound>,
        /// The client accepts an SSE stream, so messages about its requests may go there.
        sse: bool,
        reply: oneshot::Sender<Posted>,
    },
    Listen {
        reply: oneshot::Sender<Option<mpsc::Receiver<Item>>>,
    },
    Close,
}

/// The cloneable way to a relay.
#[derive(Clone)]
pub struct RelayHandle {
    tx: mpsc::Sender<Msg>,
}

impl RelayHandle {
    /// Sends a POST's messages; None when the relay has ended.
    pub async fn post(&self, messages: Vec<Inbound>, sse: bool) -> Option<Posted> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Msg::Post {
                messages,
                sse,
                reply,
            })
            .await
            .ok()?;
        rx.await.ok()
    }

    /// Opens the GET stream; Some(None) when one is open already, None when the relay
    /// has ended.
    pub async fn listen(&self) -> Option<Option<mpsc::Receiver<Item>>> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Msg::Listen { reply }).await.ok()?;
        rx.await.ok()
    }

    /// Ends the session (DELETE): the connection closes and its calls are cancelled.
    pub async fn close(&self) {
        // An ended relay is already closed.
        let _ = self.tx.send(Msg::Close).await;
    }

    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// One open response stream.
struct Stream {
    tx: mpsc::Sender<Item>,
    /// Its requests not yet answered, by the id the connection knows.
    waiting: Vec<Id>,
    sse: bool,
}

/// Who asked: the stream and the client's own id.
struct Owner {
    stream: u64,
    original: Id,
}

pub struct Relay {
    /// Rename request ids (the shared stateless relay).
    rename: bool,
    frames: mpsc::Sender<Frame>,
    out: mpsc::Receiver<Charged<Out>>,
    mailbox: mpsc::Receiver<Msg>,
    closed_tx: mpsc::UnboundedSender<u64>,
    closed_rx: mpsc::UnboundedReceiver<u64>,
    streams: HashMap<u64, Stream>,
    owners: HashMap<Id, Owner>,
    listen: Option<mpsc::Sender<Item>>,
    next_stream: u64,
    next_id: u64,
    bytes: u64,
    last_active: Instant,
    agent: u64,
}

impl Relay {
    /// A relay for a connection reading `frames` and writing `out`.
    pub fn new(
        agent: u64,
        rename: bool,
        frames: mpsc::Sender<Frame>,
        out: mpsc::Receiver<Charged<Out>>,
    ) -> (Relay, RelayHandle) {
        let (tx, mailbox) = mpsc::channel(MAILBOX);
        // Unbounded, but each stream sends at most one message here, and the open
        // streams are bounded by the connection's in-flight limit.
        let (closed_tx, closed_rx) = mpsc::unbounded_channel();
        (
            Relay {
                rename,
                frames,
                out,
                mailbox,
                closed_tx,
                closed_rx,
                streams: HashMap::new(),
                owners: HashMap::new(),
                listen: None,
                next_stream: 0,
                next_id: 0,
                bytes: 0,
                last_active: Instant::now(),
                agent,
            },
            RelayHandle { tx },
        )
    }

    /// Runs until the connection ends; returns the bytes written to clients.
    pub async fn run(mut self, idle: Option<Duration>) -> std::io::Result<u64> {
        let mut open = true;
        loop {
            let idle_at = match idle {
                Some(d) if open && self.streams.is_empty() && self.listen.is_none() => {
                    Some(self.last_active + d)
                }
                _ => None,
            };
            tokio::select! {
                out = self.out.recv() => match out {
                    Some(out) => self.route(out),
                    // The connection has ended and dropped its queue.
                    None => break,
                },
                Some(n) = self.closed_rx.recv() => self.stream_closed(n),
                msg = self.mailbox.recv(), if open => match msg {
                    Some(Msg::Post { messages, sse, reply }) => {
                        self.last_active = Instant::now();
                        let posted = self.post(messages, sse);
                        let _ = reply.send(posted); // the client may have gone
                    }
                    Some(Msg::Listen { reply }) => {
                        self.last_active = Instant::now();
                        let _ = reply.send(self.open_listen()); // the client may have gone
                    }
                    Some(Msg::Close) | None => {
                        open = false;
                        self.close_input();
                    }
                },
                () = sleep_until(idle_at) => {
                    tracing::info!(agent = self.agent, "closing an idle HTTP session");
                    open = false;
                    self.close_input();
                }
            }
        }
        Ok(self.bytes)
    }

    /// Ends the connection's input: it then closes and cancels what is in flight.
    fn close_input(&mut self) {
        let (dead, _) = mpsc::channel(1);
        self.frames = dead;
        self.mailbox.close();
    }

    fn post(&mut self, messages: Vec<Inbound>, sse: bool) -> Posted {
        let mut lines = Vec::with_capacity(messages.len());
        let mut waiting = Vec::new();
        let stream = self.next_stream + 1;
        let mut owners = Vec::new();
        for Inbound { value: mut m, text } in messages {
            let mut text = text;
            let is_request = m.get("method").is_some() && m.get("id").is_some();
            if is_request && let Some(original) = m.get("id").and_then(Id::from_value) {
                let id = if self.rename {
                    self.next_id += 1;
                    let renamed = Id::Str(format!("h{}", self.next_id));
                    // The client's text with the new id, else the values with it.
                    text = text.and_then(|t| jsonrpc::with_id(&t, &renamed));
                    if text.is_none() {
                        jsonrpc::set_member(&mut m, "id", renamed.to_value());
                    }
                    renamed
                } else {
                    original.clone()
                };
                waiting.push(id.clone());
                owners.push((id, Owner { stream, original }));
            }
            lines.push(text.unwrap_or_else(|| m.to_string()));
        }
        let permits = match self.frames.try_reserve_many(lines.len().max(1)) {
            Ok(p) => p,
            Err(mpsc::error::TrySendError::Full(())) => {
                return Posted::Unavailable("the agent connection is busy; retry shortly");
            }
            Err(mpsc::error::TrySendError::Closed(())) => {
                return Posted::Unavailable("the session has ended");
            }
        };
        for (permit, line) in permits.zip(lines) {
            permit.send(Frame::Line(line));
        }
        if waiting.is_empty() {
            return Posted::Accepted;
        }
        self.next_stream = stream;
        for (id, owner) in owners {
            self.owners.insert(id, owner);
        }
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        self.streams.insert(stream, Stream { tx, waiting, sse });
        Posted::Stream {
            rx,
            guard: StreamGuard {
                stream,
                closed: self.closed_tx.clone(),
            },
        }
    }

    fn open_listen(&mut self) -> Option<mpsc::Receiver<Item>> {
        if self.listen.as_ref().is_some_and(|l| !l.is_closed()) {
            return None;
        }
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        self.listen = Some(tx);
        Some(rx)
    }

    /// Puts one outgoing message on the stream it belongs to.
    fn route(&mut self, out: Charged<Out>) {
        // The message's bytes stay charged to the connection's budget until a response
        // stream has written it.
        let (out, charge) = out.split();
        let peek = Peek::of(&out.line);
        if peek.is_response {
            let Some(id) = peek.id.or(out.about) else {
                return;
            };
            let Some(owner) = self.owners.remove(&id) else {
                tracing::debug!(agent = self.agent, rpc_id = %id, "dropped a reply whose client stopped listening");
                return;
            };
            let line = if self.rename {
                restore_id(out.line, &owner.original)
            } else {
                out.line
            };
            let done = match self.streams.get_mut(&owner.stream) {
                Some(s) => {
                    s.waiting.retain(|w| *w != id);
                    let last = s.waiting.is_empty();
                    if !send(&s.tx, (line, charge), last, &mut self.bytes) {
                        tracing::warn!(
                            agent = self.agent,
                            "an HTTP client is not reading its response stream"
                        );
                    }
                    s.waiting.is_empty()
                }
                None => false,
            };
            if done {
                // The last reply: the stream ends once its queue is read.
                self.streams.remove(&owner.stream);
            }
            return;
        }
        // A notification, or a request of mcpd's (a server asking for input).
        let owned = out
            .about
            .as_ref()
            .and_then(|id| self.owners.get(id))
            .map(|o| o.stream)
            .filter(|s| self.streams.get(s).is_some_and(|s| s.sse));
        let target = owned.or_else(|| {
            if !peek.is_request {
                return None;
            }
            // A server's request during a call: where its call's stream is unknown, the
            // only open stream is the best guess, then the GET stream, then the newest.
            // Stream numbers grow, so the newest has the largest.
            let sse: Vec<u64> = self
                .streams
                .iter()
                .filter(|(_, s)| s.sse)
                .map(|(n, _)| *n)
                .collect();
            if sse.len() == 1 || self.listen.is_none() {
                sse.into_iter().max()
            } else {
                None
            }
        });
        // Progress tokens are the client's own; a subscription's notifications name it
        // by its request id, which was renamed.
        let line = match (&out.about, self.rename) {
            (Some(id), true)
                if out
                    .line
                    .contains(mcpd_wire::protocol::era::key::SUBSCRIPTION_ID) =>
            {
                match self.owners.get(id) {
                    Some(o) => restore_subscription(out.line, &o.original),
                    None => out.line,
                }
            }
            _ => out.line,
        };
        match target.and_then(|t| self.streams.get(&t)) {
            Some(s) => {
                send(&s.tx, (line, charge), false, &mut self.bytes);
            }
            None => match &self.listen {
                Some(l) if !l.is_closed() => {
                    if !send(l, (line, charge), false, &mut self.bytes) {
                        tracing::debug!(
                            agent = self.agent,
                            "dropped a message for a full GET stream"
                        );
                    }
                }
                _ => tracing::debug!(
                    agent = self.agent,
                    "dropped a message with no stream to carry it (no GET stream is open)"
                ),
            },
        }
    }

    /// A client stopped listening: its unanswered requests are cancelled upstream.
    fn stream_closed(&mut self, n: u64) {
        let Some(stream) = self.streams.remove(&n) else {
            return;
        };
        for id in stream.waiting {
            self.owners.remove(&id);
            let cancel = jsonrpc::notification_line(
                mcpd_wire::protocol::method::CANCELLED,
                Some(&json!({
                    "requestId": id.to_value(),
                    "reason": "the HTTP client closed its response stream",
                })),
            );
            // A full or closed connection: the call ends with the connection anyway.
            let _ = self.frames.try_send(Frame::Line(cancel));
        }
    }
}

/// Queues a line on a stream; false when the client is not reading (the line is lost).
fn send(
    tx: &mpsc::Sender<Item>,
    (line, charge): (String, Charge),
    last: bool,
    bytes: &mut u64,
) -> bool {
    let len = line.len() as u64;
    match tx.try_send(Item {
        line,
        last,
        _charge: charge,
    }) {
        Ok(()) => {
            *bytes += len;
            true
        }
        Err(_) => false,
    }
}

async fn sleep_until(when: Option<Instant>) {
    match when {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
