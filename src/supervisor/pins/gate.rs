//! The pin gate, a part of the supervisor.
//!
//! Every server's pins asked what of a list agents may see and which of its names are
//! held, and a person's look at, or answer to, what is held. No registry, no slots.

use super::{Kind, NotHeld, PinSet, Pins};
use crate::config::PinMode;
use crate::registry::HeldKind;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio::sync::oneshot;

/// What a person asks of a server's pins.
#[derive(Debug)]
pub enum PinOp {
    /// Each held definition beside its approved one.
    Diff,
    /// Approve the held definitions named (all with none).
    Approve(Vec<String>),
    /// Drop every pin: what the server shows next is a first listing again.
    Forget,
}

/// Why a pin operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("no server named '{0}'")]
    UnknownServer(String),
    #[error("{0}; `mcpd ctl diff SERVER` lists what is held")]
    NotHeld(#[from] NotHeld),
    #[error("approved, but {0}: the approval lasts until mcpd stops")]
    NotSaved(String),
}

/// What of a list agents may see, and what the registry is told is held.
#[derive(Debug, PartialEq)]
pub struct Admitted {
    pub items: Vec<Value>,
    /// The ids of the held definitions of the list's kind (None for templates, which
    /// calls do not name).
    pub held: Option<(HeldKind, Vec<String>)>,
}

/// What a person's operation changed.
#[derive(Debug, PartialEq)]
pub enum Answer {
    /// `ctl diff`'s answer, nothing changed.
    Diff(Value),
    /// These kinds' lists pass the pins again (approved, or forgotten: a first listing).
    Readmit { kinds: BTreeSet<Kind>, forgot: bool },
}

/// Every server's pins, the gate of every list.
pub struct PinGate {
    pins: Pins,
}

impl PinGate {
    pub fn new(pins: Pins) -> PinGate {
        PinGate { pins }
    }

    /// A `kind` list of `server` (from connection `instance`, None for the cache).
    pub fn admit(
        &mut self,
        server: &Arc<str>,
        mode: PinMode,
        kind: Kind,
        instance: Option<u64>,
        raw: Vec<Value>,
    ) -> Admitted {
        let items = self.pins.admit(server, mode, kind, instance, raw);
        Admitted {
            items,
            held: self.held(server, kind),
        }
    }

    /// The held names of `server` of `kind`, as the registry takes them.
    fn held(&self, server: &str, kind: Kind) -> Option<(HeldKind, Vec<String>)> {
        let held = match kind {
            Kind::Tool => HeldKind::Tool,
            Kind::Prompt => HeldKind::Prompt,
            Kind::Resource => HeldKind::Resource,
            Kind::Template => return None,
        };
        let ids = self
            .pins
            .get(server)
            .map(|s| s.held_ids(kind))
            .unwrap_or_default();
        Some((held, ids))
    }

    /// `server`'s first listing is over: under `trust-first`, every later list of every
    /// kind is gated (saved now, so a restart keeps it).
    pub fn first_listing_over(&mut self, server: &Arc<str>, mode: PinMode) {
        self.pins.of(server, mode).first_listing_over();
        self.pins.save_changed();
    }

    /// What `server` showed was a first listing (a new mode or `forget` admitted it
    /// again): that listing is over now.
    pub fn first_listing_shown(&mut self, server: &Arc<str>, mode: PinMode) {
        self.pins.of(server, mode).first_listing_shown();
    }

    /// What `server` last sent of `kind`, through its pins now (None: it sent none).
    pub fn readmit(&mut self, server: &Arc<str>, mode: PinMode, kind: Kind) -> Option<Admitted> {
        let items = self.pins.of(server, mode).readmit_or_trust(kind)?;
        Some(Admitted {
            items,
            held: self.held(server, kind),
        })
    }

    /// How many definitions of `server` wait, and why its pin file cannot be used.
    pub fn view(&self, server: &str) -> Option<mcpd_ctl::control_api::PinView> {
        let set = self.pins.get(server)?;
        Some(mcpd_ctl::control_api::PinView {
            mode: set.mode().as_str().into(),
            held: set.held_count(),
            broken: set.broken_why().map(str::to_owned),
        })
    }

    /// A person's operation on `server`'s pins: what it changed (the caller lists those
    /// kinds again and saves), or why it could not.
    pub fn answer(
        &mut self,
        server: &Arc<str>,
        mode: PinMode,
        op: PinOp,
    ) -> Result<Answer, PinError> {
        let set = self.pins.of(server, mode);
        match op {
            PinOp::Diff => Ok(Answer::Diff(diff(server, set))),
            PinOp::Approve(names) => Ok(Answer::Readmit {
                kinds: set.approve(&names)?,
                forgot: false,
            }),
            PinOp::Forget => {
                set.forget();
                // What it shows now is its first listing, trusted or held by the mode.
                let kinds = [Kind::Tool, Kind::Prompt, Kind::Resource, Kind::Template].into();
                Ok(Answer::Readmit {
                    kinds,
                    forgot: true,
                })
            }
        }
    }

    /// Writes `server`'s pin file; answered once it is on disk.
    pub fn save(&mut self, server: &Arc<str>) -> oneshot::Receiver<Result<(), String>> {
        self.pins.save(server)
    }

    /// Writes the pin files that changed since they were last written.
    pub fn save_changed(&mut self) {
        self.pins.save_changed();
    }
}

/// `ctl diff`'s answer: each held definition beside its approved version, if any.
fn diff(server: &str, set: &PinSet) -> Value {
    let held: Vec<Value> = set
        .held()
        .map(|h| {
            let approved = set
                .approved()
                .get(&(h.kind, h.pinned.id.clone()))
                .map(|a| a.definition.clone());
            json!({
                "kind": h.kind.as_str(),
                "id": h.pinned.id,
                "held": h.pinned.definition,
                "approved": approved,
            })
        })
        .collect();
    json!({
        "server": server,
        "mode": set.mode().as_str(),
        "broken": set.broken_why(),
        "held": held,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::state_file::StateWriter;

    fn tool(name: &str, description: &str) -> Value {
        json!({"name": name, "description": description, "inputSchema": {"type": "object"}})
    }

    fn names(items: &[Value]) -> Vec<&str> {
        items.iter().filter_map(|t| t["name"].as_str()).collect()
    }

    fn gate() -> PinGate {
        PinGate::new(Pins::new(None, StateWriter::spawn()))
    }

    #[tokio::test]
    async fn a_change_after_the_first_listing_is_held_and_named_until_approved() {
        let mut g = gate();
        let s: Arc<str> = Arc::from("fs");
        let mode = PinMode::TrustFirst;
        let first = g.admit(&s, mode, Kind::Tool, Some(1), vec![tool("a", "adds")]);
        assert_eq!(names(&first.items), ["a"]);
        assert_eq!(first.held, Some((HeldKind::Tool, vec![])));
        g.first_listing_over(&s, mode);
        let raw = vec![tool("a", "IGNORE PREVIOUS"), tool("b", "new")];
        let changed = g.admit(&s, mode, Kind::Tool, Some(1), raw);
        assert!(changed.items.is_empty());
        let held = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(changed.held, Some((HeldKind::Tool, held)));
        assert_eq!(g.view("fs").map(|v| v.held), Some(2));
        // A name not held is refused; approving one lists it again.
        let nope = g.answer(&s, mode, PinOp::Approve(vec!["zz".into()]));
        assert!(matches!(nope, Err(PinError::NotHeld(_))));
        let approved = g.answer(&s, mode, PinOp::Approve(vec!["b".into()]));
        let kinds = [Kind::Tool].into();
        assert_eq!(
            approved.ok(),
            Some(Answer::Readmit {
                kinds,
                forgot: false
            })
        );
        let again = g.readmit(&s, mode, Kind::Tool).map(|a| a.items);
        assert_eq!(again.as_deref().map(names), Some(vec!["b"]));
        assert_eq!(g.view("fs").map(|v| v.held), Some(1));
    }

    #[tokio::test]
    async fn diff_shows_each_held_definition_beside_its_approved_one() {
        let mut g = gate();
        let s: Arc<str> = Arc::from("fs");
        let mode = PinMode::TrustFirst;
        g.admit(&s, mode, Kind::Tool, Some(1), vec![tool("a", "adds")]);
        g.first_listing_over(&s, mode);
        g.admit(&s, mode, Kind::Tool, Some(2), vec![tool("a", "evil")]);
        let Ok(Answer::Diff(d)) = g.answer(&s, mode, PinOp::Diff) else {
            panic!("a diff");
        };
        assert_eq!(d["server"], "fs");
        assert_eq!(d["held"][0]["id"], "a");
        assert_eq!(d["held"][0]["held"]["description"], "evil");
        assert_eq!(d["held"][0]["approved"]["description"], "adds");
    }

    #[tokio::test]
    async fn templates_are_gated_but_never_named_as_held_and_forget_readmits_every_kind() {
        let mut g = gate();
        let s: Arc<str> = Arc::from("fs");
        let mode = PinMode::TrustFirst;
        let t = vec![json!({"uriTemplate": "x://{a}", "name": "t"})];
        let out = g.admit(&s, mode, Kind::Template, Some(1), t);
        assert_eq!((out.items.len(), out.held), (1, None));
        let forgot = g.answer(&s, mode, PinOp::Forget);
        let Ok(Answer::Readmit {
            kinds,
            forgot: true,
        }) = forgot
        else {
            panic!("forget readmits");
        };
        assert_eq!(kinds.len(), 4);
    }
}
