//! The one way a server's lists reach the registry.
//!
//! Through its pins (`pins/`), which hold new and changed definitions, on arrival and
//! from the cache at start; where each connection is in its first round of lists, which
//! ends a server's first listing; and a person's answer to them (`ctl diff`, `approve`,
//! `forget`).

use super::pins::{Admitted, Answer, Kind};
pub use super::pins::{PinError, PinOp};
use super::{AfterExit, Supervisor};
use crate::config::PinMode;
use mcpd_wire::protocol::ListKind;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio::sync::oneshot;

/// Where a connection is in its first round of lists: the lists its capabilities
/// declare, which it fetches as soon as it is connected. The first connection of a
/// server whose round is over ends the server's first listing (`trust-first` then gates
/// every kind), and a lazy server started only to learn its catalog rests then.
#[derive(Debug, Default)]
pub(super) enum FirstRound {
    /// Not connected yet.
    #[default]
    Connecting,
    /// These kinds are still to be listed, or to fail; whether any has been.
    Waiting {
        kinds: BTreeSet<Kind>,
        answered: bool,
    },
    Over,
}

impl FirstRound {
    /// A list of `kind` came, or failed (None: nothing came). Whether the round is over
    /// now (it was waiting, and nothing more is awaited).
    pub(super) fn step(&mut self, kind: Option<Kind>) -> bool {
        let FirstRound::Waiting { kinds, answered } = self else {
            return false;
        };
        if let Some(kind) = kind {
            *answered |= kinds.remove(&kind);
        }
        if !kinds.is_empty() {
            return false;
        }
        *self = FirstRound::Over;
        true
    }

    /// Whether the connection, ending now, had listed something of its first round
    /// without finishing it.
    pub(super) fn cut_short(&self) -> bool {
        matches!(self, FirstRound::Waiting { answered: true, .. })
    }
}

impl Supervisor {
    /// Lists every server's cached catalog at once, before any server is up; each is
    /// replaced when its server reports its real one. The cache holds the servers' own
    /// names, so they are presented under the naming in force now.
    pub(super) fn load_cached_catalogs(&mut self) {
        let limit = self.name_limit;
        for (name, slot) in &self.slots {
            let _ = self
                .registry
                .set_naming(name, slot.cfg.naming.clone(), limit); // nothing listed yet: no error
        }
        let mut cached = Vec::new();
        for (name, slot) in &self.slots {
            let Some(lists) = self.store.lists(&slot.cfg) else {
                continue;
            };
            cached.push((name.clone(), lists.tools(), lists.clone()));
        }
        for (name, tools, lists) in cached {
            // Through the pins like every list: a change held before the restart stays
            // held, and a server never pinned lists nothing until it reports.
            if let Some(tools) = tools {
                let tools = self.gate_tools(&name, None, tools);
                let Some(slot) = self.slots.get(&name) else {
                    continue;
                };
                let tools = slot.cfg.tools.apply(&tools);
                if let Err(e) = self.registry.replace(&name, &tools, limit) {
                    tracing::debug!(upstream = %name, "ignored the cached tool list: {e}");
                }
            }
            for kind in [ListKind::Prompts, ListKind::Resources, ListKind::Templates] {
                let items = self.gate_list(&name, kind, None, lists.list(kind));
                self.registry.replace_list(&name, kind, items, limit);
            }
            tracing::info!(upstream = %name, "listed the cached catalog until the server reports its own");
        }
    }

    /// A connection of slot `name` is connected, and fetches the lists of `kinds` now.
    pub(super) fn first_round_begins(
        &mut self,
        name: &Arc<str>,
        instance: u64,
        kinds: BTreeSet<Kind>,
    ) {
        let Some(r) = self
            .current(name, instance)
            .and_then(|s| s.running.as_mut())
        else {
            return;
        };
        r.first_round = FirstRound::Waiting {
            kinds,
            answered: false,
        };
        self.first_round_step(name, instance, None);
    }

    /// A list of `kind` came, or failed, on a connection of slot `name` (None: nothing
    /// came, see whether nothing is awaited).
    pub(super) fn first_round_step(&mut self, name: &Arc<str>, instance: u64, kind: Option<Kind>) {
        let Some(slot) = self.current(name, instance) else {
            return;
        };
        let Some(r) = slot.running.as_mut() else {
            return;
        };
        if !r.first_round.step(kind) {
            return;
        }
        if std::mem::take(&mut slot.fill_only) {
            // Its catalog is known (and cached) now: rest until a call comes.
            slot.after_exit = AfterExit::Idle;
            r.cancel.cancel();
        }
        let server = slot
            .instance
            .as_ref()
            .map_or_else(|| name.clone(), |i| i.template.clone());
        self.first_listing_over(&server);
    }

    /// A connection of slot `name` ended in the middle of its first round: when it had
    /// listed something, the server's first listing is over (the kinds it did not list
    /// count as listed empty), as a failed list would have been.
    pub(super) fn first_round_cut(&mut self, name: &Arc<str>, round: &FirstRound) {
        if !round.cut_short() {
            return;
        }
        let server = self
            .slots
            .get(name)
            .and_then(|s| s.instance.as_ref())
            .map_or_else(|| name.clone(), |i| i.template.clone());
        self.first_listing_over(&server);
    }

    /// `server`'s first listing is over: under `trust-first`, every later list of every
    /// kind is gated (saved now, so a restart keeps it).
    fn first_listing_over(&mut self, server: &Arc<str>) {
        let mode = self.pin_mode(server);
        self.pins.first_listing_over(server, mode);
    }

    fn pin_mode(&self, server: &str) -> PinMode {
        self.slots
            .get(server)
            .map_or(PinMode::TrustFirst, |s| s.cfg.pin)
    }

    /// A tool list of `server` (its own, or an instance's), as agents may see it.
    pub(super) fn gate_tools(
        &mut self,
        server: &Arc<str>,
        instance: Option<u64>,
        raw: Vec<Value>,
    ) -> Vec<Value> {
        let mode = self.pin_mode(server);
        let admitted = self.pins.admit(server, mode, Kind::Tool, instance, raw);
        self.note_held(server, admitted)
    }

    /// A prompt, resource or template list, likewise.
    pub(super) fn gate_list(
        &mut self,
        server: &Arc<str>,
        kind: ListKind,
        instance: Option<u64>,
        raw: Vec<Value>,
    ) -> Vec<Value> {
        let mode = self.pin_mode(server);
        let admitted = self.pins.admit(server, mode, kind.into(), instance, raw);
        self.note_held(server, admitted)
    }

    /// Tells the registry which names of `server` are held (calls to them say so); what
    /// agents may see of the list.
    fn note_held(&mut self, server: &Arc<str>, admitted: Admitted) -> Vec<Value> {
        if let Some((kind, ids)) = admitted.held {
            self.registry.set_held(server, kind, ids);
        }
        admitted.items
    }

    /// How many definitions of `server` wait, and why its pin file cannot be used.
    pub(super) fn pin_view(&self, server: &str) -> Option<mcpd_ctl::control_api::PinView> {
        self.pins.view(server)
    }

    /// `mcpd/pins`: answered at once, or (approve, forget) once the pin file is on disk.
    pub(super) fn on_pins(
        &mut self,
        server: &str,
        op: PinOp,
        respond_to: oneshot::Sender<Result<Value, PinError>>,
    ) {
        let Some((server, slot)) = self.slots.get_key_value(server) else {
            let _ = respond_to.send(Err(PinError::UnknownServer(server.to_owned())));
            return;
        };
        let (server, mode) = (server.clone(), slot.cfg.pin);
        let (kinds, forgot) = match self.pins.answer(&server, mode, op) {
            Ok(Answer::Diff(diff)) => {
                let _ = respond_to.send(Ok(diff)); // the asker may be gone
                return;
            }
            Ok(Answer::Readmit { kinds, forgot }) => (kinds, forgot),
            Err(e) => {
                let _ = respond_to.send(Err(e)); // the asker may be gone
                return;
            }
        };
        let approved = kinds.len();
        for kind in kinds {
            self.readmit(&server, kind);
        }
        if forgot {
            // ...and that listing is over: what it shows later is gated.
            self.pins.first_listing_shown(&server, mode);
        }
        self.publish();
        let saved = self.pins.save(&server);
        tracing::info!(upstream = %server, "pins changed by a person");
        mcpd_runtime::tracker::spawn(async move {
            let answer = match saved.await {
                Ok(Ok(())) => Ok(json!({ "kinds": approved })),
                Ok(Err(e)) => Err(PinError::NotSaved(e)),
                Err(_) => Err(PinError::NotSaved("the writer stopped".into())),
            };
            let _ = respond_to.send(answer); // the asker may be gone
        });
    }

    /// A server's pin mode changed (a reload): what it listed passes its pins again.
    pub(super) fn repin(&mut self, server: &Arc<str>) {
        let mode = self.pin_mode(server);
        tracing::info!(upstream = %server, mode = mode.as_str(), "pin mode changed");
        for kind in [Kind::Tool, Kind::Prompt, Kind::Resource, Kind::Template] {
            self.readmit(server, kind);
        }
        // What it showed was its first listing under `trust-first`: that is over now.
        self.pins.first_listing_shown(server, mode);
        self.pins.save_changed();
    }

    /// Lists again what `server` last sent of `kind`, through its pins now.
    fn readmit(&mut self, server: &Arc<str>, kind: Kind) {
        let mode = self.pin_mode(server);
        let Some(admitted) = self.pins.readmit(server, mode, kind) else {
            return;
        };
        let items = self.note_held(server, admitted);
        let limit = self.name_limit;
        let list = match kind {
            Kind::Tool => {
                let Some(slot) = self.slots.get(server) else {
                    return;
                };
                let tools = slot.cfg.tools.apply(&items);
                if let Err(e) = self.registry.replace(server, &tools, limit) {
                    tracing::warn!(upstream = %server, "the approved tool list cannot be listed: {e}");
                }
                return;
            }
            Kind::Prompt => ListKind::Prompts,
            Kind::Resource => ListKind::Resources,
            Kind::Template => ListKind::Templates,
        };
        self.registry.replace_list(server, list, items, limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(kinds: &[Kind]) -> FirstRound {
        FirstRound::Waiting {
            kinds: kinds.iter().copied().collect(),
            answered: false,
        }
    }

    #[test]
    fn a_first_round_is_over_once_each_kind_is_listed_or_failed() {
        let mut r = waiting(&[Kind::Tool, Kind::Prompt]);
        assert!(!r.step(None), "nothing came yet");
        assert!(!r.cut_short(), "nothing listed: a cut ends nothing");
        assert!(!r.step(Some(Kind::Resource)), "a kind not awaited");
        assert!(!r.step(Some(Kind::Tool)));
        assert!(
            r.cut_short(),
            "something listed: a cut ends the first listing"
        );
        assert!(r.step(Some(Kind::Prompt)));
        assert!(matches!(r, FirstRound::Over));
        assert!(!r.step(Some(Kind::Prompt)), "over once");
        assert!(!r.cut_short());
    }

    #[test]
    fn a_connection_that_awaits_no_list_ends_its_round_at_once_and_one_connecting_never_does() {
        assert!(waiting(&[]).step(None));
        let mut connecting = FirstRound::default();
        assert!(!connecting.step(Some(Kind::Tool)));
        assert!(!connecting.cut_short());
    }
}
