//! Tool discovery settings.
//!
//! `[daemon] tools = "all" | "discover"`, `pinned`, `discover_above` and `max_active`,
//! which a profile may override (`tools = "discover"` there, or its own `pinned`), and
//! the reserved name `mcpd`.

use super::{ConfigError, Validator};
use serde::Deserialize;

/// The name mcpd's own tools are listed under (`mcpd__find_tools`, …): no server and no
/// prefix may take it.
pub const RESERVED: &str = "mcpd";

/// Tools described in full per agent at most, by default.
const MAX_ACTIVE: usize = 16;

/// What `tools/list` shows an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolMode {
    /// Every tool it may call (the default).
    #[default]
    All,
    /// Its pinned tools, the tools it activated, and the three discovery meta-tools.
    Discover,
}

/// How an agent finds its tools.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Discovery {
    pub mode: ToolMode,
    /// Qualified tool names always listed in full in discover mode.
    pub pinned: Vec<String>,
    /// Discover mode only once the agent's visible tools are more than this many.
    pub discover_above: Option<usize>,
    /// Tools `mcpd__describe_tools` keeps activated per agent (the least recently
    /// described leave first).
    pub max_active: usize,
}

impl Discovery {
    /// Whether an agent that can see `visible` tools gets discover mode.
    pub fn discovers(&self, visible: usize) -> bool {
        self.mode == ToolMode::Discover && self.discover_above.is_none_or(|n| visible > n)
    }
}

/// A profile's `tools`: a mode, or globs over tool names (which keep the daemon's mode).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum RawProfileTools {
    Mode(String),
    Globs(Vec<String>),
}

impl Default for RawProfileTools {
    fn default() -> Self {
        RawProfileTools::Globs(Vec::new())
    }
}

impl Validator<'_> {
    fn mode(&self, key: &str, text: &str) -> Result<ToolMode, ConfigError> {
        match text {
            "all" => Ok(ToolMode::All),
            "discover" => Ok(ToolMode::Discover),
            other => Err(self.err(
                key,
                format!("'{other}' is not a tool mode: use \"all\" or \"discover\""),
            )),
        }
    }

    /// `[daemon]`'s settings.
    pub(super) fn discovery(
        &self,
        tools: Option<&str>,
        pinned: &[String],
        discover_above: Option<usize>,
        max_active: Option<usize>,
    ) -> Result<Discovery, ConfigError> {
        let mode = match tools {
            Some(t) => self.mode("daemon.tools", t)?,
            None => ToolMode::All,
        };
        let max_active = max_active.unwrap_or(MAX_ACTIVE);
        if !(1..=1000).contains(&max_active) {
            return Err(self.err("daemon.max_active", "must be between 1 and 1000"));
        }
        Ok(Discovery {
            mode,
            pinned: pinned.to_vec(),
            discover_above,
            max_active,
        })
    }

    /// A profile's settings over the daemon's, and its tool globs.
    pub(super) fn profile_discovery(
        &self,
        key: &str,
        tools: RawProfileTools,
        pinned: Option<Vec<String>>,
        discover_above: Option<usize>,
        daemon: &Discovery,
    ) -> Result<(Discovery, Vec<String>), ConfigError> {
        let mut d = daemon.clone();
        let globs = match tools {
            RawProfileTools::Mode(m) => {
                d.mode = self.mode(&format!("{key}.tools"), &m)?;
                Vec::new()
            }
            RawProfileTools::Globs(g) => g,
        };
        if let Some(p) = pinned {
            d.pinned = p;
        }
        if discover_above.is_some() {
            d.discover_above = discover_above;
        }
        Ok((d, globs))
    }

    /// Refuses a server name or prefix that would take mcpd's own.
    pub(super) fn not_reserved(&self, server: &str, prefix: &str) -> Result<(), ConfigError> {
        if server == RESERVED {
            return Err(self.err(
                format!("servers.{server}"),
                "the name 'mcpd' is reserved for mcpd's own tools (mcpd__find_tools, …): choose another",
            ));
        }
        if prefix == RESERVED {
            return Err(self.err(
                format!("servers.{server}.prefix"),
                "the prefix 'mcpd' is reserved for mcpd's own tools (mcpd__find_tools, …): choose another",
            ));
        }
        Ok(())
    }
}
