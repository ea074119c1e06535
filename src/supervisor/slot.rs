//! One configured server as the supervisor keeps it.
//!
//! Its config, state, restart counters, last error and history, and what agents are told
//! about its availability.

use super::backoff::{Backoff, CrashBudget};
use super::{AfterExit, Running, ServerState, instances, login};
use crate::config::{ServerConfig, Share};
use crate::registry::Availability;
use crate::upstream::ServerIdentity;
use tokio::time::Instant;

/// Everything the supervisor knows about one configured server.
pub(super) struct Slot {
    pub(super) cfg: ServerConfig,
    pub(super) state: ServerState,
    pub(super) running: Option<Running>,
    pub(super) after_exit: AfterExit,
    /// Processes started after the first.
    pub(super) restarts: u32,
    pub(super) backoff: Backoff,
    pub(super) budget: CrashBudget,
    pub(super) retry_at: Option<Instant>,
    pub(super) ready_since: Option<Instant>,
    pub(super) last_error: Option<String>,
    pub(super) last_exit: Option<String>,
    pub(super) stderr_tail: Vec<String>,
    pub(super) catalog_error: Option<String>,
    /// Kept across restarts so status can show what the server last said.
    pub(super) identity: Option<ServerIdentity>,
    /// How the server's era was decided, for status.
    pub(super) era_reason: Option<String>,
    /// The running connection's era came from the cache (so a failed start forgets it).
    pub(super) plan_from_cache: bool,
    /// Its process ended when asked `server/discover` (and why): the next start speaks
    /// `initialize` at once, and the verdict is remembered only once that start works,
    /// since a server that fails to start ends the same way.
    pub(super) quit_on_discover: Option<String>,
    /// The server's cache hints from its last tool list.
    pub(super) cache: Option<(u64, bool)>,
    /// A lazy server started only to learn its catalog: it goes idle once it has.
    pub(super) fill_only: bool,
    /// For an instance of a server run per agent or per project: whose it is.
    pub(super) instance: Option<instances::Instance>,
    /// The slot goes away once its process has stopped.
    pub(super) removing: bool,
    /// A remote server's OAuth login (None for local servers and static credentials).
    pub(super) login: Option<crate::oauth::credential::CredentialHandle>,
    /// The server asked for scopes the login lacks.
    pub(super) more_scope: bool,
    /// Lifecycle events (state changes, exits), newest last, for `mcpd ctl logs`.
    pub(super) history: std::collections::VecDeque<String>,
    /// The state the history last recorded.
    pub(super) noted: Option<ServerState>,
    /// The lookup of this start's secrets in flight (its id), if one is.
    pub(super) resolving: Option<u64>,
    /// This start's secrets, once looked up; taken by the connection that uses them.
    pub(super) resolved: Option<super::secrets::Resolved>,
    /// The secret whose absence keeps the server down, until `ctl secret set` sets it.
    pub(super) missing_secret: Option<String>,
}

/// Lifecycle events kept per server.
const HISTORY: usize = 100;

impl Slot {
    /// Records a lifecycle event with the time.
    pub(super) fn note(&mut self, event: String) {
        let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(format!("{now} {event}"));
    }

    /// Records a state change, with what explains it.
    pub(super) fn note_state(&mut self) {
        if self.noted == Some(self.state) {
            return;
        }
        self.noted = Some(self.state);
        let detail = match self.state {
            ServerState::Ready => self
                .running
                .as_ref()
                .and_then(|r| r.pid)
                .map(|p| format!(" (pid {p})"))
                .unwrap_or_default(),
            ServerState::Backoff | ServerState::Failed | ServerState::NeedsLogin => self
                .last_error
                .as_ref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default(),
            _ => String::new(),
        };
        self.note(format!("{}{detail}", self.state.as_str()));
    }
}

impl Slot {
    pub(super) fn new(cfg: ServerConfig) -> Slot {
        Slot {
            backoff: Backoff::new(&cfg.restart),
            budget: CrashBudget::new(&cfg.restart),
            state: if cfg.enabled {
                ServerState::Stopped
            } else {
                ServerState::Disabled
            },
            running: None,
            after_exit: AfterExit::Recover,
            restarts: 0,
            retry_at: None,
            ready_since: None,
            last_error: None,
            last_exit: None,
            stderr_tail: Vec::new(),
            catalog_error: None,
            identity: None,
            era_reason: None,
            plan_from_cache: false,
            quit_on_discover: None,
            cache: None,
            fill_only: false,
            instance: None,
            removing: false,
            history: std::collections::VecDeque::new(),
            noted: None,
            login: None,
            more_scope: false,
            resolving: None,
            resolved: None,
            missing_secret: None,
            cfg,
        }
    }

    /// The longest a start of this server may take: a call waits that long for it (and
    /// hears sooner when the start fails).
    fn start_wait(&self) -> std::time::Duration {
        let h = &self.cfg.health;
        match &self.cfg.launch {
            crate::config::Launch::Stdio(l) if l.package_runner().is_some() => {
                h.startup_timeout.max(h.first_start_timeout)
            }
            _ => h.startup_timeout,
        }
    }

    pub(super) fn availability(&self) -> Availability {
        let wait = self.start_wait();
        match self.cfg.share {
            Share::Agent if self.instance.is_none() => return Availability::PerAgent { wait },
            Share::Project { .. } if self.instance.is_none() => {
                return Availability::PerProject { wait };
            }
            _ => {}
        }
        match (
            self.state,
            self.running.as_ref().and_then(|r| r.handle.as_ref()),
        ) {
            (ServerState::Ready, Some(h)) => Availability::Ready(h.clone()),
            (ServerState::Backoff, _) => Availability::Backoff {
                attempt: self.backoff.attempt(),
                retry_at: self
                    .retry_at
                    .map(Instant::into_std)
                    .unwrap_or_else(std::time::Instant::now),
            },
            (ServerState::Failed, _) if self.cfg.unresolved.is_some() => Availability::NotStarted {
                reason: self.last_error.clone().unwrap_or_default(),
            },
            (ServerState::Failed, _) => Availability::Failed {
                reason: self.last_error.clone().unwrap_or_else(|| "unknown".into()),
            },
            (ServerState::Stopped, _) => Availability::Stopped,
            (ServerState::Disabled, _) => Availability::Disabled,
            (ServerState::NeedsLogin, _) => Availability::NeedsLogin {
                reason: login::login_hint(self, &self.cfg.name, "waiting for an OAuth login"),
            },
            (ServerState::Idle, _) => Availability::Idle { wait },
            _ => Availability::Starting { wait },
        }
    }
}
