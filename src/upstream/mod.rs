//! Client side of mcpd: one actor per upstream connection.
//!
//! Each is reached through a cloneable `UpstreamHandle`.
//!
//! A connection's life is one task (`connection::run`): start the process or open the
//! HTTP transport, do the handshake, serve requests until the server goes away or the
//! supervisor cancels it, then stop and reap the process (or end the HTTP session). The
//! task's return value tells the supervisor how it ended.

mod actor;
pub mod connection;
mod handle;
mod handshake;
pub mod http;
mod list;
pub use list::ListError;
mod dress;
pub mod process;
mod raw_result;
mod refusal;
pub mod sandbox;
pub mod serve;
mod subscriptions;
mod transport;

use mcpd_runtime::outbox::Outbox;
use mcpd_wire::jsonrpc::ErrorObject;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

use handle::BACKSTOP;
pub(crate) use handle::UpstreamMsg;
pub use handle::{Subscription, TASK_WAIT, UpstreamHandle};
pub use list::{fetch_list, fetch_tools};
pub use process::kill_group;
pub use raw_result::RawResult;

/// Identifies one agent call across mcpd, so it can be cancelled later.
pub type CallId = u64;

/// How an upstream request ended: the server's own answer (a result or its JSON-RPC
/// error, both passed through), or a failure on mcpd's side of the connection.
pub type Reply = Result<Result<Value, ErrorObject>, UpstreamError>;

/// An agent call's outcome, with the result as the server's own text.
pub type RawReply = Result<Result<RawResult, ErrorObject>, UpstreamError>;

/// Where a request's outcome goes: as values (mcpd's own requests, which it reads), or as
/// text (agent calls, which it mostly passes on).
pub(crate) enum ReplyTo {
    Value(oneshot::Sender<Reply>),
    Raw(oneshot::Sender<RawReply>),
}

impl ReplyTo {
    /// Sends the outcome; the caller may have gone, and then no one needs it.
    pub(crate) fn send(self, outcome: Result<Result<RawResult, ErrorObject>, UpstreamError>) {
        match self {
            ReplyTo::Raw(tx) => {
                let _ = tx.send(outcome);
            }
            ReplyTo::Value(tx) => {
                let reply = outcome.and_then(|o| match o {
                    Ok(raw) => raw.to_value().map(Ok),
                    Err(e) => Ok(Err(e)),
                });
                let _ = tx.send(reply);
            }
        }
    }

    /// Sends an outcome that is already a value.
    pub(crate) fn send_value(self, outcome: Result<Value, ErrorObject>) {
        match self {
            ReplyTo::Value(tx) => {
                let _ = tx.send(Ok(outcome));
            }
            ReplyTo::Raw(tx) => {
                let _ = tx.send(Ok(outcome.map(|v| RawResult::from_value(&v))));
            }
        }
    }

    pub(crate) fn fail(self, error: UpstreamError) {
        self.send(Err(error));
    }
}

/// The id of the `initialize` (or `server/discover`) request of a connection; mcpd's
/// later request ids start above it.
pub const INITIALIZE_ID: u64 = 0;

/// The message for a server that refused mcpd's static credentials.
pub fn refused_message(hint: &str) -> String {
    format!(
        "the server refused mcpd's credentials ({hint}); set `bearer_token_env` or `headers` for this server, then run `mcpd ctl restart`"
    )
}

/// Why an upstream request got no answer from the server.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UpstreamError {
    #[error("the server exited ({status})")]
    Exited { status: String },
    #[error("no answer within {after:?}")]
    Timeout { after: Duration },
    #[error("{limit} requests already in flight")]
    Busy { limit: usize },
    #[error("the connection is gone")]
    Gone,
    #[error("the server is being stopped")]
    Stopping,
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The server answered an HTTP request with an error status.
    #[error("the server answered HTTP {status}{}", excerpt_suffix(.excerpt))]
    Http { status: u16, excerpt: String },
    /// The reply stream ended, or the connection broke, before the answer came.
    #[error("no response received for request {id}: {why}")]
    NoResponse { id: u64, why: String },
    /// The server could not be reached (DNS, connect, TLS).
    #[error("{0}")]
    Unreachable(String),
    /// The server needs an OAuth login (or more scope) mcpd does not have; says what to run.
    #[error("{0}")]
    NeedsLogin(String),
}

fn excerpt_suffix(excerpt: &str) -> String {
    if excerpt.is_empty() {
        String::new()
    } else {
        format!(": {excerpt}")
    }
}

/// A request a server sent mcpd while handling an agent's call (`elicitation/create`,
/// `sampling/createMessage`, `roots/list`), for the agent side to answer. Channels carry
/// it boxed: every agent connection has a queue of these, and a channel allocates room for
/// 32 of its items up front (2 KiB unboxed, 256 bytes boxed), for requests that are rare.
#[derive(Debug)]
pub struct ServerAsk {
    pub method: String,
    pub params: Option<Value>,
    pub respond_to: oneshot::Sender<Result<Value, ErrorObject>>,
}

/// A 2025-11-25 server's `notifications/tasks/status` (a `Task`, pushed when its status
/// changes), for the agent side to pass to the agent that owns the task under the id it
/// knows. The upstream side cannot tell who that is (the connection is shared, and the
/// task outlives the call that made it): it only says which connection the task id is of.
#[derive(Debug)]
pub struct TaskStatus {
    pub server: Arc<str>,
    /// The connection's instance number ([`UpstreamHandle::instance`]): task ids are
    /// one process's, so a restarted server's are told apart from its predecessor's.
    pub instance: u64,
    /// The notification's params as the server sent them (the server's task id).
    pub params: Value,
    /// The size of the server's line, charged against the channel's byte budget.
    pub bytes: usize,
}

impl mcpd_runtime::budget::Weigh for TaskStatus {
    fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Task statuses queued from every connection to the agent side at most, by count and
/// by bytes (each is at most one line, `max_message_bytes`); beyond them they are dropped,
/// as the notification is optional and the agent can poll.
const TASK_STATUSES: usize = 256;
const TASK_STATUS_BYTES: usize = 1 << 20;

/// The channel every connection sends [`TaskStatus`]es on (`try_send`, never waiting).
pub fn task_status_channel() -> (
    mcpd_runtime::budget::Sender<TaskStatus>,
    mpsc::Receiver<mcpd_runtime::budget::Charged<TaskStatus>>,
) {
    mcpd_runtime::budget::channel(TASK_STATUSES, TASK_STATUS_BYTES)
}

/// What an agent call brings besides its request: where progress goes, the agent's
/// capabilities, and where the server's requests during the call go.
#[derive(Debug, Default)]
pub struct CallOptions {
    pub progress: Option<ProgressSink>,
    /// The calling agent's client capabilities, for a modern server's envelope.
    pub caps: Option<std::sync::Arc<Value>>,
    pub asks: Option<mpsc::Sender<Box<ServerAsk>>>,
    /// Where the server's log messages about this call go.
    pub logs: Option<LogRoute>,
}

/// A request's params on their way to the server.
#[derive(Debug, Clone)]
pub enum CallParams {
    Value(Option<Value>),
    /// A `tools/call` read by `jsonrpc::peek_tool_call`: its params as values but the
    /// agent's arguments as the JSON text it wrote (an object, already checked). The
    /// server gets them written into its request as they are (beside a modern server's
    /// envelope or mcpd's progress token), unless some become HTTP parameter headers:
    /// then they are parsed.
    ToolCall(PlainCall),
}

/// A `tools/call`'s params: as values (the server's name of the tool, and `_meta` or any
/// other member), but for the agent's arguments, kept as the JSON text it wrote (an
/// object, already checked by `json::check`).
#[derive(Debug, Clone)]
pub struct PlainCall {
    /// Shared: a call's params go to its server once per attempt, and copying a map per
    /// call would cost more than the arguments' parse this path saves.
    pub params: std::sync::Arc<serde_json::Map<String, Value>>,
    pub arguments: Option<std::sync::Arc<str>>,
}

impl PlainCall {
    /// The tool's name (the server's).
    pub fn name(&self) -> &str {
        self.params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

impl From<Option<Value>> for CallParams {
    fn from(params: Option<Value>) -> Self {
        CallParams::Value(params)
    }
}

impl CallParams {
    /// The params as values.
    pub fn into_value(self) -> Option<Value> {
        match self {
            CallParams::Value(v) => v,
            CallParams::ToolCall(PlainCall { params, arguments }) => {
                let mut params = Arc::unwrap_or_clone(params);
                if let Some(arguments) = arguments {
                    params.insert("arguments".into(), plain_arguments(&arguments));
                }
                Some(Value::Object(params))
            }
        }
    }
}

/// The value of arguments text that `json::check` found to be a JSON object (so reading
/// it again cannot fail; if it ever did, the server would get an empty object).
pub fn plain_arguments(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::Object(serde_json::Map::new()))
}

/// Where a call's `notifications/message` go, and from which level.
#[derive(Debug, Clone)]
pub struct LogRoute {
    pub outbox: Outbox,
    /// The lowest level passed on; None passes everything.
    pub threshold: Option<String>,
}

/// Where progress notifications for one call go: the calling agent's queue, with the
/// agent's own progress token restored.
#[derive(Debug, Clone)]
pub struct ProgressSink {
    pub token: Value,
    pub outbox: Outbox,
}

/// What a connection reports about itself while it runs, for `ctl status`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct LiveStatus {
    pub in_flight: usize,
    pub malformed_lines: u64,
    pub oversized_lines: u64,
    pub stderr_tail: Vec<String>,
    /// HTTP sessions started again after the server forgot ours.
    pub session_renewals: u64,
    /// How long since its last call (its idle time).
    pub since_call: std::time::Duration,
}

/// What the server said about itself in the handshake.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerIdentity {
    pub protocol_version: String,
    pub server_info: Value,
    pub capabilities: Value,
    pub instructions: Option<String>,
    pub pid: Option<u32>,
    /// For remote servers, the HTTP transport in use ("streamable-http" or "sse").
    pub transport: Option<&'static str>,
    /// The instance id an mcpd daemon puts in its handshake answers.
    pub mcpd_instance: Option<String>,
    /// The mcpd daemons such a daemon reaches through its own servers.
    pub mcpd_behind: Vec<String>,
    /// How the handshake found the server's era, when it had to find out (a local
    /// server's first start): the supervisor remembers it.
    pub era_reason: Option<String>,
}

impl ServerIdentity {
    pub fn has_tools(&self) -> bool {
        self.capabilities.get("tools").is_some_and(Value::is_object)
    }

    /// The lists besides tools the server's capabilities say it has: the ones its
    /// connection fetches at once, with the tool list when it has tools.
    pub fn list_kinds(&self) -> Vec<mcpd_wire::protocol::ListKind> {
        Self::list_kinds_of(&self.capabilities)
    }

    pub(crate) fn list_kinds_of(caps: &Value) -> Vec<mcpd_wire::protocol::ListKind> {
        use mcpd_wire::protocol::ListKind;
        let has = |key: &str| caps.get(key).is_some_and(Value::is_object);
        let mut kinds = Vec::new();
        if has("prompts") {
            kinds.push(ListKind::Prompts);
        }
        if has("resources") {
            kinds.push(ListKind::Resources);
            kinds.push(ListKind::Templates);
        }
        kinds
    }
}

/// Events a connection sends up to the supervisor. Each carries the instance number so
/// the supervisor ignores news from a process it has already replaced.
#[derive(Debug)]
pub enum ConnectionEvent {
    /// Handshake done; the connection serves requests through `handle`.
    Connected {
        server: Arc<str>,
        instance: u64,
        handle: UpstreamHandle,
        identity: ServerIdentity,
        /// For a remote server, its live HTTP state.
        http: Option<tokio::sync::watch::Receiver<mcpd_ctl::control_api::HttpInfo>>,
    },
    /// The connection is unusable (e.g. the server stopped answering pings) and is being
    /// stopped; sent before the stop, which may take a while, so no one routes to it.
    Lost {
        server: Arc<str>,
        instance: u64,
        error: String,
    },
    /// No agent call for the server's `idle_timeout`: the supervisor may stop it.
    Idle { server: Arc<str>, instance: u64 },
    /// A remote server's login ended well (true) or was logged out (false). Sent by its
    /// credential, not a connection.
    Login { server: Arc<str>, logged_in: bool },
    /// A fresh prompt, resource or template list, or why it could not be fetched.
    List {
        server: Arc<str>,
        instance: u64,
        kind: mcpd_wire::protocol::ListKind,
        items: Result<Vec<Value>, list::ListError>,
    },
    /// A fresh tool list, or why it could not be fetched.
    Tools {
        server: Arc<str>,
        instance: u64,
        tools: Result<Vec<Value>, list::ListError>,
        /// The server's cache hints (`ttlMs`, private scope), when it gave any.
        cache: Option<(u64, bool)>,
    },
}

/// How a connection ended. Returned by the connection task, so the supervisor learns
/// of it from its `JoinSet` and no channel has to point upwards for it.
#[derive(Debug, Clone)]
pub struct ConnectionExit {
    /// Why it ended, in words for `last_error`; None for a requested stop.
    pub error: Option<String>,
    /// The process's exit status, when it ran.
    pub exit_status: Option<String>,
    /// The last lines the server wrote to stderr.
    pub stderr_tail: Vec<String>,
    /// The server refused mcpd's credentials: do not retry until the config changes or
    /// someone runs `mcpd ctl restart`.
    pub fatal: bool,
    /// The handshake showed the server does not speak the era that was tried.
    pub era_mismatch: bool,
    /// The handshake refused the server for good (`handshake::refuse_self`): what it
    /// listed before is forgotten, not served.
    pub never_serve: bool,
    /// The server ended when asked `server/discover`: its era is legacy, and why.
    pub legacy_next: Option<String>,
}
