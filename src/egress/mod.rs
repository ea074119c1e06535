//! The filtering HTTP proxy of confined servers.
//!
//! A server gets `HTTPS_PROXY`/`HTTP_PROXY` pointing at a listener mcpd owns, and only
//! hosts on its network list get through.
//!
//! Only egress decides which host a confined server may reach: the sandbox confines the
//! server's own sockets, and `serve` judges every request through the proxy. It checks
//! the request's host and port against the server's `Allow` (`allow.rs`), resolves a
//! name itself and connects only to the addresses the matching rule permits
//! (`address.rs`), then tunnels bytes (`tunnel.rs`). The request head is read
//! within fixed limits and tokenized by httparse (`request/`); hosts and ports are read the same way in rules
//! and requests (`host.rs`).

mod address;
mod allow;
pub(crate) mod host;
pub(crate) mod request;
mod tunnel;

pub use allow::{Allow, HostRule, MAX_RULES};

use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tunnel::{Proxy, Resolver};

/// Connections served at once per `serve`, each a tunnel or a request on its way to one.
pub const MAX_CONNECTIONS: usize = 64;
/// How long to wait after a failed accept (usually: out of file descriptors) before the
/// next, so that a persistent failure does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves proxy connections on `listener` for server `server` until `cancel` fires;
/// then stops accepting and ends every open tunnel. Never panics on any input.
pub async fn serve(
    listener: TcpListener,
    allow: Arc<Allow>,
    server: String,
    cancel: CancellationToken,
) {
    serve_with(
        listener,
        Proxy::new(allow, server, Resolver::System),
        cancel,
    )
    .await;
}

/// `serve` with the resolver given.
async fn serve_with(listener: TcpListener, proxy: Proxy, cancel: CancellationToken) {
    let proxy = Arc::new(proxy);
    // At the cap, the loop stops accepting until a connection ends: the kernel's accept
    // queue holds the next ones, costing mcpd nothing, and a client that waits is
    // served as soon as one of its own connections closes. The cap concerns this server
    // alone, since each server has its own listener.
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let connections = TaskTracker::new();
    loop {
        let permit = tokio::select! {
            () = cancel.cancelled() => break,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                // The semaphore is never closed.
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            () = cancel.cancelled() => break,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, _)) => {
                let proxy = Arc::clone(&proxy);
                let cancel = cancel.clone();
                // On the daemon's tracker too, so that shutdown counts a tunnel that
                // outlives this loop; the local one lets `serve` wait for its own.
                mcpd_runtime::tracker::spawn(connections.track_future(async move {
                    proxy.connection(stream, cancel).await;
                    drop(permit);
                }));
            }
            Err(e) => {
                drop(permit);
                proxy.accept_failed(&e);
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                }
            }
        }
    }
    // No more connections queue up for a loop that no longer accepts.
    drop(listener);
    connections.close();
    connections.wait().await;
}

#[cfg(test)]
mod tests;
