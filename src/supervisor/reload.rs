//! Live reload: applying a new configuration's servers — added ones start, removed ones stop, changed ones restart, unchanged ones are left alone.

use super::{AfterExit, ServerState, Slot, Supervisor};
use crate::config::Config;
use std::sync::Arc;

/// What a reload changed, for the log and `mcpd ctl reload`.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct ReloadSummary {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
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
            match self.slots.get_mut(&key) {
                None => {
                    summary.added.push(name.clone());
                    self.slots.insert(key.clone(), Slot::new(cfg.clone()));
                    if cfg.enabled {
                        self.start(&key);
                    }
                }
                Some(slot) if slot.cfg == *cfg => summary.unchanged += 1,
                Some(slot) => {
                    summary.changed.push(name.clone());
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
            unchanged = summary.unchanged,
            "configuration reloaded"
        );
        self.publish();
        summary
    }
}
