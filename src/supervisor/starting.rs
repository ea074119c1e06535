//! Starting a server: what must hold first (its variables set, its secrets looked up), its era's plan, and the connection, spawned by the supervisor so it knows every pid from the start.

use super::{AfterExit, Finished, Running, ServerState, Supervisor, confine, secrets};
use crate::config::Launch;
use crate::upstream::connection;
use crate::upstream::process;
use crate::upstream::serve::{ConnectionContext, EraPlan};
use std::sync::Arc;
use tokio::time::Instant;

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
        let mut config = slot.cfg.clone();
        let resolved = slot.resolved.take();
        let launch = match secrets::launch(&config, resolved.as_ref()) {
            Ok(launch) => launch,
            Err(why) => return self.not_started(name, format!("not started: {why}")),
        };
        // What the server prints of them is masked in what mcpd keeps and logs.
        let mask = Arc::new(crate::secrets::Mask::new(
            resolved
                .iter()
                .flat_map(|r| r.iter().map(|(n, v)| (n.as_str(), v))),
        ));
        drop(resolved);
        // Confined from the launch with its secrets in: a confined server gets them
        // exactly as an unconfined one does.
        let confined = match &launch {
            Launch::Stdio(l) => self.confinement(name, l),
            Launch::Http(_) => Ok(None),
        };
        let sandbox = confined
            .as_ref()
            .ok()
            .and_then(|c| c.as_ref().map(|p| p.view.clone()));
        let Some(slot) = self.slots.get_mut(name) else {
            return;
        };
        self.next_instance += 1;
        let instance = self.next_instance;
        let cancel = self.cancel.child_token();
        // Spawned here, not in the connection task, so the supervisor knows every pid
        // from the start: the sentinel watches its group and the orphan reaper leaves
        // it to its connection.
        let mut spawned = match &launch {
            Launch::Stdio(launch) => Some(confined.and_then(|c| process::spawn(launch, c))),
            Launch::Http(_) => None,
        };
        if let Launch::Http(h) = launch {
            config.launch = Launch::Http(h);
        }
        let spawned_stdio = spawned.is_some();
        let egress = spawned
            .as_mut()
            .and_then(|s| s.as_mut().ok())
            .and_then(|s| confine::serve_egress(name, s));
        let pid = spawned
            .as_ref()
            .and_then(|s| s.as_ref().ok())
            .map(|s| s.pid);
        if let Some(pid) = pid {
            self.sentinel.watch(pid);
        }
        let ctx = ConnectionContext {
            spawned,
            config,
            instance,
            max_line: self.max_line,
            queue_bytes: self.queue_bytes,
            events: self.events_tx.clone(),
            cancel: cancel.clone(),
            era,
            startup,
            login: slot.login.clone(),
            task_status: self.task_status.clone(),
            mask,
        };
        slot.running = Some(Running {
            instance,
            pid,
            cancel,
            started: Instant::now(),
            handle: None,
            http: None,
            probing: era == EraPlan::Auto && spawned_stdio,
            sandbox,
            _egress: egress,
            first_round: super::gate::FirstRound::default(),
        });
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
