//! The life of one upstream connection — spawn, handshake, serve, stop, reap — as one task.
//!
//! The HTTP variant lives in `http`, and what both share in `serve`.

use super::actor::End;
use super::serve::{ConnectionContext, EraPlan, negotiate, report_lost, serve};
use super::transport::{Inbound, Outbound};
use super::{ConnectionExit, handshake, http, process};
use crate::config::Launch;
use futures::StreamExt;
use mcpd_runtime::budget;
use mcpd_runtime::framing;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Lines queued to a server's stdin before requests are refused as busy.
const STDIN_QUEUE: usize = 1024;
/// Stderr lines queued between the reader task and the connection.
const STDERR_QUEUE: usize = 256;

/// Runs one connection to its end and reports how it ended. Every path stops and reaps
/// the process before returning, which is what lets the supervisor start the next one
/// without ever having two alive for one server.
pub async fn run(mut ctx: ConnectionContext) -> ConnectionExit {
    let spawned = ctx.spawned.take();
    match (&ctx.config.launch, spawned) {
        (Launch::Http(launch), _) => {
            let launch = launch.clone();
            http::run(ctx, launch).await
        }
        (Launch::Stdio(_), Some(Ok(spawned))) => run_stdio(ctx, spawned).await,
        (Launch::Stdio(_), Some(Err(e))) => {
            let mut exit = ConnectionExit::before_start(e.to_string());
            exit.fatal = e.fatal();
            exit
        }
        (Launch::Stdio(_), None) => {
            ConnectionExit::before_start("internal error: no process was started".into())
        }
    }
}

async fn run_stdio(ctx: ConnectionContext, spawned: process::Spawned) -> ConnectionExit {
    let server: Arc<str> = Arc::from(ctx.config.name.as_str());
    let process::Spawned {
        mut child,
        pid,
        stdin,
        stdout,
        stderr,
        ..
    } = spawned;
    tracing::info!(upstream = %server, pid, command = %ctx.config.target(), "started server process");
    let (out_tx, out_rx) = budget::channel::<Outbound>(STDIN_QUEUE, ctx.queue_bytes);
    let writer = mcpd_runtime::tracker::spawn(framing::write_lines(stdin, out_rx));
    let (err_tx, mut err_rx) = mpsc::channel(STDERR_QUEUE);
    let stderr_task = mcpd_runtime::tracker::spawn(process::read_stderr(
        server.clone(),
        stderr,
        err_tx,
        ctx.mask.clone(),
    ));
    let mut frames = framing::LineReader::new(stdout, ctx.max_line).map(|frame| match frame {
        Ok(frame) => Inbound::Frame(frame),
        Err(e) => Inbound::Closed {
            error: format!("reading the server's output failed: {e}"),
            fatal: false,
        },
    });
    let grace = ctx.config.health.stop_grace;

    let startup = ctx.startup;
    let mut malformed = 0;
    // A local server's era, when not known yet, is found on this very process.
    let patience = ctx.config.health.probe_timeout;
    let negotiation = async {
        match ctx.era {
            EraPlan::Auto => {
                handshake::in_place(&server, &mut frames, &out_tx, &mut malformed, patience).await
            }
            plan => negotiate(plan, &server, &mut frames, &out_tx, &mut malformed).await,
        }
    };
    let handshake = tokio::select! {
        r = tokio::time::timeout(startup.limit, negotiation) => match r {
            Ok(r) => r.map_err(Some),
            Err(_) => Err(Some(handshake::HandshakeError::from(format!(
                "the server did not complete initialize within {} ({}){}",
                humantime::format_duration(startup.limit),
                startup.setting,
                if malformed > 0 { format!("; it wrote {malformed} lines that are not JSON-RPC messages") } else { String::new() },
            )))),
        },
        () = ctx.cancel.cancelled() => Err(None),
    };
    let mut identity = match handshake {
        Ok(identity) => identity,
        Err(mut error) => {
            drop(out_tx);
            let status = process::stop(&mut child, pid, grace).await;
            let tail = finish_stderr(stderr_task, &mut err_rx).await;
            writer.abort();
            let era_mismatch = error.as_ref().is_some_and(|e| e.era_mismatch);
            // A refusal no retry can change (`refuse_self`: this daemon, or a loop of
            // daemons) fails the server at once, as over HTTP; it used to be dropped
            // here, so the server was restarted until its crash budget ran out.
            let fatal = error.as_ref().is_some_and(|e| e.fatal);
            let never_serve = error.as_ref().is_some_and(|e| e.never_serve);
            let legacy_next = error.as_mut().and_then(|e| e.legacy_next.take());
            return ConnectionExit {
                error: error.map(|e| format!("initialize failed: {}", e.message)),
                exit_status: Some(status),
                stderr_tail: tail,
                fatal,
                era_mismatch,
                never_serve,
                legacy_next,
            };
        }
    };
    identity.pid = Some(pid);
    tracing::info!(
        upstream = %server,
        pid,
        protocol = %identity.protocol_version,
        "server initialized"
    );

    let exited = async {
        match child.wait().await {
            Ok(s) => process::describe(&s),
            Err(e) => format!("wait failed: {e}"),
        }
    };
    let peer = format!("pid {pid}");
    let (end, mut tail) = serve(
        &ctx,
        peer,
        identity,
        None,
        out_tx,
        &mut frames,
        exited,
        &mut err_rx,
        malformed,
    )
    .await;
    drop(frames);
    let (error, status) = match end {
        End::Stopped => (None, process::stop(&mut child, pid, grace).await),
        End::Exited(status) => {
            process::reap_group(pid).await;
            (Some(format!("the server exited ({status})")), status)
        }
        End::Failed(why) | End::Refused(why) => {
            report_lost(&ctx, &why).await;
            let status = process::stop(&mut child, pid, grace).await;
            (Some(why), status)
        }
    };
    for line in finish_stderr(stderr_task, &mut err_rx).await {
        tail.push(line);
    }
    writer.abort();
    match &error {
        Some(e) => {
            tracing::warn!(upstream = %server, pid, status = %status, "connection ended: {e}")
        }
        None => tracing::info!(upstream = %server, pid, status = %status, "server stopped"),
    }
    ConnectionExit {
        error,
        exit_status: Some(status),
        stderr_tail: tail.lines(),
        fatal: false,
        era_mismatch: false,
        never_serve: false,
        legacy_next: None,
    }
}

/// Collects what the stderr reader still has. A grandchild may hold the pipe open, so the
/// wait is short and bounded.
async fn finish_stderr(
    task: tokio::task::JoinHandle<()>,
    rx: &mut mpsc::Receiver<String>,
) -> Vec<String> {
    let mut tail = process::StderrTail::default();
    let _ = tokio::time::timeout(std::time::Duration::from_millis(200), async {
        while let Some(line) = rx.recv().await {
            tail.push(line);
        }
    })
    .await;
    task.abort();
    tail.lines()
}
