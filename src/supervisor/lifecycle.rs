//! The exit and restart policy.
//!
//! What happens when a connection ends, retries that fall due, and `ctl`
//! start/stop/restart.

use super::{Action, AfterExit, ServerState, Supervisor, SupervisorError};
use crate::upstream::ConnectionExit;
use std::sync::Arc;
use tokio::time::Instant;

impl Supervisor {
    pub(super) fn on_exit(&mut self, name: &Arc<str>, instance: u64, mut exit: ConnectionExit) {
        // A cause the user can fix with one command is said with it.
        let cache = self.slots.get(name).and_then(|s| s.private_cache());
        if let Some(hint) = super::diagnose::broken_cache(name, cache.as_deref(), &exit.stderr_tail)
        {
            exit.error = Some(match exit.error.take() {
                Some(e) => format!("{e}: {hint}"),
                None => hint,
            });
        }
        let sentinel = self.starter.sentinel().clone();
        let Some(slot) = self.current(name, instance) else {
            return;
        };
        let Some(running) = slot.running.take() else {
            return;
        };
        if let Some(pid) = running.pid {
            sentinel.forget(pid);
        }
        let uptime = running.started.elapsed();
        let recovering = slot.after_exit == AfterExit::Recover;
        if exit.era_mismatch && std::mem::take(&mut slot.plan_from_cache) {
            // The cached era stopped working: find it again next time.
            tracing::info!(upstream = %name, "the cached protocol era no longer works; asking the server again");
            self.store.forget_era(name);
        }
        self.first_round_cut(name, &running.first_round);
        let Some(slot) = self.slots.get_mut(name) else {
            return;
        };
        // A legacy server that quits on `server/discover` (or one that fails to start):
        // the next start, at once, speaks `initialize`. It counts as a crash like any
        // exit, so a server that fails to start still ends `failed`.
        let quit_on_discover = recovering && exit.legacy_next.is_some();
        slot.quit_on_discover = exit.legacy_next.clone().filter(|_| recovering);
        slot.last_exit = exit.exit_status.clone();
        slot.resolved = None;
        slot.stderr_tail = exit.stderr_tail;
        let how = match (&exit.exit_status, &exit.error) {
            (Some(s), Some(e)) => format!("ended ({s}): {e}"),
            (Some(s), None) => format!("ended ({s})"),
            (None, Some(e)) => format!("ended: {e}"),
            (None, None) => "ended".to_owned(),
        };
        slot.note(how);
        slot.ready_since = None;
        if let Some(e) = &exit.error {
            slot.last_error = Some(e.clone());
        }
        // A start the server refused for want of scope waits for a login that grants it.
        if slot.state == ServerState::Starting
            && slot
                .login
                .as_ref()
                .is_some_and(|l| !l.view().more_scope.is_empty())
        {
            slot.more_scope = true;
        }
        let after = slot.after_exit;
        match after {
            // A server whose login is over waits for `mcpd ctl login`, not a retry.
            AfterExit::Recover | AfterExit::Restart
                if super::login::park_if_logged_out(slot, name) => {}
            AfterExit::Stay => slot.state = ServerState::Stopped,
            AfterExit::Idle => {
                tracing::info!(upstream = %name, "stopped while idle; the next call starts it");
                slot.state = ServerState::Idle;
            }
            AfterExit::Recover
                if exit.fatal
                    || (exit.era_mismatch
                        && slot.cfg.protocol != crate::config::ProtocolMode::Auto) =>
            {
                // Retrying cannot help until the credentials (or the configured era)
                // change; hammering the server with refused requests would not either.
                let mut error = exit.error.unwrap_or_else(|| "refused".into());
                if exit.era_mismatch {
                    error.push_str(&format!(
                        "; it does not speak the era set by protocol = \"{}\": fix `protocol` (or use \"auto\") and run `mcpd ctl restart {name}`",
                        slot.cfg.protocol.as_str()
                    ));
                }
                tracing::error!(upstream = %name, "{error}");
                slot.last_error = Some(error);
                slot.state = ServerState::Failed;
                if exit.never_serve {
                    // Refused as this daemon or as a loop of daemons: never served, not
                    // even from a list an earlier connection fetched (one made while two
                    // handshakes crossed, then cut: `agent/conn`, `on_catalog`), which may
                    // name tools that went round the loop.
                    self.registry.forget_server(name);
                    self.store.forget_lists(name);
                }
            }
            AfterExit::Restart => {
                slot.budget.clear();
                slot.backoff.reset();
                slot.restarts += 1;
                self.start(name);
            }
            AfterExit::Recover => {
                if uptime >= slot.cfg.restart.stable_after {
                    slot.backoff.reset();
                }
                let error = exit.error.unwrap_or_else(|| "the server ended".into());
                if slot.budget.record(Instant::now()) {
                    let reason = format!(
                        "crashed {} times within {} (last: {error}); not restarting until `mcpd ctl restart {name}` or a config change",
                        slot.budget.recent(),
                        humantime::format_duration(slot.cfg.restart.window)
                    );
                    tracing::error!(upstream = %name, "{reason}");
                    slot.last_error = Some(reason);
                    slot.state = ServerState::Failed;
                } else {
                    let delay = match quit_on_discover {
                        true => std::time::Duration::ZERO,
                        false => slot.backoff.next_delay(rand::random::<f64>()),
                    };
                    tracing::warn!(upstream = %name, delay = ?delay, "restarting after: {error}");
                    slot.retry_at = Some(Instant::now() + delay);
                    slot.state = ServerState::Backoff;
                }
            }
        }
        // Agents waiting for an instance hear that it failed; a stopped instance whose
        // agent has left goes away.
        self.settle_waiters(name);
        if self
            .slots
            .get(name)
            .is_some_and(|s| s.removing && s.running.is_none())
        {
            self.slots.remove(name);
        }
        self.publish();
    }

    pub(super) fn retry_due(&mut self) {
        self.linger_due();
        let now = Instant::now();
        self.check_projects(now);
        let due: Vec<Arc<str>> = self
            .slots
            .iter()
            .filter(|(_, s)| s.retry_at.is_some_and(|t| t <= now))
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            if let Some(slot) = self.slots.get_mut(&name) {
                slot.restarts += 1;
            }
            self.start(&name);
        }
        self.publish();
    }

    pub(super) fn control(&mut self, name: &str, action: Action) -> Result<(), SupervisorError> {
        let Some(key) = self.slots.keys().find(|k| &***k == name).cloned() else {
            return Err(self.unknown(name));
        };
        let Some(slot) = self.slots.get_mut(&key) else {
            return Ok(());
        };
        tracing::info!(upstream = %key, ?action, "control request");
        if slot.cfg.share.instanced() && slot.instance.is_none() {
            return self.control_instances(&key, action);
        }
        match (action, slot.running.as_ref()) {
            (Action::Restart, Some(r)) => {
                slot.after_exit = AfterExit::Restart;
                r.cancel.cancel();
            }
            (Action::Stop, Some(r)) => {
                slot.after_exit = AfterExit::Stay;
                slot.retry_at = None;
                r.cancel.cancel();
            }
            (Action::Stop, None) => {
                slot.retry_at = None;
                // A lookup of secrets in flight: its answer starts nothing.
                slot.resolving = None;
                slot.resolved = None;
                slot.state = ServerState::Stopped;
            }
            (Action::Start, Some(_)) => {}
            (Action::Restart | Action::Start, None) => {
                slot.budget.clear();
                slot.backoff.reset();
                if action == Action::Restart {
                    slot.restarts += 1;
                }
                self.start(&key);
            }
        }
        self.publish();
        Ok(())
    }
}

impl Supervisor {
    /// `ctl restart` or `stop` of a server run as instances acts on each instance (a
    /// stopped one is made again by the next call that needs it); `start` has nothing to
    /// start: its instances start with the calls of their agents.
    fn control_instances(
        &mut self,
        name: &Arc<str>,
        action: Action,
    ) -> Result<(), SupervisorError> {
        if action == Action::Start {
            return Err(SupervisorError::Instanced(name.to_string()));
        }
        let keys: Vec<Arc<str>> = self
            .slots
            .iter()
            .filter(|(_, s)| s.template() == Some(&**name))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            let _ = self.control(&key, action); // the slot exists: no error
        }
        self.publish();
        Ok(())
    }
}
