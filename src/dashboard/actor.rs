//! The owner of the dashboard's launch tokens and sessions (`auth::Keys`).
//!
//! Pages and `mcpd/ui` reach it through a `DashboardHandle`. It sleeps in its mailbox
//! while nobody asks: no timer (keys expire when asked about).

use super::auth::{Key, Keys, TOKEN_TTL};
use mcpd_runtime::ask::AskError;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Messages waiting in the mailbox.
const MAILBOX: usize = 64;
/// How long a page or `mcpd/ui` waits for the actor.
const ASK_WAIT: Duration = Duration::from_secs(2);

enum DashboardMsg {
    Mint {
        respond_to: oneshot::Sender<Key>,
    },
    Redeem {
        token: Key,
        respond_to: oneshot::Sender<Option<Key>>,
    },
    Check {
        session: Key,
        respond_to: oneshot::Sender<bool>,
    },
    End {
        session: Key,
    },
}

/// How pages and the daemon reach the dashboard's keys. Cheap to clone.
#[derive(Clone, Debug)]
pub struct DashboardHandle {
    tx: mpsc::Sender<DashboardMsg>,
    /// The page's origin, `http://127.0.0.1:PORT` (or `http://[::1]:PORT`).
    origin: Arc<str>,
}

impl DashboardHandle {
    /// The page's address, for `mcpd/status` (no token).
    pub fn url(&self) -> String {
        format!("{}/", self.origin)
    }

    /// A fresh launch URL: the login address with a token valid once, for `TOKEN_TTL`.
    pub async fn launch_url(&self) -> Result<(String, Duration), AskError> {
        let token = mcpd_runtime::ask::ask(&self.tx, ASK_WAIT, |respond_to| DashboardMsg::Mint {
            respond_to,
        })
        .await?;
        Ok((
            format!("{}/login?token={}", self.origin, token.hex()),
            TOKEN_TTL,
        ))
    }

    /// The new session's id for a launch token, or None (unknown, used, expired, or the
    /// dashboard is stopping).
    pub(super) async fn redeem(&self, token: Key) -> Option<Key> {
        mcpd_runtime::ask::ask(&self.tx, ASK_WAIT, |respond_to| DashboardMsg::Redeem {
            token,
            respond_to,
        })
        .await
        .ok()
        .flatten()
    }

    /// Whether a session is open (and keeps it open).
    pub(super) async fn check(&self, session: Key) -> bool {
        mcpd_runtime::ask::ask(&self.tx, ASK_WAIT, |respond_to| DashboardMsg::Check {
            session,
            respond_to,
        })
        .await
        .unwrap_or(false)
    }

    /// Ends a session.
    pub(super) async fn end(&self, session: Key) {
        // A full mailbox waits; a stopped dashboard has no sessions left to end.
        let _ = tokio::time::timeout(ASK_WAIT, self.tx.send(DashboardMsg::End { session })).await;
    }
}

impl crate::agent::UiLink for DashboardHandle {
    fn url(&self) -> String {
        DashboardHandle::url(self)
    }

    fn launch_url(&self) -> futures::future::BoxFuture<'_, Result<(String, Duration), AskError>> {
        Box::pin(DashboardHandle::launch_url(self))
    }
}

/// The mailbox of a dashboard not yet started, and the handle that sends to it: the
/// router is built with the handle before the actor gets its router.
pub struct Mailbox(mpsc::Receiver<DashboardMsg>);

/// A handle and the mailbox it sends to, for a dashboard listening at `addr`.
pub fn channel(addr: SocketAddr) -> (DashboardHandle, Mailbox) {
    let (tx, rx) = mpsc::channel(MAILBOX);
    let origin: Arc<str> = format!("http://{addr}").into();
    (DashboardHandle { tx, origin }, Mailbox(rx))
}

/// The keys' owner.
pub struct DashboardActor {
    inbox: mpsc::Receiver<DashboardMsg>,
    keys: Keys,
}

impl DashboardActor {
    pub fn new(mailbox: Mailbox) -> DashboardActor {
        DashboardActor {
            inbox: mailbox.0,
            keys: Keys::default(),
        }
    }

    /// Answers until shutdown or until every handle is gone.
    pub async fn run(mut self, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                msg = self.inbox.recv() => match msg {
                    Some(msg) => self.handle(msg),
                    None => break,
                },
            }
        }
    }

    fn handle(&mut self, msg: DashboardMsg) {
        let now = Instant::now();
        // A caller that gave up has dropped its receiver; nothing is owed to it.
        match msg {
            DashboardMsg::Mint { respond_to } => {
                let _ = respond_to.send(self.keys.mint(now));
            }
            DashboardMsg::Redeem { token, respond_to } => {
                let session = self.keys.redeem(&token, now);
                let (tokens, sessions) = self.keys.counts();
                match session {
                    Some(_) => tracing::info!(sessions, "a browser logged in to the dashboard"),
                    None => tracing::info!(
                        tokens,
                        "a dashboard login with an unknown, used or expired token was refused"
                    ),
                }
                let _ = respond_to.send(session);
            }
            DashboardMsg::Check {
                session,
                respond_to,
            } => {
                let _ = respond_to.send(self.keys.check(&session, now));
            }
            DashboardMsg::End { session } => self.keys.end(&session),
        }
    }
}
