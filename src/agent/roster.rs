//! Who is connected: the roster, an actor that knows every agent connection and asks each for its live details when `mcpd ctl agents` wants them.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How long a busy agent connection may take to describe itself.
const ASK_TIMEOUT: Duration = Duration::from_millis(500);
/// How long `ctl agents` waits for the whole list (every agent asked at once).
const LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// One agent as `ctl agents` shows it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AgentInfo {
    pub agent: u64,
    pub pid: Option<i32>,
    pub uid: Option<u32>,
    /// The executable of the connecting process, from `/proc/PID/exe`.
    pub exe: Option<String>,
    pub client: Option<String>,
    pub client_version: Option<String>,
    /// "legacy", "modern", or none before the first decisive exchange.
    pub era: Option<String>,
    pub in_flight: usize,
    pub profile: Option<String>,
    /// How the agent is connected: "unix", "http session" or "http stateless".
    #[serde(default)]
    pub transport: Option<String>,
    /// The peer's address, for agents connected over HTTP.
    #[serde(default)]
    pub remote: Option<String>,
}

impl AgentInfo {
    /// An agent on the Unix socket, as known before it says who it is: its process and
    /// that process's executable.
    pub fn unix(agent: u64, pid: Option<i32>, uid: Option<u32>) -> AgentInfo {
        let exe = pid
            .and_then(|p| {
                #[allow(
                    clippy::disallowed_methods,
                    reason = "a procfs link, which never waits"
                )]
                std::fs::read_link(format!("/proc/{p}/exe")).ok()
            })
            .map(|p| p.display().to_string());
        AgentInfo {
            agent,
            pid,
            uid,
            exe,
            transport: Some("unix".into()),
            ..Default::default()
        }
    }
}

/// How a connection is asked for its live details.
pub type Asker = mpsc::Sender<oneshot::Sender<AgentInfo>>;

enum Msg {
    Join {
        info: AgentInfo,
        ask: Asker,
    },
    Leave {
        agent: u64,
    },
    List {
        respond_to: oneshot::Sender<Vec<AgentInfo>>,
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
        crate::tasks::spawn(roster.run());
        AgentRoster { tx }
    }

    pub fn join(&self, info: AgentInfo, ask: Asker) {
        // A full roster mailbox only costs this agent its line in `ctl agents`.
        let _ = self.tx.try_send(Msg::Join { info, ask });
    }

    pub fn leave(&self, agent: u64) {
        let _ = self.tx.try_send(Msg::Leave { agent });
    }

    pub async fn list(&self) -> Vec<AgentInfo> {
        crate::ask::ask(&self.tx, LIST_TIMEOUT, |respond_to| Msg::List {
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
                self.agents.insert(info.agent, (info, ask));
            }
            Msg::Leave { agent } => {
                self.agents.remove(&agent);
            }
            Msg::List { respond_to } => {
                // Asked from a task of its own, so a slow agent never holds up joins and
                // leaves.
                let known: Vec<(AgentInfo, Asker)> = self.agents.values().cloned().collect();
                crate::tasks::spawn(async move {
                    let asked = known.into_iter().map(|(base, ask)| describe(base, ask));
                    let out = futures::future::join_all(asked).await;
                    let _ = respond_to.send(out); // the asker may have left
                });
            }
        }
    }
}

/// What an agent says about itself, on top of what was known when it connected.
async fn describe(base: AgentInfo, ask: Asker) -> AgentInfo {
    let (respond_to, rx) = oneshot::channel();
    if ask.try_send(respond_to).is_err() {
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
            ..live
        },
        _ => base,
    }
}
