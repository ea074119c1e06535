//! The snapshot agents read (`Catalog`).
//!
//! Its fields are private, and it answers what callers ask of it (which tool a name is,
//! whether a server can take calls, which generation each list is at).

use super::{Availability, CacheHint, Held, InstanceKey, Instances, Surface, ToolEntry};
use crate::upstream::UpstreamHandle;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// An immutable snapshot of everything agents can list and call.
#[derive(Debug, Default)]
pub struct Catalog {
    /// Sorted by qualified name, so listings are deterministic. Shared with the
    /// registry's generations, so a new snapshot copies pointers, not definitions.
    pub(super) tools: Vec<Arc<ToolEntry>>,
    pub(super) index: HashMap<String, usize>,
    /// Every configured server and whether it can take calls.
    pub(super) servers: BTreeMap<Arc<str>, Availability>,
    /// Changes whenever the set of tools or a definition changes, and only then.
    pub(super) tools_version: u64,
    /// Every server's prompts, resources and templates.
    pub(super) surface: Arc<Surface>,
    /// Change when the prompts, or the resources and templates, change.
    pub(super) prompts_version: u64,
    pub(super) resources_version: u64,
    /// Which server a non-empty prefix belongs to, when only one server uses it: tells a
    /// call to a server that has not listed its tools yet from a call to no tool at all.
    pub(super) prefixes: HashMap<String, Arc<str>>,
    /// The servers whose tools have no prefix (`prefix = ""`): a call to a name no server
    /// lists may be for one of them that has listed nothing yet.
    pub(super) unprefixed: Vec<Arc<str>>,
    /// The search index over `tools` (tool discovery).
    pub(super) search: Arc<crate::discovery::Index>,
    /// Definitions held for approval (names only).
    pub(super) held: Arc<Held>,
    /// What only the supervisor knows: running instances, confined processes, daemons
    /// behind, cache hints.
    pub(super) live: Live,
}

/// What the supervisor adds to a snapshot from its running servers.
#[derive(Debug, Default)]
pub struct Live {
    /// The ready instances of servers run per agent or per project, by server.
    pub instances: Instances,
    /// The process (group leader) ids of the confined servers running now: their
    /// processes may not connect to mcpd's socket.
    pub confined: Vec<u32>,
    /// The mcpd daemons reached through the servers that are ready (their instance ids,
    /// and the ones they reach): told in this daemon's handshake answers, so that a loop
    /// of daemons is recognised (`upstream/handshake.rs`, `refuse_self`).
    pub mcpd_behind: Vec<String>,
    /// The cache hints mcpd puts on its listings for modern agents.
    pub cache: CacheHint,
}

/// What a tool name a caller gave is.
#[derive(Debug)]
pub enum Resolved<'a> {
    /// A tool the caller sees.
    Tool(&'a ToolEntry),
    /// A definition held for a person's approval, of a server the caller sees.
    Held { server: &'a Arc<str> },
    /// Most likely a tool of a server that has not listed its tools yet: by its prefix,
    /// or the one server without a prefix the caller sees that lists nothing.
    Unlisted {
        server: &'a Arc<str>,
        availability: &'a Availability,
    },
    /// No tool at all.
    Unknown,
}

impl Catalog {
    /// This snapshot with what the supervisor knows of its running servers.
    pub fn with_live(mut self, live: Live) -> Catalog {
        self.live = live;
        self
    }

    pub fn tool(&self, qualified: &str) -> Option<&ToolEntry> {
        let i = self.index.get(qualified)?;
        self.tools.get(*i).map(|t| &**t)
    }

    /// What the tool name `name` is for a caller that sees the servers `sees_server`
    /// accepts and the tools `sees_tool` accepts (server, presented name).
    pub fn resolve(
        &self,
        name: &str,
        sees_server: impl Fn(&str) -> bool,
        sees_tool: impl Fn(&str, &str) -> bool,
    ) -> Resolved<'_> {
        if let Some(tool) = self
            .tool(name)
            .filter(|t| sees_tool(&t.server, &t.qualified))
        {
            return Resolved::Tool(tool);
        }
        // A held tool is neither unknown nor served: a person must look.
        if let Some(server) = self.held.tools.get(name)
            && sees_server(server)
        {
            return Resolved::Held { server };
        }
        // Without a prefix the name does not say its server; when exactly one server
        // without a prefix has listed nothing, the call is most likely for it.
        let by_prefix = name
            .split_once(mcpd_wire::protocol::naming::SEPARATOR)
            .and_then(|(prefix, _)| self.prefixes.get(prefix))
            .and_then(|server| self.servers.get_key_value(server))
            .filter(|(_, a)| !matches!(a, Availability::Ready(_)));
        let unlisted = match by_prefix {
            Some(found) => Some(found),
            None => match self.unlisted_unprefixed(&sees_server)[..] {
                [found] => Some(found),
                _ => None,
            },
        };
        match unlisted {
            Some((server, availability)) => Resolved::Unlisted {
                server,
                availability,
            },
            None => Resolved::Unknown,
        }
    }

    /// The servers without a prefix the caller sees, that cannot take calls now and
    /// list no tool.
    fn unlisted_unprefixed(
        &self,
        sees_server: &impl Fn(&str) -> bool,
    ) -> Vec<(&Arc<str>, &Availability)> {
        self.unprefixed
            .iter()
            .filter(|s| sees_server(s))
            .filter_map(|s| self.servers.get_key_value(s))
            .filter(|(_, a)| {
                !matches!(
                    a,
                    Availability::Ready(_)
                        | Availability::PerAgent { .. }
                        | Availability::PerProject { .. }
                )
            })
            .filter(|(s, _)| !self.lists_tools_of(s))
            .collect()
    }

    /// Whether any tool of `server` is listed. A walk over every tool: for errors only.
    pub fn lists_tools_of(&self, server: &str) -> bool {
        self.tools.iter().any(|t| &*t.server == server)
    }

    /// Whether `server` is configured and can take calls now.
    pub fn availability(&self, server: &str) -> Option<&Availability> {
        self.servers.get(server)
    }

    /// Every configured server (instances are reached through theirs), by name.
    pub fn servers(&self) -> impl Iterator<Item = (&Arc<str>, &Availability)> {
        self.servers.iter()
    }

    /// How many servers are configured.
    pub fn server_count(&self) -> usize {
        self.servers.len()
    }

    /// The generations of the tool, prompt, and resource (with template) lists: each
    /// changes when its list does, and only then.
    pub fn versions(&self) -> (u64, u64, u64) {
        (
            self.tools_version,
            self.prompts_version,
            self.resources_version,
        )
    }

    /// Every server's prompts, resources and templates.
    pub fn surface(&self) -> &Arc<Surface> {
        &self.surface
    }

    /// Definitions held for approval (names only).
    pub fn held(&self) -> &Held {
        &self.held
    }

    /// The search index over the tools (tool discovery).
    pub fn search(&self) -> &crate::discovery::Index {
        &self.search
    }

    /// The cache hints mcpd puts on its listings for modern agents.
    pub fn cache(&self) -> CacheHint {
        self.live.cache
    }

    /// The mcpd daemons reached through the servers that are ready.
    pub fn mcpd_behind(&self) -> &[String] {
        &self.live.mcpd_behind
    }

    /// The ready instance `key` of `server`, if it is.
    pub fn instance(&self, server: &str, key: &InstanceKey) -> Option<&UpstreamHandle> {
        self.live.instances.get(server, key)
    }

    /// How many instances are ready.
    pub fn instance_count(&self) -> usize {
        self.live.instances.count()
    }

    /// Whether the process (group leader) `pid` is a confined server's.
    pub fn is_confined(&self, pid: u32) -> bool {
        self.live.confined.contains(&pid)
    }

    /// Whether any confined server runs now.
    pub fn any_confined(&self) -> bool {
        !self.live.confined.is_empty()
    }
}
