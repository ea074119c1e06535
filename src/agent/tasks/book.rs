//! The tasks each owner made through mcpd, newest first.
//!
//! So `tasks/list` can show a 2025-11-25 agent its own tasks (and no one else's) across
//! every server: its servers' connections are shared, so their own lists cannot.
//!
//! One actor for the daemon: a task outlives the connection that made it. Bounded:
//! owners, and tasks per owner (the oldest leave first); an entry also leaves when its
//! `ttl` lapses or its server no longer knows it. It holds ids only: a listing asks
//! each task's server for its status.
//!
//! The same actor routes 2025-11-25 servers' `notifications/tasks/status` to the legacy
//! agents whose tasks they are (`status.rs` holds the routes): a task is recorded for
//! both at once, and the servers' statuses arrive on a channel of their own.

use super::ids::{Kind, Made};
use super::status::{Routes, StatusTo};
use crate::upstream::TaskStatus;
use mcpd_runtime::budget::Charged;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// Owners remembered (the socket's users and the HTTP listener), tasks per owner, and
/// tasks per page of `tasks/list`.
const MAX_OWNERS: usize = 64;
const MAX_PER_OWNER: usize = 1000;
pub const PAGE: usize = 50;
/// An entry without a `ttl` is kept this long at most.
const MAX_TTL: Duration = Duration::from_secs(24 * 3600);
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// A task an owner made.
#[derive(Clone, Debug)]
pub struct Entry {
    pub seq: u64,
    /// The id the agent has.
    pub sealed: Arc<str>,
    pub server: Arc<str>,
    /// The server's id.
    pub task: String,
    pub kind: Kind,
    until: Instant,
}

enum Msg {
    Record {
        owner: Arc<str>,
        made: Made,
        /// Where its statuses go: a legacy agent's 2025-11-25 task.
        status_to: Option<StatusTo>,
    },
    /// Up to a page of `owner`'s tasks older than `before`, and whether more are left.
    Page {
        owner: Arc<str>,
        before: Option<u64>,
        respond_to: oneshot::Sender<(Vec<Entry>, bool)>,
    },
    Forget {
        owner: Arc<str>,
        seq: u64,
    },
}

/// The cloneable way to the book.
#[derive(Clone)]
pub struct TaskBook {
    tx: mpsc::Sender<Msg>,
}

struct Book {
    rx: mpsc::Receiver<Msg>,
    next_seq: u64,
    /// Owner → tasks, newest first; and when each owner last made one.
    owners: HashMap<Arc<str>, (VecDeque<Entry>, Instant)>,
    /// Where servers' task statuses go.
    routes: Routes,
    /// The longest line an agent is sent (`max_message_bytes`).
    max_line: usize,
}

impl TaskBook {
    /// Starts the book, which routes the task statuses that arrive on `statuses` (from
    /// every server connection) to their agents, in lines of at most `max_line` bytes.
    pub fn spawn(statuses: mpsc::Receiver<Charged<TaskStatus>>, max_line: usize) -> TaskBook {
        let (tx, rx) = mpsc::channel(256);
        let book = Book {
            rx,
            next_seq: 1,
            owners: HashMap::new(),
            routes: Routes::default(),
            max_line,
        };
        mcpd_runtime::tracker::spawn(book.run(statuses));
        TaskBook { tx }
    }

    /// Records a task, and where its statuses go; a full mailbox costs only its line in
    /// `tasks/list` and its status notifications.
    pub fn record(&self, owner: Arc<str>, made: Made, status_to: Option<StatusTo>) {
        let _ = self.tx.try_send(Msg::Record {
            owner,
            made,
            status_to,
        });
    }

    pub async fn page(&self, owner: Arc<str>, before: Option<u64>) -> (Vec<Entry>, bool) {
        mcpd_runtime::ask::ask(&self.tx, ASK_TIMEOUT, |respond_to| Msg::Page {
            owner,
            before,
            respond_to,
        })
        .await
        .unwrap_or_default()
    }

    pub fn forget(&self, owner: Arc<str>, seq: u64) {
        let _ = self.tx.try_send(Msg::Forget { owner, seq });
    }
}

impl Book {
    /// Serves until every handle is gone. Records come first: a task's status may follow
    /// its record closely, and would be dropped as unknown if it overtook it.
    async fn run(mut self, mut statuses: mpsc::Receiver<Charged<TaskStatus>>) {
        loop {
            let msg = tokio::select! {
                biased;
                msg = self.rx.recv() => match msg {
                    Some(msg) => msg,
                    None => break,
                },
                Some(status) = statuses.recv() => {
                    let now = Instant::now();
                    self.routes.deliver(status.into_inner(), self.max_line, now);
                    continue;
                }
            };
            match msg {
                Msg::Record {
                    owner,
                    made,
                    status_to,
                } => {
                    if let Some(to) = status_to {
                        self.routes.record(&owner, &made, to, Instant::now());
                    }
                    self.record(owner, made);
                }
                Msg::Page {
                    owner,
                    before,
                    respond_to,
                } => {
                    let _ = respond_to.send(self.page(&owner, before));
                }
                Msg::Forget { owner, seq } => {
                    if let Some((tasks, _)) = self.owners.get_mut(&owner) {
                        tasks.retain(|e| e.seq != seq);
                    }
                }
            }
        }
    }

    fn record(&mut self, owner: Arc<str>, made: Made) {
        let now = Instant::now();
        if !self.owners.contains_key(&owner)
            && self.owners.len() >= MAX_OWNERS
            && let Some(oldest) = self
                .owners
                .iter()
                .min_by_key(|(_, (_, last))| *last)
                .map(|(o, _)| o.clone())
        {
            self.owners.remove(&oldest);
        }
        let ttl = made
            .ttl_ms
            .map_or(MAX_TTL, |ms| Duration::from_millis(ms).min(MAX_TTL));
        let entry = Entry {
            seq: self.next_seq,
            sealed: made.sealed,
            server: made.server,
            task: made.task,
            kind: made.kind,
            until: now + ttl,
        };
        self.next_seq += 1;
        let (tasks, last) = self
            .owners
            .entry(owner)
            .or_insert_with(|| (VecDeque::new(), now));
        *last = now;
        tasks.push_front(entry);
        tasks.truncate(MAX_PER_OWNER);
    }

    fn page(&mut self, owner: &Arc<str>, before: Option<u64>) -> (Vec<Entry>, bool) {
        let Some((tasks, _)) = self.owners.get_mut(owner) else {
            return (Vec::new(), false);
        };
        let now = Instant::now();
        tasks.retain(|e| e.until > now);
        let mut older = tasks.iter().filter(|e| before.is_none_or(|b| e.seq < b));
        let page: Vec<Entry> = older.by_ref().take(PAGE).cloned().collect();
        let more = older.next().is_some();
        (page, more)
    }
}
