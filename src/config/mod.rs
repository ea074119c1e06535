//! Configuration: the raw TOML file, validated once into a `Config` that running code trusts.

mod filter;
mod remote;

pub use filter::{Profile, ToolFilter, glob};
pub use remote::{HttpLaunch, HttpTransport, Secret, display_url};

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a configuration cannot be used. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: cannot read the config file: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("{path}: `{key}`: {message}")]
    Invalid {
        path: PathBuf,
        key: String,
        message: String,
    },
}

/// Default limits, documented in README's configuration reference.
pub mod defaults {
    use std::time::Duration;
    pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
    pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
    pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
    pub const TOOL_NAME_LIMIT: usize = 64;
    pub const MAX_AGENTS: usize = 512;
    pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
    pub const MAX_IN_FLIGHT: usize = 1024;
    pub const AGENT_QUEUE: usize = 1024;
    pub const BACKOFF_INITIAL: Duration = Duration::from_millis(250);
    pub const BACKOFF_MAX: Duration = Duration::from_secs(30);
    pub const MAX_RESTARTS: u32 = 5;
    pub const RESTART_WINDOW: Duration = Duration::from_secs(60);
    pub const STABLE_AFTER: Duration = Duration::from_secs(30);
    pub const PING_INTERVAL: Duration = Duration::from_secs(30);
    pub const PING_TIMEOUT: Duration = Duration::from_secs(10);
    pub const STOP_GRACE: Duration = Duration::from_secs(2);
    pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
    pub const MAX_MEDIA_BYTES: usize = 10 * 1024 * 1024;
}

// ---------------------------------------------------------------- raw file

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    daemon: RawDaemon,
    #[serde(default)]
    servers: BTreeMap<String, RawServer>,
    #[serde(default)]
    profiles: BTreeMap<String, filter::RawProfile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDaemon {
    socket: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    request_timeout: Option<String>,
    max_message_bytes: Option<usize>,
    max_media_bytes: Option<usize>,
    tool_name_limit: Option<usize>,
    max_agents: Option<usize>,
    agent_queue: Option<usize>,
    shutdown_grace: Option<String>,
    #[serde(default)]
    restart: RawRestart,
    #[serde(default)]
    health: RawHealth,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRestart {
    backoff_initial: Option<String>,
    backoff_max: Option<String>,
    max_restarts: Option<u32>,
    window: Option<String>,
    stable_after: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHealth {
    ping_interval: Option<String>,
    ping_timeout: Option<String>,
    startup_timeout: Option<String>,
    stop_grace: Option<String>,
    probe_timeout: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    command: Option<String>,
    url: Option<String>,
    transport: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    bearer_token_env: Option<String>,
    connect_timeout: Option<String>,
    protocol: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    #[serde(default = "yes")]
    enabled: bool,
    timeout: Option<String>,
    restart: Option<RawRestart>,
    health: Option<RawHealth>,
    max_in_flight: Option<usize>,
    tools: Option<filter::RawToolFilter>,
    start: Option<String>,
    idle_timeout: Option<String>,
    share: Option<String>,
}

fn yes() -> bool {
    true
}

// ---------------------------------------------------------------- validated

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
    /// Longest qualified tool name shown to agents.
    pub tool_name_limit: usize,
    /// Agent connections accepted at once; more are refused with an error.
    pub max_agents: usize,
    /// Messages queued to one agent before it counts as not reading and is disconnected.
    pub agent_queue: usize,
    /// How long in-flight calls may finish after a shutdown signal.
    pub shutdown_grace: Duration,
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
    /// Started with the daemon, or on its first call.
    pub lazy: bool,
    /// Stopped after this long without agent calls (started again on the next one).
    pub idle_timeout: Option<Duration>,
    /// Each agent connection gets its own instance (`share = "agent"`).
    pub per_agent: bool,
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
    /// Bound on the `server/discover` probe that finds a server's era.
    pub probe_timeout: Duration,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            socket: None,
            state_dir: None,
            request_timeout: defaults::REQUEST_TIMEOUT,
            max_message_bytes: defaults::MAX_MESSAGE_BYTES,
            max_media_bytes: defaults::MAX_MEDIA_BYTES,
            tool_name_limit: defaults::TOOL_NAME_LIMIT,
            max_agents: defaults::MAX_AGENTS,
            agent_queue: defaults::AGENT_QUEUE,
            shutdown_grace: defaults::SHUTDOWN_GRACE,
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

/// Server names: lowercase, digits and dashes, so `NAME__tool` splits unambiguously.
pub fn valid_server_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 32
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

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
        humantime::parse_duration(s).map_err(|e| {
            self.err(
                key,
                format!("{s:?} is not a duration ({e}); write e.g. \"500ms\", \"30s\" or \"2m\""),
            )
        })
    }

    fn positive(
        &self,
        key: &str,
        v: Option<usize>,
        default: usize,
        min: usize,
    ) -> Result<usize, ConfigError> {
        match v {
            None => Ok(default),
            Some(n) if n >= min => Ok(n),
            Some(n) => Err(self.err(key, format!("{n} is too small; the minimum is {min}"))),
        }
    }

    fn config(&self, raw: RawFile) -> Result<Config, ConfigError> {
        let d = &raw.daemon;
        let daemon = DaemonConfig {
            socket: d.socket.clone(),
            state_dir: d.state_dir.clone(),
            request_timeout: self.duration(
                "daemon.request_timeout",
                &d.request_timeout,
                defaults::REQUEST_TIMEOUT,
            )?,
            max_message_bytes: self.positive(
                "daemon.max_message_bytes",
                d.max_message_bytes,
                defaults::MAX_MESSAGE_BYTES,
                4096,
            )?,
            max_media_bytes: self.positive(
                "daemon.max_media_bytes",
                d.max_media_bytes,
                defaults::MAX_MEDIA_BYTES,
                1,
            )?,
            tool_name_limit: self.positive(
                "daemon.tool_name_limit",
                d.tool_name_limit,
                defaults::TOOL_NAME_LIMIT,
                48,
            )?,
            max_agents: self.positive(
                "daemon.max_agents",
                d.max_agents,
                defaults::MAX_AGENTS,
                1,
            )?,
            agent_queue: self.positive(
                "daemon.agent_queue",
                d.agent_queue,
                defaults::AGENT_QUEUE,
                16,
            )?,
            shutdown_grace: self.duration(
                "daemon.shutdown_grace",
                &d.shutdown_grace,
                defaults::SHUTDOWN_GRACE,
            )?,
        };
        let restart_default = self.restart("daemon.restart", &d.restart, None)?;
        let health_default = self.health("daemon.health", &d.health, None)?;
        let mut servers = BTreeMap::new();
        for (name, s) in raw.servers {
            let key = format!("servers.{name}");
            if !valid_server_name(&name) {
                return Err(self.err(
                    key,
                    "a server name is 1-32 characters of a-z, 0-9 and '-', starting with a letter or digit (no '_', so NAME__tool splits unambiguously)",
                ));
            }
            let launch = self.launch(&key, &s)?;
            let restart = match &s.restart {
                Some(r) => self.restart(&format!("{key}.restart"), r, Some(restart_default))?,
                None => restart_default,
            };
            let health = match &s.health {
                Some(h) => self.health(&format!("{key}.health"), h, Some(health_default))?,
                None => health_default,
            };
            let protocol = match s.protocol.as_deref() {
                None | Some("auto") => ProtocolMode::Auto,
                Some("legacy") => ProtocolMode::Legacy,
                Some("modern") => ProtocolMode::Modern,
                Some(other) => {
                    return Err(self.err(
                        format!("{key}.protocol"),
                        format!("{other:?} is not a protocol mode; use \"auto\", \"legacy\" or \"modern\""),
                    ));
                }
            };
            let server = ServerConfig {
                launch,
                protocol,
                enabled: s.enabled,
                timeout: self.duration(
                    &format!("{key}.timeout"),
                    &s.timeout,
                    daemon.request_timeout,
                )?,
                restart,
                health,
                max_in_flight: self.positive(
                    &format!("{key}.max_in_flight"),
                    s.max_in_flight,
                    defaults::MAX_IN_FLIGHT,
                    1,
                )?,
                tools: self.tool_filter(&key, s.tools.clone())?,
                per_agent: match s.share.as_deref() {
                    None | Some("shared") => false,
                    Some("agent") => true,
                    Some(other) => {
                        return Err(self.err(
                            format!("{key}.share"),
                            format!("{other:?} is not a share mode; use \"shared\" or \"agent\""),
                        ));
                    }
                },
                lazy: match s.start.as_deref() {
                    None | Some("eager") => false,
                    Some("lazy") => true,
                    Some(other) => {
                        return Err(self.err(
                            format!("{key}.start"),
                            format!("{other:?} is not a start mode; use \"eager\" or \"lazy\""),
                        ));
                    }
                },
                idle_timeout: match &s.idle_timeout {
                    None => None,
                    v => Some(self.duration(&format!("{key}.idle_timeout"), v, Duration::ZERO)?)
                        .filter(|d| !d.is_zero()),
                },
                name: name.clone(),
            };
            if server.timeout.is_zero() {
                return Err(self.err(format!("{key}.timeout"), "must be greater than zero"));
            }
            servers.insert(name, server);
        }
        if daemon.request_timeout.is_zero() {
            return Err(self.err("daemon.request_timeout", "must be greater than zero"));
        }
        let profiles = self.profiles(raw.profiles, &servers)?;
        Ok(Config {
            source: Some(self.path.to_owned()),
            daemon,
            servers,
            profiles,
        })
    }

    /// The `command` or `url` of a server table, and the keys that go with it.
    fn launch(&self, key: &str, s: &RawServer) -> Result<Launch, ConfigError> {
        match (&s.command, &s.url) {
            (Some(_), Some(_)) => Err(self.err(
                key,
                "set either `command` (a local server) or `url` (a remote one), not both",
            )),
            (Some(c), None) => {
                if c.trim().is_empty() {
                    return Err(self.err(format!("{key}.command"), "the command is empty"));
                }
                let remote_only = [
                    ("transport", s.transport.is_some()),
                    ("headers", !s.headers.is_empty()),
                    ("bearer_token_env", s.bearer_token_env.is_some()),
                    ("connect_timeout", s.connect_timeout.is_some()),
                ];
                if let Some((k, _)) = remote_only.iter().find(|(_, set)| *set) {
                    return Err(self.err(
                        format!("{key}.{k}"),
                        "only applies to remote servers (those with `url`)",
                    ));
                }
                Ok(Launch::Stdio(StdioLaunch {
                    command: c.clone(),
                    args: s.args.clone(),
                    env: s.env.clone(),
                    cwd: s.cwd.clone(),
                }))
            }
            (None, Some(url)) => {
                let local_only = [
                    ("args", !s.args.is_empty()),
                    ("env", !s.env.is_empty()),
                    ("cwd", s.cwd.is_some()),
                ];
                if let Some((k, _)) = local_only.iter().find(|(_, set)| *set) {
                    return Err(self.err(
                        format!("{key}.{k}"),
                        "only applies to local servers (those with `command`)",
                    ));
                }
                let raw = remote::RawRemote {
                    url,
                    transport: s.transport.as_deref(),
                    headers: &s.headers,
                    bearer_token_env: s.bearer_token_env.as_deref(),
                    connect_timeout: &s.connect_timeout,
                };
                Ok(Launch::Http(self.remote(key, raw)?))
            }
            (None, None) => Err(self.err(
                format!("{key}.command"),
                "missing: every server needs the program to run (command = \"npx\") or the URL of a remote server (url = \"https://…/mcp\")",
            )),
        }
    }

    fn restart(
        &self,
        key: &str,
        r: &RawRestart,
        base: Option<RestartPolicy>,
    ) -> Result<RestartPolicy, ConfigError> {
        let b = base.unwrap_or(RestartPolicy {
            backoff_initial: defaults::BACKOFF_INITIAL,
            backoff_max: defaults::BACKOFF_MAX,
            max_restarts: defaults::MAX_RESTARTS,
            window: defaults::RESTART_WINDOW,
            stable_after: defaults::STABLE_AFTER,
        });
        let p = RestartPolicy {
            backoff_initial: self.duration(
                &format!("{key}.backoff_initial"),
                &r.backoff_initial,
                b.backoff_initial,
            )?,
            backoff_max: self.duration(
                &format!("{key}.backoff_max"),
                &r.backoff_max,
                b.backoff_max,
            )?,
            max_restarts: r.max_restarts.unwrap_or(b.max_restarts),
            window: self.duration(&format!("{key}.window"), &r.window, b.window)?,
            stable_after: self.duration(
                &format!("{key}.stable_after"),
                &r.stable_after,
                b.stable_after,
            )?,
        };
        if p.backoff_max < p.backoff_initial {
            return Err(self.err(
                format!("{key}.backoff_max"),
                "must not be shorter than backoff_initial",
            ));
        }
        Ok(p)
    }

    fn health(
        &self,
        key: &str,
        h: &RawHealth,
        base: Option<HealthPolicy>,
    ) -> Result<HealthPolicy, ConfigError> {
        let b = base.unwrap_or(HealthPolicy {
            startup_timeout: defaults::STARTUP_TIMEOUT,
            ping_interval: defaults::PING_INTERVAL,
            ping_timeout: defaults::PING_TIMEOUT,
            stop_grace: defaults::STOP_GRACE,
            probe_timeout: defaults::PROBE_TIMEOUT,
        });
        let p = HealthPolicy {
            startup_timeout: self.duration(
                &format!("{key}.startup_timeout"),
                &h.startup_timeout,
                b.startup_timeout,
            )?,
            ping_interval: self.duration(
                &format!("{key}.ping_interval"),
                &h.ping_interval,
                b.ping_interval,
            )?,
            ping_timeout: self.duration(
                &format!("{key}.ping_timeout"),
                &h.ping_timeout,
                b.ping_timeout,
            )?,
            stop_grace: self.duration(&format!("{key}.stop_grace"), &h.stop_grace, b.stop_grace)?,
            probe_timeout: self.duration(
                &format!("{key}.probe_timeout"),
                &h.probe_timeout,
                b.probe_timeout,
            )?,
        };
        if p.startup_timeout.is_zero() || p.ping_timeout.is_zero() {
            return Err(self.err(
                key,
                "startup_timeout and ping_timeout must be greater than zero",
            ));
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<(), &str>) {
        let got = Config::parse(text, Path::new("/etc/mcpd.toml"));
        match (got, expected) {
            (Ok(_), Ok(())) => {}
            (Err(e), Err(want)) => {
                let msg = e.to_string();
                assert!(msg.contains(want), "error {msg:?} should contain {want:?}");
                assert!(msg.starts_with("/etc/mcpd.toml"), "{msg}");
            }
            (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn configs_validate_with_errors_naming_the_key() {
        check("", Ok(()));
        check(
            "[servers.fs]\ncommand = \"npx\"\nargs = [\"-y\"]\ntimeout = \"5s\"",
            Ok(()),
        );
        check(
            "[servers.fs]\ncommand = \"x\"\nbogus = 1",
            Err("unknown field `bogus`"),
        );
        check(
            "[daemon]\nsocket_path = \"x\"",
            Err("unknown field `socket_path`"),
        );
        check(
            "[servers.fs]\ncommand = \"x\"\ntimeout = \"soon\"",
            Err("`servers.fs.timeout`: \"soon\" is not a duration"),
        );
        check(
            "[servers.my_fs]\ncommand = \"x\"",
            Err("`servers.my_fs`: a server name"),
        );
        check("[servers.Fs]\ncommand = \"x\"", Err("`servers.Fs`"));
        check(
            "[servers.fs]\nargs = []",
            Err("`servers.fs.command`: missing"),
        );
        check(
            "[servers.fs]\ncommand = \"x\"\n[servers.fs.restart]\nbackoff_initial = \"10s\"\nbackoff_max = \"1s\"",
            Err("backoff_max"),
        );
        check(
            "[daemon]\nrequest_timeout = \"0s\"",
            Err("daemon.request_timeout"),
        );
        check(
            "[daemon]\ntool_name_limit = 10",
            Err("`daemon.tool_name_limit`: 10 is too small"),
        );
        check("not toml =", Err("/etc/mcpd.toml"));
    }

    fn check_env(text: &str, expected: Result<(), &str>) {
        let env = |var: &str| match var {
            "TOKEN" => Some("s3cret".to_owned()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        let got = Config::parse_with_env(text, Path::new("/etc/mcpd.toml"), &env);
        match (got, expected) {
            (Ok(_), Ok(())) => {}
            (Err(e), Err(want)) => {
                let msg = e.to_string();
                assert!(msg.contains(want), "error {msg:?} should contain {want:?}");
                assert!(!msg.contains("s3cret"), "a secret leaked into {msg:?}");
            }
            (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn remote_servers_validate_and_never_show_their_secrets() {
        let ok = "[servers.r]\nurl = \"https://example.com/mcp\"\n";
        check_env(ok, Ok(()));
        check_env(
            &format!(
                "{ok}transport = \"sse\"\nbearer_token_env = \"TOKEN\"\nconnect_timeout = \"3s\""
            ),
            Ok(()),
        );
        check_env(
            &format!("{ok}headers = {{ X-Key = \"k-${{TOKEN}}\" }}"),
            Ok(()),
        );
        check_env(
            "[servers.r]\nurl = \"ftp://example.com\"",
            Err("`servers.r.url`: the scheme must be http or https"),
        );
        check_env(
            "[servers.r]\nurl = \"not a url\"",
            Err("`servers.r.url`: not a valid URL"),
        );
        check_env(
            &format!("{ok}transport = \"websocket\""),
            Err("`servers.r.transport`: \"websocket\" is not a transport"),
        );
        check_env(
            &format!("{ok}bearer_token_env = \"MISSING\""),
            Err("`servers.r.bearer_token_env`: the variable MISSING is not set"),
        );
        check_env(
            &format!("{ok}bearer_token_env = \"EMPTY\""),
            Err("the variable EMPTY is empty"),
        );
        check_env(
            &format!("{ok}headers = {{ X-Key = \"${{MISSING}}\" }}"),
            Err("`servers.r.headers.X-Key`: refers to ${MISSING}, which is not set"),
        );
        check_env(
            &format!("{ok}headers = {{ X-Key = \"${{TOKEN\" }}"),
            Err("an unterminated ${"),
        );
        check_env(
            &format!("{ok}headers = {{ Mcp-Session-Id = \"x\" }}"),
            Err("mcpd sets this header itself"),
        );
        check_env(
            &format!(
                "{ok}bearer_token_env = \"TOKEN\"\nheaders = {{ Authorization = \"Bearer ${{TOKEN}}\" }}"
            ),
            Err("conflicts with bearer_token_env"),
        );
        check_env(
            &format!("{ok}headers = {{ X-Key = \"a\\nb-${{TOKEN}}\" }}"),
            Err("not a valid header value"),
        );
        check_env(
            "[servers.r]\nurl = \"https://example.com/mcp\"\ncommand = \"x\"",
            Err("either `command`"),
        );
        check_env(
            &format!("{ok}args = [\"a\"]"),
            Err("`servers.r.args`: only applies to local servers"),
        );
        check_env(
            "[servers.r]\ncommand = \"x\"\ntransport = \"sse\"",
            Err("`servers.r.transport`: only applies to remote servers"),
        );
        // Expanded values are kept, but never printed by Debug.
        let c = Config::parse_with_env(
            &format!("{ok}headers = {{ X-Key = \"k-${{TOKEN}}\" }}\nbearer_token_env = \"TOKEN\""),
            Path::new("f"),
            &|v: &str| (v == "TOKEN").then(|| "s3cret".to_owned()),
        )
        .unwrap();
        let Launch::Http(h) = &c.servers["r"].launch else {
            panic!("not remote")
        };
        assert_eq!(h.headers[0].1.expose(), "k-s3cret");
        assert!(!format!("{c:?}").contains("s3cret"));
        let u = reqwest::Url::parse("https://user:pw@example.com/mcp?key=abc").unwrap();
        assert_eq!(display_url(&u), "https://example.com/mcp?…");
    }

    #[test]
    fn server_values_inherit_daemon_defaults() {
        let c = Config::parse(
            "[daemon]\nrequest_timeout = \"7s\"\n[daemon.restart]\nmax_restarts = 2\n[servers.a]\ncommand = \"x\"\n[servers.b]\ncommand = \"y\"\ntimeout = \"1s\"\n[servers.b.restart]\nwindow = \"5s\"",
            Path::new("f"),
        )
        .unwrap();
        assert_eq!(c.servers["a"].timeout, Duration::from_secs(7));
        assert_eq!(c.servers["b"].timeout, Duration::from_secs(1));
        assert_eq!(c.servers["a"].restart.max_restarts, 2);
        assert_eq!(c.servers["b"].restart.max_restarts, 2);
        assert_eq!(c.servers["b"].restart.window, Duration::from_secs(5));
        assert!(c.servers["a"].enabled);
    }

    #[test]
    fn server_names_follow_the_documented_pattern() {
        for ok in [
            "a",
            "fs",
            "server-1",
            "0x",
            "abcdefghijklmnopqrstuvwxyz012345",
        ] {
            assert!(valid_server_name(ok), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a_b",
            "A",
            "a.b",
            "abcdefghijklmnopqrstuvwxyz0123456",
        ] {
            assert!(!valid_server_name(bad), "{bad}");
        }
    }
}
