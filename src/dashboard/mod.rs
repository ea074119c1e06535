//! The dashboard: a read-only page of the daemon's servers, served on its own loopback TCP listener (`[daemon] ui`, `ui_listen`) to a browser logged in through `mcpd ctl ui`.
//!
//! - `actor.rs` is the one task: the accept loop, which also owns the launch tokens and
//!   sessions (`auth.rs`); pages and `mcpd/ui` reach it through a `DashboardHandle`.
//! - `guard.rs` is the layer in front of every route (Host, Origin, the session cookie,
//!   the security headers); `pages/` renders the pages with askama.
//! - While no page is open nothing runs but that task, asleep in `accept`: no timer,
//!   no per-page task; keys expire when they are next looked at.

mod actor;
mod auth;
mod guard;
mod pages;
mod peer;

pub use actor::DashboardHandle;

use crate::agent::AgentContext;
use crate::config::UiListen;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

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

/// The bound listener, before the daemon reports ready (a taken port is a startup error).
pub struct Bound {
    listener: TcpListener,
    /// The address bound (with the kernel's port when `ui_listen` asked for port 0).
    pub addr: SocketAddr,
}

/// Binds the dashboard's loopback address.
pub async fn bind(cfg: &UiListen) -> Result<Bound, DashboardError> {
    let bind_err = |source| DashboardError::Bind {
        addr: cfg.addr,
        source,
    };
    let listener = TcpListener::bind(cfg.addr).await.map_err(bind_err)?;
    let addr = listener.local_addr().map_err(bind_err)?;
    Ok(Bound { listener, addr })
}

/// A dashboard bound and reachable through its handle, not yet serving: the handle goes
/// into the daemon's facts (`mcpd/ui`, status) before the agent context the pages use is
/// made from them.
pub struct Pending {
    bound: Bound,
    handle: DashboardHandle,
    mailbox: actor::Mailbox,
}

/// The handle of a dashboard bound at `bound`, and the dashboard to start.
pub fn prepare(bound: Bound) -> (DashboardHandle, Pending) {
    let (handle, mailbox) = actor::channel(bound.addr);
    let pending = Pending {
        bound,
        handle: handle.clone(),
        mailbox,
    };
    (handle, pending)
}

impl Pending {
    /// Starts serving until `shutdown` fires; returns the task to wait for at shutdown.
    /// `ctx` is the daemon's agent context: the pages read the supervisor, the roster and
    /// the metrics through it, and call tools through an agent connection of their own.
    pub fn start(
        self,
        ctx: AgentContext,
        logs: crate::logging::LogBook,
        shutdown: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let Pending {
            bound,
            handle,
            mailbox,
        } = self;
        let guard = guard::Guard {
            policy: Arc::new(guard::Policy::new(bound.addr)),
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
        let actor = actor::DashboardActor::new(bound.listener, mailbox, app, shutdown);
        tracing::info!(url = %handle.url(), "serving the dashboard (`mcpd ctl ui` opens it)");
        crate::tasks::spawn(actor.run())
    }
}
