//! The catalog agents see: every server's tools under qualified names, swapped one generation at a time. No IO.
//!
//! The supervisor alone owns the `Registry` and publishes each new `Catalog` through a
//! `watch` channel; agents read an `Arc<Catalog>` snapshot, so a reader sees one whole
//! generation of every server, never a mix.

pub mod surface;

use crate::protocol::naming;
use crate::upstream::UpstreamHandle;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;
pub use surface::{Entry, Kind, Surface};

/// Tools returned per `tools/list` page to agents.
pub const PAGE_SIZE: usize = 500;

/// One tool as agents see it.
#[derive(Debug, Clone)]
pub struct ToolEntry {
    /// The name agents call it by.
    pub qualified: String,
    pub server: Arc<str>,
    /// The server's own name for it.
    pub original: String,
    /// The server's definition with `name` replaced by the qualified name.
    pub definition: Value,
}

/// Whether calls to a server can be made now, and if not, what to tell the caller.
#[derive(Debug, Clone)]
pub enum Availability {
    Ready(UpstreamHandle),
    /// Starting: a call may wait this long for it to be ready.
    Starting {
        wait: std::time::Duration,
    },
    Backoff {
        attempt: u32,
        retry_at: Instant,
    },
    Failed {
        reason: String,
    },
    Stopped,
    /// Not running until a call needs it (`start = "lazy"` or `idle_timeout`); a call
    /// starts it and may wait this long.
    Idle {
        wait: std::time::Duration,
    },
    /// Each agent gets its own instance (`share = "agent"`); a call starts the caller's
    /// and may wait this long.
    PerAgent {
        wait: std::time::Duration,
    },
}

impl Availability {
    /// Finishes the sentence "server 'x' is …" for an agent.
    pub fn explain(&self) -> String {
        match self {
            Availability::Ready(_) => "ready".into(),
            Availability::Starting { .. } => {
                "still starting and did not become ready in time; retry in a moment".into()
            }
            Availability::Backoff { attempt, retry_at } => {
                let wait = retry_at.saturating_duration_since(Instant::now());
                format!(
                    "restarting (attempt {attempt}, next try in {})",
                    humantime::format_duration(std::time::Duration::from_millis(
                        wait.as_millis() as u64
                    ))
                )
            }
            Availability::Failed { reason } => format!(
                "failed and will not be restarted automatically ({reason}); fix it and run `mcpd ctl restart`"
            ),
            Availability::Stopped => {
                "stopped (disabled in the config or by `mcpd ctl stop`)".into()
            }
            Availability::Idle { .. } => "idle and could not be started".into(),
            Availability::PerAgent { .. } => "run per agent".into(),
        }
    }
}

/// An immutable snapshot of everything agents can list and call.
#[derive(Debug, Default)]
pub struct Catalog {
    /// Sorted by qualified name, so listings are deterministic. Shared with the
    /// registry's generations, so a new snapshot copies pointers, not definitions.
    tools: Vec<Arc<ToolEntry>>,
    index: HashMap<String, usize>,
    /// Every configured server and whether it can take calls.
    pub servers: BTreeMap<Arc<str>, Availability>,
    /// Changes whenever the set of tools or a definition changes, and only then.
    pub tools_version: u64,
    /// Every server's prompts, resources and templates.
    pub surface: Arc<Surface>,
    /// Change when the prompts, or the resources and templates, change.
    pub prompts_version: u64,
    pub resources_version: u64,
    /// The cache hints mcpd puts on its listings for modern agents.
    pub cache: CacheHint,
}

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

impl Catalog {
    pub fn tool(&self, qualified: &str) -> Option<&ToolEntry> {
        self.index.get(qualified).map(|i| &*self.tools[*i])
    }

    pub fn tools(&self) -> &[Arc<ToolEntry>] {
        &self.tools
    }

    /// One page of tools after the cursor, and the cursor of the next page if any.
    pub fn page(
        &self,
        cursor: Option<&str>,
    ) -> Result<(&[Arc<ToolEntry>], Option<String>), String> {
        let start = match cursor {
            None => 0,
            Some(c) => {
                let after = decode_cursor(c).ok_or_else(|| format!("invalid cursor {c:?}"))?;
                self.tools
                    .partition_point(|t| t.qualified.as_str() <= after.as_str())
            }
        };
        let end = (start + PAGE_SIZE).min(self.tools.len());
        let page = &self.tools[start..end];
        let next = (end < self.tools.len()).then(|| encode_cursor(&self.tools[end - 1].qualified));
        Ok((page, next))
    }
}

/// One page of prompts, resources or templates after the cursor, and the next cursor.
pub fn page_entries<'a>(
    items: &'a [Arc<Entry>],
    cursor: Option<&str>,
) -> Result<(&'a [Arc<Entry>], Option<String>), String> {
    let start = match cursor {
        None => 0,
        Some(c) => {
            let after = decode_cursor(c).ok_or_else(|| format!("invalid cursor {c:?}"))?;
            items.partition_point(|e| e.presented.as_str() <= after.as_str())
        }
    };
    let end = (start + PAGE_SIZE).min(items.len());
    let next = (end < items.len()).then(|| encode_cursor(&items[end - 1].presented));
    Ok((&items[start..end], next))
}

/// Cursors name the last tool of the page (hex-encoded to keep them opaque), so a page
/// boundary stays right even when the catalog changes between pages.
fn encode_cursor(last: &str) -> String {
    last.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_cursor(c: &str) -> Option<String> {
    if !c.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..c.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(c.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// Why a server's new tool list was not taken.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenerationError {
    #[error("tool #{index} has no string \"name\"")]
    Unnamed { index: usize },
    #[error("tools {first:?} and {second:?} both map to the name {qualified:?}")]
    Duplicate {
        qualified: String,
        first: String,
        second: String,
    },
}

/// Every server's current tool generation. Owned by the supervisor.
#[derive(Debug, Default)]
pub struct Registry {
    generations: BTreeMap<Arc<str>, Vec<Arc<ToolEntry>>>,
    version: u64,
    /// Each server's last good prompt, resource and template lists, as it sent them.
    lists: BTreeMap<(Arc<str>, Kind), Vec<Value>>,
    prompts_version: u64,
    resources_version: u64,
    /// The presented surface, rebuilt only when a list changed.
    surface: Arc<Surface>,
    surface_stale: bool,
    name_limit: usize,
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
        let mut entries = Vec::with_capacity(tools.len());
        let mut seen: HashMap<String, String> = HashMap::new();
        for (index, tool) in tools.iter().enumerate() {
            let Some(original) = tool.get("name").and_then(Value::as_str) else {
                return Err(GenerationError::Unnamed { index });
            };
            let qualified = naming::qualify(server, original, limit);
            if let Some(first) = seen.insert(qualified.clone(), original.to_owned()) {
                return Err(GenerationError::Duplicate {
                    qualified,
                    first,
                    second: original.to_owned(),
                });
            }
            let mut definition = tool.clone();
            if let Some(obj) = definition.as_object_mut() {
                obj.insert("name".into(), Value::String(qualified.clone()));
            }
            entries.push(Arc::new(ToolEntry {
                qualified,
                server: server.clone(),
                original: original.to_owned(),
                definition,
            }));
        }
        let n = entries.len();
        let same = self.generations.get(server).is_some_and(|old| {
            old.len() == n
                && old
                    .iter()
                    .zip(&entries)
                    .all(|(a, b)| a.definition == b.definition)
        });
        if !same {
            self.version += 1;
            self.generations.insert(server.clone(), entries);
        }
        Ok(n)
    }

    pub fn tool_count(&self, server: &str) -> usize {
        self.generations.get(server).map_or(0, |g| g.len())
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
        kind: Kind,
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
            Kind::Prompts => self.prompts_version += 1,
            Kind::Resources | Kind::Templates => self.resources_version += 1,
        }
        self.name_limit = limit;
        self.surface_stale = true;
        true
    }

    /// How many prompts and resources a server has, for status.
    pub fn list_count(&self, server: &str, kind: Kind) -> usize {
        self.lists
            .iter()
            .filter(|((s, k), _)| &**s == server && *k == kind)
            .map(|(_, v)| v.len())
            .sum()
    }

    /// A new snapshot for agents.
    pub fn catalog(&mut self, servers: BTreeMap<Arc<str>, Availability>) -> Catalog {
        if std::mem::take(&mut self.surface_stale) {
            self.surface = Arc::new(Surface::build(&self.lists, self.name_limit.max(48)));
        }
        let mut tools: Vec<Arc<ToolEntry>> = self
            .generations
            .values()
            .flat_map(|g| g.iter().cloned())
            .collect();
        tools.sort_by(|a, b| a.qualified.cmp(&b.qualified));
        // Server names contain no '_', so qualified names of different servers never
        // collide; this keeps the first just in case the invariant is ever broken.
        let mut names = HashSet::new();
        tools.retain(|t| names.insert(t.qualified.clone()));
        let index = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.qualified.clone(), i))
            .collect();
        Catalog {
            tools,
            index,
            servers,
            tools_version: self.version,
            cache: CacheHint::default(),
            surface: self.surface.clone(),
            prompts_version: self.prompts_version,
            resources_version: self.resources_version,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(c: &Catalog) -> Vec<&str> {
        c.tools().iter().map(|t| t.qualified.as_str()).collect()
    }

    #[test]
    fn generations_are_replaced_whole_or_not_at_all() {
        let mut r = Registry::default();
        let a: Arc<str> = "a".into();
        let b: Arc<str> = "b".into();
        assert_eq!(
            r.replace(&b, &[json!({"name": "z"}), json!({"name": "y"})], 64),
            Ok(2)
        );
        assert_eq!(r.replace(&a, &[json!({"name": "x"})], 64), Ok(1));
        let err = r.replace(&a, &[json!({"name": "q"}), json!({"name": "q"})], 64);
        assert!(
            matches!(err, Err(GenerationError::Duplicate { .. })),
            "{err:?}"
        );
        assert_eq!(
            r.replace(&a, &[json!({"title": "no name"})], 64),
            Err(GenerationError::Unnamed { index: 0 })
        );
        let c = r.catalog(BTreeMap::new());
        assert_eq!(names(&c), vec!["a__x", "b__y", "b__z"]);
        let t = c.tool("b__y").unwrap();
        assert_eq!((t.original.as_str(), &*t.server), ("y", "b"));
        assert_eq!(t.definition["name"], "b__y");
    }

    #[test]
    fn pages_follow_cursors_to_the_end() {
        let mut r = Registry::default();
        let s: Arc<str> = "s".into();
        let tools: Vec<Value> = (0..1234)
            .map(|i| json!({ "name": format!("t{i:04}") }))
            .collect();
        r.replace(&s, &tools, 64).unwrap();
        let c = r.catalog(BTreeMap::new());
        let mut all = Vec::new();
        let mut cursor = None;
        loop {
            let (page, next) = c.page(cursor.as_deref()).unwrap();
            all.extend(page.iter().map(|t| t.qualified.clone()));
            match next {
                Some(n) => cursor = Some(n),
                None => break,
            }
        }
        assert_eq!(all.len(), 1234);
        assert!(all.windows(2).all(|w| w[0] < w[1]));
        assert!(c.page(Some("zz")).is_err());
    }
}
