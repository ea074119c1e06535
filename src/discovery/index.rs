//! The search index over every tool.
//!
//! BM25F over each tool's name, server prefix, title, description and parameters, built
//! per server so a server's new list rebuilds only its own part.
//!
//! Fields and weights: the tool's own name (3), its title (2), the server prefix (1.5),
//! the description (1), parameter names (1) and parameter descriptions (0.2). A word's
//! weighted count in a tool and the tool's weighted length go into BM25 (k1 = 1.2,
//! b = 0.75) with document frequencies over the whole index; a query word's synonyms
//! count at [`tokens::SYNONYM_WEIGHT`]. Ties break on the qualified name, so results are
//! deterministic.

use super::tokens;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

const K1: f32 = 1.2;
const B: f32 = 0.75;
const W_NAME: f32 = 3.0;
const W_TITLE: f32 = 2.0;
const W_PREFIX: f32 = 1.5;
const W_DESCRIPTION: f32 = 1.0;
const W_PARAM: f32 = 1.0;
const W_PARAM_DESCRIPTION: f32 = 0.2;
/// The most of a query that is read.
const MAX_QUERY_CHARS: usize = 1024;
const MAX_QUERY_WORDS: usize = 32;
/// The longest summary shown for a tool.
const SUMMARY_CHARS: usize = 200;

struct Doc {
    qualified: Box<str>,
    summary: Box<str>,
    len: f32,
}

/// One server's tools, indexed.
pub struct Segment {
    docs: Vec<Doc>,
    /// Word → (tool, weighted count).
    postings: HashMap<Box<str>, Vec<(u32, f32)>>,
    total_len: f32,
}

/// A tool that matched.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit<'a> {
    pub qualified: &'a str,
    pub server: &'a Arc<str>,
    /// The description's first sentence.
    pub summary: &'a str,
    pub score: f32,
}

/// Every server's segment.
#[derive(Default, Clone)]
pub struct Index {
    segments: BTreeMap<Arc<str>, Arc<Segment>>,
    docs: usize,
    total_len: f32,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Index({} tools)", self.docs)
    }
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Segment({} tools)", self.len())
    }
}

impl Segment {
    /// Indexes one server's tools: `(qualified name, definition)` pairs.
    pub fn build<'a>(tools: impl IntoIterator<Item = (&'a str, &'a Value)>) -> Segment {
        let mut docs = Vec::new();
        let mut postings: HashMap<Box<str>, Vec<(u32, f32)>> = HashMap::new();
        let mut total_len = 0.0;
        let mut tools: Vec<(&str, &Value)> = tools.into_iter().collect();
        tools.sort_by_key(|(q, _)| *q);
        for (i, (qualified, def)) in tools.into_iter().enumerate() {
            let mut counts: HashMap<String, f32> = HashMap::new();
            let mut len = 0.0;
            let mut add = |text: &str, weight: f32| {
                for w in tokens::words(text) {
                    *counts.entry(w).or_default() += weight;
                    len += weight;
                }
            };
            let (prefix, own) = qualified
                .split_once(mcpd_wire::protocol::naming::SEPARATOR)
                .unwrap_or(("", qualified));
            add(own, W_NAME);
            add(prefix, W_PREFIX);
            let title = def
                .get("title")
                .or_else(|| def.pointer("/annotations/title"))
                .and_then(Value::as_str)
                .unwrap_or("");
            add(title, W_TITLE);
            let description = def.get("description").and_then(Value::as_str).unwrap_or("");
            add(description, W_DESCRIPTION);
            let props = def
                .pointer("/inputSchema/properties")
                .and_then(Value::as_object);
            for (name, schema) in props.into_iter().flatten() {
                add(name, W_PARAM);
                if let Some(d) = schema.get("description").and_then(Value::as_str) {
                    add(d, W_PARAM_DESCRIPTION);
                }
            }
            let doc = u32::try_from(i).unwrap_or(u32::MAX);
            for (w, c) in counts {
                postings
                    .entry(w.into_boxed_str())
                    .or_default()
                    .push((doc, c));
            }
            total_len += len;
            docs.push(Doc {
                qualified: qualified.into(),
                summary: first_sentence(description).into(),
                len,
            });
        }
        Segment {
            docs,
            postings,
            total_len,
        }
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }
}

impl Index {
    /// An index of these segments; a segment is shared, not copied, so an index for a
    /// new catalog reuses every server's segment whose tools did not change.
    pub fn of(segments: BTreeMap<Arc<str>, Arc<Segment>>) -> Index {
        let docs = segments.values().map(|s| s.docs.len()).sum();
        let total_len = segments.values().map(|s| s.total_len).sum();
        Index {
            segments,
            docs,
            total_len,
        }
    }

    pub fn segment(&self, server: &str) -> Option<&Arc<Segment>> {
        self.segments.get(server)
    }

    pub fn len(&self) -> usize {
        self.docs
    }

    pub fn is_empty(&self) -> bool {
        self.docs == 0
    }

    /// The best `limit` tools for `query` among those `accept(server, qualified)`
    /// allows, best first. An empty or `*` query lists tools by server and name.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        accept: impl Fn(&str, &str) -> bool,
    ) -> Vec<Hit<'_>> {
        // A query is a request in a few words: only its first ones are read, so a huge
        // one costs no more than a short one.
        let query = query.trim();
        let head = match query.char_indices().nth(MAX_QUERY_CHARS) {
            Some((i, _)) => query.get(..i).unwrap_or(query),
            None => query,
        };
        let mut words = tokens::words(head);
        words.truncate(MAX_QUERY_WORDS);
        if query.is_empty() || query == "*" || words.is_empty() {
            return self
                .segments
                .iter()
                .flat_map(|(server, seg)| seg.docs.iter().map(move |d| (server, d)))
                .filter(|(server, d)| accept(server, &d.qualified))
                .take(limit)
                .map(|(server, d)| hit(server, d, 0.0))
                .collect();
        }
        // Query words count once each; synonyms of them count less.
        let mut terms: Vec<(&str, f32)> = Vec::new();
        for w in &words {
            if !terms.iter().any(|(t, _)| t == w) {
                terms.push((w, 1.0));
            }
        }
        for w in &words {
            for s in tokens::synonyms(w) {
                if !terms.iter().any(|(t, _)| *t == s) {
                    terms.push((s, tokens::SYNONYM_WEIGHT));
                }
            }
        }
        let n = self.docs.max(1) as f32;
        let avg = (self.total_len / n).max(1.0);
        let mut scores: HashMap<(&Arc<str>, u32), f32> = HashMap::new();
        for (term, weight) in terms {
            let df: usize = self
                .segments
                .values()
                .filter_map(|s| s.postings.get(term))
                .map(Vec::len)
                .sum();
            if df == 0 {
                continue;
            }
            let idf = (1.0 + (n - df as f32 + 0.5) / (df as f32 + 0.5)).ln();
            for (server, seg) in &self.segments {
                let Some(list) = seg.postings.get(term) else {
                    continue;
                };
                for &(doc, tf) in list {
                    let Some(d) = seg.docs.get(doc as usize) else {
                        continue;
                    };
                    let norm = K1 * (1.0 - B + B * d.len / avg);
                    *scores.entry((server, doc)).or_default() +=
                        weight * idf * tf * (K1 + 1.0) / (tf + norm);
                }
            }
        }
        let mut hits: Vec<Hit<'_>> = scores
            .into_iter()
            .filter_map(|((server, doc), score)| {
                let d = self.segments.get(server)?.docs.get(doc as usize)?;
                accept(server, &d.qualified).then(|| hit(server, d, score))
            })
            .collect();
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.qualified.cmp(b.qualified))
        });
        hits.truncate(limit);
        hits
    }
}

fn hit<'a>(server: &'a Arc<str>, d: &'a Doc, score: f32) -> Hit<'a> {
    Hit {
        qualified: &d.qualified,
        server,
        summary: &d.summary,
        score,
    }
}

/// A description's first sentence (or line), at most [`SUMMARY_CHARS`] characters.
pub fn first_sentence(text: &str) -> String {
    let text = text.trim();
    let line = text.lines().next().unwrap_or("");
    let end = line
        .match_indices(". ")
        .map(|(i, _)| i + 1)
        .next()
        .unwrap_or(line.len());
    let sentence = line.get(..end).unwrap_or(line);
    if sentence.chars().count() <= SUMMARY_CHARS {
        return sentence.to_owned();
    }
    let cut: String = sentence.chars().take(SUMMARY_CHARS - 1).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn index() -> Index {
        let fs = [
            json!({"name": "fs__read_file", "description": "Read a file's contents. Any size.",
                "inputSchema": {"properties": {"path": {"description": "where the file is"}}}}),
            json!({"name": "fs__write_file", "description": "Write text to a file."}),
            json!({"name": "fs__list_directory", "description": "List a directory's entries."}),
        ];
        let git = [
            json!({"name": "git__git_status", "description": "Shows the working tree status."}),
            json!({"name": "git__git_diff_unstaged", "description": "Shows changes not yet staged."}),
        ];
        let seg = |tools: &[Value]| {
            Arc::new(Segment::build(
                tools.iter().map(|t| (t["name"].as_str().unwrap_or(""), t)),
            ))
        };
        Index::of(BTreeMap::from([
            (Arc::from("fs"), seg(&fs)),
            (Arc::from("git"), seg(&git)),
        ]))
    }

    #[test]
    fn the_best_tool_ranks_first_and_results_are_deterministic() {
        let ix = index();
        let all = |_: &str, _: &str| true;
        let hits = ix.search("show the contents of a file", 3, all);
        assert_eq!(hits.first().map(|h| h.qualified), Some("fs__read_file"));
        assert_eq!(
            hits.first().map(|h| h.summary),
            Some("Read a file's contents.")
        );
        assert_eq!(
            ix.search("unstaged changes", 1, all)[0].qualified,
            "git__git_diff_unstaged"
        );
        assert_eq!(
            ix.search("folder entries", 1, all)[0].qualified,
            "fs__list_directory"
        );
        assert_eq!(
            ix.search("x y z read", 5, all),
            ix.search("x y z read", 5, all)
        );
    }

    #[test]
    fn a_huge_query_costs_what_its_first_words_cost() {
        let ix = index();
        // Only the first words are read: the rest, however long, changes nothing.
        let huge = format!("unstaged changes {}", "file ".repeat(200_000));
        let hits = ix.search(&huge, 1, |_, _| true);
        assert_eq!(hits[0].qualified, "git__git_diff_unstaged");
    }

    #[test]
    fn only_accepted_tools_are_found_and_star_lists_by_server() {
        let ix = index();
        let hits = ix.search("file", 10, |s, _| s == "git");
        assert!(hits.iter().all(|h| &**h.server == "git"), "{hits:?}");
        let listed: Vec<&str> = ix
            .search("*", 4, |_, _| true)
            .iter()
            .map(|h| h.qualified)
            .collect();
        assert_eq!(
            listed,
            [
                "fs__list_directory",
                "fs__read_file",
                "fs__write_file",
                "git__git_diff_unstaged"
            ]
        );
    }
}
