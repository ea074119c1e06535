//! Deciding how a server's connection finds its protocol era.
//!
//! It finds it from the config, the era cache, or in place on its first start; this file
//! also remembers what the handshake found, and a package runner's first-start allowance.

use super::Supervisor;
use crate::config::{Launch, ProtocolMode, ServerConfig};
use crate::upstream::serve::{EraPlan, Startup};
use mcpd_wire::protocol::era::Era;
use std::sync::Arc;

impl Supervisor {
    /// How the next connection of `name` finds its era.
    pub(super) fn plan(&mut self, name: &str) -> EraPlan {
        let cfg = self.era_config(name);
        let Some(slot) = self.slots.get_mut(name) else {
            return EraPlan::Auto;
        };
        slot.plan_from_cache = false;
        if slot.quit_on_discover.is_some() {
            slot.era_reason = Some(
                "its last process ended when asked server/discover: this start speaks initialize"
                    .into(),
            );
            return EraPlan::Legacy;
        }
        match (slot.cfg.protocol, &slot.cfg.launch) {
            (ProtocolMode::Legacy, _) => EraPlan::Legacy,
            (ProtocolMode::Modern, _) => EraPlan::Modern,
            // HTTP servers are asked in place on every connection.
            (ProtocolMode::Auto, Launch::Http(_)) => EraPlan::Auto,
            (ProtocolMode::Auto, Launch::Stdio(_)) => {
                // An instance speaks its server's era, found once for all instances.
                let Some(cached) = cfg.as_ref().and_then(|c| self.store.era(c)) else {
                    return EraPlan::Auto;
                };
                slot.era_reason = Some(format!(
                    "remembered from an earlier start: {}",
                    cached.reason
                ));
                slot.plan_from_cache = true;
                match cached.era {
                    Era::Legacy => EraPlan::Legacy,
                    Era::Modern => EraPlan::Modern,
                }
            }
        }
    }

    /// The configuration a server's era is remembered under: its own, or for an
    /// instance its server's.
    fn era_config(&self, name: &str) -> Option<ServerConfig> {
        let slot = self.slots.get(name)?;
        let template = slot.template().and_then(|t| self.slots.get(t));
        Some(template.unwrap_or(slot).cfg.clone())
    }

    /// A local server completed its handshake: its era is remembered for the next
    /// starts (and the next daemon) when it was found in place (`found`, saying how), and
    /// in any case once per configuration, which tells a first start from the next.
    pub(super) fn remember_era(&mut self, name: &Arc<str>, era: Era, found: Option<String>) {
        let Some(cfg) = self.era_config(name) else {
            return;
        };
        if !matches!(cfg.launch, Launch::Stdio(_)) {
            return;
        }
        let reason = match found {
            Some(reason) => {
                if let Some(slot) = self.slots.get_mut(name) {
                    slot.era_reason = Some(reason.clone());
                }
                reason
            }
            None if self.store.era(&cfg).is_some() => return,
            None => format!("protocol = \"{}\" in the config", cfg.protocol.as_str()),
        };
        self.store.put_era(&cfg, era, reason);
    }

    /// How long the next start of `name` may take to complete its handshake. A package
    /// runner (`npx`, `uvx`, …) that has never started with this configuration may be
    /// downloading and installing its package first: killing it then would leave the
    /// runner's cache half-written, so it gets `health.first_start_timeout`.
    pub(super) fn startup(&self, name: &str) -> Startup {
        let usual = Startup {
            limit: self
                .slots
                .get(name)
                .map_or(crate::config::defaults::STARTUP_TIMEOUT, |s| {
                    s.cfg.health.startup_timeout
                }),
            setting: "health.startup_timeout",
        };
        let Some(cfg) = self.era_config(name) else {
            return usual;
        };
        let Launch::Stdio(launch) = &cfg.launch else {
            return usual;
        };
        let first = cfg.health.first_start_timeout;
        // A confined server's runner installs into its private cache: empty (its first
        // confined start, or after it was cleared), it downloads again.
        let installed = self.started_before(&cfg)
            && !self
                .slots
                .get(name)
                .is_some_and(|s| s.private_cache_empty());
        if launch.package_runner().is_none() || first <= usual.limit || installed {
            return usual;
        }
        Startup {
            limit: first,
            setting: "health.first_start_timeout, for a package runner's first start",
        }
    }

    /// Whether a server has completed a handshake with this configuration before (its
    /// era was remembered then, whatever `protocol` says).
    fn started_before(&self, cfg: &ServerConfig) -> bool {
        self.store.era(cfg).is_some()
    }
}
