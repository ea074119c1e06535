//! The config file as serde reads it.
//!
//! Every table with `deny_unknown_fields`, so a misspelt key is an error naming it.
//! Nothing here is validated; `mod.rs` and its siblings make these into `Config`.

use super::{filter, naming};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    #[serde(default)]
    pub(super) daemon: RawDaemon,
    #[serde(default)]
    pub(super) servers: BTreeMap<String, RawServer>,
    #[serde(default)]
    pub(super) profiles: BTreeMap<String, filter::RawProfile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDaemon {
    pub(super) socket: Option<PathBuf>,
    pub(super) state_dir: Option<PathBuf>,
    pub(super) request_timeout: Option<String>,
    pub(super) max_message_bytes: Option<usize>,
    pub(super) max_media_bytes: Option<usize>,
    #[serde(default)]
    pub(super) allow_uids: Vec<u32>,
    pub(super) tool_name_limit: Option<usize>,
    pub(super) max_agents: Option<usize>,
    pub(super) agent_queue: Option<usize>,
    pub(super) queue_bytes: Option<usize>,
    pub(super) shutdown_grace: Option<String>,
    pub(super) http_listen: Option<String>,
    #[serde(default)]
    pub(super) http_allow_remote: bool,
    pub(super) http_auth: Option<String>,
    pub(super) http_token_env: Option<String>,
    #[serde(default)]
    pub(super) http_allowed_hosts: Vec<String>,
    pub(super) http_max_connections: Option<usize>,
    pub(super) http_header_timeout: Option<String>,
    pub(super) ui: Option<bool>,
    pub(super) ui_listen: Option<String>,
    pub(super) tools: Option<String>,
    #[serde(default)]
    pub(super) pinned: Vec<String>,
    pub(super) discover_above: Option<usize>,
    pub(super) max_active: Option<usize>,
    #[serde(default)]
    pub(super) restart: RawRestart,
    #[serde(default)]
    pub(super) health: RawHealth,
    #[serde(default)]
    pub(super) sandbox: bool,
    pub(super) pin: Option<String>,
    pub(super) secrets: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRestart {
    pub(super) backoff_initial: Option<String>,
    pub(super) backoff_max: Option<String>,
    pub(super) max_restarts: Option<u32>,
    pub(super) window: Option<String>,
    pub(super) stable_after: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHealth {
    pub(super) ping_interval: Option<String>,
    pub(super) ping_timeout: Option<String>,
    pub(super) startup_timeout: Option<String>,
    pub(super) stop_grace: Option<String>,
    pub(super) probe_timeout: Option<String>,
    pub(super) first_start_timeout: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    pub(super) command: Option<String>,
    pub(super) url: Option<String>,
    pub(super) transport: Option<String>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    pub(super) bearer_token_env: Option<String>,
    pub(super) bearer_token: Option<String>,
    pub(super) connect_timeout: Option<String>,
    pub(super) oauth: Option<super::oauth::RawOAuth>,
    pub(super) protocol: Option<String>,
    #[serde(default)]
    pub(super) args: Vec<String>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    pub(super) cwd: Option<PathBuf>,
    #[serde(default = "yes")]
    pub(super) enabled: bool,
    pub(super) timeout: Option<String>,
    pub(super) restart: Option<RawRestart>,
    pub(super) health: Option<RawHealth>,
    pub(super) max_in_flight: Option<usize>,
    pub(super) tools: Option<filter::RawToolFilter>,
    pub(super) prompts: Option<naming::RawPrompts>,
    /// What agents see before each tool and prompt name; the server's name if unset.
    pub(super) prefix: Option<String>,
    pub(super) start: Option<String>,
    pub(super) idle_timeout: Option<String>,
    pub(super) share: Option<String>,
    pub(super) max_projects: Option<usize>,
    pub(super) sandbox: Option<super::sandbox::RawSandbox>,
    pub(super) pin: Option<String>,
}

pub(super) fn yes() -> bool {
    true
}

// ---------------------------------------------------------------- validated
