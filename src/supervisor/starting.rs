//! Starting a server: what must hold first, its era's plan, and the connection.
//!
//! What must hold first is its variables set and its secrets looked up; the connection is
//! spawned by the supervisor so it knows every pid from the start.

use super::starter::Start;
use super::{AfterExit, Finished, ServerState, Supervisor, secrets};
use crate::config::Launch;
use crate::upstream::connection;
use crate::upstream::serve::EraPlan;
use std::sync::Arc;

impl Supervisor {
    pub(super) fn start(&mut self, name: &Arc<str>) {
        // A setting that names a variable mcpd's environment lacks: this server alone
        // stays down, saying which, and the others run.
        if let Some(why) = self.slots.get(name).and_then(|s| s.cfg.unresolved.clone()) {
            return self.not_started(name, why);
        }
        if !self.secrets_ready(name) {
            return;
        }
        let plan = self.plan(name);
        self.start_connection(name, plan);
    }

    /// `name` cannot start until a person acts (`why` says how): it stays failed, and
    /// agents waiting for it hear so.
    pub(super) fn not_started(&mut self, name: &Arc<str>, why: String) {
        let Some(slot) = self.slots.get_mut(name) else {
            return;
        };
        tracing::error!(upstream = %name, "{why}");
        slot.last_error = Some(why);
        slot.state = ServerState::Failed;
        slot.retry_at = None;
        self.settle_waiters(name);
        self.publish();
    }

    pub(super) fn start_connection(&mut self, name: &Arc<str>, era: EraPlan) {
        let startup = self.startup(name);
        let Some(slot) = self.slots.get_mut(name) else {
            return;
        };
        // This start's secrets are put in here and used once: the next start looks
        // them up again.
        let resolved = slot.resolved.take();
        let launch = match secrets::launch(&slot.cfg, resolved.as_ref()) {
            Ok(launch) => launch,
            Err(why) => return self.not_started(name, format!("not started: {why}")),
        };
        let mask = super::starter::mask(resolved.as_ref());
        drop(resolved);
        // Confined from the launch with its secrets in: a confined server gets them
        // exactly as an unconfined one does.
        let confined = match &launch {
            Launch::Stdio(l) => slot.confinement(name, l),
            Launch::Http(_) => Ok(None),
        };
        let start = Start {
            config: slot.cfg.clone(),
            launch,
            confined,
            era,
            startup,
            login: slot.login.clone(),
            mask,
        };
        let (running, ctx) = self.starter.spawn(name, start);
        let instance = running.instance;
        slot.running = Some(running);
        slot.state = ServerState::Starting;
        slot.retry_at = None;
        slot.after_exit = AfterExit::Recover;
        let name = name.clone();
        self.conns.spawn(async move {
            let exit = connection::run(ctx).await;
            (name, instance, Finished::Connection(exit))
        });
    }
}
