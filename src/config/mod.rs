//! Configuration: the raw TOML file, validated once into a `Config` that running code trusts.

#![allow(
    clippy::disallowed_methods,
    reason = "the daemon reads its config before the runtime serves anyone, and on reload from a blocking thread"
)]

mod bool_or_table;
mod discovery;
mod error;
mod filter;
mod http;
mod naming;
mod oauth;
mod pin;
mod project;
mod raw;
mod remote;
mod runner;
mod sandbox;
mod secrets;
mod server;
mod ui;
mod value;

pub use discovery::{Discovery, RESERVED, ToolMode};
pub use error::ConfigError;
pub use filter::{Profile, ToolFilter, glob};
pub use http::{HttpAuth, HttpListen};
pub use mcpd_wire::protocol::naming::Naming;
pub use naming::valid_server_name;
pub use oauth::{ClientAuth, CredentialStore, Grant, IdentityProvider, KeySource, OAuthConfig};
pub use pin::PinMode;
pub use project::{PROJECT, PROJECT_NAME, Share};
pub use remote::{HttpLaunch, HttpTransport, Secret, display_url};
pub use sandbox::{Network, SandboxProfile};
pub use ui::UiListen;

use raw::{RawFile, RawHealth, RawRestart, RawServer};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub mod defaults;

/// A validated configuration. Running code never re-checks it.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The file it came from; None when the daemon started without one.
    pub source: Option<PathBuf>,
    pub daemon: DaemonConfig,
    /// Every configured server, enabled or not, by name.
    pub servers: BTreeMap<String, ServerConfig>,
    /// Named subsets of servers and tools an agent can choose (`mcpd connect --profile`).
    pub profiles: BTreeMap<String, Profile>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DaemonConfig {
    /// Socket path from the file; the command line and environment take precedence.
    pub socket: Option<PathBuf>,
    /// Where mcpd keeps state across restarts (the servers' protocol eras).
    pub state_dir: Option<PathBuf>,
    /// Default per-request timeout for servers that set none.
    pub request_timeout: Duration,
    /// Longest line accepted from an agent or a server, in bytes.
    pub max_message_bytes: usize,
    /// Largest decoded image or audio block passed on to agents, in bytes.
    pub max_media_bytes: usize,
    /// Users besides the daemon's own (and root) who may connect (a system-wide daemon).
    pub allow_uids: Vec<u32>,
    /// Longest qualified tool name shown to agents.
    pub tool_name_limit: usize,
    /// Agent connections accepted at once; more are refused with an error.
    pub max_agents: usize,
    /// Messages queued to one agent before it counts as not reading and is disconnected.
    pub agent_queue: usize,
    /// Bytes queued to one agent (then it is disconnected as not reading) or to one
    /// server (then requests to it are refused as busy).
    pub queue_bytes: usize,
    /// How long in-flight calls may finish after a shutdown signal.
    pub shutdown_grace: Duration,
    /// The optional Streamable HTTP listener (`http_listen`).
    pub http: Option<HttpListen>,
    /// The dashboard's loopback listener (`ui`, `ui_listen`); None when `ui = false`.
    pub ui: Option<UiListen>,
    /// How agents without a profile find their tools (`tools`, `pinned`, …).
    pub discovery: Discovery,
    /// Where `mcpd ctl secret set` stores (`secrets`).
    pub secrets: crate::secrets::Preferred,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    pub launch: Launch,
    /// Which protocol era to speak to it.
    pub protocol: ProtocolMode,
    pub enabled: bool,
    /// Per-request timeout.
    pub timeout: Duration,
    pub restart: RestartPolicy,
    pub health: HealthPolicy,
    /// Requests in flight to this server at once; more fail with "busy".
    pub max_in_flight: usize,
    /// Which of its tools agents see, and description overrides.
    pub tools: ToolFilter,
    /// The prefix and renames of its tools and prompts.
    pub naming: Naming,
    /// Started with the daemon, or on its first call.
    pub lazy: bool,
    /// Stopped after this long without agent calls (started again on the next one).
    pub idle_timeout: Option<Duration>,
    /// Shared, one instance per agent, or one per project (`share`).
    pub share: Share,
    /// The sandbox a local server runs in; None runs it unconfined.
    pub sandbox: Option<SandboxProfile>,
    /// How its definitions are pinned (`pin`).
    pub pin: PinMode,
    /// Why it cannot start, when a setting refers to a variable mcpd's environment lacks:
    /// the server stays `failed` with this as its error, the others run.
    pub unresolved: Option<String>,
    /// The secrets its launch refers to (`${secret:NAME}`), looked up at each start.
    pub secrets: Vec<String>,
}

/// Which protocol era mcpd speaks to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolMode {
    /// Find out: probe with `server/discover`, fall back to `initialize`.
    Auto,
    /// Only `initialize` (2024-11-05 … 2025-11-25).
    Legacy,
    /// Only 2026-07-28.
    Modern,
}

impl ProtocolMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolMode::Auto => "auto",
            ProtocolMode::Legacy => "legacy",
            ProtocolMode::Modern => "modern",
        }
    }
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum Launch {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio(StdioLaunch),
    /// A remote server over HTTP.
    Http(HttpLaunch),
}

#[derive(Debug, Clone, PartialEq)]
pub struct StdioLaunch {
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
}

impl ServerConfig {
    /// Whether `other` differs from this one in its naming at most, so the running
    /// process can stay and only the names agents see change.
    pub fn same_but_naming(&self, other: &ServerConfig) -> bool {
        let mut renamed = self.clone();
        renamed.naming = other.naming.clone();
        renamed.pin = other.pin;
        renamed == *other
    }

    /// What the server runs or where it is, safe to show: the command, or the URL without
    /// user info or query.
    pub fn target(&self) -> String {
        match &self.launch {
            Launch::Stdio(s) => s.command.clone(),
            Launch::Http(h) => h.display_url(),
        }
    }
}

/// When and how often a crashed server is started again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RestartPolicy {
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// Crashes allowed within `window` before the server is marked failed.
    pub max_restarts: u32,
    pub window: Duration,
    /// Uptime after which the backoff resets.
    pub stable_after: Duration,
}

/// Handshake, liveness and stop deadlines.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HealthPolicy {
    pub startup_timeout: Duration,
    /// Idle time after which a `ping` is sent; zero disables probes.
    pub ping_interval: Duration,
    pub ping_timeout: Duration,
    /// Wait after closing stdin, and again after SIGTERM, before escalating.
    pub stop_grace: Duration,
    /// How long a local server's answer to `server/discover` is awaited before
    /// `initialize` is sent too, on the same process.
    pub probe_timeout: Duration,
    /// The start timeout of a package runner's first start with its configuration.
    pub first_start_timeout: Duration,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            socket: None,
            state_dir: None,
            request_timeout: defaults::REQUEST_TIMEOUT,
            max_message_bytes: defaults::MAX_MESSAGE_BYTES,
            max_media_bytes: defaults::MAX_MEDIA_BYTES,
            allow_uids: Vec::new(),
            tool_name_limit: defaults::TOOL_NAME_LIMIT,
            max_agents: defaults::MAX_AGENTS,
            agent_queue: defaults::AGENT_QUEUE,
            queue_bytes: defaults::queue_bytes(defaults::MAX_MESSAGE_BYTES),
            shutdown_grace: defaults::SHUTDOWN_GRACE,
            http: None,
            ui: Some(UiListen::default()),
            discovery: Discovery {
                max_active: 16,
                ..Discovery::default()
            },
            secrets: crate::secrets::Preferred::Auto,
        }
    }
}

impl Config {
    /// The configuration of a daemon started without a file: no servers.
    pub fn empty() -> Config {
        Config {
            source: None,
            daemon: DaemonConfig::default(),
            servers: BTreeMap::new(),
            profiles: BTreeMap::new(),
        }
    }

    /// No servers yet, from a config file at `path` that does not exist yet: the daemon
    /// reloads from it once it does (`mcpd ctl reload`).
    pub fn empty_at(path: PathBuf) -> Config {
        Config {
            source: Some(path),
            daemon: DaemonConfig::default(),
            servers: BTreeMap::new(),
            profiles: BTreeMap::new(),
        }
    }

    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        // Absolute, so status and logs name the file unambiguously.
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        Config::parse(&text, &path)
    }

    /// Parses a config, expanding `${VAR}` references from the process environment.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        Config::parse_with_env(text, path, &|var| std::env::var(var).ok())
    }

    /// Parses a config with `env` as the environment that `${VAR}` and
    /// `bearer_token_env` refer to.
    pub fn parse_with_env(
        text: &str,
        path: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        Validator { path, env }.config(raw)
    }
}

/// Reads only `daemon.socket` from a config file, for `mcpd connect` and `mcpd ctl`:
/// nothing else is validated or expanded, so a `${VAR}` that the caller's environment
/// lacks (the daemon's may have it) cannot hide the socket setting.
pub fn socket_setting(path: &Path) -> Result<Option<PathBuf>, ConfigError> {
    #[derive(Deserialize)]
    struct File {
        #[serde(default)]
        daemon: Daemon,
    }
    #[derive(Deserialize, Default)]
    struct Daemon {
        socket: Option<PathBuf>,
    }
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    let file: File = toml::from_str(&text).map_err(|e| ConfigError::Syntax {
        path: path.to_owned(),
        message: e.to_string().trim_end().to_owned(),
    })?;
    Ok(file.daemon.socket)
}

/// A gibibyte: the largest message or media size mcpd accepts as a setting.
const GIB: usize = 1 << 30;

struct Validator<'a> {
    path: &'a Path,
    /// The environment `${VAR}` references are read from.
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Validator<'_> {
    fn err(&self, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.to_owned(),
            key: key.into(),
            message: message.into(),
        }
    }

    fn duration(
        &self,
        key: &str,
        v: &Option<String>,
        default: Duration,
    ) -> Result<Duration, ConfigError> {
        let Some(s) = v else { return Ok(default) };
        let d = humantime::parse_duration(s).map_err(|e| {
            self.err(
                key,
                format!("{s:?} is not a duration ({e}); write e.g. \"500ms\", \"30s\" or \"2m\""),
            )
        })?;
        if d > defaults::MAX_DURATION {
            return Err(self.err(
                key,
                format!(
                    "{s:?} is too long; the longest is {}",
                    humantime::format_duration(defaults::MAX_DURATION)
                ),
            ));
        }
        Ok(d)
    }

    /// A count or size within `range`, or `default` when not set.
    fn positive(
        &self,
        key: &str,
        v: Option<usize>,
        default: usize,
        range: std::ops::RangeInclusive<usize>,
    ) -> Result<usize, ConfigError> {
        match v {
            None => Ok(default),
            Some(n) if range.contains(&n) => Ok(n),
            Some(n) if n < *range.start() => Err(self.err(
                key,
                format!("{n} is too small; the minimum is {}", range.start()),
            )),
            Some(n) => Err(self.err(
                key,
                format!("{n} is too large; the maximum is {}", range.end()),
            )),
        }
    }

    fn config(&self, raw: RawFile) -> Result<Config, ConfigError> {
        let d = &raw.daemon;
        let max_message_bytes = self.positive(
            "daemon.max_message_bytes",
            d.max_message_bytes,
            defaults::MAX_MESSAGE_BYTES,
            4096..=GIB,
        )?;
        let daemon = DaemonConfig {
            socket: d.socket.clone(),
            state_dir: d.state_dir.clone(),
            request_timeout: self.duration(
                "daemon.request_timeout",
                &d.request_timeout,
                defaults::REQUEST_TIMEOUT,
            )?,
            max_message_bytes,
            max_media_bytes: self.positive(
                "daemon.max_media_bytes",
                d.max_media_bytes,
                defaults::MAX_MEDIA_BYTES,
                1..=GIB,
            )?,
            allow_uids: d.allow_uids.clone(),
            tool_name_limit: self.positive(
                "daemon.tool_name_limit",
                d.tool_name_limit,
                defaults::TOOL_NAME_LIMIT,
                48..=256,
            )?,
            max_agents: self.positive(
                "daemon.max_agents",
                d.max_agents,
                defaults::MAX_AGENTS,
                1..=65_536,
            )?,
            agent_queue: self.positive(
                "daemon.agent_queue",
                d.agent_queue,
                defaults::AGENT_QUEUE,
                16..=1 << 20,
            )?,
            // A queue must hold at least one message of the largest size.
            queue_bytes: self.positive(
                "daemon.queue_bytes",
                d.queue_bytes,
                defaults::queue_bytes(max_message_bytes),
                max_message_bytes..=u32::MAX as usize,
            )?,
            shutdown_grace: self.duration(
                "daemon.shutdown_grace",
                &d.shutdown_grace,
                defaults::SHUTDOWN_GRACE,
            )?,
            http: self.http(http::RawHttp::of(d))?,
            ui: self.ui(d.ui, d.ui_listen.as_deref())?,
            discovery: self.discovery(
                d.tools.as_deref(),
                &d.pinned,
                d.discover_above,
                d.max_active,
            )?,
            secrets: self.secrets_store(d.secrets.as_deref())?,
        };
        let restart_default = self.restart("daemon.restart", &d.restart, None)?;
        let pin_default = self.pin_mode("daemon.pin", d.pin.as_deref().unwrap_or("trust-first"))?;
        let health_default = self.health("daemon.health", &d.health, None)?;
        let mut servers = BTreeMap::new();
        for (name, s) in raw.servers {
            let mut server = self.server(
                &name,
                &s,
                daemon.request_timeout,
                restart_default,
                health_default,
            )?;
            let local = matches!(server.launch, Launch::Stdio(_));
            let key = format!("servers.{name}");
            server.sandbox = self.sandbox(&key, s.sandbox.as_ref(), d.sandbox, local)?;
            server.pin = match &s.pin {
                Some(p) => self.pin_mode(&format!("{key}.pin"), p)?,
                None => pin_default,
            };
            let no_renames = BTreeMap::new();
            server.naming = self.naming(
                &name,
                s.prefix.as_deref(),
                s.tools.as_ref().map_or(&no_renames, |t| &t.rename),
                s.prompts.as_ref().map_or(&no_renames, |p| &p.rename),
                daemon.tool_name_limit,
            )?;
            self.not_reserved(&name, &server.naming.prefix)?;
            servers.insert(name, server);
        }
        if daemon.request_timeout.is_zero() {
            return Err(self.err("daemon.request_timeout", "must be greater than zero"));
        }
        let profiles = self.profiles(raw.profiles, &servers, &daemon.discovery)?;
        Ok(Config {
            source: Some(self.path.to_owned()),
            daemon,
            servers,
            profiles,
        })
    }
}

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;
