//! What every start of a server needs from the daemon.
//!
//! Ids for connections and lookups, the secret stores, the sentinel, the limits a
//! connection runs under, and the spawn of its process (confined as prepared).

use super::{Running, secrets};
use crate::config::{Launch, ServerConfig};
use crate::sentinel::SentinelHandle;
use crate::upstream::ConnectionEvent;
use crate::upstream::process::{self, SpawnError};
use crate::upstream::sandbox::Prepared;
use crate::upstream::serve::{ConnectionContext, EraPlan, Startup};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The supervisor's part that starts connections.
pub(super) struct Starter {
    /// The last id given to a connection or a lookup of secrets (one sequence, so an
    /// answer is never taken for another's).
    last_id: u64,
    /// Bytes of one message at most (`daemon.max_message_bytes`).
    max_line: usize,
    /// Bytes queued to one server at most (`daemon.queue_bytes`).
    queue_bytes: usize,
    /// The supervisor's token: every connection's is a child of it.
    cancel: CancellationToken,
    /// Where connections report their events.
    events: mpsc::Sender<ConnectionEvent>,
    /// Told about every process group, so none outlives a killed mcpd.
    sentinel: SentinelHandle,
    /// Given to every connection, for its server's task statuses (to the agent side).
    task_status: mcpd_runtime::budget::Sender<crate::upstream::TaskStatus>,
    /// Where `${secret:NAME}` references are looked up at each start.
    secrets: crate::secrets::Secrets,
}

/// What one start of a server is made of, decided by the supervisor.
pub(super) struct Start {
    pub(super) config: ServerConfig,
    /// The launch with this start's secrets in.
    pub(super) launch: Launch,
    /// Its confinement, prepared (a local server's), or why it cannot be.
    pub(super) confined: Result<Option<Prepared>, SpawnError>,
    pub(super) era: EraPlan,
    pub(super) startup: Startup,
    pub(super) login: Option<crate::oauth::credential::CredentialHandle>,
    /// What the server prints of its secrets is masked in what mcpd keeps and logs.
    pub(super) mask: Arc<crate::secrets::Mask>,
}

/// What `Starter::new` is given.
pub(super) struct Limits {
    pub(super) max_line: usize,
    pub(super) queue_bytes: usize,
}

impl Starter {
    pub(super) fn new(
        limits: Limits,
        cancel: CancellationToken,
        events: mpsc::Sender<ConnectionEvent>,
        sentinel: SentinelHandle,
        task_status: mcpd_runtime::budget::Sender<crate::upstream::TaskStatus>,
        secrets: crate::secrets::Secrets,
    ) -> Starter {
        Starter {
            last_id: 0,
            max_line: limits.max_line,
            queue_bytes: limits.queue_bytes,
            cancel,
            events,
            sentinel,
            task_status,
            secrets,
        }
    }

    /// A new id for a connection or a lookup of secrets.
    pub(super) fn next_id(&mut self) -> u64 {
        self.last_id += 1;
        self.last_id
    }

    pub(super) fn secrets(&self) -> &crate::secrets::Secrets {
        &self.secrets
    }

    /// Where connections (and logins) report their events.
    pub(super) fn events(&self) -> mpsc::Sender<ConnectionEvent> {
        self.events.clone()
    }

    pub(super) fn sentinel(&self) -> &SentinelHandle {
        &self.sentinel
    }

    /// Spawns a start's process (a local server's) and makes its connection's context:
    /// spawned here, not in the connection task, so the supervisor knows every pid from
    /// the start (the sentinel watches its group and the orphan reaper leaves it to its
    /// connection).
    pub(super) fn spawn(&mut self, name: &str, start: Start) -> (Running, ConnectionContext) {
        let Start {
            mut config,
            launch,
            confined,
            era,
            startup,
            login,
            mask,
        } = start;
        let sandbox = confined
            .as_ref()
            .ok()
            .and_then(|c| c.as_ref().map(|p| p.view.clone()));
        let instance = self.next_id();
        let cancel = self.cancel.child_token();
        let mut spawned = match &launch {
            Launch::Stdio(launch) => Some(confined.and_then(|c| process::spawn(launch, c))),
            Launch::Http(_) => None,
        };
        if let Launch::Http(h) = launch {
            config.launch = Launch::Http(h);
        }
        let spawned_stdio = spawned.is_some();
        let egress = spawned
            .as_mut()
            .and_then(|s| s.as_mut().ok())
            .and_then(|s| super::confine::serve_egress(name, s));
        let pid = spawned
            .as_ref()
            .and_then(|s| s.as_ref().ok())
            .map(|s| s.pid);
        if let Some(pid) = pid {
            self.sentinel.watch(pid);
        }
        let ctx = ConnectionContext {
            spawned,
            config,
            instance,
            max_line: self.max_line,
            queue_bytes: self.queue_bytes,
            events: self.events.clone(),
            cancel: cancel.clone(),
            era,
            startup,
            login,
            task_status: self.task_status.clone(),
            mask,
        };
        let running = Running {
            instance,
            pid,
            cancel,
            started: Instant::now(),
            handle: None,
            http: None,
            probing: era == EraPlan::Auto && spawned_stdio,
            sandbox,
            _egress: egress,
            first_round: super::gate::FirstRound::default(),
        };
        (running, ctx)
    }
}

/// The mask of a start's secrets: what the server prints of them is masked.
pub(super) fn mask(resolved: Option<&secrets::Resolved>) -> Arc<crate::secrets::Mask> {
    Arc::new(crate::secrets::Mask::new(
        resolved
            .iter()
            .flat_map(|r| r.iter().map(|(n, v)| (n.as_str(), v))),
    ))
}
