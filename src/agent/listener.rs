//! The agent socket: binding it, accepting connections, handing each to its actor.
//!
//! The socket is bound safely, connections are accepted under a cap, and each is handed
//! to its own actor.

use super::AgentContext;
use crate::errors::EdgeError;
use futures::FutureExt;
use mcpd_wire::jsonrpc::{self, ErrorObject};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Why the socket could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("another mcpd is already listening on {0}; stop it first (mcpd ctl status shows it)")]
    InUse(PathBuf),
    #[error("cannot create the socket directory {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot bind {path}: {source}")]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Activation(String),
    #[error(transparent)]
    Http(#[from] super::http::HttpError),
}

/// Binds the agent socket: its directory is created 0700, the socket made 0600. A socket
/// file left by a dead daemon is removed, but only after connecting to it fails.
#[allow(
    clippy::disallowed_methods,
    reason = "binding happens once, before any agent is served"
)]
pub async fn bind(path: &Path) -> Result<UnixListener, BindError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.exists()
    {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| BindError::Dir {
                path: dir.to_owned(),
                source,
            })?;
    }
    if path.exists() {
        match tokio::time::timeout(Duration::from_secs(2), UnixStream::connect(path)).await {
            Ok(Ok(_)) | Err(_) => return Err(BindError::InUse(path.to_owned())),
            Ok(Err(_)) => {
                tracing::info!(socket = %path.display(), "removing a stale socket file");
                // If it vanished meanwhile, bind below is what matters.
                let _ = std::fs::remove_file(path);
            }
        }
    }
    let bind_err = |source| BindError::Bind {
        path: path.to_owned(),
        source,
    };
    let listener = UnixListener::bind(path).map_err(bind_err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(bind_err)?;
    Ok(listener)
}

/// Accepts agents until `cancel` fires. Each connection runs in `tracker` and owns one
/// permit of the agent cap; beyond the cap a connection gets an error line and is closed.
pub async fn run(
    listener: UnixListener,
    ctx: AgentContext,
    max_agents: usize,
    tracker: TaskTracker,
    cancel: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(max_agents));
    loop {
        let accepted = tokio::select! {
            () = cancel.cancelled() => break,
            a = listener.accept() => a,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Usually out of file descriptors: wait rather than spin.
                tracing::error!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let agent = ctx.daemon.next_agent.fetch_add(1, Ordering::Relaxed) + 1;
        let (pid, uid) = stream
            .peer_cred()
            .map(|c| (c.pid(), Some(c.uid())))
            .unwrap_or((None, None));
        // Only the daemon's own user (and root, and the users in daemon.allow_uids)
        // may connect; the socket's permissions say the same, this holds even if they
        // are loosened.
        if !ctx.access.allows(uid) {
            tracing::warn!(
                agent,
                pid,
                uid,
                "refused an agent from a user that may not use this daemon (daemon.allow_uids)"
            );
            let e = EdgeError::OtherUser {
                uid,
                own: ctx.access.own,
            }
            .to_error_object();
            tracker.spawn(refuse_with(stream, e));
            continue;
        }
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::warn!(
                agent,
                pid,
                max_agents,
                "refused an agent: connection limit reached"
            );
            tracker.spawn(refuse(stream, max_agents));
            continue;
        };
        // Whether a server's process connected. At most 64 small procfs reads, bounded
        // like the executable's below (`roster::unix_agent`), and as early as can be: a
        // peer that is gone by then cannot be told (`PeerOrigin::Unknown`).
        let origin = super::lineage::origin(pid);
        let server = origin.server();
        if confined_peer(&ctx, origin) {
            tracing::warn!(
                agent,
                pid,
                ?origin,
                "refused a confined server's process on the socket"
            );
            let e = EdgeError::ConfinedServer.to_error_object();
            tracker.spawn(refuse_with(stream, e));
            continue;
        }
        // An Option field logs its value, or nothing when None.
        tracing::info!(agent, pid, uid, ?origin, "agent connected");
        let ctx = ctx.with_peer(super::Peer::socket(uid, pid, origin));
        let mut seed = super::roster::unix_agent(agent, pid, uid);
        seed.server_pid = server;
        // `map`, not an `async` block awaiting it: that would hold the connection's
        // future twice (captured, and moved into the await).
        let served = super::conn::serve(stream, seed, ctx, cancel.clone());
        tracker.spawn(served.map(move |()| {
            drop(permit);
            tracing::info!(agent, "agent disconnected");
        }));
    }
}

/// Whether the peer is a process of a confined server (or, while any server is confined,
/// one whose origin could not be told, which a server can cause on purpose).
fn confined_peer(ctx: &super::AgentContext, origin: super::PeerOrigin) -> bool {
    let catalog = ctx.catalog.borrow();
    match origin {
        super::PeerOrigin::Server { leader } => catalog.is_confined(leader),
        super::PeerOrigin::Unknown => catalog.any_confined(),
        super::PeerOrigin::Outside => false,
    }
}

async fn refuse(stream: UnixStream, max: usize) {
    let e = EdgeError::TooManyAgents(max).to_error_object();
    refuse_with(stream, e).await;
}

async fn refuse_with(mut stream: UnixStream, e: ErrorObject) {
    let line = jsonrpc::error_line(None, &e) + "\n";
    // The refused agent may already have gone; nothing else to do for it.
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(line.as_bytes())).await;
}
