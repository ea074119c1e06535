//! Live reload: applying a new configuration's servers — added ones start, removed ones stop, changed ones restart, unchanged ones are left alone.
//!
//! A change of naming only (`prefix`, renames) keeps the process: its lists are presented
//! again under the new names at once.

use super::{AfterExit, ServerState, Slot, Supervisor};
use crate::config::Config;
use std::sync::Arc;

/// What a reload changed, for the log and `mcpd ctl reload`.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct ReloadSummary {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
    /// Servers whose naming alone changed: renamed in place, not restarted.
    #[serde(default)]
    pub renamed: Vec<String>,
    pub unchanged: usize,
}

impl Supervisor {
    pub(super) fn reload(&mut self, config: &Config) -> ReloadSummary {
        let mut summary = ReloadSummary::default();
        // Removed servers (and their per-agent instances) stop; their calls in flight
        // finish or fail as in any stop, and their tools leave the catalog.
        let gone: Vec<Arc<str>> = self
            .slots
            .iter()
            .filter(|(k, s)| {
                let base = s.owner.as_ref().map_or(&***k, |o| &*o.template);
                !config.servers.contains_key(base)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in gone {
            let Some(slot) = self.slots.get_mut(&key) else {
                continue;
            };
            if slot.owner.is_none() {
                summary.removed.push(key.to_string());
                self.registry.forget_server(&key);
                self.catalog_cache.forget(&key);
                self.eras.forget(&key);
            }
            slot.removing = true;
            slot.retry_at = None;
            slot.after_exit = AfterExit::Stay;
            match &slot.running {
                Some(r) => r.cancel.cancel(),
                None => {
                    self.slots.remove(&key);
                }
            }
        }
        for (name, cfg) in &config.servers {
            let key: Arc<str> = Arc::from(name.as_str());
            // Before anything is listed under the new config, so no list of this
            // server is ever presented under its old names.
            let renamed = self
                .registry
                .set_naming(&key, cfg.naming.clone(), self.name_limit);
            if let (Err(e), Some(slot)) = (&renamed, self.slots.get_mut(&key)) {
                tracing::warn!(upstream = %key, "its tools cannot be listed under the new names: {e}");
                slot.catalog_error = Some(format!("tool list rejected under the new names: {e}"));
            }
            // A server whose URL or OAuth settings change gets a login of its own.
            let fresh_login = match self.slots.get(&key) {
                Some(s) if launch_oauth(&s.cfg) != launch_oauth(cfg) => self.login_for(cfg),
                _ => None,
            };
            match self.slots.get_mut(&key) {
                None => {
                    summary.added.push(name.clone());
                    let mut slot = Slot::new(cfg.clone());
                    slot.login = self.login_for(cfg);
                    self.slots.insert(key.clone(), slot);
                    if cfg.enabled {
                        self.start(&key);
                    }
                }
                Some(slot) if slot.cfg == *cfg => summary.unchanged += 1,
                Some(slot) if slot.cfg.same_but_naming(cfg) => {
                    summary.renamed.push(name.clone());
                    slot.cfg = cfg.clone();
                    if renamed.is_ok() {
                        slot.catalog_error = None;
                    }
                }
                Some(slot) => {
                    summary.changed.push(name.clone());
                    if launch_oauth(&slot.cfg) != launch_oauth(cfg) {
                        slot.login = fresh_login;
                    }
                    slot.cfg = cfg.clone();
                    slot.budget.clear();
                    slot.backoff.reset();
                    slot.retry_at = None;
                    let enabled = cfg.enabled;
                    match &slot.running {
                        Some(r) => {
                            slot.after_exit = if enabled {
                                AfterExit::Restart
                            } else {
                                AfterExit::Stay
                            };
                            r.cancel.cancel();
                        }
                        None if enabled => self.start(&key),
                        None => slot.state = ServerState::Stopped,
                    }
                }
            }
        }
        tracing::info!(
            added = ?summary.added,
            removed = ?summary.removed,
            changed = ?summary.changed,
            renamed = ?summary.renamed,
            unchanged = summary.unchanged,
            "configuration reloaded"
        );
        self.publish();
        summary
    }
}

/// What a server's login depends on: its URL and OAuth settings.
fn launch_oauth(
    cfg: &crate::config::ServerConfig,
) -> Option<(&reqwest::Url, &crate::config::OAuthConfig)> {
    match &cfg.launch {
        crate::config::Launch::Http(l) => l.oauth.as_ref().map(|o| (&l.url, o)),
        crate::config::Launch::Stdio(_) => None,
    }
}
