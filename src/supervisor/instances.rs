//! Servers run as instances.
//!
//! One per agent (`share = "agent"`, started on its first call, stopped after it leaves)
//! or one per project (`share = "project"`, shared by the agents working in it, started
//! when one connects, stopped when idle or evicted).
//!
//! An instance is a slot of its own (named `SERVER@AGENT` or `SERVER@PROJECT`) with the
//! same supervision as any server (backoff, budget, reaping). The template server never
//! runs itself. Agents see the template's lists: the last any of its instances reported
//! (cached across restarts), and find a ready instance's handle in the catalog
//! (`Catalog::instances`); only a call whose instance is not ready asks the supervisor.

use super::projects;
use super::{AfterExit, ServerState, Slot, Supervisor, SupervisorError};
use crate::config::{Launch, Share};
use crate::registry::InstanceKey;
use crate::upstream::UpstreamHandle;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// How long an instance outlives its agent's connection (a reconnecting agent finds it).
pub const LINGER: Duration = Duration::from_secs(5);

pub type Waiter = oneshot::Sender<Result<UpstreamHandle, SupervisorError>>;

/// What makes a slot an instance: whose it is, who waits for it, when it goes.
pub(super) struct Instance {
    pub(super) template: Arc<str>,
    pub(super) key: InstanceKey,
    /// Agents waiting for it to be ready.
    pub(super) waiters: Vec<Waiter>,
    /// When it stops, its agent having left (per-agent instances).
    pub(super) linger_until: Option<Instant>,
    /// When it was last in use: made or asked for, or an agent working in its project
    /// left. An instance is in use while an agent works in its project; past
    /// `max_projects`, the one out of use longest stops.
    pub(super) last_used: Instant,
}

impl Supervisor {
    /// An agent's instance of `server`: answered at once when it is ready, otherwise
    /// once it is (or has failed). Returns whether anything changed (to publish).
    pub(super) fn instance(&mut self, server: &str, key: InstanceKey, respond_to: Waiter) -> bool {
        let (slot_key, changed) = match self.ensure_instance(server, key) {
            Ok(k) => k,
            Err(e) => {
                let _ = respond_to.send(Err(e)); // the agent may have given up
                return false;
            }
        };
        let Some(slot) = self.slots.get_mut(&slot_key) else {
            return changed;
        };
        if let (ServerState::Ready, Some(h)) = (
            slot.state,
            slot.running.as_ref().and_then(|r| r.handle.clone()),
        ) {
            let _ = respond_to.send(Ok(h)); // the agent may have given up
            return changed;
        }
        // One that is neither running nor due to retry (failed, say) will not become
        // ready by waiting: the caller hears why now.
        if slot.running.is_none() && slot.retry_at.is_none() {
            let why = SupervisorError::InstanceFailed(slot.availability().explain());
            let _ = respond_to.send(Err(why)); // the agent may have given up
            return changed;
        }
        if let Some(i) = slot.instance.as_mut() {
            i.waiters.push(respond_to);
        }
        changed
    }

    /// Finds or makes instance `key` of `server` and starts it if it is not running:
    /// its slot's name, and whether anything changed.
    fn ensure_instance(
        &mut self,
        server: &str,
        key: InstanceKey,
    ) -> Result<(Arc<str>, bool), SupervisorError> {
        let Some(template) = self.slots.get(server) else {
            return Err(self.unknown(server));
        };
        if !template.cfg.enabled {
            return Err(SupervisorError::InstanceFailed(
                crate::registry::Availability::Disabled.explain(),
            ));
        }
        let share = template.cfg.share;
        let project = match (&key, share) {
            (InstanceKey::Agent(_), Share::Agent) => None,
            (InstanceKey::Project(p), Share::Project { .. }) => Some(p.clone()),
            _ => return Err(SupervisorError::NotInstanced(server.to_owned())),
        };
        let slot_key: Arc<str> = Arc::from(format!("{server}@{key}"));
        let mut changed = false;
        if !self.slots.contains_key(&slot_key) {
            if let (Some(p), Share::Project { max_projects }) = (&project, share) {
                // A stat of a directory an agent named, once per new instance: rare, and
                // it saves starting a server in a project that is gone.
                if !p.is_dir() {
                    return Err(SupervisorError::ProjectGone(p.display().to_string()));
                }
                self.make_room(server, max_projects)?;
            }
            let Some(template) = self.slots.get(server) else {
                return Err(self.unknown(server));
            };
            let mut cfg = template.cfg.clone();
            cfg.name = slot_key.to_string();
            if let (Some(p), Launch::Stdio(l)) = (&project, &cfg.launch) {
                cfg.launch = Launch::Stdio(l.instantiate(p));
            }
            let login = template.login.clone();
            let mut slot = Slot::new(cfg);
            slot.login = login;
            slot.instance = Some(Instance {
                template: Arc::from(server),
                key: key.clone(),
                waiters: Vec::new(),
                linger_until: None,
                last_used: Instant::now(),
            });
            self.slots.insert(slot_key.clone(), slot);
            tracing::info!(upstream = %server, instance = %key, "starting an instance");
            changed = true;
        }
        let Some(slot) = self.slots.get_mut(&slot_key) else {
            return Ok((slot_key, changed));
        };
        if let Some(i) = slot.instance.as_mut() {
            i.linger_until = None;
            i.last_used = Instant::now();
        }
        slot.removing = false;
        if slot.running.is_none() && slot.retry_at.is_none() && slot.state != ServerState::Failed {
            slot.budget.clear();
            slot.backoff.reset();
            self.start(&slot_key);
            changed = true;
        }
        Ok((slot_key, changed))
    }

    /// Room for one more project instance of `server`: past `max`, the one no agent has
    /// worked in for longest stops (calls are not counted: they never reach the
    /// supervisor); when every one has an agent, the call is refused.
    fn make_room(&mut self, server: &str, max: usize) -> Result<(), SupervisorError> {
        let live = self
            .slots
            .iter()
            .filter(|(_, s)| !s.removing && s.template() == Some(server))
            .filter_map(|(k, s)| {
                Some(projects::Candidate {
                    key: k.clone(),
                    agents: self.agents_in(s),
                    last_used: s.instance.as_ref()?.last_used,
                })
            })
            .collect();
        let victim = match projects::room(live, max) {
            projects::Room::Free => return Ok(()),
            projects::Room::Evict(victim) => victim,
            projects::Room::Full => {
                return Err(SupervisorError::TooManyProjects {
                    server: server.to_owned(),
                    max,
                });
            }
        };
        tracing::info!(upstream = %victim, "max_projects reached; stopping the least recently used instance no agent works in");
        self.stop_instance(&victim);
        Ok(())
    }

    /// Stops an instance for good: its slot goes once its process is reaped.
    pub(super) fn stop_instance(&mut self, key: &Arc<str>) {
        let Some(slot) = self.slots.get_mut(key) else {
            return;
        };
        slot.removing = true;
        slot.retry_at = None;
        match &slot.running {
            Some(r) => {
                slot.after_exit = AfterExit::Stay;
                r.cancel.cancel();
            }
            None => {
                self.slots.remove(key);
            }
        }
    }

    /// How many connected agents work in an instance's project (zero for per-agent ones).
    pub(super) fn agents_in(&self, slot: &Slot) -> usize {
        match slot.instance.as_ref().map(|i| &i.key) {
            Some(InstanceKey::Project(p)) => self.projects.agents_in(p),
            _ => 0,
        }
    }

    /// An agent's project is known (or changed, or gone): its project's instances of the
    /// project servers it sees start in the background, so its first call does not wait.
    pub(super) fn agent_project(
        &mut self,
        agent: u64,
        project: Option<Arc<Path>>,
        servers: Vec<Arc<str>>,
    ) -> bool {
        let Some(project) = project else {
            let left = self.projects.leave(agent);
            self.vacated(left);
            return false;
        };
        let left = self.projects.enter(agent, project.clone());
        self.vacated(left);
        let mut changed = false;
        for server in servers {
            let key = InstanceKey::Project(project.clone());
            match self.ensure_instance(&server, key) {
                Ok((_, c)) => changed |= c,
                Err(e) => {
                    tracing::info!(upstream = %server, agent, "no instance started in the background: {e}")
                }
            }
        }
        changed
    }

    /// An agent disconnected: its instances stop after `LINGER`; it works in no project.
    pub(super) fn agent_gone(&mut self, agent: u64) {
        let left = self.projects.leave(agent);
        self.vacated(left);
        let until = Instant::now() + LINGER;
        for slot in self.slots.values_mut() {
            if let Some(i) = slot.instance.as_mut()
                && i.key == InstanceKey::Agent(agent)
            {
                i.linger_until = Some(until);
            }
        }
    }

    /// An agent left `project` (or moved on): its instances were in use until now.
    fn vacated(&mut self, project: Option<Arc<Path>>) {
        let Some(project) = project else {
            return;
        };
        let now = Instant::now();
        for slot in self.slots.values_mut() {
            if let Some(i) = slot.instance.as_mut()
                && i.key == InstanceKey::Project(project.clone())
            {
                i.last_used = now;
            }
        }
    }

    /// Stops instances whose agent left more than `LINGER` ago.
    pub(super) fn linger_due(&mut self) {
        let now = Instant::now();
        let due: Vec<Arc<str>> = self
            .slots
            .iter()
            .filter(|(_, s)| {
                s.instance
                    .as_ref()
                    .and_then(|i| i.linger_until)
                    .is_some_and(|t| t <= now)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            tracing::info!(upstream = %key, "the agent left; stopping its instance");
            self.stop_instance(&key);
        }
    }

    /// Whether any instance runs per project (the project check is armed only then).
    pub(super) fn any_project_instance(&self) -> bool {
        self.slots.values().any(|s| {
            s.instance
                .as_ref()
                .is_some_and(|i| matches!(i.key, InstanceKey::Project(_)))
        })
    }

    /// Stops the instances whose project directory is gone, when the check is due.
    pub(super) fn check_projects(&mut self, now: Instant) {
        if !self.projects.check_due(now) {
            return;
        }
        let gone: Vec<Arc<str>> = self
            .slots
            .iter()
            .filter(|(_, s)| match s.instance.as_ref().map(|i| &i.key) {
                // A stat per project instance every `PROJECT_CHECK`: a few at most.
                Some(InstanceKey::Project(p)) => !s.removing && !p.is_dir(),
                _ => false,
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in gone {
            tracing::info!(upstream = %key, "the project directory is gone; stopping its instance");
            self.stop_instance(&key);
        }
    }

    /// Tells an instance's waiting agents how it went: its handle once ready, or why not.
    pub(super) fn settle_waiters(&mut self, key: &str) {
        let Some(slot) = self.slots.get_mut(key) else {
            return;
        };
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
        let Some(i) = slot.instance.as_mut() else {
            return;
        };
        for w in i.waiters.drain(..) {
            let _ = w.send(outcome.clone()); // the agent may have given up
        }
    }

    /// How many instances a server has, for status.
    pub(super) fn instance_count(&self, template: &str) -> usize {
        self.slots
            .values()
            .filter(|s| s.template() == Some(template))
            .count()
    }
}

impl Supervisor {
    /// A server run as instances was added: one per agent starts once to learn its tools
    /// (unless they are cached); one per project never runs itself. Any other starts.
    pub(super) fn start_template(&mut self, name: &Arc<str>) {
        let Some(slot) = self.slots.get_mut(name) else {
            return;
        };
        match slot.cfg.share {
            Share::Shared => self.start(name),
            Share::Project { .. } => slot.state = ServerState::Idle,
            Share::Agent => {
                if self.store.lists(&slot.cfg).is_some() {
                    slot.state = ServerState::Idle;
                } else {
                    slot.fill_only = true;
                    self.start(name);
                }
            }
        }
    }

    /// A server changed in the config: run as instances, its own process (if it ran, or
    /// was shared before) stops and every instance restarts under the new config; shared
    /// now, its instances stop.
    pub(super) fn reconfigure_instances(&mut self, template: &Arc<str>) {
        let Some(slot) = self.slots.get_mut(template) else {
            return;
        };
        if slot.cfg.share.instanced() {
            match &slot.running {
                Some(r) => {
                    slot.after_exit = AfterExit::Idle;
                    r.cancel.cancel();
                }
                None => slot.state = ServerState::Idle,
            }
        }
        let cfg = slot.cfg.clone();
        let keys: Vec<Arc<str>> = self
            .slots
            .iter()
            .filter(|(_, s)| s.template() == Some(&**template))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            let Some(slot) = self.slots.get_mut(&key) else {
                continue;
            };
            let mut new = cfg.clone();
            new.name = key.to_string();
            if let (Some(InstanceKey::Project(p)), Launch::Stdio(l)) =
                (slot.instance.as_ref().map(|i| &i.key), &cfg.launch)
            {
                new.launch = Launch::Stdio(l.instantiate(p));
            }
            // A per-agent instance of a server now run per project (or the other way)
            // has no place any more.
            let fits = slot
                .instance
                .as_ref()
                .is_some_and(|i| projects::fits(&i.key, cfg.share));
            if !fits || !cfg.enabled {
                self.stop_instance(&key);
                continue;
            }
            slot.cfg = new;
            slot.budget.clear();
            slot.backoff.reset();
            slot.retry_at = None;
            match &slot.running {
                Some(r) => {
                    slot.after_exit = AfterExit::Restart;
                    r.cancel.cancel();
                }
                None => self.start(&key),
            }
        }
    }
}

impl Slot {
    /// The server an instance belongs to.
    pub(super) fn template(&self) -> Option<&str> {
        self.instance.as_ref().map(|i| &*i.template)
    }
}
