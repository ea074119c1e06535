//! The supervisor's handle.
//!
//! The messages it takes, the cloneable `SupervisorHandle` that sends them (each answer
//! within a deadline), and why a request can fail.

use super::{
    EVENTS, INSTANCE_WAIT, MAILBOX, ReloadSummary, STATUS_WAIT, ServerStatus, Slot, Supervisor,
    instances,
};
use crate::config::Config;
use crate::registry::{Catalog, Registry};
use crate::sentinel::SentinelHandle;
use crate::upstream::UpstreamHandle;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub(super) enum SupervisorMsg {
    Status {
        respond_to: oneshot::Sender<Vec<ServerStatus>>,
    },
    Control {
        name: String,
        action: Action,
        respond_to: oneshot::Sender<Result<(), SupervisorError>>,
    },
    /// An agent's instance of a server run per agent or per project.
    Instance {
        server: String,
        key: crate::registry::InstanceKey,
        respond_to: instances::Waiter,
    },
    /// An agent's project is known, changed or gone; the project servers it sees.
    AgentProject {
        agent: u64,
        project: Option<Arc<std::path::Path>>,
        servers: Vec<Arc<str>>,
    },
    /// An agent disconnected; its instances may go.
    AgentGone { agent: u64 },
    /// The login of a remote server, for `mcpd ctl login` and `logout`.
    Login {
        name: String,
        respond_to:
            oneshot::Sender<Result<crate::oauth::credential::CredentialHandle, SupervisorError>>,
    },
    /// A person's look at, or answer to, a server's held definitions.
    Pins {
        name: String,
        op: super::gate::PinOp,
        respond_to: oneshot::Sender<Result<serde_json::Value, super::gate::PinError>>,
    },
    /// A secret was set: servers down for want of it start; which ones did, and which
    /// running servers refer to it.
    SecretSet {
        name: String,
        respond_to: oneshot::Sender<(Vec<String>, Vec<String>)>,
    },
    /// Apply a new, already validated configuration's servers.
    Reload {
        config: Box<Config>,
        respond_to: oneshot::Sender<ReloadSummary>,
    },
}

/// Why the supervisor could not do what was asked.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SupervisorError {
    #[error("no server named '{name}' (configured: {known})")]
    UnknownServer { name: String, known: String },
    #[error("'{0}' is not run per agent or per project")]
    NotInstanced(String),
    #[error(
        "'{server}' already runs for {max} projects (max_projects), each with an agent working in it; raise max_projects or close an agent in another project"
    )]
    TooManyProjects { server: String, max: usize },
    #[error("the project directory {0} does not exist any more")]
    ProjectGone(String),
    #[error(
        "'{0}' runs one instance per agent or per project, started by their calls; restart or stop its instances instead"
    )]
    Instanced(String),
    /// An agent's own instance could not be started; says why.
    #[error("{0}")]
    InstanceFailed(String),
    #[error("'{0}' is a local server; only remote servers log in")]
    LocalServer(String),
    #[error(
        "'{0}' has a static credential (bearer_token_env or an Authorization header) or oauth = false"
    )]
    NoOAuth(String),
    #[error("the supervisor did not answer: {0}")]
    NoAnswer(#[from] mcpd_runtime::ask::AskError),
}

impl Supervisor {
    /// The error for a name that is no configured server.
    pub(super) fn unknown(&self, name: &str) -> SupervisorError {
        let known: Vec<&str> = self.slots.keys().map(|k| &**k).collect();
        SupervisorError::UnknownServer {
            name: name.to_owned(),
            known: known.join(", "),
        }
    }
}

/// Control actions on one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Stop the process if running and start a new one; clears a crash loop.
    Restart,
    Stop,
    Start,
}

/// The cloneable way to talk to the supervisor.
#[derive(Debug, Clone)]
pub struct SupervisorHandle {
    tx: mpsc::Sender<SupervisorMsg>,
}

impl SupervisorHandle {
    /// Starts the supervisor and every enabled server. The returned receiver always
    /// holds the current catalog. The task ends once `cancel` fires and every
    /// server process has been stopped and reaped. Every connection gets `task_status`,
    /// for its server's task statuses, which it only ever `try_send`s to the agent side.
    pub fn spawn(
        config: &Config,
        cancel: CancellationToken,
        sentinel: SentinelHandle,
        task_status: mcpd_runtime::budget::Sender<crate::upstream::TaskStatus>,
        secrets: crate::secrets::Secrets,
    ) -> (
        SupervisorHandle,
        watch::Receiver<Arc<Catalog>>,
        tokio::task::JoinHandle<()>,
    ) {
        let (tx, rx) = mpsc::channel(MAILBOX);
        let (catalog_tx, catalog_rx) = watch::channel(Arc::new(Catalog::default()));
        let (events_tx, events_rx) = mpsc::channel(EVENTS);
        let slots = config
            .servers
            .values()
            .map(|cfg| (Arc::from(cfg.name.as_str()), Slot::new(cfg.clone())))
            .collect();
        let state_dir = mcpd_ctl::paths::state_dir(config.daemon.state_dir.clone());
        let configured = &|name: &str| config.servers.contains_key(name);
        let store = super::store::StateStore::load(state_dir, configured);
        let sup = Supervisor {
            slots,
            registry: Registry::default(),
            catalog: catalog_tx,
            events_rx,
            rx,
            conns: JoinSet::new(),
            pins: super::pins::PinGate::new(super::pins::Pins::new(store.dir(), store.writer())),
            store,
            projects: super::projects::Projects::default(),
            starter: super::starter::Starter::new(
                super::starter::Limits {
                    max_line: config.daemon.max_message_bytes,
                    queue_bytes: config.daemon.queue_bytes,
                },
                cancel.clone(),
                events_tx,
                sentinel,
                task_status,
                secrets,
            ),
            name_limit: config.daemon.tool_name_limit,
            cancel,
        };
        let mut sup = sup;
        // The first catalog (cached lists, servers starting) is published before this
        // returns, so an agent accepted at once never sees an empty daemon.
        sup.boot();
        let task = mcpd_runtime::tracker::spawn(sup.run());
        (SupervisorHandle { tx }, catalog_rx, task)
    }

    /// Tells the supervisor the secret `name` was set: the servers it started because
    /// they waited for it, and the running ones that refer to it.
    pub async fn secret_set(&self, name: &str) -> Option<(Vec<String>, Vec<String>)> {
        mcpd_runtime::ask::ask(&self.tx, STATUS_WAIT, |respond_to| {
            SupervisorMsg::SecretSet {
                name: name.to_owned(),
                respond_to,
            }
        })
        .await
        .ok()
    }

    pub async fn status(&self) -> Option<Vec<ServerStatus>> {
        let asked = mcpd_runtime::ask::ask(&self.tx, STATUS_WAIT, |respond_to| {
            SupervisorMsg::Status { respond_to }
        })
        .await;
        asked.ok()
    }

    /// The caller's instance of a server run per agent or per project, once it is ready.
    pub async fn instance(
        &self,
        server: &str,
        key: crate::registry::InstanceKey,
    ) -> Result<UpstreamHandle, SupervisorError> {
        let asked = mcpd_runtime::ask::ask(&self.tx, INSTANCE_WAIT, |respond_to| {
            SupervisorMsg::Instance {
                server: server.to_owned(),
                key,
                respond_to,
            }
        })
        .await;
        asked.unwrap_or_else(|e| Err(e.into()))
    }

    /// Applies a new configuration's servers; returns what changed.
    pub async fn reload(
        &self,
        config: Config,
    ) -> Result<ReloadSummary, mcpd_runtime::ask::AskError> {
        mcpd_runtime::ask::ask(&self.tx, STATUS_WAIT, |respond_to| SupervisorMsg::Reload {
            config: Box::new(config),
            respond_to,
        })
        .await
    }

    /// Tells the supervisor an agent's project (None: it has none now) and the project
    /// servers it sees, whose instances start in the background.
    pub fn agent_project(
        &self,
        agent: u64,
        project: Option<Arc<std::path::Path>>,
        servers: Vec<Arc<str>>,
    ) {
        let msg = SupervisorMsg::AgentProject {
            agent,
            project,
            servers,
        };
        // A full mailbox drops this: the instances then start with the agent's first
        // call, and status counts the agent in no project.
        if self.tx.try_send(msg).is_err() {
            tracing::debug!(
                agent,
                "the supervisor is busy; not told the agent's project"
            );
        }
    }

    /// Tells the supervisor an agent disconnected.
    pub fn agent_gone(&self, agent: u64) {
        // A full mailbox drops this; the instances then stay until the daemon stops.
        let _ = self.tx.try_send(SupervisorMsg::AgentGone { agent });
    }

    /// The login of a remote server, for `mcpd ctl login` and `logout`.
    pub async fn login(
        &self,
        name: &str,
    ) -> Result<crate::oauth::credential::CredentialHandle, SupervisorError> {
        let asked = mcpd_runtime::ask::ask(&self.tx, Duration::from_secs(10), |respond_to| {
            SupervisorMsg::Login {
                name: name.to_owned(),
                respond_to,
            }
        })
        .await;
        asked.unwrap_or_else(|e| Err(e.into()))
    }

    /// A person's look at, or answer to, a server's held definitions. The wait covers an
    /// approval's write to disk.
    pub async fn pins(
        &self,
        name: &str,
        op: super::gate::PinOp,
    ) -> Result<serde_json::Value, String> {
        let asked = mcpd_runtime::ask::ask(&self.tx, Duration::from_secs(30), |respond_to| {
            SupervisorMsg::Pins {
                name: name.to_owned(),
                op,
                respond_to,
            }
        })
        .await;
        match asked {
            Ok(answer) => answer.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        }
    }

    pub async fn control(&self, name: &str, action: Action) -> Result<(), SupervisorError> {
        let asked =
            mcpd_runtime::ask::ask(&self.tx, STATUS_WAIT, |respond_to| SupervisorMsg::Control {
                name: name.to_owned(),
                action,
                respond_to,
            })
            .await;
        asked.unwrap_or_else(|e| Err(e.into()))
    }
}
