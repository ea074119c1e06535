//! The accept loop of mcpd's two TCP listeners, the HTTP listener's and the dashboard's.
//!
//! A cap on connections, `TCP_NODELAY`, the header and idle timeouts, each request told
//! its peer's and its own address, and graceful shutdown of every connection.
//!
//! axum's `serve` offers none of the limits, so mcpd runs the loop itself, as mini-redis
//! does: a permit of a semaphore is taken *before* each accept, so beyond the cap new
//! connections wait in the kernel's accept queue (costing mcpd nothing) until one closes.
//! Each connection is one task running hyper's HTTP/1 server over the axum router.

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// Largest request head (request line and headers) read; a longer one is refused with
/// 431 and the connection closed. Node's HTTP server has the same limit, so no MCP client
/// can count on more; and it bounds what each of `max_connections` stalled heads holds.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The warning that the cap is reached is repeated at most this often.
const SATURATION_WARNING_EVERY: Duration = Duration::from_secs(60);

/// The limits of the accept loop (the HTTP listener's from `[daemon]`).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// What the listener is called in the warning that the cap is reached.
    pub name: &'static str,
    /// TCP connections served at once.
    pub max_connections: usize,
    /// How long a connection may take to send a request's head, from when it opens or its
    /// previous response ended.
    pub header_timeout: Duration,
}

/// The listener's own address, in each request's extensions (the dashboard looks up who
/// owns a connection by both its ends).
#[derive(Clone, Copy, Debug)]
pub struct LocalAddr(pub SocketAddr);

/// Serves `app` on `listener` until `shutdown` fires, then asks every connection to
/// finish (idle ones close at once, open responses run to their end) and waits for them.
/// The caller bounds that wait.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let connections = TaskTracker::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    // The header timeout runs whenever the connection waits for a request head: from
    // accept, and again after each response. So it is also the idle keep-alive timeout,
    // and it never runs while a request is in flight (an open SSE stream is not idle).
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_header_size(MAX_HEAD_BYTES)
        .keep_alive(true);
    let mut warned: Option<Instant> = None;
    // The address connections arrive at: a request's `LocalAddr`.
    let local = listener.local_addr().ok();
    loop {
        let Some(permit) = permit(&permits, limits, &mut warned, &shutdown).await else {
            break;
        };
        let Some((stream, remote)) = accept(&listener, &shutdown).await else {
            break;
        };
        connections.spawn(connection(
            stream,
            (remote, local),
            http.clone(),
            app.clone(),
            permit,
            shutdown.clone(),
        ));
    }
    connections.close();
    connections.wait().await;
}

/// A connection permit, waiting for one when the cap is reached; None on shutdown.
async fn permit(
    permits: &Arc<Semaphore>,
    limits: Limits,
    warned: &mut Option<Instant>,
    shutdown: &CancellationToken,
) -> Option<OwnedSemaphorePermit> {
    if let Ok(p) = permits.clone().try_acquire_owned() {
        return Some(p);
    }
    if warned.is_none_or(|at| at.elapsed() >= SATURATION_WARNING_EVERY) {
        *warned = Some(Instant::now());
        tracing::warn!(
            max = limits.max_connections,
            "the {} serves as many connections as it may; new ones wait until one closes",
            limits.name
        );
    }
    tokio::select! {
        () = shutdown.cancelled() => None,
        // The semaphore is never closed, so this only fails if it were.
        p = permits.clone().acquire_owned() => p.ok(),
    }
}

/// The next connection, with `TCP_NODELAY` set; None on shutdown.
async fn accept(
    listener: &TcpListener,
    shutdown: &CancellationToken,
) -> Option<(TcpStream, SocketAddr)> {
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => return None,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, remote)) => {
                // Replies are written whole (or as whole SSE events): no reason to let
                // Nagle hold back their last segment.
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(%remote, "cannot set TCP_NODELAY: {e}");
                }
                return Some((stream, remote));
            }
            Err(e) => {
                // Usually out of file descriptors: back off rather than spin.
                tracing::error!("accepting a TCP connection failed: {e}");
                tokio::select! {
                    () = shutdown.cancelled() => return None,
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        }
    }
}

/// Serves one connection until it closes, times out, or shutdown lets it finish. Holds
/// its permit to the end.
async fn connection(
    stream: TcpStream,
    (remote, local): (SocketAddr, Option<SocketAddr>),
    http: hyper::server::conn::http1::Builder,
    app: Router,
    permit: OwnedSemaphorePermit,
    shutdown: CancellationToken,
) {
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        // What `ConnectInfo<SocketAddr>` extracts: sessions are named by their address.
        req.extensions_mut().insert(ConnectInfo(remote));
        if let Some(local) = local {
            req.extensions_mut().insert(LocalAddr(local));
        }
        app.clone().oneshot(req)
    });
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
        tracing::debug!(%remote, "connection ended: {e}");
    }
    drop(permit);
}
