//! The life of one upstream connection: spawn, handshake, serve, stop, reap — as one task.

use super::actor::{Actor, End};
use super::{ConnectionEvent, ConnectionExit, handshake, process};
use crate::config::ServerConfig;
use crate::framing::{self, BoundedLines};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

/// Lines queued to a server's stdin before requests are refused as busy.
const STDIN_QUEUE: usize = 1024;
/// Stderr lines queued between the reader task and the connection.
const STDERR_QUEUE: usize = 256;

/// What a connection needs from the supervisor.
pub struct ConnectionContext {
    pub config: ServerConfig,
    /// The process, already started by the supervisor, or why it could not be.
    pub spawned: Result<process::Spawned, String>,
    pub instance: u64,
    pub max_line: usize,
    pub events: mpsc::Sender<ConnectionEvent>,
    /// Fired by the supervisor to stop this connection.
    pub cancel: CancellationToken,
}

/// Runs one connection to its end and reports how it ended. Every path stops and reaps
/// the process before returning, which is what lets the supervisor start the next one
/// without ever having two alive for one server.
pub async fn run(ctx: ConnectionContext) -> ConnectionExit {
    let server: Arc<str> = Arc::from(ctx.config.name.as_str());
    let spawned = match ctx.spawned {
        Ok(s) => s,
        Err(e) => {
            return ConnectionExit {
                error: Some(e),
                exit_status: None,
                stderr_tail: Vec::new(),
                was_ready: false,
            };
        }
    };
    let process::Spawned {
        mut child,
        pid,
        stdin,
        stdout,
        stderr,
    } = spawned;
    tracing::info!(upstream = %server, pid, command = %ctx.config.command, "started server process");
    let (out_tx, out_rx) = mpsc::channel(STDIN_QUEUE);
    let writer = tokio::spawn(framing::write_lines(stdin, out_rx));
    let (err_tx, mut err_rx) = mpsc::channel(STDERR_QUEUE);
    let stderr_task = tokio::spawn(process::read_stderr(server.clone(), stderr, err_tx));
    let mut frames = FramedRead::new(stdout, BoundedLines::new(ctx.max_line));
    let grace = ctx.config.health.stop_grace;

    let startup = ctx.config.health.startup_timeout;
    let mut malformed = 0;
    let handshake = tokio::select! {
        r = tokio::time::timeout(startup, handshake::initialize(&server, &mut frames, &out_tx, &mut malformed)) => match r {
            Ok(r) => r.map_err(Some),
            Err(_) => Err(Some(format!(
                "the server did not complete initialize within {} (health.startup_timeout){}",
                humantime::format_duration(startup),
                if malformed > 0 { format!("; it wrote {malformed} lines that are not JSON-RPC messages") } else { String::new() },
            ))),
        },
        () = ctx.cancel.cancelled() => Err(None),
    };
    let mut identity = match handshake {
        Ok(identity) => identity,
        Err(error) => {
            drop(out_tx);
            let status = process::stop(&mut child, pid, grace).await;
            let tail = finish_stderr(stderr_task, &mut err_rx).await;
            writer.abort();
            return ConnectionExit {
                error: error.map(|e| format!("initialize failed: {e}")),
                exit_status: Some(status),
                stderr_tail: tail,
                was_ready: false,
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

    let (mut actor, handle) = Actor::new(
        server.clone(),
        &ctx.config,
        pid,
        out_tx,
        ctx.events.clone(),
        ctx.instance,
    );
    actor.malformed = malformed;
    let has_tools = identity.has_tools();
    let connected = ConnectionEvent::Connected {
        server: server.clone(),
        instance: ctx.instance,
        handle,
        identity,
    };
    if ctx.events.send(connected).await.is_err() {
        // The supervisor is gone, so the daemon is shutting down.
        ctx.cancel.cancel();
    }
    let (end, mut tail) = actor
        .run(&mut frames, &mut child, &mut err_rx, &ctx.cancel, has_tools)
        .await;
    drop(frames);
    let (error, status) = match end {
        End::Stopped => (None, process::stop(&mut child, pid, grace).await),
        End::Exited(status) => {
            process::reap_group(pid).await;
            (Some(format!("the server exited ({status})")), status)
        }
        End::Failed(why) => {
            let lost = ConnectionEvent::Lost {
                server: server.clone(),
                instance: ctx.instance,
                error: why.clone(),
            };
            // If the supervisor is gone the daemon is stopping anyway.
            let _ = ctx.events.send(lost).await;
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
        was_ready: true,
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
