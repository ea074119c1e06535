//! The supervisor owns every upstream.
//!
//! Starts them, restarts them with backoff, stops them, and publishes the catalog.

pub mod backoff;
mod catalog_cache;
mod confine;
mod diagnose;
mod eras;
mod events;
mod gate;
mod handle;
mod instances;
mod pins;
mod projects;
mod reload;
mod secrets;
mod starter;
pub(crate) mod state_file;
mod store;

pub use gate::PinOp;
pub use reload::{ReloadSummary, Reloader};
mod era_plan;
mod lifecycle;
mod login;
mod slot;
mod starting;
mod status;

use crate::config::Share;
use crate::registry::{Catalog, Live, Registry};
use crate::upstream::{ConnectionEvent, ConnectionExit, UpstreamHandle};
use mcpd_ctl::control_api::{HttpInfo, ServerState, ServerStatus};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use handle::SupervisorMsg;
pub use handle::{Action, SupervisorError, SupervisorHandle};
use slot::Slot;

const MAILBOX: usize = 64;
/// How long a status, control or reload request waits for the supervisor (which answers
/// each at once, never waiting on a server).
const STATUS_WAIT: Duration = Duration::from_secs(10);
/// How long a call waits for the supervisor to hand over the agent's own instance (the
/// caller bounds its wait for the instance to start by itself).
const INSTANCE_WAIT: Duration = Duration::from_secs(3600);
const EVENTS: usize = 256;

/// What a task of the supervisor's `JoinSet` reports when it ends.
pub(crate) enum Finished {
    Connection(ConnectionExit),
    /// A start's secrets, looked up.
    Secrets(
        Result<
            std::collections::HashMap<String, crate::secrets::SecretValue>,
            crate::secrets::SecretError,
        >,
    ),
}

/// What to do when the running instance exits.
#[derive(Debug, Clone, Copy, PartialEq)]
enum AfterExit {
    /// It crashed or exited by itself: back off and restart, within the budget.
    Recover,
    /// `ctl restart`: start again at once with a clean budget.
    Restart,
    /// `ctl stop` or shutdown: stay stopped.
    Stay,
    /// Idle (lazy start or idle timeout): stopped until a call needs it.
    Idle,
}

struct Running {
    instance: u64,
    /// The server process (and process group) id, when it could be started.
    pid: Option<u32>,
    cancel: CancellationToken,
    started: Instant,
    handle: Option<UpstreamHandle>,
    /// For a remote server, its live HTTP state.
    http: Option<watch::Receiver<HttpInfo>>,
    /// Its handshake is finding the server's era in place (`handshake::in_place`).
    probing: bool,
    /// What confines its process, if anything does.
    sandbox: Option<mcpd_ctl::control_api::SandboxView>,
    /// Stops its network proxy (a host list's) when the process is gone.
    _egress: Option<tokio_util::sync::DropGuard>,
    /// Where its first round of lists is (`gate.rs`).
    first_round: gate::FirstRound,
}

/// The actor: every server's slot and the registry, the mailboxes it reads, and its
/// parts, each owning its own state (`store.rs`, `pins/`, `projects.rs`, `starter.rs`).
struct Supervisor {
    /// Every configured server and every instance, by name.
    slots: BTreeMap<Arc<str>, Slot>,
    /// Every server's lists under presented names: each catalog is made from it.
    registry: Registry,
    /// Where each new catalog is published to agents.
    catalog: watch::Sender<Arc<Catalog>>,
    /// What running connections report.
    events_rx: mpsc::Receiver<ConnectionEvent>,
    /// The handles' requests.
    rx: mpsc::Receiver<SupervisorMsg>,
    /// Connections and lookups of secrets: each says how it ended.
    conns: JoinSet<(Arc<str>, u64, Finished)>,
    /// What is kept across daemon restarts: eras, last good lists, where they live.
    store: store::StateStore,
    /// Every server's pinned definitions: the gate of every list.
    pins: pins::PinGate,
    /// Each connected agent's project, and when project instances are next checked.
    projects: projects::Projects,
    /// What every start needs: ids, secrets, the sentinel, connections' limits.
    starter: starter::Starter,
    /// Presented names' longest length (`daemon.tool_name_limit`).
    name_limit: usize,
    /// Fires at shutdown; every connection's token is a child of it.
    cancel: CancellationToken,
}

impl Supervisor {
    /// Lists the cached catalogs, starts every server that starts with the daemon, and
    /// publishes the first catalog.
    fn boot(&mut self) {
        self.load_cached_catalogs();
        let logins: Vec<_> = self
            .slots
            .iter()
            .map(|(n, s)| (n.clone(), self.login_for(&s.cfg)))
            .collect();
        for (name, login) in logins {
            if let Some(slot) = self.slots.get_mut(&name) {
                slot.login = login;
            }
        }
        let names: Vec<Arc<str>> = self.slots.keys().cloned().collect();
        for name in names {
            let Some(slot) = self.slots.get(&name) else {
                continue;
            };
            if !slot.cfg.enabled {
                continue;
            }
            // A lazy server with a cached catalog waits for its first call; without one
            // it is started once to learn its tools, and goes idle afterwards.
            let cached = self.store.lists(&slot.cfg).is_some();
            let (share, lazy) = (slot.cfg.share, slot.cfg.lazy);
            if matches!(share, Share::Project { .. })
                && let Some(slot) = self.slots.get_mut(&name)
            {
                // Its command names a project: only its instances run, and the first
                // one's lists become its own.
                slot.state = ServerState::Idle;
                continue;
            }
            if (lazy || share == Share::Agent)
                && let Some(slot) = self.slots.get_mut(&name)
            {
                if cached {
                    slot.state = ServerState::Idle;
                    continue;
                }
                slot.fill_only = true;
            }
            self.start(&name);
        }
        self.publish();
    }

    async fn run(mut self) {
        let mut sigchld =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child()).ok();
        // Exits come in bursts (a server and its children, a restart): one sweep soon
        // after the first, not one per signal or per ended connection.
        let mut sweep_at: Option<Instant> = None;
        loop {
            // The project check runs only while a project instance does: an idle daemon
            // sleeps until something happens.
            let any = self.any_project_instance();
            self.projects.track(any, Instant::now());
            let next_retry = self
                .slots
                .values()
                .flat_map(|s| [s.retry_at, s.instance.as_ref().and_then(|i| i.linger_until)])
                .flatten()
                .chain(self.projects.deadline())
                .min();
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => break,
                Some(()) = recv_signal(&mut sigchld) => {
                    sweep_at.get_or_insert_with(|| Instant::now() + SWEEP_DELAY);
                }
                () = sleep_until(sweep_at) => {
                    sweep_at = None;
                    self.reap_orphans();
                }
                Some(joined) = self.conns.join_next() => match joined {
                    Ok((name, instance, finished)) => {
                        self.on_finished(&name, instance, finished);
                        sweep_at.get_or_insert_with(|| Instant::now() + SWEEP_DELAY);
                    }
                    Err(e) => tracing::error!("a connection task failed: {e}"),
                },
                Some(event) = self.events_rx.recv() => self.on_event(event),
                Some(msg) = self.rx.recv() => self.on_msg(msg),
                () = sleep_until(next_retry) => self.retry_due(),
            }
        }
        self.shutdown().await;
    }

    fn on_finished(&mut self, name: &Arc<str>, instance: u64, finished: Finished) {
        match finished {
            Finished::Connection(exit) => self.on_exit(name, instance, exit),
            Finished::Secrets(found) => self.on_secrets(name, instance, found),
        }
    }

    /// The slot of `server` if `instance` is still its running instance.
    fn current(&mut self, server: &str, instance: u64) -> Option<&mut Slot> {
        self.slots
            .get_mut(server)
            .filter(|s| s.running.as_ref().is_some_and(|r| r.instance == instance))
    }

    fn on_msg(&mut self, msg: SupervisorMsg) {
        match msg {
            SupervisorMsg::Status { respond_to } => self.status(respond_to),
            SupervisorMsg::Control {
                name,
                action,
                respond_to,
            } => {
                let _ = respond_to.send(self.control(&name, action)); // the asker may have left
            }
            SupervisorMsg::Instance {
                server,
                key,
                respond_to,
            } => {
                // A call whose instance is ready finds it in the catalog; one that asks
                // here waits for a start, which publishes when it is ready.
                if self.instance(&server, key, respond_to) {
                    self.publish();
                }
            }
            SupervisorMsg::AgentProject {
                agent,
                project,
                servers,
            } => {
                if self.agent_project(agent, project, servers) {
                    self.publish();
                }
            }
            SupervisorMsg::AgentGone { agent } => self.agent_gone(agent),
            SupervisorMsg::Login { name, respond_to } => {
                let _ = respond_to.send(self.login_of(&name)); // the asker may have left
            }
            SupervisorMsg::Pins {
                name,
                op,
                respond_to,
            } => self.on_pins(&name, op, respond_to),
            SupervisorMsg::SecretSet { name, respond_to } => {
                let _ = respond_to.send(self.on_secret_set(&name));
            }
            SupervisorMsg::Reload { config, respond_to } => {
                let summary = self.reload(&config);
                let _ = respond_to.send(summary); // the asker may have left
            }
        }
    }

    fn publish(&mut self) {
        // First listings approved since the last publish are written now, together.
        self.pins.save_changed();
        for slot in self.slots.values_mut() {
            slot.note_state();
        }
        // Instances are reached through their server, not listed.
        let servers = self
            .slots
            .iter()
            .filter(|(_, s)| s.instance.is_none())
            .map(|(n, s)| (n.clone(), s.availability()))
            .collect();
        let before: Vec<_> = self.registry.collisions().cloned().collect();
        let catalog = self.registry.catalog(servers);
        let mut live = Live {
            confined: self
                .slots
                .values()
                .filter_map(|s| s.running.as_ref().filter(|r| r.sandbox.is_some())?.pid)
                .collect(),
            mcpd_behind: self.mcpd_behind(),
            ..Live::default()
        };
        for slot in self.slots.values() {
            if let (Some(i), ServerState::Ready, Some(h)) = (
                &slot.instance,
                slot.state,
                slot.running.as_ref().and_then(|r| r.handle.as_ref()),
            ) {
                live.instances
                    .insert(i.template.clone(), i.key.clone(), h.clone());
            }
        }
        self.report_collisions(&before);
        // mcpd's listings are as fresh as the least fresh server's, and private if any
        // server's are.
        let hints = self.slots.values().filter_map(|s| s.cache);
        for (ttl, private) in hints {
            live.cache.ttl_ms = live.cache.ttl_ms.min(ttl);
            live.cache.private |= private;
        }
        let catalog = catalog.with_live(live);
        self.catalog.send_replace(Arc::new(catalog));
    }

    /// The mcpd daemons reached through the servers that are ready, or connected and
    /// still fetching their first tool list, each once, at most `era::MAX_BEHIND`.
    fn mcpd_behind(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        // A daemon is reached from its handshake on, not from its first tool list: until
        // that list came (tens of milliseconds, more on a busy machine) the daemon behind
        // an `mcpd connect` entry would be left out of this daemon's answers, and the
        // other half of a loop of daemons connecting then would pass `refuse_self`.
        let reached = self.slots.values().filter(|s| {
            s.state == ServerState::Ready || s.running.as_ref().is_some_and(|r| r.handle.is_some())
        });
        for identity in reached.filter_map(|s| s.identity.as_ref()) {
            let ids = identity.mcpd_instance.iter().chain(&identity.mcpd_behind);
            for id in ids {
                if out.len() < mcpd_wire::protocol::era::MAX_BEHIND && !out.contains(id) {
                    out.push(id.clone());
                }
            }
        }
        out
    }

    /// Stops every server and waits for each to be reaped, within a deadline.
    async fn shutdown(&mut self) {
        let mut deadline = Duration::ZERO;
        for slot in self.slots.values_mut() {
            slot.after_exit = AfterExit::Stay;
            if let Some(r) = &slot.running {
                r.cancel.cancel();
                // close stdin + grace, SIGTERM + grace, SIGKILL + reap
                deadline = deadline.max(slot.cfg.health.stop_grace * 2 + Duration::from_secs(2));
            }
        }
        let drained = tokio::time::timeout(deadline, async {
            while let Some(joined) = self.conns.join_next().await {
                if let Ok((name, instance, finished)) = joined {
                    self.on_finished(&name, instance, finished);
                }
            }
        })
        .await;
        if drained.is_err() {
            tracing::error!("some servers did not stop in time; killing them");
            for slot in self.slots.values() {
                if let Some(pid) = slot.running.as_ref().and_then(|r| r.pid) {
                    crate::upstream::kill_group(pid);
                }
            }
            self.conns.shutdown().await;
        }
        self.reap_orphans();
        self.store.flush(STATE_FLUSH).await;
        self.starter.sentinel().clean();
    }

    /// Reaps zombie orphans, leaving alone the processes whose connection reaps them.
    fn reap_orphans(&self) {
        let mut owned: HashSet<u32> = self
            .slots
            .values()
            .filter_map(|s| s.running.as_ref()?.pid)
            .collect();
        owned.extend(self.starter.sentinel().pid());
        let n = crate::reaper::reap_orphans(&owned);
        if n > 0 {
            tracing::debug!(reaped = n, "reaped orphaned processes");
        }
    }
}

/// How long shutdown waits for the state files to be written.
const STATE_FLUSH: Duration = Duration::from_secs(2);

/// How long after a child's exit the orphan sweep runs, gathering a burst of exits.
const SWEEP_DELAY: Duration = Duration::from_millis(100);

async fn recv_signal(s: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match s {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(when: Option<Instant>) {
    match when {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
