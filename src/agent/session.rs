//! One agent connection's session.
//!
//! What the agent said about itself, its era, its profile, its subscriptions; the state
//! every handler reads.

use crate::upstream::ServerAsk;
use mcpd_wire::jsonrpc::Id;
use mcpd_wire::protocol::era::Era;
use mcpd_wire::protocol::method;
use serde_json::Value;
use std::collections::HashMap;
use tokio::sync::mpsc;

/// What the agent said about itself, and the connection's era. Handlers change it only
/// through its methods, each of which says what the agent did.
#[derive(Debug)]
pub struct Session {
    /// The connection's number, for logs.
    agent: u64,
    client_name: Option<String>,
    client_version: Option<String>,
    /// The mcpd daemon this agent is, when its handshake said so (another daemon's
    /// connection to this one as its server; `era::instance_in`).
    mcpd_instance: Option<String>,
    /// True after `notifications/initialized`: list-change notifications may be sent.
    initialized: bool,
    /// The request being handled again after it waited for servers to start
    /// (`wait.rs`): it does not wait twice.
    redo: Option<mcpd_wire::jsonrpc::Id>,
    /// Whether the agent has listed tools: only its first list waits for servers.
    listed: bool,
    /// The era the connection is pinned to by its first decisive exchange.
    era: Option<Era>,
    /// The capabilities a legacy agent declared in `initialize`.
    capabilities: std::sync::Arc<Value>,
    /// Open `subscriptions/listen` requests of a modern agent, by request id.
    listens: HashMap<Id, Listen>,
    /// The actor's service that sends a server's requests to this (legacy) agent.
    asks: mpsc::Sender<Box<ServerAsk>>,
    /// Servers this agent subscribed to resources on, to unsubscribe when it goes.
    subscribed: std::collections::HashSet<std::sync::Arc<str>>,
    /// The resources it subscribed to, as (server, the server's URI): at most
    /// `surface::MAX_SUBSCRIPTIONS`, so no agent grows a server's table without bound.
    resources: std::collections::HashSet<(std::sync::Arc<str>, String)>,
    /// The logging level a legacy agent set for its own calls.
    log_level: Option<String>,
    /// Call and byte counters.
    metrics: crate::metrics::Metrics,
    /// The profile the agent chose; None sees everything.
    profile: Option<std::sync::Arc<crate::config::Profile>>,
    /// Set once the connection acts as an agent (see `AgentGauge`).
    counted: Option<super::AgentGauge>,
    /// The project it works in, for servers run per project, and where that came from.
    project: super::project::claim::Project,
    /// The tools it activated in discovery mode (`mcpd__describe_tools`), least recent
    /// first, at most its profile's `max_active`.
    active: std::collections::VecDeque<String>,
}

impl Session {
    /// The session of connection `agent` before the agent has said anything.
    pub fn new(
        agent: u64,
        asks: mpsc::Sender<Box<ServerAsk>>,
        metrics: crate::metrics::Metrics,
        project: super::project::claim::Project,
    ) -> Session {
        Session {
            agent,
            client_name: None,
            client_version: None,
            mcpd_instance: None,
            initialized: false,
            redo: None,
            listed: false,
            era: None,
            // A connection that never sends `initialize` (`mcpd ctl call`) declared none.
            capabilities: std::sync::Arc::new(serde_json::json!({})),
            listens: HashMap::new(),
            asks,
            subscribed: Default::default(),
            resources: Default::default(),
            log_level: None,
            metrics,
            profile: None,
            counted: None,
            active: std::collections::VecDeque::new(),
            project,
        }
    }

    /// The connection's number, for logs and per-agent instances.
    pub fn agent(&self) -> u64 {
        self.agent
    }

    /// The era the connection is pinned to, once an exchange decided it.
    pub fn era(&self) -> Option<Era> {
        self.era
    }

    /// The agent's `initialize`: pins the connection to that era and keeps what the
    /// agent said about itself.
    pub fn initialize(&mut self, capabilities: Value, client: Client) {
        self.era = Some(Era::Legacy);
        self.capabilities = std::sync::Arc::new(capabilities);
        self.client_name = client.name;
        self.client_version = client.version;
        self.mcpd_instance = client.mcpd_instance;
    }

    /// A valid 2026-07-28 request on a connection not pinned yet: pins it to that era,
    /// with the client the request names. Whether it was not pinned before.
    pub fn pin_modern(&mut self, name: Option<String>, version: Option<String>) -> bool {
        if self.era.is_some() {
            return false;
        }
        self.era = Some(Era::Modern);
        self.client_name = name;
        self.client_version = version;
        true
    }

    /// The name the agent gave itself, if any.
    pub fn client_name(&self) -> Option<&str> {
        self.client_name.as_deref()
    }

    /// The mcpd daemon this agent is, when its handshake said so.
    pub fn mcpd_instance(&self) -> Option<&String> {
        self.mcpd_instance.as_ref()
    }

    /// The agent's `server/discover` said it is the mcpd daemon `instance`.
    pub fn is_mcpd(&mut self, instance: String) {
        self.mcpd_instance = Some(instance);
    }

    /// `notifications/initialized`: list-change notifications may be sent from now on.
    pub fn mark_initialized(&mut self) {
        self.initialized = true;
    }

    /// Whether `id` is the request being handled again after its wait (`wait.rs`).
    pub fn is_redo(&self, id: &Id) -> bool {
        self.redo.as_ref() == Some(id)
    }

    /// The request handled again now, or None once it is handled.
    pub fn set_redo(&mut self, id: Option<Id>) {
        self.redo = id;
    }

    /// Whether this is the agent's first `tools/list` (only that one waits for servers).
    pub fn first_listing(&mut self) -> bool {
        !std::mem::replace(&mut self.listed, true)
    }

    /// The capabilities a legacy agent declared in `initialize`.
    pub fn capabilities(&self) -> &std::sync::Arc<Value> {
        &self.capabilities
    }

    /// The actor's service that sends a server's requests to this agent.
    pub fn asks(&self) -> &mpsc::Sender<Box<ServerAsk>> {
        &self.asks
    }

    /// The logging level a legacy agent set for its own calls.
    pub fn log_level(&self) -> Option<&String> {
        self.log_level.as_ref()
    }

    /// `logging/setLevel`: the level for the agent's own calls from now on.
    pub fn set_log_level(&mut self, level: String) {
        self.log_level = Some(level);
    }

    /// Call and byte counters.
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.metrics
    }

    /// The profile the agent chose; None sees everything.
    pub fn profile(&self) -> Option<&std::sync::Arc<crate::config::Profile>> {
        self.profile.as_ref()
    }

    /// The agent chose a profile.
    pub fn choose_profile(&mut self, profile: std::sync::Arc<crate::config::Profile>) {
        self.profile = Some(profile);
    }

    /// The connection asked for something other than a control method: from now on it
    /// counts as an agent (`AgentGauge`), once.
    pub fn count_as_agent(&mut self, daemon: &std::sync::Arc<super::DaemonInfo>) {
        if self.counted.is_none() {
            self.counted = Some(super::AgentGauge::count(daemon));
        }
    }

    /// The project it works in, for servers run per project.
    pub fn project(&self) -> &super::project::claim::Project {
        &self.project
    }

    /// The project, to claim or settle one (`project/`).
    pub fn project_mut(&mut self) -> &mut super::project::claim::Project {
        &mut self.project
    }

    /// Open `subscriptions/listen` requests of a modern agent, by request id.
    pub fn listens(&self) -> &HashMap<Id, Listen> {
        &self.listens
    }

    /// A `subscriptions/listen` opened (it stays open until the agent cancels it).
    pub fn open_listen(&mut self, id: Id, listen: Listen) {
        self.listens.insert(id, listen);
    }

    /// The agent cancelled request `id`: a subscription of that id ends, silently.
    pub fn end_listen(&mut self, id: &Id) {
        self.listens.remove(id);
    }

    /// Servers this agent subscribed to resources on, to unsubscribe when it goes.
    pub fn subscribed(&self) -> impl Iterator<Item = &std::sync::Arc<str>> {
        self.subscribed.iter()
    }

    /// `resources/subscribe` (`on`) or `resources/unsubscribe` of `key` (the server and
    /// its URI); false, and nothing changed, when a subscription would pass `max`.
    pub fn subscribe(&mut self, key: (std::sync::Arc<str>, String), on: bool, max: usize) -> bool {
        let server = key.0.clone();
        if !on {
            self.resources.remove(&key);
        } else if self.resources.len() >= max && !self.resources.contains(&key) {
            return false;
        } else {
            self.resources.insert(key);
        }
        self.subscribed.insert(server);
        true
    }

    /// Subscribes to every resource of `keys` (a listen's), or, if that would pass `max`,
    /// to none: false then.
    pub fn subscribe_all(&mut self, keys: Vec<(std::sync::Arc<str>, String)>, max: usize) -> bool {
        let new: std::collections::HashSet<_> = keys
            .iter()
            .filter(|key| !self.resources.contains(*key))
            .cloned()
            .collect();
        if self.resources.len() + new.len() > max {
            return false;
        }
        self.resources.extend(new);
        for (server, _) in keys {
            self.subscribed.insert(server);
        }
        true
    }

    /// The tools it activated in discovery mode, least recent first.
    pub fn active(&self) -> &std::collections::VecDeque<String> {
        &self.active
    }

    /// Adds `names` to the agent's active tools, most recent last, keeping at most `max`.
    /// Whether the set changed.
    pub fn activate(&mut self, max: usize, names: Vec<String>) -> bool {
        let before: Vec<String> = self.active.iter().cloned().collect();
        for n in names {
            self.active.retain(|a| *a != n);
            self.active.push_back(n);
        }
        while self.active.len() > max {
            self.active.pop_front();
        }
        let mut a: Vec<&String> = before.iter().collect();
        let mut b: Vec<&String> = self.active.iter().collect();
        a.sort();
        b.sort();
        a != b
    }

    /// What this connection says about itself for `mcpd ctl agents`.
    pub fn describe(
        &self,
        in_flight: &super::in_flight::InFlight,
    ) -> mcpd_ctl::control_api::AgentInfo {
        mcpd_ctl::control_api::AgentInfo {
            agent: self.agent,
            client: self.client_name.clone(),
            client_version: self.client_version.clone(),
            era: self.era.map(|e| e.as_str().to_owned()),
            in_flight: in_flight.len(),
            calls: in_flight.describe(mcpd_ctl::control_api::CALLS_SHOWN),
            profile: self.profile.as_ref().map(|p| p.name.clone()),
            project: self
                .project
                .current
                .as_ref()
                .map(|p| p.display().to_string()),
            control_only: self.counted.is_none(),
            ..Default::default()
        }
    }

    /// Whether the agent's profile includes this server.
    pub fn sees_server(&self, server: &str) -> bool {
        self.profile
            .as_ref()
            .is_none_or(|p| p.includes_server(server))
    }

    /// Whether the agent's profile includes this tool.
    pub fn sees_tool(&self, server: &str, qualified: &str) -> bool {
        self.profile
            .as_ref()
            .is_none_or(|p| p.includes_tool(server, qualified))
    }

    /// Up to three tool names this agent may see that are nearest to `name` (for an
    /// unknown tool's error).
    pub fn nearest_tools(&self, catalog: &crate::registry::Catalog, name: &str) -> Vec<String> {
        catalog
            .search()
            .search(name, 3, |s, q| self.sees_tool(s, q))
            .into_iter()
            .map(|h| h.qualified.to_owned())
            .collect()
    }

    /// Tells the agent which of its lists changed between two catalog versions (tools,
    /// prompts, resources), once per change.
    pub fn notify_changes(
        &self,
        outbox: &mcpd_runtime::outbox::Outbox,
        old: (u64, u64, u64),
        new: (u64, u64, u64),
    ) {
        let changed = [
            (
                old.0 != new.0,
                mcpd_wire::protocol::method::TOOLS_LIST_CHANGED,
            ),
            (
                old.1 != new.1,
                mcpd_wire::protocol::method::PROMPTS_LIST_CHANGED,
            ),
            (
                old.2 != new.2,
                mcpd_wire::protocol::method::RESOURCES_LIST_CHANGED,
            ),
        ];
        for (did, m) in changed {
            if did {
                self.notify_list_changed(outbox, m);
            }
        }
    }

    /// Tells the agent one of its lists changed (`m`, a list-changed method): a legacy
    /// agent by the plain notification once it is initialized, a modern one on each
    /// subscription that asked for that kind.
    pub fn notify_list_changed(&self, outbox: &mcpd_runtime::outbox::Outbox, m: &str) {
        if self.era != Some(Era::Modern) && self.initialized {
            outbox.send(mcpd_wire::jsonrpc::notification_line(m, None));
        }
        for (id, listen) in &self.listens {
            if listen.wants(m) {
                let params = serde_json::json!({
                    "_meta": { mcpd_wire::protocol::era::key::SUBSCRIPTION_ID: id }
                });
                outbox.send_about(id, mcpd_wire::jsonrpc::notification_line(m, Some(&params)));
            }
        }
    }
}

/// What an agent's `initialize` says about it.
pub struct Client {
    pub name: Option<String>,
    pub version: Option<String>,
    /// The mcpd daemon it is, if it says so (`era::instance_in`).
    pub mcpd_instance: Option<String>,
}

/// Which notifications one `subscriptions/listen` of an agent asked for.
#[derive(Debug)]
pub struct Listen {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    /// Ends the watchers of the tasks it names (`tasks/watch.rs`) when the listen goes.
    pub tasks: Option<tokio_util::sync::DropGuard>,
    /// How many tasks it watches.
    pub watching: usize,
}

impl Listen {
    /// Whether this subscription asked for a list-changed notification method.
    pub fn wants(&self, m: &str) -> bool {
        match m {
            method::TOOLS_LIST_CHANGED => self.tools,
            method::PROMPTS_LIST_CHANGED => self.prompts,
            method::RESOURCES_LIST_CHANGED => self.resources,
            _ => false,
        }
    }
}
