//! Request and reply over an actor's mailbox.
//!
//! One helper whose deadline covers both the send (a full mailbox) and the reply.

use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Why an actor gave no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// The actor has stopped (its mailbox or the reply channel closed).
    #[error("the actor has stopped")]
    Gone,
    /// The mailbox stayed full or the reply did not come within the deadline.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// Sends the message `make` builds around a reply channel and waits for the reply, all
/// within `within`: a busy actor whose mailbox is full cannot hold its caller longer
/// than an actor that is slow to answer.
pub async fn ask<M, T>(
    tx: &mpsc::Sender<M>,
    within: Duration,
    make: impl FnOnce(oneshot::Sender<T>) -> M,
) -> Result<T, AskError> {
    let (respond_to, rx) = oneshot::channel();
    deliver(tx, within, make(respond_to), rx).await
}

/// [`ask`] for a message already made around the reply channel `rx`. When the mailbox
/// has room, as it nearly always does, the message goes in at once and the future holds
/// no send in progress; only a full mailbox is waited on (boxed: a send future holds a
/// second copy of the message, which would make every call's future larger).
pub async fn deliver<M, T>(
    tx: &mpsc::Sender<M>,
    within: Duration,
    msg: M,
    rx: oneshot::Receiver<T>,
) -> Result<T, AskError> {
    let deadline = tokio::time::Instant::now() + within;
    match tx.try_send(msg) {
        Ok(()) => {}
        Err(mpsc::error::TrySendError::Closed(_)) => return Err(AskError::Gone),
        Err(mpsc::error::TrySendError::Full(msg)) => {
            Box::pin(tokio::time::timeout_at(deadline, tx.send(msg)))
                .await
                .map_err(|_| AskError::Timeout(within))?
                .map_err(|_| AskError::Gone)?;
        }
    }
    tokio::time::timeout_at(deadline, rx)
        .await
        .map_err(|_| AskError::Timeout(within))?
        .map_err(|_| AskError::Gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_deadline_covers_a_full_mailbox_as_well_as_a_slow_reply() {
        let (tx, mut rx) = mpsc::channel::<oneshot::Sender<u8>>(1);
        let (parked, _keep) = oneshot::channel();
        tx.send(parked).await.unwrap(); // the mailbox is now full
        let d = Duration::from_secs(1);
        assert_eq!(ask(&tx, d, |r| r).await, Err(AskError::Timeout(d)));
        let first = rx.recv().await.unwrap();
        drop(first);
        let answering = crate::tracker::spawn(async move {
            let r = rx.recv().await.unwrap();
            let _ = r.send(7);
            rx
        });
        assert_eq!(ask(&tx, d, |r| r).await, Ok(7));
        drop(answering.await.unwrap());
        assert_eq!(ask(&tx, d, |r| r).await, Err(AskError::Gone));
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_mailbox_that_frees_up_in_time_takes_the_message_and_the_reply_comes() {
        let (tx, mut rx) = mpsc::channel::<oneshot::Sender<u8>>(1);
        let (parked, _keep) = oneshot::channel();
        tx.send(parked).await.unwrap(); // full: the message has to wait for room
        let answering = crate::tracker::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            drop(rx.recv().await.unwrap()); // room for the waiting message
            let r = rx.recv().await.unwrap();
            let _ = r.send(9);
            rx
        });
        assert_eq!(ask(&tx, Duration::from_secs(1), |r| r).await, Ok(9));
        drop(answering.await.unwrap());
    }
}
