//! Queues bounded by bytes as well as by count.
//!
//! Each message is charged against a byte budget, and its bytes come back when the
//! receiver drops it.
//!
//! A queue of 1,024 messages can hold 16 GiB when each may be 16 MiB. Every queue that
//! carries peers' messages (an agent's outbox, a server's stdin) is a `budget::Sender`:
//! sending takes the message's size from a semaphore of bytes, the permit travels with
//! the message, and the receiver gives the bytes back by dropping it once written.

use std::ops::Deref;
use std::sync::Arc;
use tokio::sync::mpsc::error::{SendError, TrySendError};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// How much of a budget a message takes.
pub trait Weigh {
    fn bytes(&self) -> usize;
}

impl Weigh for String {
    fn bytes(&self) -> usize {
        self.len()
    }
}

/// A message's share of a budget, given back when this is dropped.
#[derive(Debug)]
pub struct Charge {
    _permit: OwnedSemaphorePermit,
}

/// A queued message with its share of the budget, given back when this is dropped.
#[derive(Debug)]
pub struct Charged<T> {
    item: T,
    charge: Charge,
}

impl<T> Charged<T> {
    /// The message; its bytes go back to the budget now.
    pub fn into_inner(self) -> T {
        self.item
    }

    /// The message and its charge, for a receiver that queues it again further on: the
    /// bytes stay counted until the charge is dropped.
    pub fn split(self) -> (T, Charge) {
        (self.item, self.charge)
    }
}

impl<T> Deref for Charged<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.item
    }
}

/// The sending side of a queue bounded by `count` messages and `bytes` bytes.
#[derive(Debug)]
pub struct Sender<T> {
    tx: mpsc::Sender<Charged<T>>,
    budget: Arc<Semaphore>,
    total: u32,
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender {
            tx: self.tx.clone(),
            budget: self.budget.clone(),
            total: self.total,
        }
    }
}

/// A queue of at most `count` messages holding at most `bytes` bytes (capped at 4 GiB).
/// One message larger than the whole budget is taken alone, as if it were its size.
pub fn channel<T>(count: usize, bytes: usize) -> (Sender<T>, mpsc::Receiver<Charged<T>>) {
    let total = u32::try_from(bytes).unwrap_or(u32::MAX).max(1);
    let (tx, rx) = mpsc::channel(count.max(1));
    let budget = Arc::new(Semaphore::new(total as usize));
    (Sender { tx, budget, total }, rx)
}

impl<T: Weigh> Sender<T> {
    fn weight(&self, item: &T) -> u32 {
        u32::try_from(item.bytes())
            .unwrap_or(u32::MAX)
            .min(self.total)
    }

    /// Queues `item` if the queue has a free slot and the bytes for it; never waits.
    pub fn try_send(&self, item: T) -> Result<(), TrySendError<T>> {
        let Ok(charge) = self
            .budget
            .clone()
            .try_acquire_many_owned(self.weight(&item))
        else {
            return Err(if self.tx.is_closed() {
                TrySendError::Closed(item)
            } else {
                TrySendError::Full(item)
            });
        };
        self.tx
            .try_send(Charged {
                item,
                charge: Charge { _permit: charge },
            })
            .map_err(|e| match e {
                TrySendError::Full(c) => TrySendError::Full(c.item),
                TrySendError::Closed(c) => TrySendError::Closed(c.item),
            })
    }

    /// Queues `item`, waiting for its bytes and a slot.
    pub async fn send(&self, item: T) -> Result<(), SendError<T>> {
        let weight = self.weight(&item);
        let charge = tokio::select! {
            charge = self.budget.clone().acquire_many_owned(weight) => charge,
            () = self.tx.closed() => return Err(SendError(item)),
        };
        let Ok(charge) = charge else {
            return Err(SendError(item)); // the semaphore is never closed
        };
        self.tx
            .send(Charged {
                item,
                charge: Charge { _permit: charge },
            })
            .await
            .map_err(|SendError(c)| SendError(c.item))
    }
}

/// A sender that does not keep the queue open: a queue's receiver may be waiting for
/// every sender to go (an agent's writer ends that way), and something that only may
/// send later must not hold it open.
#[derive(Debug)]
pub struct WeakSender<T> {
    tx: mpsc::WeakSender<Charged<T>>,
    budget: Arc<Semaphore>,
    total: u32,
}

impl<T> Clone for WeakSender<T> {
    fn clone(&self) -> Self {
        WeakSender {
            tx: self.tx.clone(),
            budget: self.budget.clone(),
            total: self.total,
        }
    }
}

impl<T> Sender<T> {
    pub fn downgrade(&self) -> WeakSender<T> {
        WeakSender {
            tx: self.tx.downgrade(),
            budget: self.budget.clone(),
            total: self.total,
        }
    }
}

impl<T> WeakSender<T> {
    /// The sender again, while some other sender keeps the queue open.
    pub fn upgrade(&self) -> Option<Sender<T>> {
        Some(Sender {
            tx: self.tx.upgrade()?,
            budget: self.budget.clone(),
            total: self.total,
        })
    }

    /// Whether a sender still keeps the queue open.
    pub fn is_open(&self) -> bool {
        self.tx.strong_count() > 0
    }
}

/// Room for one message of a known size: a slot and its bytes, taken together.
pub struct Permit<'a, T> {
    slot: mpsc::Permit<'a, Charged<T>>,
    charge: Charge,
}

impl<T> Permit<'_, T> {
    /// Queues `item` in the room held. (Its bytes were counted when the room was taken.)
    pub fn send(self, item: T) {
        self.slot.send(Charged {
            item,
            charge: self.charge,
        });
    }
}

impl<T> Sender<T> {
    /// Waits for room for a message of `bytes` bytes; None once the receiver is gone.
    /// Cancel-safe: dropping the wait gives back whatever it had taken.
    pub async fn reserve(&self, bytes: usize) -> Option<Permit<'_, T>> {
        let weight = u32::try_from(bytes).unwrap_or(u32::MAX).min(self.total);
        let charge = tokio::select! {
            charge = self.budget.clone().acquire_many_owned(weight) => charge.ok()?,
            () = self.tx.closed() => return None,
        };
        let slot = self.tx.reserve().await.ok()?;
        Some(Permit {
            slot,
            charge: Charge { _permit: charge },
        })
    }

    /// Whether at least a quarter of both the slots and the bytes are free: best-effort
    /// messages (server logs) are dropped below that, leaving room for replies.
    pub fn has_slack(&self) -> bool {
        self.tx.capacity() > self.tx.max_capacity() / 4
            && self.budget.available_permits() > self.total as usize / 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bytes_bound_the_queue_and_come_back_when_messages_are_dropped() {
        let (tx, mut rx) = channel::<String>(100, 10);
        assert!(tx.try_send("12345".into()).is_ok());
        assert!(tx.try_send("1234".into()).is_ok());
        assert!(matches!(
            tx.try_send("12".into()),
            Err(TrySendError::Full(s)) if s == "12"
        ));
        let first = rx.recv().await.map(Charged::into_inner);
        assert_eq!(first.as_deref(), Some("12345"));
        assert!(tx.try_send("12".into()).is_ok(), "the bytes came back");
        // A message larger than the whole budget goes alone once the queue is empty.
        assert!(tx.try_send("x".repeat(50)).is_err());
        drop(rx.recv().await);
        drop(rx.recv().await);
        assert!(tx.try_send("x".repeat(50)).is_ok());
        drop(rx);
        assert!(matches!(
            tx.try_send("a".into()),
            Err(TrySendError::Closed(_))
        ));
    }

    #[tokio::test]
    async fn a_weak_sender_does_not_keep_the_queue_open() {
        let (tx, mut rx) = channel::<String>(4, 100);
        let weak = tx.downgrade();
        let upgraded = weak.upgrade().unwrap();
        assert!(upgraded.try_send("a".into()).is_ok());
        drop((tx, upgraded));
        assert!(!weak.is_open());
        assert!(weak.upgrade().is_none());
        assert_eq!(
            rx.recv().await.map(Charged::into_inner).as_deref(),
            Some("a")
        );
        assert!(
            rx.recv().await.is_none(),
            "the receiver saw every sender go"
        );
    }

    #[tokio::test]
    async fn counts_bound_the_queue_too() {
        let (tx, _rx) = channel::<String>(2, 1000);
        assert!(tx.try_send("a".into()).is_ok());
        assert!(tx.try_send("b".into()).is_ok());
        assert!(matches!(
            tx.try_send("c".into()),
            Err(TrySendError::Full(_))
        ));
        assert!(!tx.has_slack());
    }

    #[tokio::test]
    async fn send_waits_for_bytes_and_fails_once_the_receiver_is_gone() {
        let (tx, rx) = channel::<String>(10, 4);
        tx.send("1234".into()).await.unwrap();
        let waiting = crate::tracker::spawn({
            let tx = tx.clone();
            async move { tx.send("5678".into()).await.is_ok() }
        });
        drop(rx);
        assert!(!waiting.await.unwrap());
    }
}
