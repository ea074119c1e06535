//! The cache of servers' protocol eras, kept in a file.
//!
//! So a restarted daemon does not probe again. Owned by the supervisor.
//!
//! A verdict is keyed by server name and a fingerprint of everything in the config that
//! decides how the server is started; any change to that configuration invalidates it.

use crate::config::{Launch, ServerConfig};
use mcpd_wire::protocol::era::Era;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One cached verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachedEra {
    pub fingerprint: String,
    pub era: Era,
    /// Why: the probe's outcome in words, shown in `ctl status`.
    pub reason: String,
    /// Seconds since the Unix epoch.
    pub decided_at: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    servers: BTreeMap<String, CachedEra>,
}

pub struct EraCache {
    path: Option<PathBuf>,
    file: File,
    writer: super::state_file::StateWriter,
}

impl EraCache {
    /// Loads the cache from `dir/eras.json`, keeping only configured servers. A missing
    /// or unreadable file is an empty cache: the worst that happens is a probe.
    pub fn load(
        dir: Option<PathBuf>,
        configured: &dyn Fn(&str) -> bool,
        writer: super::state_file::StateWriter,
    ) -> EraCache {
        let path = dir.map(|d| d.join("eras.json"));
        let mut file: File = super::state_file::load(path.as_deref(), "era cache");
        let before = file.servers.len();
        file.servers.retain(|name, _| configured(name));
        let cache = EraCache { path, file, writer };
        if cache.file.servers.len() != before {
            cache.save();
        }
        cache
    }

    /// The cached era of a server, if its configuration has not changed since.
    pub fn get(&self, cfg: &ServerConfig) -> Option<&CachedEra> {
        self.file
            .servers
            .get(&cfg.name)
            .filter(|v| v.fingerprint == fingerprint(cfg))
    }

    pub fn put(&mut self, cfg: &ServerConfig, era: Era, reason: String) {
        let decided_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let verdict = CachedEra {
            fingerprint: fingerprint(cfg),
            era,
            reason,
            decided_at,
        };
        self.file.servers.insert(cfg.name.clone(), verdict);
        self.save();
    }

    /// Forgets a verdict that stopped working, so the next start probes again.
    pub fn forget(&mut self, name: &str) {
        if self.file.servers.remove(name).is_some() {
            self.save();
        }
    }

    /// Has the file written (privately, atomically, off the runtime). A failure is
    /// logged: the cache only saves probes.
    fn save(&self) {
        let Some(path) = &self.path else {
            return;
        };
        match serde_json::to_vec_pretty(&self.file) {
            Ok(bytes) => self.writer.write(path.clone(), bytes, "era cache"),
            Err(e) => tracing::warn!("could not save the era cache: {e}"),
        }
    }
}

/// A stable hash of how a server is started (SHA-256 over a canonical rendering).
/// Environment values are hashed, never stored.
pub fn fingerprint(cfg: &ServerConfig) -> String {
    let mut text = format!("protocol={}\n", cfg.protocol.as_str());
    match &cfg.launch {
        Launch::Stdio(s) => {
            text.push_str(&format!("command={}\n", s.command));
            for a in &s.args {
                text.push_str(&format!("arg={a}\n"));
            }
            for (k, v) in &s.env {
                text.push_str(&format!("env={k}={v}\n"));
            }
            if let Some(cwd) = &s.cwd {
                text.push_str(&format!("cwd={}\n", cwd.display()));
            }
        }
        Launch::Http(h) => {
            text.push_str(&format!(
                "url={}\ntransport={}\n",
                h.url,
                h.transport.as_str()
            ));
        }
    }
    hex::encode(<sha2::Sha256 as sha2::Digest>::digest(text))
}
