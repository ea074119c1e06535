//! The fixture's shared state: options, counters, sessions, open streams, event history and running requests.

use super::{FixtureOptions, Stats};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, MutexGuard, PoisonError};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// Everything the request handlers, stream tasks and the `HttpFixture` handle share.
pub(super) struct Shared {
    pub opts: FixtureOptions,
    /// The bound port, for the URLs the auth headers name.
    pub port: u16,
    /// Cancelled by `stop` (or dropping the fixture): ends every stream, worker and connection.
    pub shutdown: CancellationToken,
    /// Test code: one lock is simpler than an actor, and nothing awaits while holding it.
    inner: Mutex<Inner>,
}

#[derive(Default)]
pub(super) struct Inner {
    pub stats: Stats,
    /// Streamable HTTP session ids that requests may carry; forgotten by DELETE and `expire_sessions`.
    pub sessions: HashSet<String>,
    /// Open server-initiated streams (GET streams, 2024-11-05 session streams, or modern
    /// `subscriptions/listen` streams), by listener number.
    pub listeners: HashMap<u64, Listener>,
    /// Every event of every stream whose events carry ids, by stream number, so a GET with
    /// `Last-Event-ID` can replay what the client missed.
    pub history: HashMap<u64, History>,
    /// Requests still being worked on, by (session, JSON text of the request id), so a
    /// `notifications/cancelled` can end them.
    pub running: HashMap<(String, String), CancellationToken>,
    /// How many `extra_N` tools `notify_tools_changed` has added.
    pub extras: usize,
    /// Source of listener and stream numbers; one counter so every number is unique.
    next_number: u64,
}

/// One open server-initiated stream, as seen from outside its task.
pub(super) struct Listener {
    /// The session the stream belongs to (for 2024-11-05, the stream *is* the session; empty
    /// for a modern stream).
    pub session: String,
    /// Messages to send on the stream; its task writes them as `message` events.
    pub out: UnboundedSender<Value>,
    /// Cancelled to close the stream from the server side.
    pub close: CancellationToken,
    pub kind: ListenerKind,
}

/// What kind of server-initiated stream a listener is.
#[derive(Clone, Debug)]
pub(super) enum ListenerKind {
    /// A Streamable HTTP GET stream.
    Get,
    /// A 2024-11-05 session stream.
    Legacy,
    /// A 2026-07-28 `subscriptions/listen` stream: the listen request's id (its
    /// subscriptionId), and whether it asked for tool-list changes.
    Listen { id: Value, tools: bool },
}

/// What was sent (or held back) on one stream whose events carry ids.
pub(super) struct History {
    pub session: String,
    /// A request's stream ends after a replay; a GET stream carries on live.
    pub kind: StreamKind,
    /// Event data by sequence number (the part of the id after the dash); empty for the priming event.
    pub events: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StreamKind {
    Request,
    Get,
}

impl Shared {
    pub fn new(opts: FixtureOptions, port: u16) -> Self {
        Shared {
            opts,
            port,
            shutdown: CancellationToken::new(),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Locks the state; a panic in another holder does not poison the fixture for the test.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn count_disconnect(&self) {
        self.lock().stats.disconnects += 1;
    }
}

impl Inner {
    pub fn next_number(&mut self) -> u64 {
        self.next_number += 1;
        self.next_number
    }

    /// The listener serving 2024-11-05 session `session`, if that session is open.
    pub fn legacy_out(&self, session: &str) -> Option<UnboundedSender<Value>> {
        self.listeners
            .values()
            .find(|l| matches!(l.kind, ListenerKind::Legacy) && l.session == session)
            .map(|l| l.out.clone())
    }

    /// Closes every listener that `which` selects and forgets it.
    pub fn close_listeners(&mut self, which: impl Fn(&Listener) -> bool) {
        self.listeners.retain(|_, l| {
            if which(l) {
                l.close.cancel();
                false
            } else {
                true
            }
        });
    }
}

/// A fresh session id: 32 random hex digits, visible ASCII as the spec requires.
pub(super) fn new_session_id() -> String {
    let a = RandomState::new().hash_one(1u8);
    let b = RandomState::new().hash_one(2u8);
    format!("{a:016x}{b:016x}")
}
