//! Server side of mcpd: the Unix-socket listener and one actor per agent connection.

mod call;
mod calls;
mod conn;
mod control;
mod discover;
mod era_check;
mod forward;
mod handlers;
pub mod http;
mod in_flight;
mod lineage;
mod listen;
pub mod listener;
pub mod local;
mod params;
mod pending_input;
mod project;
mod render;
mod reply;
mod request_state;
mod resolve;
pub mod roster;
mod self_description;
mod session;
mod surface;
mod tasks;
mod wait;

pub use lineage::{PeerOrigin, parent_of};
pub use request_state::{adopt_key as adopt_sealing_key, key_bytes as sealing_key};
pub use tasks::{TaskBook, TaskInputs};

use crate::registry::Catalog;
use crate::supervisor::SupervisorHandle;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Facts about the daemon itself, for `mcpd/status`.
#[derive(Debug)]
pub struct DaemonInfo {
    pub started: Instant,
    pub socket: PathBuf,
    pub config: Option<PathBuf>,
    /// Agents connected now: connections that have asked for something other than a
    /// control method. A gauge, written only through `AgentGauge`.
    pub agents: AtomicUsize,
    /// Woken when `agents` changes: systemd's status line follows it without polling.
    pub agents_changed: tokio::sync::Notify,
    /// The last agent number given out, by either listener.
    pub next_agent: AtomicU64,
    /// The most agents served at once (`daemon.max_agents`), per listener.
    pub max_agents: usize,
    /// The HTTP listener, when one is configured.
    pub http: Option<HttpInfo>,
    /// The secret stores, for `mcpd ctl secret`.
    pub secrets: crate::secrets::Secrets,
    /// Asks the daemon to upgrade in place (`mcpd ctl upgrade`).
    pub upgrader: crate::upgrade::Upgrader,
    /// How many upgrades in place this process has been through.
    pub upgrades: u32,
    /// The dashboard, unless `daemon.ui = false`: its address and launch tokens.
    pub ui: Option<Arc<dyn UiLink>>,
}

/// The dashboard as `mcpd/status` and `mcpd/ui` reach it. The dashboard implements it:
/// it is built on this module (an agent connection of its own, the roster), which
/// therefore does not name it.
pub trait UiLink: Send + Sync + std::fmt::Debug {
    /// The page's address (no token).
    fn url(&self) -> String;
    /// A fresh launch URL, valid once for the duration returned.
    fn launch_url(
        &self,
    ) -> futures::future::BoxFuture<'_, Result<(String, Duration), mcpd_runtime::ask::AskError>>;
}

/// One connection's place in `DaemonInfo::agents`, held from its first request that is
/// not a control method until the connection ends (dropped with its session).
///
/// Counting by what a connection asks, not by its being open, is what makes the count
/// exact for the one who reads it: `mcpd ctl status` (and metrics, and systemd's
/// `STATUS=`) come through connections that only send control methods, which therefore
/// never count themselves or each other. A connection that is open but has not sent a
/// request yet is not counted either; a client's first message comes at once.
#[derive(Debug)]
pub struct AgentGauge(Arc<DaemonInfo>);

impl AgentGauge {
    pub fn count(daemon: &Arc<DaemonInfo>) -> AgentGauge {
        daemon.agents.fetch_add(1, Ordering::Relaxed);
        daemon.agents_changed.notify_one();
        AgentGauge(daemon.clone())
    }
}

impl Drop for AgentGauge {
    fn drop(&mut self) {
        self.0.agents.fetch_sub(1, Ordering::Relaxed);
        self.0.agents_changed.notify_one();
    }
}

/// The HTTP listener as `mcpd ctl http-token` tells it.
#[derive(Debug)]
pub struct HttpInfo {
    pub url: String,
    /// None when `http_auth = "none"`.
    pub token: Option<crate::config::Secret>,
}

/// Who may use the daemon: its own user, root, and `daemon.allow_uids`.
#[derive(Debug, Clone)]
pub struct Access {
    pub own: u32,
    pub allowed: Vec<u32>,
}

impl Access {
    /// Whether a connecting user may use the daemon.
    pub fn allows(&self, uid: Option<u32>) -> bool {
        uid.is_some_and(|u| u == self.own || u == 0 || self.allowed.contains(&u))
    }

    /// Whether a user may control it (restart, stop, start, reload): its own user or root.
    pub fn controls(&self, uid: Option<u32>) -> bool {
        uid.is_some_and(|u| u == self.own || u == 0)
    }
}

/// What an agent connection needs: the daemon's part, one for every connection, and the
/// facts about this connection's peer. Cloned per connection for the cost of an `Arc`.
#[derive(Clone)]
pub struct AgentContext {
    /// What every connection shares.
    pub shared: Arc<SharedContext>,
    /// Who is at the other end of this connection (set at accept).
    pub peer: Peer,
}

/// The connection reads the daemon's part as its own: a handler says `ctx.catalog`, and
/// the peer's facts are spelt `ctx.peer`.
impl std::ops::Deref for AgentContext {
    type Target = SharedContext;

    fn deref(&self) -> &SharedContext {
        &self.shared
    }
}

impl AgentContext {
    /// The context of a connection from `peer`.
    pub fn with_peer(&self, peer: Peer) -> AgentContext {
        AgentContext {
            shared: self.shared.clone(),
            peer,
        }
    }
}

/// Who an agent connection's peer is, as told at accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// The connecting agent's uid, from its peer credentials.
    pub uid: Option<u32>,
    /// The connecting agent's pid, from its peer credentials.
    pub pid: Option<i32>,
    /// Whether the peer is a process of a server mcpd started (from its pid, at accept):
    /// a server runs as the daemon's user, so the uid alone cannot tell. Such a peer, or
    /// one whose origin could not be told (`Unknown`, which a server can cause), never
    /// gets control methods (`control::may_control`). `server()` is the server's leader
    /// pid, to look its server up by (a sandboxed server's processes are to get no access
    /// at all; `Unknown` should then count as sandboxed). `Outside` for HTTP agents,
    /// which have no peer process.
    pub origin: PeerOrigin,
    /// Whether the agent came over the HTTP listener.
    pub over_http: bool,
}

impl Peer {
    /// A peer on the Unix socket, with its credentials and origin.
    pub fn socket(uid: Option<u32>, pid: Option<i32>, origin: PeerOrigin) -> Peer {
        Peer {
            uid,
            pid,
            origin,
            over_http: false,
        }
    }

    /// An agent over the HTTP listener: no peer process.
    pub fn http() -> Peer {
        Peer {
            uid: None,
            pid: None,
            origin: PeerOrigin::Outside,
            over_http: true,
        }
    }

    /// The daemon itself, as user `uid` (the dashboard's own connection).
    pub fn inside(uid: u32) -> Peer {
        Peer::socket(Some(uid), None, PeerOrigin::Outside)
    }
}

/// What every agent connection shares: the daemon's catalog, supervisor and actors, and
/// its settings for agents.
pub struct SharedContext {
    pub catalog: watch::Receiver<Arc<Catalog>>,
    pub supervisor: SupervisorHandle,
    /// Who may connect and control the daemon.
    pub access: Access,
    /// Call and byte counters, for `mcpd ctl metrics`.
    pub metrics: crate::metrics::Metrics,
    /// Every connected agent, for `mcpd ctl agents`.
    pub agents: roster::AgentRoster,
    /// Applies a re-read config (`mcpd/reload`).
    pub reloader: crate::supervisor::Reloader,
    pub daemon: Arc<DaemonInfo>,
    pub max_line: usize,
    pub queue: usize,
    /// Bytes queued to one agent at most (`daemon.queue_bytes`).
    pub queue_bytes: usize,
    /// The profiles agents can choose, by name.
    pub profiles: Arc<std::collections::BTreeMap<String, Arc<crate::config::Profile>>>,
    /// Bounds on the results passed to agents (image and audio sizes).
    pub limits: mcpd_wire::protocol::results::Limits,
    /// How long in-flight calls may finish once shutdown begins.
    pub drain_grace: Duration,
    /// The input requests of 2025-11-25 tasks that modern agents hold.
    pub task_inputs: TaskInputs,
    /// The tasks each owner made, for `tasks/list`.
    pub task_book: TaskBook,
    /// How agents without a profile find their tools (`[daemon] tools`, …).
    pub discovery: crate::config::Discovery,
}

impl AgentContext {
    /// What every agent connection starts from: the daemon-wide part, and a peer each
    /// listener replaces with its connection's own.
    pub fn new(
        config: &crate::config::Config,
        catalog: tokio::sync::watch::Receiver<Arc<crate::registry::Catalog>>,
        supervisor: SupervisorHandle,
        reloader: crate::supervisor::Reloader,
        daemon: Arc<DaemonInfo>,
        task_statuses: tokio::sync::mpsc::Receiver<
            mcpd_runtime::budget::Charged<crate::upstream::TaskStatus>,
        >,
    ) -> AgentContext {
        let shared = crate::agent::SharedContext {
            catalog,
            supervisor,
            reloader,
            access: crate::agent::Access {
                own: nix::unistd::getuid().as_raw(),
                allowed: config.daemon.allow_uids.clone(),
            },
            agents: crate::agent::roster::AgentRoster::spawn(),
            metrics: crate::metrics::Metrics::spawn(),
            daemon,
            max_line: config.daemon.max_message_bytes,
            queue: config.daemon.agent_queue,
            queue_bytes: config.daemon.queue_bytes,
            limits: mcpd_wire::protocol::results::Limits {
                max_media_bytes: config.daemon.max_media_bytes,
            },
            profiles: std::sync::Arc::new(
                config
                    .profiles
                    .iter()
                    .map(|(k, v)| (k.clone(), std::sync::Arc::new(v.clone())))
                    .collect(),
            ),
            drain_grace: config.daemon.shutdown_grace,
            task_inputs: crate::agent::TaskInputs::spawn(),
            task_book: crate::agent::TaskBook::spawn(
                task_statuses,
                config.daemon.max_message_bytes,
            ),
            discovery: config.daemon.discovery.clone(),
        };
        let peer = Peer::socket(None, None, PeerOrigin::Outside);
        AgentContext {
            shared: Arc::new(shared),
            peer,
        }
    }
}
