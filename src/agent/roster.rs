//! Who is connected: the roster, an actor that knows every agent connection.
//!
//! It asks each connection for its live details when `mcpd ctl agents` wants them.

use mcpd_ctl::control_api::AgentInfo;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How long a busy agent connection may take to describe itself.
const ASK_TIMEOUT: Duration = Duration::from_millis(500);
/// How long `ctl agents` waits for the whole list (every agent asked at once).
const LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// An agent on the Unix socket, as known before it says who it is: its process and
/// that process's executable. (The shape is `control_api`'s; filling it in from procfs
/// is the daemon's business.)
pub fn unix_agent(agent: u64, pid: Option<i32>, uid: Option<u32>) -> AgentInfo {
    let mut info = AgentInfo {
        agent,
        pid,
        uid,
        exe: pid.and_then(exe_of),
        transport: Some("unix".into()),
        ..Default::default()
    };
    // Behind `mcpd connect` is the client that started it: the one worth showing.
    if let Some(bridge) = pid
        && let Some(own) = own_exe()
        && info.exe.as_deref() == Some(own)
        && let Some(parent) = parent_of(bridge)
    {
        info.via = Some("mcpd connect".into());
        info.bridge_pid = Some(bridge);
        info.pid = Some(parent);
        info.exe = exe_of(parent);
    }
    info
}

/// This daemon's own executable, read once: every socket connection is compared with it.
fn own_exe() -> Option<&'static str> {
    static OWN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    OWN.get_or_init(|| std::process::id().try_into().ok().and_then(exe_of))
        .as_deref()
}

/// The executable of process `pid`.
fn exe_of(pid: i32) -> Option<String> {
    #[allow(
        clippy::disallowed_methods,
        reason = "a procfs link, which never waits"
    )]
    let link = std::fs::read_link(format!("/proc/{pid}/exe"));
    link.ok().map(|p| p.display().to_string())
}

/// The parent of process `pid`, unless that is init (or outside mcpd's pid namespace).
fn parent_of(pid: i32) -> Option<i32> {
    let ppid = super::lineage::parent_of(u32::try_from(pid).ok()?)?;
    i32::try_from(ppid).ok().filter(|p| *p > 1)
}

/// What the roster asks a connection.
pub enum RosterAsk {
    /// Its live details, for `ctl agents` and the dashboard.
    Describe(oneshot::Sender<AgentInfo>),
    /// To cancel a request in flight for the daemon's user; answers whether it was.
    Cancel {
        id: mcpd_wire::jsonrpc::Id,
        respond_to: oneshot::Sender<bool>,
    },
}

/// How a connection is asked.
pub type Asker = mpsc::Sender<RosterAsk>;

/// Why a request could not be cancelled.
#[derive(Debug, thiserror::Error)]
pub enum CancelError {
    #[error("no agent {0} is connected")]
    NoAgent(u64),
    #[error("agent {agent} has no request {id} in flight (it may have just finished)")]
    NoRequest { agent: u64, id: String },
    #[error("agent {0} did not answer in time")]
    Busy(u64),
}

enum Msg {
    Join {
        /// Boxed: the other messages are a few words.
        info: Box<AgentInfo>,
        ask: Asker,
    },
    Leave {
        agent: u64,
    },
    List {
        respond_to: oneshot::Sender<Vec<AgentInfo>>,
    },
    Find {
        agent: u64,
        respond_to: oneshot::Sender<Option<Asker>>,
    },
}

/// The cloneable way to the roster.
#[derive(Clone)]
pub struct AgentRoster {
    tx: mpsc::Sender<Msg>,
}

impl AgentRoster {
    pub fn spawn() -> AgentRoster {
        let (tx, rx) = mpsc::channel::<Msg>(256);
        let roster = Roster {
            agents: BTreeMap::new(),
            rx,
        };
        mcpd_runtime::tracker::spawn(roster.run());
        AgentRoster { tx }
    }

    pub fn join(&self, info: AgentInfo, ask: Asker) {
        // A full roster mailbox only costs this agent its line in `ctl agents`.
        let _ = self.tx.try_send(Msg::Join {
            info: Box::new(info),
            ask,
        });
    }

    pub fn leave(&self, agent: u64) {
        let _ = self.tx.try_send(Msg::Leave { agent });
    }

    /// Cancels agent `agent`'s request `id` (an id as JSON text) for the daemon's user:
    /// cancelled upstream as if the agent had, and the agent answered with an error.
    pub async fn cancel(&self, agent: u64, id: &str) -> Result<(), CancelError> {
        let no_request = || CancelError::NoRequest {
            agent,
            id: id.to_owned(),
        };
        let parsed = serde_json::from_str(id).ok();
        let parsed = parsed.as_ref().and_then(mcpd_wire::jsonrpc::Id::from_value);
        let Some(parsed) = parsed else {
            return Err(no_request());
        };
        let found = mcpd_runtime::ask::ask(&self.tx, ASK_TIMEOUT, |respond_to| Msg::Find {
            agent,
            respond_to,
        })
        .await;
        let Ok(Some(ask)) = found else {
            return Err(CancelError::NoAgent(agent));
        };
        let asked = mcpd_runtime::ask::ask(&ask, ASK_TIMEOUT, |respond_to| RosterAsk::Cancel {
            id: parsed,
            respond_to,
        })
        .await;
        match asked {
            Ok(true) => Ok(()),
            Ok(false) => Err(no_request()),
            Err(mcpd_runtime::ask::AskError::Gone) => Err(CancelError::NoAgent(agent)),
            Err(_) => Err(CancelError::Busy(agent)),
        }
    }

    pub async fn list(&self) -> Vec<AgentInfo> {
        mcpd_runtime::ask::ask(&self.tx, LIST_TIMEOUT, |respond_to| Msg::List {
            respond_to,
        })
        .await
        .unwrap_or_default()
    }
}

/// The actor behind `AgentRoster`: every connected agent, with how to ask it.
struct Roster {
    agents: BTreeMap<u64, (AgentInfo, Asker)>,
    rx: mpsc::Receiver<Msg>,
}

impl Roster {
    async fn run(mut self) {
        while let Some(msg) = self.rx.recv().await {
            self.on_msg(msg);
        }
    }

    fn on_msg(&mut self, msg: Msg) {
        // A connection whose `Leave` was dropped (a full mailbox) is gone all the same:
        // its asker is closed. Pruned here so no ghost stays listed.
        self.agents.retain(|_, (_, ask)| !ask.is_closed());
        match msg {
            Msg::Join { info, ask } => {
                self.agents.insert(info.agent, (*info, ask));
            }
            Msg::Leave { agent } => {
                self.agents.remove(&agent);
            }
            Msg::Find { agent, respond_to } => {
                let ask = self.agents.get(&agent).map(|(_, ask)| ask.clone());
                let _ = respond_to.send(ask); // the asker may have left
            }
            Msg::List { respond_to } => {
                // Asked from a task of its own, so a slow agent never holds up joins and
                // leaves.
                let known: Vec<(AgentInfo, Asker)> = self.agents.values().cloned().collect();
                mcpd_runtime::tracker::spawn(async move {
                    let asked = known.into_iter().map(|(base, ask)| describe(base, ask));
                    let mut out = futures::future::join_all(asked).await;
                    out.retain(|a| !a.control_only);
                    let _ = respond_to.send(out); // the asker may have left
                });
            }
        }
    }
}

/// What an agent says about itself, on top of what was known when it connected.
async fn describe(base: AgentInfo, ask: Asker) -> AgentInfo {
    let (respond_to, rx) = oneshot::channel();
    if ask.try_send(RosterAsk::Describe(respond_to)).is_err() {
        return base;
    }
    match tokio::time::timeout(ASK_TIMEOUT, rx).await {
        Ok(Ok(live)) => AgentInfo {
            agent: base.agent,
            pid: base.pid,
            uid: base.uid,
            exe: base.exe,
            transport: base.transport,
            remote: base.remote,
            via: base.via,
            bridge_pid: base.bridge_pid,
            server_pid: base.server_pid,
            ..live
        },
        _ => base,
    }
}
