//! Who holds a name that several servers present (empty or shared prefixes, renames).
//!
//! The server that had it first keeps it, and the others' claims are rejected and
//! reported. No IO.
//!
//! "First" is by arrival: every generation of a server's tools (or prompts) gets a stamp
//! from one counter when its content or naming changes. A holder keeps its name for as
//! long as its lists still present it, whatever arrived since; when it stops presenting
//! it (it dropped the tool, was renamed, or was removed from the config) the name goes to
//! the claimant whose generation is oldest, at the next rebuild.

use std::collections::HashMap;
use std::sync::Arc;

/// Which namespace a name lives in: tools and prompts are listed separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NameKind {
    Tool,
    Prompt,
}

impl NameKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NameKind::Tool => "tool",
            NameKind::Prompt => "prompt",
        }
    }
}

/// A name `server` presents that `holder` already holds; agents do not see `server`'s.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Collision {
    pub kind: NameKind,
    /// The presented name both claim.
    pub name: String,
    /// The server whose claim was rejected.
    pub server: Arc<str>,
    /// The server agents reach under that name.
    pub holder: Arc<str>,
}

/// One server's claim to a presented name, with the stamp of the generation it came in.
pub struct Claim<'a> {
    pub name: &'a str,
    pub server: &'a Arc<str>,
    pub stamp: u64,
}

/// The holder of every claimed name, and the rejected claims. `previous` is the last
/// settlement: its holder keeps a name it still claims.
pub fn settle<'a>(
    kind: NameKind,
    claims: impl IntoIterator<Item = Claim<'a>>,
    previous: &HashMap<String, Arc<str>>,
) -> (HashMap<String, Arc<str>>, Vec<Collision>) {
    let mut by_name: HashMap<&str, Vec<(&Arc<str>, u64)>> = HashMap::new();
    for c in claims {
        let v = by_name.entry(c.name).or_default();
        // A server may present a name twice (two prompts mapped alike); one claim counts.
        match v.iter_mut().find(|(s, _)| *s == c.server) {
            Some(existing) => existing.1 = existing.1.min(c.stamp),
            None => v.push((c.server, c.stamp)),
        }
    }
    let mut holders = HashMap::with_capacity(by_name.len());
    let mut collisions = Vec::new();
    for (name, servers) in by_name {
        let kept = previous
            .get(name)
            .and_then(|p| servers.iter().find(|(s, _)| *s == p));
        let Some(&(holder, _)) =
            kept.or_else(|| servers.iter().min_by(|a, b| (a.1, a.0).cmp(&(b.1, b.0))))
        else {
            continue;
        };
        for (s, _) in &servers {
            if *s != holder {
                collisions.push(Collision {
                    kind,
                    name: name.to_owned(),
                    server: (*s).clone(),
                    holder: holder.clone(),
                });
            }
        }
        holders.insert(name.to_owned(), holder.clone());
    }
    collisions.sort();
    (holders, collisions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(
        claims: &[(&str, &str, u64)],
        previous: &[(&str, &str)],
        holders: &[(&str, &str)],
        rejected: &[(&str, &str)],
    ) {
        let servers: Vec<Arc<str>> = claims.iter().map(|c| Arc::from(c.1)).collect();
        let claims = claims.iter().zip(&servers).map(|((n, _, st), s)| Claim {
            name: n,
            server: s,
            stamp: *st,
        });
        let previous = previous
            .iter()
            .map(|(n, s)| ((*n).to_owned(), Arc::from(*s)))
            .collect();
        let (got, collisions) = settle(NameKind::Tool, claims, &previous);
        let mut got: Vec<(&str, &str)> = got.iter().map(|(n, s)| (n.as_str(), &**s)).collect();
        got.sort();
        assert_eq!(got, holders);
        let rejected_got: Vec<(&str, &str)> = collisions
            .iter()
            .map(|c| (c.name.as_str(), &*c.server))
            .collect();
        assert_eq!(rejected_got, rejected);
    }

    #[test]
    fn the_older_generation_holds_a_shared_name_until_it_drops_it() {
        // b arrived first, so it holds "x"; a's "y" is uncontested.
        check(
            &[("x", "a", 5), ("y", "a", 5), ("x", "b", 2)],
            &[],
            &[("x", "b"), ("y", "a")],
            &[("x", "a")],
        );
        // a holds "x" from before; b's newer... or older generation does not take it.
        check(
            &[("x", "a", 9), ("x", "b", 2)],
            &[("x", "a")],
            &[("x", "a")],
            &[("x", "b")],
        );
        // The holder no longer claims it: the oldest remaining claimant gets it.
        check(
            &[("x", "b", 7), ("x", "c", 4)],
            &[("x", "a")],
            &[("x", "c")],
            &[("x", "b")],
        );
        // Same stamp: the server name decides, so the outcome is deterministic.
        check(
            &[("x", "b", 1), ("x", "a", 1)],
            &[],
            &[("x", "a")],
            &[("x", "b")],
        );
        // One server presenting a name twice is no collision.
        check(&[("x", "a", 1), ("x", "a", 1)], &[], &[("x", "a")], &[]);
    }
}
