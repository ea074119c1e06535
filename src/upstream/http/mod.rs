//! Remote servers over HTTP.
//!
//! One connection task per server, with a transport task (Streamable HTTP or legacy
//! HTTP+SSE) beneath the shared actor.
//!
//! The connection runs the same handshake and actor as a stdio server; only the
//! transport differs. The transport task owns the HTTP session: the session id, the
//! open POSTs, the GET listener, renewal after a 404 and the final DELETE.

mod client;
mod legacy;
mod listen;
mod post;
pub(crate) mod sse;
mod streamable;

use super::actor::End;
use super::serve::{ConnectionContext, negotiate, report_lost, serve};
use super::transport::{Inbound, Outbound};
use super::{ConnectionExit, handshake};
use crate::config::{HttpLaunch, HttpTransport};
use client::Endpoint;
use futures::Stream;
use mcpd_ctl::control_api::HttpInfo;
use mcpd_runtime::budget;
use mcpd_runtime::budget::Charged;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Messages queued from the actor to the transport.
const OUT_QUEUE: usize = 1024;
/// Messages queued from the transport's readers to the actor.
const IN_QUEUE: usize = 256;
/// How long the transport may take to end its session (the DELETE) after the actor stops.
const FINISH_GRACE: Duration = Duration::from_secs(3);

/// Runs one remote connection to its end.
pub async fn run(ctx: ConnectionContext, launch: HttpLaunch) -> ConnectionExit {
    let server: Arc<str> = Arc::from(ctx.config.name.as_str());
    let ep = match Endpoint::new(&launch, ctx.max_line, &server, ctx.login.clone()) {
        Ok(ep) => ep,
        Err(e) => return ConnectionExit::before_start(e),
    };
    let shown = ep.shown_url();
    tracing::info!(upstream = %server, url = %shown, transport = launch.transport.as_str(), "connecting to remote server");
    let (out_tx, out_rx) = budget::channel::<Outbound>(OUT_QUEUE, ctx.queue_bytes);
    let (in_tx, in_rx) = mpsc::channel::<Inbound>(IN_QUEUE);
    let (info_tx, info_rx) = watch::channel(HttpInfo {
        transport: launch.transport.as_str().into(),
        session: false,
        listen: "off".into(),
    });
    let mut transport = mcpd_runtime::tracker::spawn(run_transport(
        ep,
        launch.transport,
        in_tx,
        info_tx,
        out_rx,
        server.clone(),
    ));
    let mut inbound = receiver_stream(in_rx);

    let startup = ctx.config.health.startup_timeout;
    let mut malformed = 0;
    let handshake = tokio::select! {
        r = tokio::time::timeout(startup, negotiate(ctx.era, &server, &mut inbound, &out_tx, &mut malformed)) => match r {
            Ok(r) => r.map_err(Some),
            Err(_) => Err(Some(handshake::HandshakeError::from(format!(
                "{shown} did not complete initialize within {} (health.startup_timeout)",
                humantime::format_duration(startup),
            )))),
        },
        () = ctx.cancel.cancelled() => Err(None),
    };
    let mut identity = match handshake {
        Ok(identity) => identity,
        Err(error) => {
            drop(out_tx);
            finish(&server, &mut transport).await;
            let fatal = error.as_ref().is_some_and(|e| e.fatal);
            let era_mismatch = error.as_ref().is_some_and(|e| e.era_mismatch);
            let never_serve = error.as_ref().is_some_and(|e| e.never_serve);
            return ConnectionExit {
                error: error.map(|e| format!("initialize failed: {}", e.message)),
                exit_status: None,
                stderr_tail: Vec::new(),
                fatal,
                era_mismatch,
                never_serve,
                legacy_next: None,
            };
        }
    };
    let chosen = info_rx.borrow().transport.clone();
    identity.transport = Some(if chosen == "sse" {
        "sse"
    } else {
        "streamable-http"
    });
    tracing::info!(
        upstream = %server,
        url = %shown,
        transport = %chosen,
        protocol = %identity.protocol_version,
        "remote server initialized"
    );
    // A remote server has no stderr; the actor gets a closed channel.
    let (_, mut no_stderr) = mpsc::channel(1);
    let (end, _) = serve(
        &ctx,
        shown.clone(),
        identity,
        Some(info_rx),
        out_tx,
        &mut inbound,
        std::future::pending(),
        &mut no_stderr,
        malformed,
    )
    .await;
    drop(inbound);
    let (error, fatal) = match end {
        End::Stopped => (None, false),
        End::Exited(status) => (Some(format!("the connection ended ({status})")), false),
        End::Failed(why) => {
            report_lost(&ctx, &why).await;
            (Some(why), false)
        }
        End::Refused(why) => {
            report_lost(&ctx, &why).await;
            (Some(why), true)
        }
    };
    finish(&server, &mut transport).await;
    match &error {
        Some(e) => tracing::warn!(upstream = %server, url = %shown, "connection ended: {e}"),
        None => tracing::info!(upstream = %server, url = %shown, "disconnected"),
    }
    ConnectionExit {
        error,
        exit_status: None,
        stderr_tail: Vec::new(),
        fatal,
        era_mismatch: false,
        never_serve: false,
        legacy_next: None,
    }
}

/// Waits for the transport to end its session, within a deadline.
async fn finish(server: &str, transport: &mut tokio::task::JoinHandle<()>) {
    if tokio::time::timeout(FINISH_GRACE, &mut *transport)
        .await
        .is_err()
    {
        tracing::debug!(upstream = server, "the HTTP transport did not end in time");
        transport.abort();
    }
}

async fn run_transport(
    ep: Endpoint,
    kind: HttpTransport,
    inbound: mpsc::Sender<Inbound>,
    info: watch::Sender<HttpInfo>,
    mut rx: mpsc::Receiver<Charged<Outbound>>,
    server: Arc<str>,
) {
    if kind == HttpTransport::Sse {
        legacy::run(ep, inbound, info, rx, None, server).await;
        return;
    }
    let auto = kind == HttpTransport::Auto;
    let streamable = streamable::Streamable::new(
        ep.clone(),
        auto,
        inbound.clone(),
        info.clone(),
        server.clone(),
    );
    if let streamable::Finish::Fallback { first, why } = streamable.run(&mut rx).await {
        tracing::info!(upstream = %server, "{why}; trying the HTTP+SSE transport (2024-11-05)");
        legacy::run(ep, inbound, info, rx, Some((first, why)), server).await;
    }
}

fn receiver_stream<T: Send + 'static>(
    rx: mpsc::Receiver<T>,
) -> std::pin::Pin<Box<dyn Stream<Item = T> + Send>> {
    Box::pin(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }))
}
