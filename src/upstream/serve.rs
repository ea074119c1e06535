//! What every connection shares, whatever its transport.
//!
//! Its context from the supervisor, the era handshake, serving with the actor until the
//! end, and telling the supervisor a connection is lost.

use super::actor::{Actor, End, Offers};
use super::process::{self, StderrTail};
use super::transport::{Inbound, Outbound};
use super::{ConnectionEvent, ConnectionExit, ServerIdentity, handshake};
use crate::config::ServerConfig;
use futures::Stream;
use mcpd_ctl::control_api::HttpInfo;
use mcpd_runtime::budget;
use mcpd_wire::protocol::era::Era;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

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
    /// How long a local server has to complete its handshake, and the setting that says so.
    pub startup: Startup,
    /// A remote server's OAuth login, owned by its supervisor slot.
    pub login: Option<crate::oauth::credential::CredentialHandle>,
    /// Where a 2025-11-25 server's `notifications/tasks/status` go: to the agent side,
    /// which knows who owns each task (`agent/tasks/status.rs`).
    pub task_status: budget::Sender<super::TaskStatus>,
    /// The values of this start's secrets, masked in the stderr lines kept and logged.
    pub mask: Arc<crate::secrets::Mask>,
}

/// A local server's time to start: `health.startup_timeout`, or on a package runner's
/// first start `health.first_start_timeout` (it may be installing the package).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Startup {
    pub limit: std::time::Duration,
    /// The setting `limit` comes from, for the error that names it.
    pub setting: &'static str,
}

/// How a connection learns which era to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EraPlan {
    /// `initialize` (from the config, the cache or a probe).
    Legacy,
    /// `server/discover` and the modern envelope.
    Modern,
    /// Probe in place with `server/discover`, falling back to `initialize` on the same
    /// connection (HTTP) or process (stdio: `handshake::in_place`).
    Auto,
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
            never_serve: false,
            legacy_next: None,
        }
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
    http: Option<watch::Receiver<HttpInfo>>,
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
    actor.task_status = Some(ctx.task_status.clone());
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
            .and_then(|e| e.get(mcpd_wire::protocol::tasks::EXTENSION))
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
                lists: ServerIdentity::list_kinds_of(&identity_caps),
                tasks,
            },
        )
        .await
}
