//! Who works in which project, and which project instance gives way when a server runs in too many.
//!
//! Also when project instances' directories are next checked.
//!
//! A part of the supervisor with no IO: the supervisor tells it what agents said and
//! whether any project instance exists, and asks it what follows.

use crate::config::Share;
use crate::registry::InstanceKey;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How often the projects of running instances are checked to still exist.
pub const PROJECT_CHECK: Duration = Duration::from_secs(30);

/// Each connected agent's project, and the timer of the project check.
#[derive(Debug, Default)]
pub(super) struct Projects {
    /// Each connected agent's project, as it told it.
    of_agent: HashMap<u64, Arc<Path>>,
    /// When the projects of running instances are next checked to exist: armed only
    /// while a project instance exists, so an idle daemon never wakes for it.
    next_check: Option<Instant>,
}

impl Projects {
    /// `agent` works in `project` now: the project it left for it, if it moved.
    pub(super) fn enter(&mut self, agent: u64, project: Arc<Path>) -> Option<Arc<Path>> {
        let left = self.of_agent.insert(agent, project.clone());
        left.filter(|p| *p != project)
    }

    /// `agent` works in no project now (it said so, or it left): the one it left.
    pub(super) fn leave(&mut self, agent: u64) -> Option<Arc<Path>> {
        self.of_agent.remove(&agent)
    }

    /// How many connected agents work in `project`.
    pub(super) fn agents_in(&self, project: &Path) -> usize {
        self.of_agent.values().filter(|q| ***q == *project).count()
    }

    /// Arms the check while a project instance exists (keeping a deadline already set),
    /// disarms it while none does.
    pub(super) fn track(&mut self, any_instance: bool, now: Instant) {
        self.next_check = match (any_instance, self.next_check) {
            (false, _) => None,
            (true, Some(t)) => Some(t),
            (true, None) => Some(now + PROJECT_CHECK),
        };
    }

    /// When the check is next due, if it is armed.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.next_check
    }

    /// Whether the check is due at `now`; if so, the next one is `PROJECT_CHECK` later.
    pub(super) fn check_due(&mut self, now: Instant) -> bool {
        match self.next_check {
            Some(t) if t <= now => {
                self.next_check = Some(now + PROJECT_CHECK);
                true
            }
            _ => false,
        }
    }
}

/// Whether an instance keyed `key` belongs to a server shared as `share`: a per-agent
/// instance of a server now run per project (or the other way) has no place.
pub(super) fn fits(key: &InstanceKey, share: Share) -> bool {
    matches!(
        (key, share),
        (InstanceKey::Agent(_), Share::Agent) | (InstanceKey::Project(_), Share::Project { .. })
    )
}

/// One live instance as `room` weighs it: its name, how many agents work in its
/// project, and when it was last in use.
pub(super) struct Candidate<K> {
    pub(super) key: K,
    pub(super) agents: usize,
    pub(super) last_used: Instant,
}

/// Whether a new project instance has room, and at whose cost.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Room<K> {
    /// Fewer than `max_projects` run.
    Free,
    /// This one, out of use longest among those no agent works in, stops for it.
    Evict(K),
    /// Every one has an agent working in it: the new one is refused.
    Full,
}

/// Which of `live` instances gives way for a new one when `max` are running.
pub(super) fn room<K>(live: Vec<Candidate<K>>, max: usize) -> Room<K> {
    if live.len() < max {
        return Room::Free;
    }
    live.into_iter()
        .filter(|c| c.agents == 0)
        .min_by_key(|c| c.last_used)
        .map_or(Room::Full, |c| Room::Evict(c.key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> Arc<Path> {
        Arc::from(Path::new(p))
    }

    #[test]
    fn an_agent_moving_between_projects_leaves_the_first_and_counts_in_the_second() {
        let mut p = Projects::default();
        assert_eq!(p.enter(1, path("/a")), None);
        assert_eq!(p.enter(2, path("/a")), None);
        assert_eq!(p.agents_in(Path::new("/a")), 2);
        // Telling the same project again leaves nothing.
        assert_eq!(p.enter(1, path("/a")), None);
        assert_eq!(p.enter(1, path("/b")), Some(path("/a")));
        assert_eq!(p.agents_in(Path::new("/a")), 1);
        assert_eq!(p.agents_in(Path::new("/b")), 1);
        assert_eq!(p.leave(2), Some(path("/a")));
        assert_eq!(p.leave(2), None);
        assert_eq!(p.agents_in(Path::new("/a")), 0);
    }

    #[test]
    fn the_project_check_is_armed_only_while_a_project_instance_exists() {
        let now = Instant::now();
        let mut p = Projects::default();
        // An idle daemon: nothing to wake for.
        assert_eq!(p.deadline(), None);
        p.track(false, now);
        assert_eq!(p.deadline(), None);
        assert!(!p.check_due(now + PROJECT_CHECK * 10));
        // The first project instance arms it; later loops keep the deadline.
        p.track(true, now);
        assert_eq!(p.deadline(), Some(now + PROJECT_CHECK));
        p.track(true, now + Duration::from_secs(10));
        assert_eq!(p.deadline(), Some(now + PROJECT_CHECK));
        assert!(!p.check_due(now + Duration::from_secs(29)));
        let due = now + PROJECT_CHECK;
        assert!(p.check_due(due));
        assert_eq!(p.deadline(), Some(due + PROJECT_CHECK));
        // The last instance gone, the timer is too.
        p.track(false, due);
        assert_eq!(p.deadline(), None);
    }

    #[test]
    fn instances_fit_only_the_share_they_were_made_for() {
        let project = InstanceKey::Project(path("/a"));
        let agent = InstanceKey::Agent(7);
        let per_project = Share::Project { max_projects: 2 };
        let cases = [
            (&agent, Share::Agent, true),
            (&agent, per_project, false),
            (&agent, Share::Shared, false),
            (&project, per_project, true),
            (&project, Share::Agent, false),
            (&project, Share::Shared, false),
        ];
        for (key, share, expected) in cases {
            assert_eq!(fits(key, share), expected, "{key} as {share:?}");
        }
    }

    #[test]
    fn the_instance_out_of_use_longest_with_no_agent_gives_way() {
        let t = Instant::now();
        let c = |key: &'static str, agents: usize, secs: u64| Candidate {
            key,
            agents,
            last_used: t + Duration::from_secs(secs),
        };
        // Room left: nobody goes.
        assert_eq!(room(vec![c("a", 0, 1)], 2), Room::Free);
        // The oldest without an agent goes, even if one with an agent is older.
        let live = vec![c("a", 1, 0), c("b", 0, 5), c("c", 0, 3)];
        assert_eq!(room(live, 3), Room::Evict("c"));
        // Every one has an agent: refused.
        assert_eq!(room(vec![c("a", 1, 0), c("b", 2, 1)], 2), Room::Full);
    }
}
