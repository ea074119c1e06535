//! The dashboard's one task: it accepts connections on the loopback listener and owns the launch tokens and sessions (`auth::Keys`), which pages and `mcpd/ui` reach through a `DashboardHandle`.
//!
//! One task for both, because nothing else is to run while no page is open: the loop
//! sleeps in `accept` and in its mailbox, with no timer (keys expire when asked about).
//! Each connection is a task of its own (hyper's HTTP/1 server over the router), capped
//! in number, with the HTTP listener's header and idle timeout.

use super::auth::{Key, Keys, TOKEN_TTL};
use crate::ask::AskError;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// Connections served at once; a browser opens six per host. More are closed at once.
const MAX_CONNECTIONS: usize = 32;
/// How long a request head may take, which is also how long an idle connection stays.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request head read (a page's requests carry a few hundred bytes).
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Messages waiting in the mailbox.
const MAILBOX: usize = 64;
/// How long a page or `mcpd/ui` waits for the actor.
const ASK_WAIT: Duration = Duration::from_secs(2);
/// How long shutdown waits for open connections.
const DRAIN: Duration = Duration::from_secs(2);

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
        let token = crate::ask::ask(&self.tx, ASK_WAIT, |respond_to| DashboardMsg::Mint {
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
        crate::ask::ask(&self.tx, ASK_WAIT, |respond_to| DashboardMsg::Redeem {
            token,
            respond_to,
        })
        .await
        .ok()
        .flatten()
    }

    /// Whether a session is open (and keeps it open).
    pub(super) async fn check(&self, session: Key) -> bool {
        crate::ask::ask(&self.tx, ASK_WAIT, |respond_to| DashboardMsg::Check {
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

/// The dashboard task's state.
pub struct DashboardActor {
    listener: TcpListener,
    inbox: mpsc::Receiver<DashboardMsg>,
    keys: Keys,
    app: Router,
    /// One permit per open connection.
    permits: Arc<Semaphore>,
    connections: TaskTracker,
    http: hyper::server::conn::http1::Builder,
    shutdown: CancellationToken,
    /// The listener's address and the daemon's user: a connection is served only when
    /// that user (or root) owns its client end.
    addr: SocketAddr,
    own_uid: u32,
}

impl DashboardActor {
    pub fn new(
        listener: TcpListener,
        mailbox: Mailbox,
        app: Router,
        shutdown: CancellationToken,
    ) -> DashboardActor {
        let addr = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)));
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT)
            .max_header_size(MAX_HEAD_BYTES)
            .keep_alive(true);
        DashboardActor {
            listener,
            inbox: mailbox.0,
            keys: Keys::default(),
            app,
            permits: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            connections: TaskTracker::new(),
            http,
            shutdown,
            addr,
            own_uid: nix::unistd::getuid().as_raw(),
        }
    }

    /// Serves until shutdown, then lets open connections finish (bounded by `DRAIN`).
    pub async fn run(mut self) {
        loop {
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => break,
                Some(msg) = self.inbox.recv() => self.handle(msg),
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, remote)) => self.serve(stream, remote),
                    Err(e) => {
                        // Usually out of file descriptors: back off rather than spin.
                        tracing::warn!("dashboard accept failed: {e}");
                        tokio::select! {
                            () = self.shutdown.cancelled() => break,
                            () = tokio::time::sleep(Duration::from_millis(100)) => {}
                        }
                    }
                },
            }
        }
        self.connections.close();
        if tokio::time::timeout(DRAIN, self.connections.wait())
            .await
            .is_err()
        {
            tracing::debug!("dashboard connections still open at shutdown");
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

    /// Starts serving a connection, or closes it when `MAX_CONNECTIONS` are open.
    fn serve(&mut self, stream: TcpStream, remote: SocketAddr) {
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            tracing::debug!(%remote, "dashboard connection refused: {MAX_CONNECTIONS} are open");
            return;
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(%remote, "cannot set TCP_NODELAY: {e}");
        }
        let uid = super::peer::uid_of(remote, self.addr);
        if !super::peer::allowed(uid, self.own_uid) {
            tracing::warn!(%remote, uid, "refused a dashboard connection from another user (or one whose user could not be told)");
            self.connections.spawn(refuse(stream, permit));
            return;
        }
        self.connections.spawn(connection(
            stream,
            remote,
            self.http.clone(),
            self.app.clone(),
            permit,
            self.shutdown.clone(),
        ));
    }
}

/// Tells another user's connection why it gets nothing, and closes it.
async fn refuse(mut stream: TcpStream, permit: OwnedSemaphorePermit) {
    use tokio::io::AsyncWriteExt as _;
    const ANSWER: &[u8] = b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 64\r\nConnection: close\r\n\r\nThis mcpd dashboard is for the user who runs the daemon, only.\n\n";
    // A peer that does not read gets nothing after a moment; it is closed either way.
    let _ = tokio::time::timeout(HEADER_TIMEOUT, stream.write_all(ANSWER)).await;
    drop(permit);
}

/// Serves one connection until it closes, times out, or shutdown lets it finish.
async fn connection(
    stream: TcpStream,
    remote: SocketAddr,
    http: hyper::server::conn::http1::Builder,
    app: Router,
    permit: OwnedSemaphorePermit,
    shutdown: CancellationToken,
) {
    let service =
        hyper::service::service_fn(move |req: hyper::Request<Incoming>| app.clone().oneshot(req));
    let conn = http.serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    let served = tokio::select! {
        r = conn.as_mut() => r,
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    // Timeouts, resets and malformed requests end a connection; none concerns anyone else.
    if let Err(e) = served {
        tracing::debug!(%remote, "dashboard connection ended: {e}");
    }
    drop(permit);
}
