//! Who owns the HTTP agents.
//!
//! An actor holding the legacy sessions by id and the one shared stateless connection,
//! and starting their connections.

use super::relay::{Relay, RelayHandle, SESSION_IDLE};
use crate::agent::AgentContext;
use futures::FutureExt;
use mcpd_ctl::control_api::AgentInfo;
use mcpd_runtime::outbox::Outbox;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Frames queued from HTTP requests to one connection.
const FRAMES: usize = 64;
/// How long a request waits for the sessions actor.
const ASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

enum Msg {
    Open {
        remote: SocketAddr,
        reply: oneshot::Sender<Option<(String, RelayHandle)>>,
    },
    Find {
        id: String,
        reply: oneshot::Sender<Option<RelayHandle>>,
    },
    Forget {
        id: String,
    },
    Stateless {
        remote: SocketAddr,
        reply: oneshot::Sender<RelayHandle>,
    },
}

/// The cloneable way to the sessions actor.
#[derive(Clone)]
pub struct Sessions {
    tx: mpsc::Sender<Msg>,
}

impl Sessions {
    pub fn spawn(
        ctx: AgentContext,
        tracker: TaskTracker,
        shutdown: CancellationToken,
        max: usize,
    ) -> Sessions {
        let (tx, rx) = mpsc::channel(64);
        let starter = Starter {
            ctx,
            tracker,
            shutdown,
            sessions: tx.downgrade(),
        };
        let me = Sessions { tx };
        let table = SessionTable {
            open: HashMap::new(),
            stateless: None,
            max,
            starter,
            rx,
        };
        mcpd_runtime::tracker::spawn(table.run());
        me
    }

    /// Starts a new legacy session; None when `max` are open.
    pub async fn open(&self, remote: SocketAddr) -> Option<(String, RelayHandle)> {
        mcpd_runtime::ask::ask(&self.tx, ASK_TIMEOUT, |reply| Msg::Open { remote, reply })
            .await
            .ok()
            .flatten()
    }

    pub async fn find(&self, id: &str) -> Option<RelayHandle> {
        let id = id.to_owned();
        mcpd_runtime::ask::ask(&self.tx, ASK_TIMEOUT, |reply| Msg::Find { id, reply })
            .await
            .ok()
            .flatten()
    }

    pub async fn forget(&self, id: &str) {
        let id = id.to_owned();
        // A stopped actor has forgotten everything already.
        let _ = self.tx.send(Msg::Forget { id }).await;
    }

    /// The shared connection for stateless requests, started again if it ended.
    pub async fn stateless(&self, remote: SocketAddr) -> Option<RelayHandle> {
        mcpd_runtime::ask::ask(&self.tx, ASK_TIMEOUT, |reply| Msg::Stateless {
            remote,
            reply,
        })
        .await
        .ok()
    }
}

/// The actor behind `Sessions`: the open legacy sessions by id and the one shared
/// stateless connection.
struct SessionTable {
    open: HashMap<String, RelayHandle>,
    stateless: Option<RelayHandle>,
    /// Sessions open at once, at most.
    max: usize,
    starter: Starter,
    rx: mpsc::Receiver<Msg>,
}

impl SessionTable {
    async fn run(mut self) {
        while let Some(msg) = self.rx.recv().await {
            self.on_msg(msg);
        }
    }

    fn on_msg(&mut self, msg: Msg) {
        match msg {
            Msg::Open { remote, reply } => {
                self.open.retain(|_, r| !r.is_closed());
                let made = (self.open.len() < self.max).then(|| {
                    let id = new_session_id();
                    let relay = self.starter.start(remote, Some(id.clone()));
                    self.open.insert(id.clone(), relay.clone());
                    (id, relay)
                });
                let _ = reply.send(made); // the client may have gone
            }
            Msg::Find { id, reply } => {
                let found = self.open.get(&id).filter(|r| !r.is_closed()).cloned();
                let _ = reply.send(found); // the client may have gone
            }
            Msg::Forget { id } => {
                self.open.remove(&id);
            }
            Msg::Stateless { remote, reply } => {
                let relay = match &self.stateless {
                    Some(r) if !r.is_closed() => r.clone(),
                    _ => {
                        let r = self.starter.start(remote, None);
                        self.stateless = Some(r.clone());
                        r
                    }
                };
                let _ = reply.send(relay); // the client may have gone
            }
        }
    }
}

/// Starts agent connections for the sessions actor.
struct Starter {
    ctx: AgentContext,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    /// Weak, so the table's own connections do not keep it alive: it ends when the
    /// listener's last handle goes.
    sessions: mpsc::WeakSender<Msg>,
}

impl Starter {
    /// Starts one agent connection with its relay: a session's when `session` is
    /// given, else the shared stateless one.
    fn start(&self, remote: SocketAddr, session: Option<String>) -> RelayHandle {
        // HTTP agents have no peer credentials: they may use the daemon (they showed
        // the token) but not control it.
        let ctx = self.ctx.with_peer(crate::agent::Peer::http());
        let agent = ctx.daemon.next_agent.fetch_add(1, Ordering::Relaxed) + 1;
        let (outbox, out_rx) = Outbox::new(ctx.queue, ctx.queue_bytes);
        let (frames_tx, mut frames_rx) = mpsc::channel(FRAMES);
        let stateless = session.is_none();
        let (relay, handle) = Relay::new(agent, stateless, frames_tx, out_rx);
        let writer = mcpd_runtime::tracker::spawn(relay.run((!stateless).then_some(SESSION_IDLE)));
        let frames = futures::stream::poll_fn(move |cx| {
            frames_rx
                .poll_recv(cx)
                .map(|f| f.map(Ok::<_, std::io::Error>))
        });
        let seed = AgentInfo {
            agent,
            transport: Some(
                if stateless {
                    "http stateless"
                } else {
                    "http session"
                }
                .into(),
            ),
            remote: (!stateless).then(|| remote.to_string()),
            ..Default::default()
        };
        let sessions = self.sessions.clone();
        let shutdown = self.shutdown.clone();
        tracing::info!(agent, %remote, stateless, "HTTP agent connected");
        let served = crate::agent::conn::run(frames, outbox, writer, seed, ctx, shutdown);
        // `then`, not an `async` block awaiting it: that would hold the connection's
        // future twice (captured, and moved into the await).
        self.tracker.spawn(served.then(move |()| async move {
            if let (Some(id), Some(tx)) = (session, sessions.upgrade()) {
                Sessions { tx }.forget(&id).await;
            }
            tracing::info!(agent, "HTTP agent disconnected");
        }));
        handle
    }
}

/// 128 random bits as hex: visible ASCII, as the spec requires, and unguessable.
fn new_session_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}
