//! The seldom wake-ups of an agent connection, as one stream.
//!
//! They are shutdown, an overflowed queue, a server's question, the roster (`ctl agents`,
//! a cancel), a changed catalog and a checked project claim; the stream is polled only
//! when one of them fires.

use crate::agent::roster::RosterAsk;
use crate::registry::Catalog;
use crate::upstream::ServerAsk;
use futures::StreamExt;
use futures::stream::{BoxStream, SelectAll};
use mcpd_runtime::outbox::Outbox;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// What wakes a connection rarely: shutdown, an overflowed queue, a server's question for
/// the agent, `ctl agents` asking about it, a changed catalog.
pub enum Wakeup {
    Stopping,
    Overflowed,
    Ask(Box<ServerAsk>),
    Roster(RosterAsk),
    Catalog,
    /// A claim about the agent's project, checked.
    Project(crate::agent::project::claim::News),
}

impl Wakeup {
    /// All of a connection's rare sources as one stream, which polls a source only after
    /// it woke the task. Polled beside each message, as `select!` branches would be,
    /// they cost a lock or two each (a cancellation token, a watch) on every turn of the
    /// loop, several times per call; a `SelectAll` (futures' per-stream wakers) checks
    /// one queue instead.
    pub fn of(
        shutdown: &CancellationToken,
        outbox: &Outbox,
        catalog: &watch::Receiver<Arc<Catalog>>,
        asks: mpsc::Receiver<Box<ServerAsk>>,
        describes: mpsc::Receiver<RosterAsk>,
        projects: mpsc::Receiver<crate::agent::project::claim::News>,
    ) -> SelectAll<BoxStream<'static, Wakeup>> {
        use futures::stream::{once, unfold};
        let stopping = once(shutdown.clone().cancelled_owned()).map(|()| Wakeup::Stopping);
        let overflowed =
            once(outbox.overflowed().clone().cancelled_owned()).map(|()| Wakeup::Overflowed);
        let asks = unfold(asks, |mut rx| async move {
            Some((Wakeup::Ask(rx.recv().await?), rx))
        });
        let describes = unfold(describes, |mut rx| async move {
            Some((Wakeup::Roster(rx.recv().await?), rx))
        });
        let projects = unfold(projects, |mut rx| async move {
            Some((Wakeup::Project(rx.recv().await?), rx))
        });
        // A copy of the receiver: the connection reads the catalog through its own.
        let catalog = unfold(catalog.clone(), |mut rx| async move {
            rx.changed().await.ok()?;
            Some((Wakeup::Catalog, rx))
        });
        futures::stream::select_all([
            stopping.boxed(),
            overflowed.boxed(),
            asks.boxed(),
            describes.boxed(),
            catalog.boxed(),
            projects.boxed(),
        ])
    }
}
