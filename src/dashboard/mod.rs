//! The dashboard: every server, agent and call of the daemon live.
//!
//! It also has a page per server to try its tools and act on it, and the daemon's log,
//! served on loopback (its own listener, `[daemon] ui_listen`, or the HTTP listener's
//! when that runs on loopback) to a browser logged in through `mcpd ctl ui`.
//!
//! - `actor.rs` owns the launch tokens and sessions (`auth.rs`); pages and `mcpd/ui`
//!   reach it through a `DashboardHandle`.
//! - `guard.rs` is the layer in front of every route (the connecting user, Host, Origin,
//!   the session cookie, the security headers; `peer.rs` tells the user); `pages/`
//!   renders the pages with askama.
//! - `port.rs` keeps the port of its own listener across restarts when `ui_listen`
//!   does not set one.
//! - While no page is open nothing runs but the keys' owner, asleep in its mailbox, and
//!   the accept loop (`http_accept`), asleep in `accept`: no timer, no per-page task;
//!   keys expire when they are next looked at.

mod actor;
mod auth;
mod guard;
mod lineage;
mod pages;
mod peer;
mod port;

pub use actor::DashboardHandle;

use crate::agent::AgentContext;
use crate::config::UiListen;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Connections served at once on the dashboard's own listener; a browser opens six.
const MAX_CONNECTIONS: usize = 32;
/// How long a request head may take, which is also how long an idle connection stays.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the dashboard could not start.
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    #[error(
        "cannot listen for the dashboard on {addr}: {source}; choose another daemon.ui_listen or set daemon.ui = false"
    )]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Where the dashboard is served, decided before the daemon reports ready.
pub enum Place {
    /// Its own listener, bound (a taken port is a startup error).
    Own(TcpListener),
    /// The HTTP listener's port, at this address: the dashboard's routes are the
    /// HTTP listener's fallback.
    Http(SocketAddr),
}

impl Place {
    fn addr(&self) -> Option<SocketAddr> {
        match self {
            Place::Own(l) => l.local_addr().ok(),
            Place::Http(a) => Some(*a),
        }
    }
}

/// Binds the dashboard's own loopback address. An explicit `ui_listen` is bound as it
/// is. Without one, the port of the last run kept in `state` (the state directory) is
/// asked for first, so the page's address survives a restart; when it is taken (or none
/// is kept) the kernel picks a free port, which is kept for the next start.
pub async fn bind(cfg: &UiListen, state: Option<&Path>) -> Result<Place, DashboardError> {
    let bind_err = |source| DashboardError::Bind {
        addr: cfg.addr,
        source,
    };
    let state = state.filter(|_| !cfg.explicit && cfg.addr.port() == 0);
    let kept = match state {
        Some(dir) => port::remembered(dir).await,
        None => None,
    };
    if let Some(p) = kept {
        let addr = SocketAddr::new(cfg.addr.ip(), p);
        match TcpListener::bind(addr).await {
            Ok(listener) => return Ok(Place::Own(listener)),
            Err(e) => tracing::warn!(
                port = p,
                "the dashboard cannot listen on its port of the last run, {p} ({e}); it gets a new port, so its address changes (mcpd ctl ui prints it)"
            ),
        }
    }
    let listener = TcpListener::bind(cfg.addr).await.map_err(bind_err)?;
    let bound = listener.local_addr().map_err(bind_err)?;
    if let Some(dir) = state {
        port::remember(dir, bound.port()).await;
    }
    Ok(Place::Own(listener))
}

/// A dashboard placed and reachable through its handle, not yet serving: the handle goes
/// into the daemon's facts (`mcpd/ui`, status) before the agent context the pages use is
/// made from them.
pub struct Pending {
    place: Place,
    addr: SocketAddr,
    handle: DashboardHandle,
    mailbox: actor::Mailbox,
}

/// The handle of a dashboard served at `place`, and the dashboard to start.
pub fn prepare(place: Place) -> (DashboardHandle, Pending) {
    let addr = place
        .addr()
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
    let (handle, mailbox) = actor::channel(addr);
    let pending = Pending {
        place,
        addr,
        handle: handle.clone(),
        mailbox,
    };
    (handle, pending)
}

/// A started dashboard: the tasks to wait for at shutdown and, when it shares the HTTP
/// listener's port, the routes that listener serves besides MCP.
pub struct Started {
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
    pub routes: Option<axum::Router>,
}

impl Pending {
    /// Starts serving until `shutdown` fires. `ctx` is the daemon's agent context: the
    /// pages read the supervisor, the roster and the metrics through it, and call tools
    /// through an agent connection of their own; `logs` is the daemon's recent log.
    pub fn start(
        self,
        ctx: AgentContext,
        logs: crate::logging::LogBook,
        shutdown: CancellationToken,
    ) -> Started {
        let Pending {
            place,
            addr,
            handle,
            mailbox,
        } = self;
        let guard = guard::Guard {
            policy: Arc::new(guard::Policy::new(addr)),
            keys: handle.clone(),
        };
        let pages = pages::Pages {
            supervisor: ctx.supervisor.clone(),
            keys: handle.clone(),
            ctx,
            logs,
            shutdown: shutdown.clone(),
        };
        // The guard is outermost: every route and the fallback are behind it.
        let app =
            pages::routes(pages).layer(axum::middleware::from_fn_with_state(guard, guard::guard));
        let keys =
            mcpd_runtime::tracker::spawn(actor::DashboardActor::new(mailbox).run(shutdown.clone()));
        let mut started = Started {
            tasks: vec![keys],
            routes: None,
        };
        match place {
            Place::Own(listener) => {
                let limits = crate::http_accept::Limits {
                    name: "dashboard",
                    max_connections: MAX_CONNECTIONS,
                    header_timeout: HEADER_TIMEOUT,
                };
                started
                    .tasks
                    .push(mcpd_runtime::tracker::spawn(crate::http_accept::serve(
                        listener, app, limits, shutdown,
                    )));
            }
            Place::Http(_) => started.routes = Some(app),
        }
        tracing::info!(url = %handle.url(), "serving the dashboard (`mcpd ctl ui` opens it)");
        started
    }
}
