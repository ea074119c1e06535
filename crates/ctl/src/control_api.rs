//! What `mcpd ctl` and the daemon share.
//!
//! The shapes of the `mcpd/status` and `mcpd/agents` answers, and the names and texts
//! both sides must agree on. Data only: no daemon code, so `ctl` depends on none.

use serde::{Deserialize, Serialize};

/// The `tools/list` `_meta` key that asks for every tool, not the discovery list.
pub const ALL_TOOLS: &str = "mcpd/allTools";

/// What an agent is told to do about an unknown tool; `mcpd ctl call` tells a person
/// [`UNKNOWN_TOOL_HINT_CLI`] instead.
pub const UNKNOWN_TOOL_HINT: &str = "call tools/list to see the tools mcpd offers";
/// The same hint for a person at the command line.
pub const UNKNOWN_TOOL_HINT_CLI: &str = "`mcpd ctl tools` lists the tools mcpd offers";

/// Where a server stands: the supervisor keeps one per slot, `ctl status` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerState {
    Starting,
    Ready,
    Backoff,
    Failed,
    Stopped,
    /// `enabled = false`: not started with the daemon.
    Disabled,
    /// Not running; started by the next call that needs it.
    Idle,
    /// A remote server that needs an OAuth login (`mcpd ctl login NAME`); not retried.
    #[serde(rename = "needs-login")]
    NeedsLogin,
}

impl ServerState {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Starting => "starting",
            ServerState::Ready => "ready",
            ServerState::Backoff => "backoff",
            ServerState::Failed => "failed",
            ServerState::Stopped => "stopped",
            ServerState::Disabled => "disabled",
            ServerState::Idle => "idle",
            ServerState::NeedsLogin => "needs-login",
        }
    }
}

/// One row of `ctl status`; also the JSON of `mcpd/status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerStatus {
    pub name: String,
    pub state: ServerState,
    /// "stdio", or for a remote server the HTTP transport in use ("streamable-http",
    /// "sse"; "auto" until the first connection decides).
    pub transport: String,
    /// The command of a local server.
    pub command: Option<String>,
    /// The URL of a remote server, without user info or query.
    pub url: Option<String>,
    /// The live HTTP state of a connected remote server.
    pub http: Option<HttpInfo>,
    pub session_renewals: u64,
    /// The protocol era spoken ("legacy" or "modern"), once known.
    pub era: Option<String>,
    /// How the era was decided (probe outcome, cache, config).
    pub era_reason: Option<String>,
    /// An era probe is running.
    pub probing: bool,
    /// For a server run per agent or per project: its instances running now.
    pub instances: usize,
    /// For an agent's instance: the agent's connection number.
    pub agent: Option<u64>,
    /// How the server is shared: "shared", "agent" or "project".
    #[serde(default = "shared")]
    pub share: String,
    /// For a project's instance: the project's path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// For a project's instance: the connected agents working in its project.
    #[serde(default)]
    pub agents: usize,
    /// For a project's instance: seconds since its last call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_secs: Option<u64>,
    /// The sandbox its running process is confined by (None: unconfined).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxView>,
    /// Its pinned definitions (None: nothing listed yet, or an instance: see its server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pins: Option<PinView>,
    pub protocol_version: Option<String>,
    pub server_info: Option<serde_json::Value>,
    pub pid: Option<u32>,
    pub tools: usize,
    pub in_flight: usize,
    pub restarts: u32,
    pub uptime_secs: Option<f64>,
    pub next_retry_secs: Option<f64>,
    pub last_error: Option<String>,
    pub last_exit: Option<String>,
    pub catalog_error: Option<String>,
    /// Names of its tools and prompts that agents do not see, because another server
    /// presents the same name and had it first.
    #[serde(default)]
    pub name_conflicts: Vec<NameConflict>,
    pub malformed_lines: u64,
    pub oversized_lines: u64,
    pub stderr_tail: Vec<String>,
    /// The secrets its settings refer to (names only), looked up at each start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// Lifecycle events (state changes, exits) with times, newest last.
    #[serde(default)]
    pub history: Vec<String>,
    /// A remote server's OAuth login (never a token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthView>,
}

/// A tool or prompt name of this server that another server holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NameConflict {
    /// "tool" or "prompt".
    pub kind: String,
    /// The name both servers present.
    pub name: String,
    /// The server agents reach under that name.
    pub held_by: String,
}

/// What a remote connection shows in `ctl status` while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpInfo {
    /// The transport in use: "streamable-http" or "sse" (or "auto" before it is known).
    pub transport: String,
    /// Whether the server gave us a session id.
    pub session: bool,
    /// The server-initiated stream: "off", "open", "reconnecting" or "unsupported".
    pub listen: String,
}

/// Where a server's login stands, as status shows it. Never holds a token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthView {
    #[serde(flatten)]
    pub state: AuthState,
    /// A `mcpd ctl login` waits for its redirect.
    pub pending: bool,
    /// The authorization server of the current login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The scopes granted, space-separated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<String>,
    /// Scopes the server asked for (a 403 `insufficient_scope`) that the login lacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_scope: Vec<String>,
    /// The machine grant mcpd runs alone (`client_credentials`, `jwt_bearer`); none for
    /// a person's browser login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
    /// The token is bound to mcpd's DPoP key.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dpop: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state", content = "detail")]
pub enum AuthState {
    /// The server has not asked for a login, and none is stored.
    None,
    /// A token that works as far as mcpd knows; valid until then (seconds since the
    /// epoch), if known.
    LoggedIn { expires_at: Option<u64> },
    /// No usable token: a person must run `mcpd ctl login`. Says why.
    NeedsLogin(String),
}

/// One agent as `ctl agents` shows it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AgentInfo {
    pub agent: u64,
    pub pid: Option<i32>,
    pub uid: Option<u32>,
    /// The executable of the connecting process, from `/proc/PID/exe`.
    pub exe: Option<String>,
    pub client: Option<String>,
    pub client_version: Option<String>,
    /// "legacy", "modern", or none before the first decisive exchange.
    pub era: Option<String>,
    pub in_flight: usize,
    pub profile: Option<String>,
    /// The project it works in (for servers run per project), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// How the agent is connected: "unix", "http session" or "http stateless".
    #[serde(default)]
    pub transport: Option<String>,
    /// The peer's address, for agents connected over HTTP.
    #[serde(default)]
    pub remote: Option<String>,
    /// "mcpd connect" when the peer on the socket is the stdio bridge: `pid` and `exe`
    /// are then the bridge's parent, the client that started it, and `bridge_pid` the
    /// bridge's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge_pid: Option<i32>,
    /// When the peer is a process of a server mcpd started: that server's pid (the
    /// leader of its process group, as `ctl status` shows it). Such a connection never
    /// gets control methods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_pid: Option<u32>,
    /// Its requests in flight, longest running first (at most `CALLS_SHOWN`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<CallInfo>,
    /// The connection has sent only control methods (`mcpd ctl`): no agent, not listed.
    /// The roster's own flag, never sent.
    #[serde(skip)]
    pub control_only: bool,
}

/// The most requests in flight one agent's entry lists.
pub const CALLS_SHOWN: usize = 32;

/// One request in flight of an agent's.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CallInfo {
    /// The request's id as the agent sent it, as JSON text (`7`, `"a"`): what
    /// `mcpd/cancel` takes.
    pub id: String,
    pub method: String,
    /// The tool, for `tools/call`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// How long it has been running.
    pub secs: f64,
}

fn shared() -> String {
    "shared".into()
}

/// A person's look at, or answer to, a server's held definitions: params `name`, `op`
/// (`diff`, `approve`, `forget`) and, for `approve`, `names` (all when empty).
pub const PINS: &str = "mcpd/pins";

/// `mcpd ctl ui`: a fresh launch URL for the dashboard, `{"url": …, "expires_secs": …}`;
/// the URL holds a token that logs one browser in, once.
pub const UI: &str = "mcpd/ui";
/// `mcpd ctl upgrade`: checks the binary at mcpd's path and, if good, answers
/// `{"path", "from", "to", "upgrades"}`, then drains and executes it in place.
pub const UPGRADE: &str = "mcpd/upgrade";
/// Cancels an agent's request in flight: `{"agent": N, "id": "<the id as JSON text>"}`.
pub const CANCEL: &str = "mcpd/cancel";

/// `mcpd ctl secret`: params `op` (`set`, `list`, `remove`), `name`, and for `set` the
/// `value`. Values go in, never come out.
pub const SECRETS: &str = "mcpd/secrets";

/// The notification `mcpd connect` sends before anything else, `{"path": DIR}`: the
/// directory it was started in (or `--project DIR`), for servers run per project.
pub const PROJECT_NOTIFICATION: &str = "notifications/mcpd/project";

/// The notification `mcpd connect` sends first on each connection: the daemon then
/// leaves its lines unread while it drains and ends with [`CLOSING_NOTIFICATION`].
pub const BRIDGE_NOTIFICATION: &str = "notifications/mcpd/bridge";
/// The daemon's last line to a bridge when it shuts down or upgrades,
/// `{"taken": N}`: it took the first N lines of the connection (every request among them
/// was answered); the bridge sends the later ones to the next daemon. The bridge keeps it
/// from its client.
pub const CLOSING_NOTIFICATION: &str = "notifications/mcpd/closing";

/// A server's pins, for `ctl status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinView {
    /// "trust-first", "approve" or "off".
    pub mode: String,
    /// Definitions waiting for a person (`mcpd ctl diff`, `approve`).
    pub held: usize,
    /// Why its pin file cannot be used: everything it lists is held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken: Option<String>,
}

/// What the kernel enforces on a confined server, for `ctl status`. On the own row of a
/// server run as instances (per agent or per project), which runs no process: what each
/// instance gets, with no paths counted (see `per_instance`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxView {
    /// "landlock".
    pub mechanism: String,
    /// The kernel's Landlock ABI.
    pub abi: u32,
    /// Paths readable, and writable.
    pub read: usize,
    pub write: usize,
    /// "all", "none" or "hosts".
    pub network: String,
    /// What the mechanism leaves open, when something is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl SandboxView {
    /// Whether this is the sandbox of a server's instances, shown on the server's own row:
    /// no paths counted, as each instance's are its own (resolved in its project). A
    /// confined process always has at least its private temporary directory writable.
    pub fn per_instance(&self) -> bool {
        self.read == 0 && self.write == 0
    }
}
