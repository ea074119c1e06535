//! One agent connection's session: what the agent said about itself, its era, its profile, its subscriptions; the state every handler reads.

use crate::jsonrpc::Id;
use crate::protocol::era::Era;
use crate::protocol::method;
use crate::upstream::ServerAsk;
use serde_json::Value;
use std::collections::HashMap;
use tokio::sync::mpsc;

/// What the agent said in `initialize`, and the connection's era.
#[derive(Debug)]
pub struct Session {
    /// The connection's number, for logs.
    pub agent: u64,
    pub protocol_version: Option<String>,
    pub client_name: Option<String>,
    pub client_version: Option<String>,
    /// The mcpd daemon this agent is, when its handshake said so (another daemon's
    /// connection to this one as its server; `era::instance_in`).
    pub mcpd_instance: Option<String>,
    /// True after `notifications/initialized`: list-change notifications may be sent.
    pub initialized: bool,
    /// The request being handled again after it waited for servers to start
    /// (`wait.rs`): it does not wait twice.
    pub redo: Option<crate::jsonrpc::Id>,
    /// Whether the agent has listed tools: only its first list waits for servers.
    pub listed: bool,
    /// The era the connection is pinned to by its first decisive exchange.
    pub era: Option<Era>,
    /// The capabilities a legacy agent declared in `initialize`.
    pub capabilities: std::sync::Arc<Value>,
    /// Open `subscriptions/listen` requests of a modern agent, by request id.
    pub listens: HashMap<Id, Listen>,
    /// The actor's service that sends a server's requests to this (legacy) agent.
    pub asks: mpsc::Sender<Box<ServerAsk>>,
    /// Servers this agent subscribed to resources on, to unsubscribe when it goes.
    pub subscribed: std::collections::HashSet<std::sync::Arc<str>>,
    /// The resources it subscribed to, as (server, the server's URI): at most
    /// `surface::MAX_SUBSCRIPTIONS`, so no agent grows a server's table without bound.
    pub resources: std::collections::HashSet<(std::sync::Arc<str>, String)>,
    /// The logging level a legacy agent set for its own calls.
    pub log_level: Option<String>,
    /// Call and byte counters.
    pub metrics: crate::metrics::Metrics,
    /// The profile the agent chose; None sees everything.
    pub profile: Option<std::sync::Arc<crate::config::Profile>>,
    /// Set once the connection acts as an agent (see `AgentGauge`).
    pub counted: Option<super::AgentGauge>,
    /// The project it works in, for servers run per project, and where that came from.
    pub project: super::project::claim::Project,
    /// The tools it activated in discovery mode (`mcpd__describe_tools`), least recent
    /// first, at most its profile's `max_active`.
    pub active: std::collections::VecDeque<String>,
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
            protocol_version: None,
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

    /// What this connection says about itself for `mcpd ctl agents`.
    pub fn describe(
        &self,
        in_flight: &super::in_flight::InFlight,
    ) -> crate::control_api::AgentInfo {
        crate::control_api::AgentInfo {
            agent: self.agent,
            client: self.client_name.clone(),
            client_version: self.client_version.clone(),
            era: self.era.map(|e| e.as_str().to_owned()),
            in_flight: in_flight.len(),
            calls: in_flight.describe(crate::control_api::CALLS_SHOWN),
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
            .search
            .search(name, 3, |s, q| self.sees_tool(s, q))
            .into_iter()
            .map(|h| h.qualified.to_owned())
            .collect()
    }

    /// Tells the agent which of its lists changed between two catalog versions (tools,
    /// prompts, resources), once per change.
    pub fn notify_changes(
        &self,
        outbox: &crate::outbox::Outbox,
        old: (u64, u64, u64),
        new: (u64, u64, u64),
    ) {
        let changed = [
            (old.0 != new.0, crate::protocol::method::TOOLS_LIST_CHANGED),
            (
                old.1 != new.1,
                crate::protocol::method::PROMPTS_LIST_CHANGED,
            ),
            (
                old.2 != new.2,
                crate::protocol::method::RESOURCES_LIST_CHANGED,
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
    pub fn notify_list_changed(&self, outbox: &crate::outbox::Outbox, m: &str) {
        if self.era != Some(Era::Modern) && self.initialized {
            outbox.send(crate::jsonrpc::notification_line(m, None));
        }
        for (id, listen) in &self.listens {
            if listen.wants(m) {
                let params = serde_json::json!({
                    "_meta": { crate::protocol::era::key::SUBSCRIPTION_ID: id }
                });
                outbox.send_about(id, crate::jsonrpc::notification_line(m, Some(&params)));
            }
        }
    }
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
