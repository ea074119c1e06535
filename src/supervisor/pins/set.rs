//! One server's pins: its approved definitions and the ones held for a person.
//!
//! Also the gate every list of the server passes (no IO here).

use super::canon::{Kind, Pinned, fingerprint_of};
use crate::config::PinMode;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// An approved definition: its fingerprint and the definition whole (shown beside a held
/// change by `ctl diff`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Approved {
    pub sha256: String,
    pub definition: Value,
}

/// A definition waiting for approval.
#[derive(Debug, Clone)]
pub struct Held {
    pub kind: Kind,
    pub pinned: Pinned,
}

/// Whether a first listing is trusted (`trust-first` only).
#[derive(Debug, Clone, PartialEq)]
enum Trust {
    /// The server's first listing is not over: the first list of each kind it sends,
    /// from whichever of its connections (or instances) lists it first, is approved as
    /// it comes; the kinds here have had theirs, and every later list of them is gated.
    /// Ends when one connection's first round of lists is (`first_listing_over`).
    Open(BTreeSet<Kind>),
    /// The server has pins: everything new or changed, of every kind, waits for a
    /// person. A kind its first listing did not list (not declared, or its list failed)
    /// was listed empty, and all of its definitions are new.
    Sealed,
}

/// One server's pins.
#[derive(Debug)]
pub struct PinSet {
    mode: PinMode,
    /// By kind and id.
    approved: BTreeMap<(Kind, String), Approved>,
    held: BTreeMap<(Kind, String), Held>,
    /// The last list of each kind as the server sent it: approval admits from it.
    last: BTreeMap<Kind, Vec<Value>>,
    trust: Trust,
    /// Why the pin file could not be used: then nothing of the server is served.
    broken: Option<String>,
    /// Changed since it was last saved.
    pub dirty: bool,
}

/// The definitions `approve` found nothing to match.
#[derive(Debug, thiserror::Error)]
#[error("nothing held is named {}", .0.join(", "))]
pub struct NotHeld(pub Vec<String>);

impl PinSet {
    /// A server with no pin file yet.
    pub fn new(mode: PinMode) -> PinSet {
        PinSet {
            mode,
            approved: BTreeMap::new(),
            held: BTreeMap::new(),
            last: BTreeMap::new(),
            trust: Trust::Open(BTreeSet::new()),
            broken: None,
            dirty: false,
        }
    }

    /// A server whose pin file held `approved`.
    pub fn loaded(mode: PinMode, approved: BTreeMap<(Kind, String), Approved>) -> PinSet {
        PinSet {
            approved,
            trust: Trust::Sealed,
            ..PinSet::new(mode)
        }
    }

    /// A server whose pin file could not be read: everything it lists is held.
    pub fn broken(mode: PinMode, why: String) -> PinSet {
        PinSet {
            broken: Some(why),
            trust: Trust::Sealed,
            ..PinSet::new(mode)
        }
    }

    pub fn mode(&self) -> PinMode {
        self.mode
    }

    pub fn set_mode(&mut self, mode: PinMode) {
        self.mode = mode;
    }

    pub fn broken_why(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    pub fn approved(&self) -> &BTreeMap<(Kind, String), Approved> {
        &self.approved
    }

    pub fn held(&self) -> impl Iterator<Item = &Held> {
        self.held.values()
    }

    pub fn held_count(&self) -> usize {
        self.held.len()
    }

    /// The gate: the items of a `kind` list that agents may see. `instance` is the
    /// connection that sent it (None for a list read from the catalog cache at start).
    pub fn admit(&mut self, kind: Kind, instance: Option<u64>, raw: Vec<Value>) -> Vec<Value> {
        if self.mode == PinMode::Off {
            self.held.retain(|(k, _), _| *k != kind);
            return raw;
        }
        // A cached list of a server never pinned is not what it shows now: it waits for
        // the server.
        if instance.is_none() && matches!(&self.trust, Trust::Open(kinds) if kinds.is_empty()) {
            return Vec::new();
        }
        let trusted = self.mode == PinMode::TrustFirst
            && self.broken.is_none()
            && self.trusts(kind, instance);
        self.held.retain(|(k, _), _| *k != kind);
        let mut out = Vec::with_capacity(raw.len());
        for item in &raw {
            // Hashed in place; copied only when kept or held.
            let Some((id, sha256)) = fingerprint_of(kind, item) else {
                out.push(item.clone()); // no id: the registry refuses it
                continue;
            };
            let key = (kind, id.to_owned());
            let approved = self.broken.is_none()
                && self.approved.get(&key).is_some_and(|a| a.sha256 == sha256);
            if approved {
                out.push(item.clone());
            } else if trusted {
                let definition = item.clone();
                self.approved.insert(key, Approved { sha256, definition });
                self.dirty = true;
                out.push(item.clone());
            } else {
                let pinned = Pinned {
                    id: key.1.clone(),
                    definition: item.clone(),
                    sha256,
                };
                self.held.insert(key, Held { kind, pinned });
            }
        }
        self.last.insert(kind, raw);
        out
    }

    /// A connection's first round of lists is over: each kind its capabilities declare
    /// has been listed or has failed to be (or the connection ended after some had).
    /// The server's first listing is then over, and it has pins: every later list of
    /// every kind is gated, the kinds not listed counting as listed empty. Marked dirty
    /// either way, so that even a first listing with nothing in it leaves a pin file,
    /// which says the same after a restart.
    pub fn first_listing_over(&mut self) {
        if self.mode == PinMode::TrustFirst && matches!(self.trust, Trust::Open(_)) {
            self.trust = Trust::Sealed;
            self.dirty = true;
        }
    }

    /// After `forget` or a new mode admitted what the server last showed as a first
    /// listing: that listing is over too (a server that has shown nothing yet waits for
    /// its next connection's first round).
    pub fn first_listing_shown(&mut self) {
        if !self.last.is_empty() {
            self.first_listing_over();
        }
    }

    /// Whether this list is a first listing trust-first approves (the first of its kind
    /// from a connection), marking the kind as listed.
    fn trusts(&mut self, kind: Kind, instance: Option<u64>) -> bool {
        match (&mut self.trust, instance) {
            (Trust::Open(kinds), Some(_)) => kinds.insert(kind),
            _ => false,
        }
    }

    /// Approves the held definitions named (by id), or all with no names; the kinds
    /// whose admitted list changed.
    pub fn approve(&mut self, names: &[String]) -> Result<BTreeSet<Kind>, NotHeld> {
        let missing: Vec<String> = names
            .iter()
            .filter(|n| !self.held.keys().any(|(_, id)| id == *n))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(NotHeld(missing));
        }
        let chosen: Vec<(Kind, String)> = self
            .held
            .keys()
            .filter(|(_, id)| names.is_empty() || names.contains(id))
            .cloned()
            .collect();
        let mut kinds = BTreeSet::new();
        for key in chosen {
            if let Some(h) = self.held.remove(&key) {
                kinds.insert(h.kind);
                let a = Approved {
                    sha256: h.pinned.sha256,
                    definition: h.pinned.definition,
                };
                self.approved.insert(key, a);
            }
        }
        if self.broken.take().is_some() {
            // A person approved what the server shows now: that is the new pin file.
            kinds.extend(self.last.keys().copied());
        }
        self.trust = Trust::Sealed;
        self.dirty = true;
        Ok(kinds)
    }

    /// The items of the last `kind` list that agents may see now: after an approval,
    /// those approved; after `forget`, the list as a first listing.
    pub fn readmit_or_trust(&mut self, kind: Kind) -> Option<Vec<Value>> {
        let raw = self.last.get(&kind)?.clone();
        // Instance 0 is no connection's (they count from 1): `forget`'s own listing.
        let instance = match &self.trust {
            Trust::Open(_) => Some(0),
            Trust::Sealed => None,
        };
        Some(self.admit(kind, instance, raw))
    }

    /// Forgets every pin: what the server shows is a first listing again.
    pub fn forget(&mut self) {
        let last = std::mem::take(&mut self.last);
        *self = PinSet::new(self.mode);
        self.last = last;
        self.dirty = true;
    }

    /// The ids of held definitions of `kind`, as the server names them.
    pub fn held_ids(&self, kind: Kind) -> Vec<String> {
        self.held
            .keys()
            .filter(|(k, _)| *k == kind)
            .map(|(_, id)| id.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, description: &str) -> Value {
        json!({"name": name, "description": description, "inputSchema": {"type": "object"}})
    }

    fn names(items: &[Value]) -> Vec<&str> {
        items.iter().filter_map(|t| t["name"].as_str()).collect()
    }

    #[test]
    fn trust_first_approves_the_first_listing_then_holds_changes_additions_and_renames() {
        let mut s = PinSet::new(PinMode::TrustFirst);
        let first = vec![tool("a", "adds"), tool("b", "bees")];
        assert_eq!(names(&s.admit(Kind::Tool, Some(1), first)), ["a", "b"]);
        assert!(s.dirty);
        // Its first prompt list is a first listing too.
        let p = vec![json!({"name": "p", "description": "a prompt"})];
        assert_eq!(s.admit(Kind::Prompt, Some(1), p).len(), 1);
        // Its next tool list is a change.
        let changed = vec![
            tool("a", "IGNORE PREVIOUS"),
            tool("b", "bees"),
            tool("c", "new"),
        ];
        assert_eq!(names(&s.admit(Kind::Tool, Some(1), changed)), ["b"]);
        assert_eq!(s.held_ids(Kind::Tool), ["a", "c"]);
        // A rename is a new definition.
        let renamed = vec![tool("a", "adds"), tool("bb", "bees")];
        assert_eq!(names(&s.admit(Kind::Tool, Some(2), renamed)), ["a"]);
        assert_eq!(s.held_ids(Kind::Tool), ["bb"]);
        // A later prompt list, from any connection, is gated.
        let more = vec![
            json!({"name": "p", "description": "a prompt"}),
            json!({"name": "q"}),
        ];
        assert_eq!(s.admit(Kind::Prompt, Some(2), more).len(), 1);
        assert_eq!(s.held_count(), 2);
    }

    #[test]
    fn instances_listing_at_once_each_get_the_first_listing_of_a_kind_not_yet_listed() {
        let mut s = PinSet::new(PinMode::TrustFirst);
        let tools = vec![tool("a", "x")];
        assert_eq!(s.admit(Kind::Tool, Some(1), tools.clone()).len(), 1);
        assert_eq!(
            s.admit(Kind::Tool, Some(2), tools).len(),
            1,
            "the same, gated"
        );
        // The first instance's resources come after the second's tools: still its first.
        let r = vec![json!({"uri": "x://a", "name": "a"})];
        assert_eq!(s.admit(Kind::Resource, Some(1), r).len(), 1);
        assert_eq!(s.held_count(), 0);
        assert!(
            s.admit(Kind::Tool, Some(2), vec![tool("a", "changed")])
                .is_empty()
        );
        // The second instance's resources come once the first's round is over: gated.
        s.first_listing_over();
        let r2 = vec![
            json!({"uri": "x://a", "name": "a"}),
            json!({"uri": "x://b"}),
        ];
        assert_eq!(s.admit(Kind::Resource, Some(2), r2).len(), 1);
        assert_eq!(s.held_ids(Kind::Resource), ["x://b"]);
    }

    #[test]
    fn once_a_first_listing_is_over_every_kind_is_gated_even_one_never_listed() {
        // The first connection listed tools only (it declared nothing else, or its
        // prompt list failed): its round is over.
        let mut s = PinSet::new(PinMode::TrustFirst);
        assert_eq!(s.admit(Kind::Tool, Some(1), vec![tool("a", "x")]).len(), 1);
        s.dirty = false;
        s.first_listing_over();
        assert!(s.dirty, "the pin file is written: the server has pins");
        // A restart declares prompts and resources: held, every one.
        let p = vec![json!({"name": "p", "description": "new"})];
        assert!(s.admit(Kind::Prompt, Some(2), p).is_empty());
        let r = vec![json!({"uri": "x://a", "name": "a"})];
        assert!(s.admit(Kind::Resource, Some(2), r).is_empty());
        assert_eq!(s.held_count(), 2);
        // The same with an empty first listing: nothing approved, yet it has pins.
        let mut e = PinSet::new(PinMode::TrustFirst);
        assert!(e.admit(Kind::Tool, Some(1), Vec::new()).is_empty());
        e.first_listing_over();
        assert!(e.dirty);
        assert!(
            e.admit(Kind::Tool, Some(2), vec![tool("a", "x")])
                .is_empty()
        );
        assert_eq!(e.held_count(), 1);
    }

    #[test]
    fn a_first_listing_over_changes_nothing_under_approve_or_once_sealed() {
        let mut s = PinSet::new(PinMode::Approve);
        s.first_listing_over();
        assert!(!s.dirty, "approve trusts nothing: no pin file for it");
        let mut l = PinSet::loaded(PinMode::TrustFirst, BTreeMap::new());
        l.first_listing_over();
        assert!(!l.dirty);
    }

    #[test]
    fn after_forget_what_the_server_shows_is_its_first_listing_and_then_it_is_over() {
        let mut s = PinSet::new(PinMode::TrustFirst);
        s.admit(Kind::Tool, Some(1), vec![tool("a", "x")]);
        s.first_listing_over();
        s.forget();
        assert_eq!(names(&s.readmit_or_trust(Kind::Tool).unwrap()), ["a"]);
        assert!(s.readmit_or_trust(Kind::Prompt).is_none(), "never listed");
        s.first_listing_shown();
        // Its first prompt list (after a failed one, say) is gated.
        let p = vec![json!({"name": "p"})];
        assert!(s.admit(Kind::Prompt, Some(1), p).is_empty());
        // A server that has shown nothing waits for its next connection's round.
        let mut n = PinSet::new(PinMode::TrustFirst);
        n.first_listing_shown();
        assert_eq!(n.admit(Kind::Tool, Some(3), vec![tool("a", "x")]).len(), 1);
    }

    #[test]
    fn approving_some_or_all_admits_them_from_the_last_list() {
        let mut s = PinSet::new(PinMode::Approve);
        assert!(
            s.admit(Kind::Tool, Some(1), vec![tool("a", "x"), tool("b", "y")])
                .is_empty()
        );
        assert!(s.approve(&["zzz".into()]).is_err());
        assert_eq!(
            s.approve(&["a".into()]).unwrap(),
            BTreeSet::from([Kind::Tool])
        );
        assert_eq!(names(&s.readmit_or_trust(Kind::Tool).unwrap()), ["a"]);
        s.approve(&[]).unwrap();
        assert_eq!(names(&s.readmit_or_trust(Kind::Tool).unwrap()), ["a", "b"]);
        assert_eq!(s.held_count(), 0);
    }

    #[test]
    fn forget_makes_what_the_server_shows_a_first_listing_again() {
        let mut s = PinSet::new(PinMode::TrustFirst);
        s.admit(Kind::Tool, Some(1), vec![tool("a", "x")]);
        assert!(
            s.admit(Kind::Tool, Some(1), vec![tool("a", "y")])
                .is_empty()
        );
        s.forget();
        assert_eq!(names(&s.readmit_or_trust(Kind::Tool).unwrap()), ["a"]);
        assert_eq!(s.held_count(), 0);
        assert!(
            s.admit(Kind::Tool, Some(2), vec![tool("a", "z")])
                .is_empty()
        );
    }

    #[test]
    fn a_broken_pin_file_holds_everything_until_approved() {
        let mut s = PinSet::broken(PinMode::TrustFirst, "bad".into());
        assert!(
            s.admit(Kind::Tool, Some(1), vec![tool("a", "x")])
                .is_empty()
        );
        assert!(s.admit(Kind::Tool, None, vec![tool("a", "x")]).is_empty());
        s.approve(&[]).unwrap();
        assert!(s.broken_why().is_none());
        assert_eq!(names(&s.readmit_or_trust(Kind::Tool).unwrap()), ["a"]);
    }

    #[test]
    fn a_cached_list_is_gated_and_never_trusted() {
        let mut fresh = PinSet::new(PinMode::TrustFirst);
        assert!(
            fresh
                .admit(Kind::Tool, None, vec![tool("a", "x")])
                .is_empty()
        );
        assert_eq!(fresh.held_count(), 0, "waits for the server instead");
        let mut approved = BTreeMap::new();
        let p = super::super::canon::pin(Kind::Tool, &tool("a", "x")).unwrap();
        approved.insert(
            (Kind::Tool, "a".to_owned()),
            Approved {
                sha256: p.sha256,
                definition: p.definition,
            },
        );
        let mut s = PinSet::loaded(PinMode::TrustFirst, approved);
        let cached = vec![tool("a", "x"), tool("b", "poison")];
        assert_eq!(names(&s.admit(Kind::Tool, None, cached)), ["a"]);
        // A loaded set is sealed: the first connection's list is gated.
        assert_eq!(
            names(&s.admit(Kind::Tool, Some(7), vec![tool("b", "poison")])),
            Vec::<&str>::new()
        );
    }

    #[test]
    fn off_passes_everything() {
        let mut s = PinSet::broken(PinMode::Off, "bad".into());
        assert_eq!(s.admit(Kind::Tool, None, vec![tool("a", "x")]).len(), 1);
    }
}
