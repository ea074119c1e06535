//! Deciding a server's protocol era before its connection starts: from the config, the era cache, or a probe process.

use super::{AfterExit, Finished, Running, ServerState, Supervisor};
use crate::config::{Launch, ProtocolMode};
use crate::protocol::era::Era;
use crate::upstream::probe::{self, ProbeVerdict};
use crate::upstream::process;
use crate::upstream::serve::EraPlan;
use std::sync::Arc;
use tokio::time::Instant;

impl Supervisor {
    /// How the next connection of `name` finds its era; None when a probe must run first.
    pub(super) fn plan(&mut self, name: &str) -> Option<EraPlan> {
        // An instance speaks its server's era, probed once for all instances.
        let template = self
            .slots
            .get(name)?
            .template()
            .and_then(|t| self.slots.get(t))
            .map(|t| t.cfg.clone());
        let slot = self.slots.get_mut(name)?;
        if let Some(t) = template
            && let Some(v) = self.eras.get(&t)
        {
            return Some(match v.era {
                Era::Legacy => EraPlan::Legacy,
                Era::Modern => EraPlan::Modern,
            });
        }
        match (slot.cfg.protocol, &slot.cfg.launch) {
            (ProtocolMode::Legacy, _) => Some(EraPlan::Legacy),
            (ProtocolMode::Modern, _) => Some(EraPlan::Modern),
            // HTTP servers are probed in place, on the serving connection.
            (ProtocolMode::Auto, Launch::Http(_)) => Some(EraPlan::Auto),
            (ProtocolMode::Auto, Launch::Stdio(_)) => {
                let cached = self.eras.get(&slot.cfg)?;
                slot.era_reason = Some(format!(
                    "remembered from an earlier start: {}",
                    cached.reason
                ));
                slot.plan_from_cache = true;
                Some(match cached.era {
                    Era::Legacy => EraPlan::Legacy,
                    Era::Modern => EraPlan::Modern,
                })
            }
        }
    }

    /// Starts a disposable probe process for `name`. If it cannot even be spawned, the
    /// connection is started instead, which reports the same error the usual way.
    pub(super) fn start_probe(&mut self, name: &Arc<str>) {
        // The probe is confined as the server is: a server that cannot be is not
        // probed either (the connection then reports why).
        let confined = match self.confinement(name) {
            Ok(c) => c,
            Err(_) => return self.start_connection(name, EraPlan::Legacy),
        };
        let sandbox = confined.as_ref().map(|p| p.view.clone());
        let Some(slot) = self.slots.get_mut(name) else {
            return;
        };
        // The probe gets this start's secrets too; the connection after it takes them.
        let launch = match super::secrets::launch(&slot.cfg, slot.resolved.as_ref()) {
            Ok(Launch::Stdio(launch)) => launch,
            Ok(Launch::Http(_)) => return,
            Err(_) => return self.start_connection(name, EraPlan::Legacy),
        };
        let mut spawned = match process::spawn(&launch, confined) {
            Ok(s) => s,
            Err(_) => return self.start_connection(name, EraPlan::Legacy),
        };
        self.next_instance += 1;
        let instance = self.next_instance;
        let cancel = self.cancel.child_token();
        let pid = spawned.pid;
        self.sentinel.watch(pid);
        slot.running = Some(Running {
            instance,
            pid: Some(pid),
            cancel: cancel.clone(),
            started: Instant::now(),
            handle: None,
            http: None,
            probing: true,
            sandbox,
            _egress: super::confine::serve_egress(name, &mut spawned),
        });
        slot.state = ServerState::Starting;
        slot.retry_at = None;
        slot.after_exit = AfterExit::Recover;
        let health = slot.cfg.health;
        let server = name.clone();
        let max_line = self.max_line;
        tracing::info!(upstream = %server, pid, "probing the server's protocol era");
        self.conns.spawn(async move {
            let verdict =
                probe::run(&server, spawned, health.probe_timeout, max_line, &cancel).await;
            (server, instance, Finished::Probe(verdict))
        });
    }

    /// A probe ended: remember its verdict, then start the serving connection unless the
    /// server was stopped meanwhile.
    pub(super) fn on_probe(
        &mut self,
        name: &Arc<str>,
        instance: u64,
        verdict: Option<ProbeVerdict>,
    ) {
        let sentinel = self.sentinel.clone();
        let Some(slot) = self.current(name, instance) else {
            return;
        };
        let Some(running) = slot.running.take() else {
            return;
        };
        if let Some(pid) = running.pid {
            sentinel.forget(pid);
        }
        let after = slot.after_exit;
        let era = match verdict {
            Some(v) => {
                slot.era_reason = Some(v.reason.clone());
                slot.plan_from_cache = false;
                // An instance's era is remembered as its server's, for every instance.
                let (template, own) = (slot.template().map(str::to_owned), slot.cfg.clone());
                let cfg = match template.and_then(|t| self.slots.get(t.as_str())) {
                    Some(t) => t.cfg.clone(),
                    None => own,
                };
                self.eras.put(&cfg, v.era, v.reason);
                Some(v.era)
            }
            None => None,
        };
        match (after, era) {
            // `ctl restart` during a probe: probe again.
            (AfterExit::Restart, None) => self.start(name),
            (AfterExit::Stay, _) | (_, None) => {
                if let Some(slot) = self.slots.get_mut(name) {
                    slot.state = ServerState::Stopped;
                    slot.resolved = None;
                }
                self.publish();
            }
            (_, Some(Era::Legacy)) => self.start_connection(name, EraPlan::Legacy),
            (_, Some(Era::Modern)) => self.start_connection(name, EraPlan::Modern),
        }
    }
}
