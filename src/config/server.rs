//! One `[servers.NAME]` table validated into a `ServerConfig`.
//!
//! How the server is reached, its timeouts, and its restart and health policies.

use super::{
    ConfigError, HealthPolicy, Launch, ProtocolMode, RawHealth, RawRestart, RawServer,
    RestartPolicy, ServerConfig, StdioLaunch, Validator, defaults, remote, valid_server_name,
};
use std::time::Duration;

impl Validator<'_> {
    /// The server table `name`. Values it leaves unset come from the daemon section:
    /// `request_timeout` and the restart and health policies.
    pub(super) fn server(
        &self,
        name: &str,
        s: &RawServer,
        request_timeout: Duration,
        restart_default: RestartPolicy,
        health_default: HealthPolicy,
    ) -> Result<ServerConfig, ConfigError> {
        let key = format!("servers.{name}");
        if !valid_server_name(name) {
            return Err(self.err(
                key,
                "a server name is 1-32 characters of a-z, 0-9 and '-', starting with a letter or digit (no '_', so NAME__tool splits unambiguously)",
            ));
        }
        let mut missing = Vec::new();
        let launch = self.launch(&key, s, &mut missing)?;
        let secrets = self.launch_secrets(&key, &launch)?;
        let (share, project_idle) = self.share(&key, s, &launch)?;
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
                    format!(
                        "{other:?} is not a protocol mode; use \"auto\", \"legacy\" or \"modern\""
                    ),
                ));
            }
        };
        let server = ServerConfig {
            launch,
            protocol,
            enabled: s.enabled,
            timeout: self.duration(&format!("{key}.timeout"), &s.timeout, request_timeout)?,
            restart,
            health,
            max_in_flight: self.positive(
                &format!("{key}.max_in_flight"),
                s.max_in_flight,
                defaults::MAX_IN_FLIGHT,
                1..=1 << 20,
            )?,
            tools: self.tool_filter(&key, s.tools.clone())?,
            // Replaced by the validated naming once the name limit is known.
            naming: mcpd_wire::protocol::naming::Naming::prefixed(name),
            share,
            // Set by the caller, which knows the daemon's default.
            sandbox: None,
            pin: super::PinMode::TrustFirst,
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
                None => project_idle,
                v => Some(self.duration(&format!("{key}.idle_timeout"), v, Duration::ZERO)?)
                    .filter(|d| !d.is_zero()),
            },
            name: name.to_owned(),
            unresolved: remote::Missing::explain(&missing),
            secrets,
        };
        if server.timeout.is_zero() {
            return Err(self.err(format!("{key}.timeout"), "must be greater than zero"));
        }
        Ok(server)
    }

    /// The `command` or `url` of a server table, and the keys that go with it.
    fn launch(
        &self,
        key: &str,
        s: &RawServer,
        missing: &mut Vec<remote::Missing>,
    ) -> Result<Launch, ConfigError> {
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
                    ("bearer_token", s.bearer_token.is_some()),
                    ("connect_timeout", s.connect_timeout.is_some()),
                    ("oauth", s.oauth.is_some()),
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
                    bearer_token: s.bearer_token.as_deref(),
                    connect_timeout: &s.connect_timeout,
                    oauth: s.oauth.as_ref(),
                };
                Ok(Launch::Http(self.remote(key, raw, missing)?))
            }
            (None, None) => Err(self.err(
                format!("{key}.command"),
                "missing: every server needs the program to run (command = \"npx\") or the URL of a remote server (url = \"https://…/mcp\")",
            )),
        }
    }

    pub(super) fn restart(
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

    pub(super) fn health(
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
            first_start_timeout: defaults::FIRST_START_TIMEOUT,
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
            first_start_timeout: self.duration(
                &format!("{key}.first_start_timeout"),
                &h.first_start_timeout,
                b.first_start_timeout,
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
