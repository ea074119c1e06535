//! The catalog's search index, kept per server.
//!
//! A new snapshot reuses the segment of every server whose tools are the same entries as
//! before, so a server's new list rebuilds only its own part.

use super::ToolEntry;
use crate::discovery::{Index, Segment};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A server's tools as last indexed, and their segment.
type Indexed = (Vec<Arc<ToolEntry>>, Arc<Segment>);

/// Each server's tools as last indexed, and their segment.
#[derive(Debug, Default)]
pub(super) struct SearchCache {
    segments: BTreeMap<Arc<str>, Indexed>,
    index: Arc<Index>,
}

impl SearchCache {
    /// The index of `tools` (sorted by qualified name, as the catalog keeps them).
    pub(super) fn index(&mut self, tools: &[Arc<ToolEntry>]) -> Arc<Index> {
        let mut by_server: BTreeMap<Arc<str>, Vec<Arc<ToolEntry>>> = BTreeMap::new();
        for t in tools {
            by_server
                .entry(t.server.clone())
                .or_default()
                .push(t.clone());
        }
        let same = |a: &[Arc<ToolEntry>], b: &[Arc<ToolEntry>]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| Arc::ptr_eq(x, y))
        };
        let unchanged = by_server.len() == self.segments.len()
            && by_server
                .iter()
                .all(|(s, list)| self.segments.get(s).is_some_and(|(old, _)| same(old, list)));
        if unchanged {
            return self.index.clone();
        }
        let mut segments = BTreeMap::new();
        for (server, list) in by_server {
            let segment = match self.segments.remove(&server) {
                Some((old, seg)) if same(&old, &list) => seg,
                _ => {
                    let parsed: Vec<serde_json::Value> = list.iter().map(|t| t.parsed()).collect();
                    Arc::new(Segment::build(
                        list.iter().map(|t| t.qualified.as_str()).zip(&parsed),
                    ))
                }
            };
            segments.insert(server, (list, segment));
        }
        self.segments = segments;
        self.index = Arc::new(Index::of(
            self.segments
                .iter()
                .map(|(s, (_, seg))| (s.clone(), seg.clone()))
                .collect(),
        ));
        self.index.clone()
    }
}
