//! Whether a server can take calls now, and the ready instances of per-agent or project servers.
//!
//! `Availability` says the first; `Instances` holds the ready instances of servers run
//! per agent or per project; agents read both from the catalog.

use crate::upstream::UpstreamHandle;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Which instance of a server run per agent or per project.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum InstanceKey {
    /// An agent connection's own (`share = "agent"`).
    Agent(u64),
    /// A project's, by its canonical path (`share = "project"`).
    Project(Arc<Path>),
}

impl std::fmt::Display for InstanceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InstanceKey::Agent(a) => write!(f, "{a}"),
            InstanceKey::Project(p) => write!(f, "{}", p.display()),
        }
    }
}

/// The ready instances' handles, by server then instance: an agent's call finds its
/// own here without asking the supervisor.
#[derive(Debug, Default)]
pub struct Instances(HashMap<Arc<str>, HashMap<InstanceKey, UpstreamHandle>>);

impl Instances {
    pub fn insert(&mut self, server: Arc<str>, key: InstanceKey, handle: UpstreamHandle) {
        self.0.entry(server).or_default().insert(key, handle);
    }

    /// How many instances are ready.
    pub fn count(&self) -> usize {
        self.0.values().map(HashMap::len).sum()
    }

    /// The ready instance `key` of `server`, if any.
    pub fn get(&self, server: &str, key: &InstanceKey) -> Option<&UpstreamHandle> {
        self.0.get(server)?.get(key)
    }
}

/// Whether calls to a server can be made now, and if not, what to tell the caller.
#[derive(Debug, Clone)]
pub enum Availability {
    Ready(UpstreamHandle),
    /// Starting: a call may wait this long for it to be ready.
    Starting {
        wait: std::time::Duration,
    },
    Backoff {
        attempt: u32,
        retry_at: Instant,
    },
    Failed {
        reason: String,
    },
    /// Stopped by `mcpd ctl stop`.
    Stopped,
    /// `enabled = false` in the config.
    Disabled,
    /// Never started: a setting cannot be resolved (a variable mcpd's environment
    /// lacks); the reason says which and what to do.
    NotStarted {
        reason: String,
    },
    /// Not running until a call needs it (`start = "lazy"` or `idle_timeout`); a call
    /// starts it and may wait this long.
    Idle {
        wait: std::time::Duration,
    },
    /// Each agent gets its own instance (`share = "agent"`); a call starts the caller's
    /// and may wait this long.
    PerAgent {
        wait: std::time::Duration,
    },
    /// Each project gets its own instance (`share = "project"`), shared by the agents
    /// working in it; a call starts the caller's project's and may wait this long.
    PerProject {
        wait: std::time::Duration,
    },
    /// A remote server waiting for `mcpd ctl login`; the reason says so.
    NeedsLogin {
        reason: String,
    },
}

impl Availability {
    /// Finishes the sentence "server 'x' is …" for an agent.
    pub fn explain(&self) -> String {
        match self {
            Availability::Ready(_) => "ready".into(),
            Availability::Starting { .. } => {
                "still starting; a tool call waits for it, this request needs it ready: retry once `mcpd ctl status` shows it ready".into()
            }
            Availability::Backoff { attempt, retry_at } => {
                let wait = retry_at.saturating_duration_since(Instant::now());
                format!(
                    "restarting (attempt {attempt}, next try in {})",
                    humantime::format_duration(std::time::Duration::from_millis(
                        wait.as_millis() as u64
                    ))
                )
            }
            Availability::Failed { reason } => format!(
                "failed and will not be restarted automatically ({reason}); fix it and run `mcpd ctl restart`"
            ),
            Availability::Stopped => {
                "stopped by `mcpd ctl stop`; `mcpd ctl start` starts it again".into()
            }
            Availability::Disabled => {
                "disabled in the config (enabled = false); `mcpd ctl start` starts it until the daemon restarts".into()
            }
            Availability::NotStarted { reason } => format!("not started: {reason}"),
            Availability::Idle { .. } => "idle and could not be started".into(),
            Availability::PerAgent { .. } => "run per agent".into(),
            Availability::PerProject { .. } => {
                "run per project, and none of its instances has listed its tools yet: the instance for this agent's project lists them once it is up; retry in a moment".into()
            }
            Availability::NeedsLogin { reason } => reason.clone(),
        }
    }
}
