//! The life of one upstream connection — spawn, handshake, serve, stop, reap — as one task; the HTTP variant lives in `http`.

use super::actor::{Actor, End, Offers};
use super::process::StderrTail;
use super::transport::{Inbound, Outbound};
use super::{ConnectionEvent, ConnectionExit, ServerIdentity, handshake, http, process};
use crate::budget;
use crate::config::{Launch, ServerConfig};
use crate::framing;
use crate::protocol::era::Era;
use futures::{Stream, StreamExt};
use std::future::Future;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// Lines queued to a server's stdin before requests are refused as busy.
const STDIN_QUEUE: usize = 1024;
/// Stderr lines queued between the reader task and the connection.
const STDERR_QUEUE: usize = 256;

/// What a connection needs from the supervisor.
pub struct ConnectionContext {
    pub config: ServerConfig,
    /// For a local server: the process, already started by the supervisor, or why it
    /// could not be. None for a remote server.
    pub spawned: Option<Result<process::Spawned, process::SpawnError>>,
    pub instance: u64,
    pub max_line: usize,
    /// Bytes queued to the server at most; beyond them requests are refused as busy.
    pub queue_bytes: usize,
    pub events: mpsc::Sender<ConnectionEvent>,
    /// Fired by the supervisor to stop this connection.
    pub cancel: CancellationToken,
    /// How the connection finds the server's protocol era.
    pub era: EraPlan,
    /// A remote server's OAuth login, owned by its supervisor slot.
    pub login: Option<crate::oauth::credential::CredentialHandle>,
}

/// How a connection learns which era to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EraPlan {
    /// `initialize` (from the config, the cache or a probe).
    Legacy,
    /// `server/discover` and the modern envelope.
    Modern,
    /// Probe in place with `server/discover`, falling back to `initialize` (HTTP).
    Auto,
}

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
        (Launch::Stdio(_), Some(Err(e))) => ConnectionExit::before_start(e.to_string()),
        (Launch::Stdio(_), None) => {
            ConnectionExit::before_start("internal error: no process was started".into())
        }
    }
}

impl ConnectionExit {
    /// A connection that ended before it could start.
    pub fn before_start(error: String) -> ConnectionExit {
        ConnectionExit {
            error: Some(error),
            exit_status: None,
            stderr_tail: Vec::new(),
            fatal: false,
            era_mismatch: false,
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
    } = spawned;
    tracing::info!(upstream = %server, pid, command = %ctx.config.target(), "started server process");
    let (out_tx, out_rx) = budget::channel::<Outbound>(STDIN_QUEUE, ctx.queue_bytes);
    let writer = crate::tasks::spawn(framing::write_lines(stdin, out_rx));
    let (err_tx, mut err_rx) = mpsc::channel(STDERR_QUEUE);
    let stderr_task = crate::tasks::spawn(process::read_stderr(server.clone(), stderr, err_tx));
    let mut frames = framing::LineReader::new(stdout, ctx.max_line).map(|frame| match frame {
        Ok(frame) => Inbound::Frame(frame),
        Err(e) => Inbound::Closed {
            error: format!("reading the server's output failed: {e}"),
            fatal: false,
        },
    });
    let grace = ctx.config.health.stop_grace;

    let startup = ctx.config.health.startup_timeout;
    let mut malformed = 0;
    let handshake = tokio::select! {
        r = tokio::time::timeout(startup, negotiate(ctx.era, &server, &mut frames, &out_tx, &mut malformed)) => match r {
            Ok(r) => r.map_err(Some),
            Err(_) => Err(Some(handshake::HandshakeError::from(format!(
                "the server did not complete initialize within {} (health.startup_timeout){}",
                humantime::format_duration(startup),
                if malformed > 0 { format!("; it wrote {malformed} lines that are not JSON-RPC messages") } else { String::new() },
            )))),
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
            let era_mismatch = error.as_ref().is_some_and(|e| e.era_mismatch);
            return ConnectionExit {
                error: error.map(|e| format!("initialize failed: {}", e.message)),
                exit_status: Some(status),
                stderr_tail: tail,
                fatal: false,
                era_mismatch,
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
    }
}

/// The handshake of the era plan: `initialize`, `server/discover`, or `server/discover`
/// falling back to `initialize`.
pub(super) async fn negotiate<S>(
    plan: EraPlan,
    server: &str,
    inbound: &mut S,
    out: &budget::Sender<Outbound>,
    malformed: &mut u64,
) -> Result<ServerIdentity, handshake::HandshakeError>
where
    S: Stream<Item = Inbound> + Unpin,
{
    match plan {
        EraPlan::Legacy => handshake::initialize(server, inbound, out, malformed).await,
        EraPlan::Modern => handshake::discover(server, inbound, out, malformed, false).await,
        EraPlan::Auto => handshake::discover(server, inbound, out, malformed, true).await,
    }
}

/// The lists besides tools a server's capabilities say it has.
fn surface_kinds(caps: &serde_json::Value) -> Vec<crate::protocol::ListKind> {
    use crate::protocol::ListKind;
    let mut kinds = Vec::new();
    if caps
        .get("prompts")
        .is_some_and(serde_json::Value::is_object)
    {
        kinds.push(ListKind::Prompts);
    }
    if caps
        .get("resources")
        .is_some_and(serde_json::Value::is_object)
    {
        kinds.push(ListKind::Resources);
        kinds.push(ListKind::Templates);
    }
    kinds
}

/// Tells the supervisor a connection is unusable before the (possibly slow) stop, so no
/// one routes to it meanwhile.
pub(super) async fn report_lost(ctx: &ConnectionContext, why: &str) {
    let lost = ConnectionEvent::Lost {
        server: Arc::from(ctx.config.name.as_str()),
        instance: ctx.instance,
        error: why.to_owned(),
    };
    // If the supervisor is gone the daemon is stopping anyway.
    let _ = ctx.events.send(lost).await;
}

/// The part every transport shares once the handshake is done: start the actor, tell the
/// supervisor, serve until the end.
#[allow(clippy::too_many_arguments)] // each is one distinct piece of the connection
pub(super) async fn serve<S, X>(
    ctx: &ConnectionContext,
    peer: String,
    identity: ServerIdentity,
    http: Option<watch::Receiver<crate::control_api::HttpInfo>>,
    out: budget::Sender<Outbound>,
    inbound: &mut S,
    exited: X,
    stderr: &mut mpsc::Receiver<String>,
    malformed: u64,
) -> (End, StderrTail)
where
    S: Stream<Item = Inbound> + Unpin,
    X: Future<Output = String> + Send,
{
    let server: Arc<str> = Arc::from(ctx.config.name.as_str());
    let era = Era::of_version(&identity.protocol_version);
    let (mut actor, handle) = Actor::new(
        server.clone(),
        &ctx.config,
        peer,
        out,
        ctx.events.clone(),
        ctx.instance,
        era,
    );
    actor.malformed = malformed;
    let has_tools = identity.has_tools();
    let identity_caps = identity.capabilities.clone();
    // A modern server tells of list changes only on a subscription.
    let wants_listen = era == Era::Modern
        && [
            "/tools/listChanged",
            "/prompts/listChanged",
            "/resources/listChanged",
        ]
        .iter()
        .any(|p| {
            identity
                .capabilities
                .pointer(p)
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false)
        });
    // Tools of a server with the Tasks extension may run as tasks.
    let tasks = era == Era::Modern
        && identity_caps
            .pointer("/extensions")
            .and_then(|e| e.get(crate::protocol::tasks::EXTENSION))
            .is_some_and(serde_json::Value::is_object);
    let connected = ConnectionEvent::Connected {
        server,
        instance: ctx.instance,
        handle,
        identity,
        http,
    };
    if ctx.events.send(connected).await.is_err() {
        // The supervisor is gone, so the daemon is shutting down.
        ctx.cancel.cancel();
    }
    actor
        .run(
            inbound,
            exited,
            stderr,
            &ctx.cancel,
            Offers {
                tools: has_tools,
                listen: wants_listen,
                lists: surface_kinds(&identity_caps),
                tasks,
            },
        )
        .await
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
