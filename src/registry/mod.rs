//! The catalog agents see.
//!
//! Every server's tools under presented names, swapped one generation at a time. No IO.
//!
//! The supervisor alone owns the `Registry` and publishes each new `Catalog` through a
//! `watch` channel; agents read an `Arc<Catalog>` snapshot, so a reader sees one whole
//! generation of every server, never a mix. Names come from each server's `Naming`
//! (prefix, renames); a name two servers present goes to one of them (`claims.rs`).

mod availability;
mod catalog;
pub mod claims;
mod held;
mod paging;
mod search;
pub mod surface;
mod tool;

pub use paging::page_entries;

pub use availability::{Availability, InstanceKey, Instances};
pub use catalog::{Catalog, Live, Resolved};
pub use claims::{Collision, NameKind};
pub use held::{Held, HeldKind};
use mcpd_wire::protocol::ListKind;
use mcpd_wire::protocol::naming::Naming;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
pub use surface::{Entry, Surface};
use tool::present_tools;
pub use tool::{GenerationError, ToolEntry};

/// Tools returned per `tools/list` page to agents.
pub const PAGE_SIZE: usize = 500;

/// How long agents may cache mcpd's listings (`ttlMs`), and whether the cache is
/// private to one authorization context (`cacheScope`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheHint {
    pub ttl_ms: u64,
    pub private: bool,
}

/// The TTL of mcpd's listings when no server gives a shorter one. Agents also hear of
/// every change through list-changed notifications, so this only bounds staleness.
pub const DEFAULT_TTL_MS: u64 = 60_000;

impl Default for CacheHint {
    fn default() -> Self {
        CacheHint {
            ttl_ms: DEFAULT_TTL_MS,
            private: false,
        }
    }
}

/// One server's tools as agents see them, and what they were made from.
#[derive(Debug)]
struct Generation {
    /// The list as the registry was given it (filtered, not yet named), kept only while
    /// `entries` could not be made from it. Otherwise `entries` hold it (each with its
    /// own name restored, see `source`), so a naming change can present it again without
    /// asking the server and without a second copy of every definition.
    raw: Option<Vec<Value>>,
    entries: Vec<Arc<ToolEntry>>,
    /// When it arrived (or was renamed), for deciding who holds a shared name.
    stamp: u64,
}

impl Generation {
    /// The list as the server gave it: the kept list, or the entries with their own names.
    fn source(&self) -> Vec<Value> {
        if let Some(raw) = &self.raw {
            return raw.clone();
        }
        self.entries
            .iter()
            .map(|e| {
                let mut d = e.parsed();
                if let Some(obj) = d.as_object_mut() {
                    obj.insert("name".into(), Value::String(e.original.clone()));
                }
                d
            })
            .collect()
    }
}

/// Every server's current tool generation. Owned by the supervisor.
#[derive(Debug, Default)]
pub struct Registry {
    generations: BTreeMap<Arc<str>, Generation>,
    version: u64,
    /// Each server's prefix and renames; a server not here is named by its own name.
    namings: BTreeMap<Arc<str>, Naming>,
    /// The source of arrival stamps.
    clock: u64,
    /// When each server's prompt list arrived (or was renamed).
    prompt_stamps: BTreeMap<Arc<str>, u64>,
    /// Who holds each presented tool and prompt name, from the last rebuild.
    tool_holders: HashMap<String, Arc<str>>,
    prompt_holders: HashMap<String, Arc<str>>,
    /// Names rejected for a server because another holds them.
    tool_collisions: Vec<Collision>,
    prompt_collisions: Vec<Collision>,
    /// Each server's last good prompt, resource and template lists, as it sent them.
    lists: BTreeMap<(Arc<str>, ListKind), Vec<Value>>,
    prompts_version: u64,
    resources_version: u64,
    /// The presented surface, rebuilt only when a list changed.
    surface: Arc<Surface>,
    surface_stale: bool,
    search: search::SearchCache,
    name_limit: usize,
    /// Each server's held definitions, by its own ids, and their presented index.
    held_ids: BTreeMap<(Arc<str>, HeldKind), Vec<String>>,
    held: Arc<Held>,
    held_stale: bool,
}

impl Registry {
    /// Builds a server's next generation from its raw tool list. A list with a problem is
    /// rejected whole and the previous generation stays.
    pub fn replace(
        &mut self,
        server: &Arc<str>,
        tools: &[Value],
        limit: usize,
    ) -> Result<usize, GenerationError> {
        let entries = present_tools(server, tools, &self.naming_of(server), limit)?;
        let n = entries.len();
        let same = self.generations.get(server).is_some_and(|old| {
            old.entries.len() == n
                && old
                    .entries
                    .iter()
                    .zip(&entries)
                    .all(|(a, b)| a.definition.get() == b.definition.get())
        });
        if !same {
            self.version += 1;
            self.clock += 1;
            let generation = Generation {
                raw: None,
                entries,
                stamp: self.clock,
            };
            self.generations.insert(server.clone(), generation);
        }
        Ok(n)
    }

    /// Sets how a server's names are presented, presenting what it already listed again.
    /// Returns whether anything changed; an error when its current tools cannot all be
    /// presented under the new naming (then none of them is listed until a list can).
    pub fn set_naming(
        &mut self,
        server: &Arc<str>,
        naming: Naming,
        limit: usize,
    ) -> Result<bool, GenerationError> {
        if self.namings.get(server) == Some(&naming) {
            return Ok(false);
        }
        let unchanged = !self.namings.contains_key(server) && naming == Naming::prefixed(server);
        self.namings.insert(server.clone(), naming);
        if unchanged {
            return Ok(false);
        }
        // The renamed server counts as arriving now: a name it newly shares with
        // another server stays with that one.
        self.clock += 1;
        if self.prompt_stamps.contains_key(server) {
            self.prompt_stamps.insert(server.clone(), self.clock);
            self.prompts_version += 1;
            self.surface_stale = true;
        }
        self.name_limit = limit;
        let naming = self.naming_of(server);
        let Some(g) = self.generations.get_mut(server) else {
            return Ok(true);
        };
        self.version += 1;
        g.stamp = self.clock;
        let source = g.source();
        match present_tools(server, &source, &naming, limit) {
            Ok(entries) => {
                g.entries = entries;
                g.raw = None;
                Ok(true)
            }
            Err(e) => {
                g.entries.clear();
                g.raw = Some(source);
                Err(e)
            }
        }
    }

    /// How a server's names are presented.
    fn naming_of(&self, server: &str) -> Naming {
        self.namings
            .get(server)
            .cloned()
            .unwrap_or_else(|| Naming::prefixed(server))
    }

    /// Names of `server` that agents do not see because another server holds them.
    pub fn collisions_of(&self, server: &str) -> Vec<Collision> {
        self.collisions()
            .filter(|c| &*c.server == server)
            .cloned()
            .collect()
    }

    /// Every rejected name, tools first.
    pub fn collisions(&self) -> impl Iterator<Item = &Collision> {
        self.tool_collisions.iter().chain(&self.prompt_collisions)
    }

    /// How many of a server's tools agents see.
    pub fn tool_count(&self, server: &str) -> usize {
        let rejected = self
            .tool_collisions
            .iter()
            .filter(|c| &*c.server == server)
            .count();
        self.generations
            .get(server)
            .map_or(0, |g| g.entries.len().saturating_sub(rejected))
    }

    /// Forgets a server's tools (it has none, or is no longer configured).
    pub fn remove(&mut self, server: &str) {
        if self.generations.remove(server).is_some() {
            self.version += 1;
        }
    }

    /// Forgets everything a server listed (it was removed from the config).
    pub fn forget_server(&mut self, server: &str) {
        self.remove(server);
        self.namings.remove(server);
        self.prompt_stamps.remove(server);
        let held = self.held_ids.len();
        self.held_ids.retain(|(s, _), _| &**s != server);
        self.held_stale |= self.held_ids.len() != held;
        let before = self.lists.len();
        self.lists.retain(|(s, _), _| &**s != server);
        if self.lists.len() != before {
            self.prompts_version += 1;
            self.resources_version += 1;
            self.surface_stale = true;
        }
    }

    /// Takes a server's new prompt, resource or template list. Returns whether anything
    /// agents see changed.
    pub fn replace_list(
        &mut self,
        server: &Arc<str>,
        kind: ListKind,
        items: Vec<Value>,
        limit: usize,
    ) -> bool {
        let key = (server.clone(), kind);
        if self.lists.get(&key) == Some(&items) {
            return false;
        }
        if items.is_empty() {
            self.lists.remove(&key);
        } else {
            self.lists.insert(key, items);
        }
        match kind {
            ListKind::Prompts => {
                self.prompts_version += 1;
                self.clock += 1;
                self.prompt_stamps.insert(server.clone(), self.clock);
            }
            ListKind::Resources | ListKind::Templates => self.resources_version += 1,
        }
        self.name_limit = limit;
        self.surface_stale = true;
        true
    }

    /// Sets a server's held definitions of one kind (their ids as the server names them).
    pub fn set_held(&mut self, server: &Arc<str>, kind: HeldKind, ids: Vec<String>) {
        let key = (server.clone(), kind);
        let old = self.held_ids.get(&key).map_or(&[][..], Vec::as_slice);
        if old == ids.as_slice() {
            return;
        }
        if ids.is_empty() {
            self.held_ids.remove(&key);
        } else {
            self.held_ids.insert(key, ids);
        }
        self.held_stale = true;
    }

    /// Whether the held definitions changed since the last snapshot.
    pub fn held_changed(&self) -> bool {
        self.held_stale
    }

    /// A new snapshot for agents (the supervisor adds what it knows of its running
    /// servers with `Catalog::with_live`).
    pub fn catalog(&mut self, servers: BTreeMap<Arc<str>, Availability>) -> Catalog {
        if std::mem::take(&mut self.surface_stale) {
            self.rebuild_surface();
        }
        if std::mem::take(&mut self.held_stale) {
            let limit = self.name_limit.max(48);
            let naming = |s: &str| self.naming_of(s);
            self.held = Arc::new(Held::build(&self.held_ids, &naming, limit));
        }
        let claims = self.generations.iter().flat_map(|(server, g)| {
            g.entries.iter().map(move |e| claims::Claim {
                name: &e.qualified,
                server,
                stamp: g.stamp,
            })
        });
        let (holders, collisions) = claims::settle(NameKind::Tool, claims, &self.tool_holders);
        let mut tools: Vec<Arc<ToolEntry>> = self
            .generations
            .values()
            .flat_map(|g| g.entries.iter())
            .filter(|t| holders.get(&t.qualified) == Some(&t.server))
            .cloned()
            .collect();
        self.tool_holders = holders;
        self.tool_collisions = collisions;
        tools.sort_by(|a, b| a.qualified.cmp(&b.qualified));
        let index = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.qualified.clone(), i))
            .collect();
        let mut prefixes: HashMap<String, Option<Arc<str>>> = HashMap::new();
        let mut unprefixed = Vec::new();
        for server in servers.keys() {
            let prefix = self.naming_of(server).prefix;
            if prefix.is_empty() {
                unprefixed.push(server.clone());
            } else {
                prefixes
                    .entry(prefix)
                    .and_modify(|holder| *holder = None)
                    .or_insert_with(|| Some(server.clone()));
            }
        }
        let prefixes = prefixes
            .into_iter()
            .filter_map(|(p, s)| Some((p, s?)))
            .collect();
        Catalog {
            search: self.search.index(&tools),
            tools,
            index,
            prefixes,
            unprefixed,
            servers,
            tools_version: self.version,
            surface: self.surface.clone(),
            prompts_version: self.prompts_version,
            resources_version: self.resources_version,
            held: self.held.clone(),
            live: Live::default(),
        }
    }

    /// Presents every server's prompts under its naming, settles shared prompt names,
    /// and rebuilds the surface.
    fn rebuild_surface(&mut self) {
        let limit = self.name_limit.max(48);
        let namings: BTreeMap<&Arc<str>, Naming> = self
            .lists
            .keys()
            .filter(|(_, k)| *k == ListKind::Prompts)
            .map(|(s, _)| (s, self.naming_of(s)))
            .collect();
        let presented: Vec<(String, &Arc<str>, u64)> = namings
            .iter()
            .flat_map(|(server, naming)| {
                let stamp = self.prompt_stamps.get(*server).copied().unwrap_or(0);
                self.lists
                    .get(&((*server).clone(), ListKind::Prompts))
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p.get("name").and_then(Value::as_str))
                    .map(move |name| (naming.prompt(name, limit), *server, stamp))
            })
            .collect();
        let claims = presented.iter().map(|(name, server, stamp)| claims::Claim {
            name,
            server,
            stamp: *stamp,
        });
        let (holders, collisions) = claims::settle(NameKind::Prompt, claims, &self.prompt_holders);
        let name = |server: &Arc<str>, original: &str| match namings.get(server) {
            Some(n) => n.prompt(original, limit),
            None => Naming::prefixed(server).prompt(original, limit),
        };
        let holds = |server: &Arc<str>, presented: &str| holders.get(presented) == Some(server);
        self.surface = Arc::new(Surface::build(&self.lists, &name, &holds));
        self.prompt_holders = holders;
        self.prompt_collisions = collisions;
    }
}

#[cfg(test)]
mod tests;
