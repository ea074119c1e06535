//! The bounded outbound queue of one agent connection, shared by everything that writes to that agent.

use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A cloneable sender of lines to one agent. Sending never waits: an agent whose queue is
/// full is not reading its socket, and waiting for it would let it stall an upstream or
/// other agents. Instead the first overflow fires `overflowed`, and the agent's actor
/// disconnects it.
#[derive(Clone, Debug)]
pub struct Outbox {
    tx: mpsc::Sender<String>,
    /// Shared behind an `Arc`: an outbox is cloned for every call (and its log route), and
    /// cloning a token takes its tree's lock where an `Arc` takes one atomic add.
    overflowed: Arc<CancellationToken>,
}

impl Outbox {
    pub fn new(capacity: usize) -> (Outbox, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel(capacity);
        (
            Outbox {
                tx,
                overflowed: Arc::new(CancellationToken::new()),
            },
            rx,
        )
    }

    /// Queues a line. Returns false when it was dropped: the agent is gone or not reading.
    pub fn send(&self, line: String) -> bool {
        match self.tx.try_send(line) {
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
    /// the queue free for replies.
    pub fn offer(&self, line: String) -> bool {
        if self.tx.capacity() <= self.tx.max_capacity() / 4 {
            return false;
        }
        self.tx.try_send(line).is_ok()
    }

    /// Fires once the queue has overflowed.
    pub fn overflowed(&self) -> &CancellationToken {
        &self.overflowed
    }
}
