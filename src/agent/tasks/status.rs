//! Where a 2025-11-25 server's `notifications/tasks/status` go.
//!
//! To the agent connection whose call made the task, under the id mcpd showed it; the
//! table of routes the task book keeps for them.
//!
//! A server's connection is shared and a task outlives the call that made it, so the
//! upstream side cannot tell whose a task is: it passes each status on
//! (`upstream::TaskStatus`, with its connection's instance number), and the routes,
//! recorded when a call's `CreateTaskResult` is rendered, say which connection and which
//! sealed id it is for. A status for a task no route names is dropped (logged at debug),
//! and a status reaches no one else: not the owner's other connections (which may poll
//! `tasks/get`), never another owner's.
//!
//! Only the 2025-11-25 tasks (`Kind::Legacy`) of legacy agents are routed: the
//! notification is that revision's. A modern agent gets `notifications/tasks` instead, on
//! a `subscriptions/listen` that names the task (`watch.rs`, which polls the server),
//! and an extension server sends no such notification.
//!
//! Best effort, as the notification is optional and an agent must be able to poll: a
//! status is `offer`ed (dropped when the agent's queue is short of room, never counting
//! against the agent), and one whose line would be longer than `max_message_bytes` is
//! dropped. Bounded: routes per owner and in all (the oldest leave first, after those of
//! closed connections and lapsed ttls); a route also leaves when its task reaches a
//! terminal status, its `ttl` lapses, or its connection closes. A route holds the
//! agent's queue weakly, so it never keeps a closed connection's writer running.

use super::ids::{self, Kind, Made};
use crate::upstream::TaskStatus;
use mcpd_runtime::outbox::WeakOutbox;
use mcpd_wire::jsonrpc;
use mcpd_wire::protocol::method;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Routes kept per owner (as many as the book keeps tasks), and in all.
const MAX_PER_OWNER: usize = 1000;
const MAX_ROUTES: usize = 4096;
/// A route for a task without a `ttl` is kept this long at most.
const MAX_TTL: Duration = Duration::from_secs(24 * 3600);

/// Where the statuses of the task a legacy agent's call makes go: that agent's queue,
/// from the server connection the call went to.
#[derive(Clone, Debug)]
pub struct StatusTo {
    pub outbox: WeakOutbox,
    /// The connection's instance number (`UpstreamHandle::instance`).
    pub instance: u64,
}

struct Route {
    seq: u64,
    owner: Arc<str>,
    /// The id the agent has.
    sealed: Arc<str>,
    to: WeakOutbox,
    until: Instant,
}

/// A task: the connection that made it, and the server's own id.
type Key = (u64, String);

/// The routes of the tasks legacy agents made on 2025-11-25 servers.
#[derive(Default)]
pub struct Routes {
    next_seq: u64,
    routes: HashMap<Key, Route>,
    /// Each route's key by age, oldest first.
    order: BTreeMap<u64, Key>,
    per_owner: HashMap<Arc<str>, usize>,
}

impl Routes {
    /// Records where the statuses of a task just made go; only a 2025-11-25 task is.
    pub fn record(&mut self, owner: &Arc<str>, made: &Made, to: StatusTo, now: Instant) {
        if made.kind != Kind::Legacy {
            return;
        }
        let key = (to.instance, made.task.clone());
        self.remove(&key);
        if self
            .per_owner
            .get(owner)
            .is_some_and(|n| *n >= MAX_PER_OWNER)
        {
            let oldest = self
                .order
                .values()
                .find(|k| self.routes.get(*k).is_some_and(|r| r.owner == *owner))
                .cloned();
            if let Some(k) = oldest {
                self.remove(&k);
            }
        }
        if self.routes.len() >= MAX_ROUTES {
            self.sweep(now);
        }
        if self.routes.len() >= MAX_ROUTES
            && let Some(k) = self.order.values().next().cloned()
        {
            self.remove(&k);
        }
        let ttl = made
            .ttl_ms
            .map_or(MAX_TTL, |ms| Duration::from_millis(ms).min(MAX_TTL));
        let seq = self.next_seq;
        self.next_seq += 1;
        self.order.insert(seq, key.clone());
        *self.per_owner.entry(owner.clone()).or_default() += 1;
        self.routes.insert(
            key,
            Route {
                seq,
                owner: owner.clone(),
                sealed: made.sealed.clone(),
                to: to.outbox,
                until: now + ttl,
            },
        );
    }

    /// Passes a server's task status to the agent that owns the task, under its id.
    pub fn deliver(&mut self, status: TaskStatus, max_line: usize, now: Instant) {
        let TaskStatus {
            server,
            instance,
            mut params,
            ..
        } = status;
        let Some(task) = params.get("taskId").and_then(Value::as_str) else {
            tracing::debug!(upstream = %server, "dropped a task status without a taskId");
            return;
        };
        let key = (instance, task.to_owned());
        let Some(route) = self.routes.get(&key) else {
            tracing::debug!(upstream = %server, "dropped a status of a task no agent connected here made");
            return;
        };
        let outbox = match route.to.upgrade() {
            Some(o) if route.until > now => o,
            _ => {
                tracing::debug!(upstream = %server, "dropped a status of a task whose agent left or whose ttl lapsed");
                self.remove(&key);
                return;
            }
        };
        ids::present(&mut params, &route.sealed);
        let terminal = matches!(
            params.get("status").and_then(Value::as_str),
            Some("completed" | "failed" | "cancelled")
        );
        if terminal {
            self.remove(&key);
        }
        let line = jsonrpc::notification_line(method::TASKS_STATUS, Some(&params));
        if line.len() > max_line {
            tracing::debug!(upstream = %server, "dropped a task status longer than max_message_bytes");
        } else if !outbox.offer(line) {
            tracing::debug!(upstream = %server, "dropped a task status: the agent's queue is short of room");
        }
    }

    fn remove(&mut self, key: &Key) {
        let Some(route) = self.routes.remove(key) else {
            return;
        };
        self.order.remove(&route.seq);
        if let Some(n) = self.per_owner.get_mut(&route.owner) {
            *n -= 1;
            if *n == 0 {
                self.per_owner.remove(&route.owner);
            }
        }
    }

    /// Forgets the routes of closed connections and lapsed ttls.
    fn sweep(&mut self, now: Instant) {
        let gone: Vec<Key> = self
            .routes
            .iter()
            .filter(|(_, r)| r.until <= now || !r.to.is_open())
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            self.remove(&k);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.routes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpd_runtime::outbox::Outbox;
    use serde_json::json;

    const RELATED: &str = "io.modelcontextprotocol/related-task";

    fn made(task: &str, kind: Kind, ttl_ms: Option<u64>) -> Made {
        Made {
            sealed: format!("sealed-{task}").into(),
            server: "old".into(),
            task: task.to_owned(),
            kind,
            ttl_ms,
        }
    }

    fn status(instance: u64, task: &str, state: &str) -> TaskStatus {
        TaskStatus {
            server: "old".into(),
            instance,
            params: json!({"taskId": task, "status": state, "_meta": {RELATED: {"taskId": task}}}),
            bytes: 100,
        }
    }

    fn lines(
        rx: &mut tokio::sync::mpsc::Receiver<
            mcpd_runtime::budget::Charged<mcpd_runtime::outbox::Out>,
        >,
    ) -> Vec<Value> {
        let mut out = Vec::new();
        while let Ok(o) = rx.try_recv() {
            out.push(serde_json::from_str(&o.line).unwrap());
        }
        out
    }

    #[test]
    fn a_status_reaches_only_the_connection_that_made_the_task_under_its_sealed_id() {
        let now = Instant::now();
        let owner: Arc<str> = "uid:1".into();
        let (mine, mut my_rx) = Outbox::new(16, 1 << 16);
        let (other, mut other_rx) = Outbox::new(16, 1 << 16);
        let mut routes = Routes::default();
        let to = |o: &Outbox, instance| StatusTo {
            outbox: o.downgrade(),
            instance,
        };
        routes.record(&owner, &made("t-1", Kind::Legacy, None), to(&mine, 7), now);
        // An extension task is not routed: modern servers send no such notification.
        routes.record(
            &owner,
            &made("t-2", Kind::Extension, None),
            to(&other, 7),
            now,
        );
        assert_eq!(routes.len(), 1);
        routes.deliver(status(7, "t-1", "working"), 1 << 16, now);
        // The same id from another connection (a restarted server) is another task.
        routes.deliver(status(8, "t-1", "working"), 1 << 16, now);
        routes.deliver(status(7, "t-2", "working"), 1 << 16, now);
        routes.deliver(status(7, "t-1", "completed"), 1 << 16, now);
        // A terminal status was the last.
        routes.deliver(status(7, "t-1", "completed"), 1 << 16, now);
        let got = lines(&mut my_rx);
        assert_eq!(got.len(), 2, "{got:?}");
        for (m, state) in got.iter().zip(["working", "completed"]) {
            assert_eq!(m["method"], "notifications/tasks/status");
            assert_eq!(m["params"]["taskId"], "sealed-t-1");
            assert_eq!(m["params"]["_meta"][RELATED]["taskId"], "sealed-t-1");
            assert_eq!(m["params"]["status"], state);
        }
        assert!(lines(&mut other_rx).is_empty());
        assert_eq!(routes.len(), 0);
    }

    #[test]
    fn routes_leave_with_their_connection_their_ttl_and_beyond_the_owners_bound() {
        let now = Instant::now();
        let owner: Arc<str> = "uid:1".into();
        let (outbox, mut rx) = Outbox::new(16, 1 << 16);
        let mut routes = Routes::default();
        let to = |o: &Outbox| StatusTo {
            outbox: o.downgrade(),
            instance: 1,
        };
        routes.record(
            &owner,
            &made("short", Kind::Legacy, Some(10)),
            to(&outbox),
            now,
        );
        routes.deliver(
            status(1, "short", "working"),
            1 << 16,
            now + Duration::from_millis(20),
        );
        assert_eq!(routes.len(), 0, "its ttl lapsed");
        for i in 0..=MAX_PER_OWNER {
            routes.record(
                &owner,
                &made(&format!("t-{i}"), Kind::Legacy, None),
                to(&outbox),
                now,
            );
        }
        assert_eq!(routes.len(), MAX_PER_OWNER);
        routes.deliver(status(1, "t-0", "working"), 1 << 16, now);
        assert!(lines(&mut rx).is_empty(), "the oldest left");
        // Too long for the agent: dropped.
        routes.deliver(status(1, "t-1", "working"), 10, now);
        assert!(lines(&mut rx).is_empty());
        // Another owner's routes still fit beside them.
        let other: Arc<str> = "uid:2".into();
        routes.record(&other, &made("x", Kind::Legacy, None), to(&outbox), now);
        assert_eq!(routes.len(), MAX_PER_OWNER + 1);
        drop(rx);
        drop(outbox);
        routes.deliver(status(1, "x", "working"), 1 << 16, now);
        assert_eq!(routes.len(), MAX_PER_OWNER, "its connection closed");
    }
}
