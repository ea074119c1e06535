//! Definitions held for a person's approval, by the names agents would use.
//!
//! A call to one is answered "held, approve it", never "unknown", and never with its
//! text.

use mcpd_wire::protocol::naming::Naming;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// What a held definition is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HeldKind {
    Tool,
    Prompt,
    Resource,
}

/// The held definitions of every server, by presented name (tools and prompts) or by
/// server and URI (resources).
#[derive(Debug, Default)]
pub struct Held {
    pub tools: HashMap<String, Arc<str>>,
    pub prompts: HashMap<String, Arc<str>>,
    pub resources: HashSet<(Arc<str>, String)>,
}

impl Held {
    /// Presents `ids` (each server's own names) under each server's naming.
    pub fn build(
        ids: &BTreeMap<(Arc<str>, HeldKind), Vec<String>>,
        naming: &dyn Fn(&str) -> Naming,
        limit: usize,
    ) -> Held {
        let mut held = Held::default();
        for ((server, kind), ids) in ids {
            let naming = naming(server);
            for id in ids {
                match kind {
                    HeldKind::Tool => {
                        held.tools.insert(naming.tool(id, limit), server.clone());
                    }
                    HeldKind::Prompt => {
                        held.prompts
                            .insert(naming.prompt(id, limit), server.clone());
                    }
                    HeldKind::Resource => {
                        held.resources.insert((server.clone(), id.clone()));
                    }
                }
            }
        }
        held
    }
}
