//! The bounded outbound queue of one agent connection.
//!
//! It is shared by everything that writes to that agent.

use crate::budget::{self, Charged, Weigh};
use crate::framing::OutLine;
use mcpd_wire::jsonrpc::Id;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// One queued message to an agent, with the request it belongs to when there is one: the
/// reply to that request, or its progress and log messages. A byte-stream writer ignores
/// `about`; the HTTP listener uses it to put each message on its request's response stream.
#[derive(Debug)]
pub struct Out {
    pub line: String,
    pub about: Option<Id>,
}

impl OutLine for Out {
    fn line(&self) -> Option<&str> {
        Some(&self.line)
    }
}

impl Weigh for Out {
    fn bytes(&self) -> usize {
        self.line.len()
    }
}

/// A cloneable sender of lines to one agent, bounded by a count of messages and by
/// bytes. Sending never waits: an agent whose queue is full is not reading its socket,
/// and waiting for it would let it stall an upstream or other agents. Instead the first
/// overflow fires `overflowed`, and the agent's actor disconnects it.
#[derive(Clone, Debug)]
pub struct Outbox {
    tx: budget::Sender<Out>,
    /// Shared behind an `Arc`: an outbox is cloned for every call (and its log route), and
    /// cloning a token takes its tree's lock where an `Arc` takes one atomic add.
    overflowed: Arc<CancellationToken>,
    /// The request everything sent through this handle belongs to, if any.
    about: Option<Id>,
}

impl Outbox {
    /// A queue of at most `capacity` messages and `bytes` bytes.
    pub fn new(capacity: usize, bytes: usize) -> (Outbox, mpsc::Receiver<Charged<Out>>) {
        let (tx, rx) = budget::channel(capacity, bytes);
        (
            Outbox {
                tx,
                overflowed: Arc::new(CancellationToken::new()),
                about: None,
            },
            rx,
        )
    }

    /// The same queue, with everything sent through the copy marked as belonging to the
    /// agent's request `id`.
    pub fn about(&self, id: &Id) -> Outbox {
        Outbox {
            tx: self.tx.clone(),
            overflowed: self.overflowed.clone(),
            about: Some(id.clone()),
        }
    }

    fn out(&self, line: String) -> Out {
        Out {
            line,
            about: self.about.clone(),
        }
    }

    /// Queues a line. Returns false when it was dropped: the agent is gone or not reading.
    pub fn send(&self, line: String) -> bool {
        self.push(self.out(line))
    }

    /// Queues a message about the agent's request `id`: its reply, or a notification
    /// of a request that stays open (a subscription's).
    pub fn send_about(&self, id: &Id, line: String) -> bool {
        self.push(Out {
            line,
            about: Some(id.clone()),
        })
    }

    fn push(&self, out: Out) -> bool {
        match self.tx.try_send(out) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.overflowed.cancel();
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    /// Queues a line if there is room, and drops it otherwise without counting the agent
    /// as not reading: for best-effort messages such as server logs. Keeps a quarter of
    /// the queue (slots and bytes) free for replies.
    pub fn offer(&self, line: String) -> bool {
        if !self.tx.has_slack() {
            return false;
        }
        self.tx.try_send(self.out(line)).is_ok()
    }

    /// The same queue, held without keeping it open, and not about any request.
    pub fn downgrade(&self) -> WeakOutbox {
        WeakOutbox {
            tx: self.tx.downgrade(),
            overflowed: self.overflowed.clone(),
        }
    }

    /// Fires once the queue has overflowed.
    pub fn overflowed(&self) -> &CancellationToken {
        &self.overflowed
    }

    /// Waits for room for one message of `bytes` bytes; None once the agent's writer has
    /// gone.
    pub async fn reserve(&self, bytes: usize) -> Option<budget::Permit<'_, Out>> {
        self.tx.reserve(bytes).await
    }
}

/// An agent's queue that does not keep the agent's writer running: a message for a task
/// the agent made outlives its calls, and may outlive the connection, which must close as
/// if nothing held its outbox.
#[derive(Clone, Debug)]
pub struct WeakOutbox {
    tx: budget::WeakSender<Out>,
    overflowed: Arc<CancellationToken>,
}

impl WeakOutbox {
    /// The outbox, while the connection is open.
    pub fn upgrade(&self) -> Option<Outbox> {
        Some(Outbox {
            tx: self.tx.upgrade()?,
            overflowed: self.overflowed.clone(),
            about: None,
        })
    }

    /// Whether the connection is still open.
    pub fn is_open(&self) -> bool {
        self.tx.is_open()
    }
}

/// Replies to an agent's own requests that found its queue full, in order. The agent's
/// actor reads no more requests while any wait, and moves them into the queue as room
/// frees: an agent that sends requests faster than mcpd's writer has written the replies
/// is slowed down, not mistaken for one that does not read. Only when none has moved for
/// a while is the agent not reading. At most one reply per request in flight and one for
/// the request just read wait here.
#[derive(Debug, Default)]
pub struct Held {
    replies: VecDeque<Out>,
    /// When the queue last took a held reply, or the first one had to wait.
    since: Option<Instant>,
}

impl Held {
    pub fn is_empty(&self) -> bool {
        self.replies.is_empty()
    }

    /// Queues `out` behind any held replies, or at once if nothing waits and there is room.
    pub fn reply(&mut self, outbox: &Outbox, out: Out) {
        if !self.replies.is_empty() {
            self.replies.push_back(out);
            return;
        }
        match outbox.tx.try_send(out) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(out)) => {
                self.replies.push_back(out);
                self.since = Some(Instant::now());
            }
        }
    }

    /// The size of the oldest held reply: the room the next `release` needs.
    pub fn next_bytes(&self) -> usize {
        self.replies.front().map_or(0, |o| o.line.len())
    }

    /// Moves the oldest held reply into the room `permit` holds.
    pub fn release(&mut self, permit: budget::Permit<'_, Out>) {
        if let Some(out) = self.replies.pop_front() {
            permit.send(out);
        }
        self.since = (!self.replies.is_empty()).then(Instant::now);
    }

    /// When the agent counts as not reading, if no held reply moves before.
    pub fn deadline(&self, stall: Duration) -> Option<Instant> {
        self.since.map(|t| t + stall)
    }

    /// What still waits, for a last try when the connection ends.
    pub fn drain(&mut self) -> impl Iterator<Item = Out> + '_ {
        self.since = None;
        self.replies.drain(..)
    }
}
