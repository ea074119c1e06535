//! The sandbox settings.
//!
//! `[daemon] sandbox` and a server's `sandbox` (true, false, or a
//! `[servers.NAME.sandbox]` table widening the default profile), validated into a
//! `SandboxProfile` whose paths are resolved when the server starts.

use super::{ConfigError, Validator};
pub use crate::egress::HostRule;

/// `sandbox = true | false` or a table.
#[derive(Debug, Clone)]
pub(super) enum RawSandbox {
    Enabled(bool),
    Table(RawSandboxTable),
}

impl<'de> serde::Deserialize<'de> for RawSandbox {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        super::bool_or_table::read(d, RawSandbox::Enabled, RawSandbox::Table)
    }
}

#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSandboxTable {
    #[serde(default)]
    read: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
    network: Option<toml::Value>,
    #[serde(default)]
    env: Vec<String>,
    #[serde(default)]
    unix_sockets: bool,
}

/// What a confined server may reach, beyond the default profile. Paths are kept as
/// written (`~`, `${PROJECT}`, `${VAR}`) and resolved when the server starts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxProfile {
    /// Readable (and executable) paths.
    pub read: Vec<String>,
    /// Writable paths (readable too).
    pub write: Vec<String>,
    pub network: Network,
    /// Variables of the daemon's environment passed through.
    pub env: Vec<String>,
    /// Whether it may make Unix sockets with `socket` (to connect to any pathname socket
    /// it can name: this kernel's Landlock cannot limit which).
    pub unix_sockets: bool,
}

/// Where a confined server may connect.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Network {
    /// Anywhere (many servers exist to reach an API).
    #[default]
    All,
    /// Nowhere: no TCP or UDP socket reaches anything.
    None,
    /// Only these hosts, through mcpd's filtering proxy.
    Hosts(Vec<HostRule>),
}

impl Network {
    pub fn as_str(&self) -> &'static str {
        match self {
            Network::All => "all",
            Network::None => "none",
            Network::Hosts(_) => "hosts",
        }
    }
}

impl std::fmt::Display for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Network::Hosts(rules) => {
                let names: Vec<String> = rules.iter().map(ToString::to_string).collect();
                write!(f, "only {}", names.join(", "))
            }
            other => f.write_str(other.as_str()),
        }
    }
}

/// The longest list of paths or names a sandbox table may hold.
const MAX_ENTRIES: usize = 256;

impl Validator<'_> {
    /// A local server's sandbox: its own setting, else the daemon's.
    pub(super) fn sandbox(
        &self,
        key: &str,
        raw: Option<&RawSandbox>,
        daemon: bool,
        local: bool,
    ) -> Result<Option<SandboxProfile>, ConfigError> {
        let key = format!("{key}.sandbox");
        let table = match raw {
            None => return Ok((daemon && local).then(SandboxProfile::default)),
            Some(_) if !local => {
                return Err(self.err(
                    key,
                    "only applies to local servers (those with `command`): a remote server runs elsewhere",
                ));
            }
            Some(RawSandbox::Enabled(on)) => return Ok(on.then(SandboxProfile::default)),
            Some(RawSandbox::Table(t)) => t,
        };
        for (k, list) in [("read", &table.read), ("write", &table.write)] {
            if list.len() > MAX_ENTRIES {
                return Err(self.err(format!("{key}.{k}"), format!("at most {MAX_ENTRIES} paths")));
            }
            if let Some(p) = list.iter().find(|p| !rooted(p)) {
                return Err(self.err(
                    format!("{key}.{k}"),
                    format!(
                        "{p:?} is not an absolute path: start it with /, ~ (the daemon's home), ${{PROJECT}} or ${{VAR}}"
                    ),
                ));
            }
        }
        if table.env.len() > MAX_ENTRIES {
            return Err(self.err(format!("{key}.env"), format!("at most {MAX_ENTRIES} names")));
        }
        if let Some(bad) = table
            .env
            .iter()
            .find(|n| n.is_empty() || n.contains('=') || n.contains('\0'))
        {
            return Err(self.err(
                format!("{key}.env"),
                format!("{bad:?} is not a variable name"),
            ));
        }
        let network = match &table.network {
            None => Network::All,
            Some(toml::Value::String(s)) if s == "all" => Network::All,
            Some(toml::Value::String(s)) if s == "none" => Network::None,
            Some(toml::Value::Array(list)) => Network::Hosts(self.hosts(&key, list)?),
            Some(other) => {
                return Err(self.err(
                    format!("{key}.network"),
                    format!(
                        "{other} is not a network mode; use \"all\", \"none\" or a list of hosts"
                    ),
                ));
            }
        };
        Ok(Some(SandboxProfile {
            read: table.read.clone(),
            write: table.write.clone(),
            network,
            env: table.env.clone(),
            unix_sockets: table.unix_sockets,
        }))
    }

    /// A `network` list: each entry a host rule, at least one, at most `MAX_RULES`.
    fn hosts(&self, key: &str, list: &[toml::Value]) -> Result<Vec<HostRule>, ConfigError> {
        let key = format!("{key}.network");
        if list.is_empty() {
            return Err(self.err(
                key,
                "an empty list would allow nothing: use \"none\" for no network",
            ));
        }
        if list.len() > crate::egress::MAX_RULES {
            let most = crate::egress::MAX_RULES;
            return Err(self.err(key, format!("at most {most} hosts")));
        }
        list.iter()
            .enumerate()
            .map(|(i, v)| {
                let entry = v.as_str().ok_or_else(|| {
                    self.err(format!("{key}[{i}]"), format!("{v} is not a string"))
                })?;
                HostRule::parse(entry).map_err(|why| self.err(format!("{key}[{i}]"), why))
            })
            .collect()
    }
}

/// Whether a sandbox path names where it starts: `/`, `~`, `${PROJECT}` or `${VAR}`.
fn rooted(p: &str) -> bool {
    p.starts_with('/') || p == "~" || p.starts_with("~/") || p.starts_with("${")
}
