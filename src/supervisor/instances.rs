//! Per-agent instances of `share = "agent"` servers: started on an agent's first call, stopped after it disconnects plus a short grace.
//!
//! An instance is a slot of its own (named `SERVER@AGENT`) with the same supervision as
//! any server (backoff, budget, reaping). It is not in the catalog: agents see the
//! template server's tools, learned once like a lazy server's, and their calls are routed
//! to their own instance.

use super::{AfterExit, ServerState, Slot, Supervisor, SupervisorError};
use crate::upstream::UpstreamHandle;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// How long an instance outlives its agent's connection (a reconnecting agent finds it).
pub const LINGER: Duration = Duration::from_secs(5);

/// Who an instance slot belongs to.
#[derive(Debug, Clone)]
pub struct Owner {
    pub template: Arc<str>,
    pub agent: u64,
}

pub type Waiter = oneshot::Sender<Result<UpstreamHandle, SupervisorError>>;

impl Supervisor {
    /// An agent's instance of `server`: answered at once when it is ready, otherwise
    /// once it is (or has failed).
    pub(super) fn instance(&mut self, server: &str, agent: u64, respond_to: Waiter) {
        let Some(template) = self.slots.get(server) else {
            let _ = respond_to.send(Err(self.unknown(server)));
            return;
        };
        if !template.cfg.per_agent {
            let _ = respond_to.send(Err(SupervisorError::NotPerAgent(server.to_owned())));
            return;
        }
        let key: Arc<str> = Arc::from(format!("{server}@{agent}"));
        if !self.slots.contains_key(&key) {
            let mut cfg = template.cfg.clone();
            cfg.name = key.to_string();
            let login = template.login.clone();
            let mut slot = Slot::new(cfg);
            slot.login = login;
            slot.owner = Some(Owner {
                template: Arc::from(server),
                agent,
            });
            self.slots.insert(key.clone(), slot);
            tracing::info!(upstream = %server, agent, "starting an instance for the agent");
        }
        let Some(slot) = self.slots.get_mut(&key) else {
            return;
        };
        slot.linger_until = None;
        if let (ServerState::Ready, Some(h)) = (
            slot.state,
            slot.running.as_ref().and_then(|r| r.handle.clone()),
        ) {
            let _ = respond_to.send(Ok(h)); // the agent may have given up
            return;
        }
        slot.waiters.push(respond_to);
        if slot.running.is_none() && slot.retry_at.is_none() {
            slot.budget.clear();
            slot.backoff.reset();
            self.start(&key);
        }
    }

    /// An agent disconnected: its instances stop after `LINGER`.
    pub(super) fn agent_gone(&mut self, agent: u64) {
        let until = Instant::now() + LINGER;
        for slot in self.slots.values_mut() {
            if slot.owner.as_ref().is_some_and(|o| o.agent == agent) {
                slot.linger_until = Some(until);
            }
        }
    }

    /// Stops instances whose agent left more than `LINGER` ago.
    pub(super) fn linger_due(&mut self) {
        let now = Instant::now();
        let due: Vec<Arc<str>> = self
            .slots
            .iter()
            .filter(|(_, s)| s.linger_until.is_some_and(|t| t <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            let Some(slot) = self.slots.get_mut(&key) else {
                continue;
            };
            slot.linger_until = None;
            slot.removing = true;
            slot.retry_at = None;
            match &slot.running {
                Some(r) => {
                    tracing::info!(upstream = %key, "the agent left; stopping its instance");
                    slot.after_exit = AfterExit::Stay;
                    r.cancel.cancel();
                }
                None => {
                    self.slots.remove(&key);
                }
            }
        }
    }

    /// Tells an instance's waiting agents how it went: its handle once ready, or why not.
    pub(super) fn settle_waiters(&mut self, key: &str) {
        let Some(slot) = self.slots.get_mut(key) else {
            return;
        };
        if slot.waiters.is_empty() {
            return;
        }
        let outcome = match (
            slot.state,
            slot.running.as_ref().and_then(|r| r.handle.clone()),
        ) {
            (ServerState::Ready, Some(h)) => Ok(h),
            (ServerState::Starting, _) => return,
            _ => Err(SupervisorError::InstanceFailed(
                slot.availability().explain(),
            )),
        };
        for w in slot.waiters.drain(..) {
            let _ = w.send(outcome.clone()); // the agent may have given up
        }
    }

    /// How many instances a server has, for status.
    pub(super) fn instance_count(&self, template: &str) -> usize {
        self.slots
            .values()
            .filter(|s| s.owner.as_ref().is_some_and(|o| &*o.template == template))
            .count()
    }
}
