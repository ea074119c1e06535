//! Handling the events a running connection reports.
//!
//! Connected, lost, idle, and its tool and other lists.

use super::pins::Kind;
use super::{AfterExit, ServerState, Supervisor};
use crate::upstream::ConnectionEvent;
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio::time::Instant;

impl Supervisor {
    /// Dispatches a connection's event by its kind.
    pub(super) fn on_event(&mut self, event: ConnectionEvent) {
        match event {
            ConnectionEvent::Connected {
                server,
                instance,
                handle,
                identity,
                http,
            } => self.on_connected(&server, instance, handle, identity, http),
            ConnectionEvent::Lost {
                server,
                instance,
                error,
            } => self.on_lost(&server, instance, error),
            ConnectionEvent::Login { server, logged_in } => self.on_login(&server, logged_in),
            ConnectionEvent::Idle { server, instance } => self.on_idle(&server, instance),
            ConnectionEvent::List {
                server,
                instance,
                kind,
                items,
            } => self.on_list(server, instance, kind, items),
            ConnectionEvent::Tools {
                server,
                instance,
                tools,
                cache,
            } => self.on_tools(&server, instance, tools, cache),
        }
    }

    /// A connection finished its handshake: it is ready unless its tool list is awaited.
    fn on_connected(
        &mut self,
        server: &Arc<str>,
        instance: u64,
        handle: crate::upstream::UpstreamHandle,
        identity: crate::upstream::ServerIdentity,
        http: Option<tokio::sync::watch::Receiver<mcpd_ctl::control_api::HttpInfo>>,
    ) {
        let Some(slot) = self.current(server, instance) else {
            return;
        };
        let has_tools = identity.has_tools();
        // The lists its connection fetches at once: its first round.
        let mut first_round: BTreeSet<Kind> =
            identity.list_kinds().into_iter().map(Kind::from).collect();
        if has_tools {
            first_round.insert(Kind::Tool);
        }
        if let Some(r) = slot.running.as_mut() {
            r.handle = Some(handle);
            r.http = http;
            r.probing = false;
        }
        let era = mcpd_wire::protocol::era::Era::of_version(&identity.protocol_version);
        // Found in place, or after the process quit on `server/discover`.
        let found = identity.era_reason.clone().or(slot.quit_on_discover.take());
        slot.identity = Some(identity);
        self.remember_era(server, era, found);
        let Some(slot) = self.slots.get_mut(server) else {
            return;
        };
        let is_mcpd = slot
            .identity
            .as_ref()
            .is_some_and(|i| i.mcpd_instance.is_some());
        if !has_tools || slot.instance.is_some() {
            // A server without the tools capability publishes no tools; an
            // instance serves the tools its server lists (which its own list,
            // when it comes, replaces).
            slot.state = ServerState::Ready;
            slot.ready_since = Some(Instant::now());
            // What went wrong before is history now (`ctl status` keeps it).
            slot.last_error = None;
            if slot.instance.is_none() {
                self.registry.remove(server);
            }
            self.settle_waiters(server);
            self.publish();
        } else if is_mcpd {
            // Another daemon is reached from now on (`mcpd_behind`): say so in
            // this daemon's handshake answers before its tool list comes.
            self.publish();
        }
        self.first_round_begins(server, instance, first_round);
    }

    /// A connection lost its server: the process is being stopped.
    fn on_lost(&mut self, server: &Arc<str>, instance: u64, error: String) {
        let Some(slot) = self.current(server, instance) else {
            return;
        };
        tracing::warn!(upstream = %server, "connection lost, stopping the process: {error}");
        if let Some(r) = slot.running.as_mut() {
            r.handle = None;
        }
        slot.state = ServerState::Backoff;
        slot.ready_since = None;
        slot.last_error = Some(error);
        self.publish();
    }

    /// A connection saw no calls for `idle_timeout`: it stops until a call needs it.
    fn on_idle(&mut self, server: &Arc<str>, instance: u64) {
        let Some(slot) = self.current(server, instance) else {
            return;
        };
        if let Some(r) = &slot.running {
            tracing::info!(upstream = %server, "no calls for idle_timeout; stopping it");
            slot.after_exit = AfterExit::Idle;
            // An instance is made again when a call needs it.
            slot.removing |= slot.instance.is_some();
            r.cancel.cancel();
        }
    }

    /// A prompt, resource or template list came (or failed) on a connection.
    fn on_list(
        &mut self,
        server: Arc<str>,
        instance: u64,
        kind: mcpd_wire::protocol::ListKind,
        items: Result<Vec<serde_json::Value>, crate::upstream::ListError>,
    ) {
        let Some(slot) = self.current(&server, instance) else {
            return;
        };
        let slot_name = server.clone();
        // An instance's list is its server's (the last any instance reported).
        let server = slot
            .instance
            .as_ref()
            .map_or(server, |i| i.template.clone());
        match items {
            Ok(items) => {
                if let Some(slot) = self.slots.get(&server) {
                    let cfg = slot.cfg.clone();
                    self.store.put_list(&cfg, kind, &items);
                }
                let items = self.gate_list(&server, kind, Some(instance), items);
                let n = items.len();
                if self
                    .registry
                    .replace_list(&server, kind, items, self.name_limit)
                {
                    tracing::info!(upstream = %server, list = kind.list().0, items = n, "catalog updated");
                    self.publish();
                } else if self.registry.held_changed() {
                    self.publish();
                }
            }
            Err(e) => {
                tracing::warn!(upstream = %server, "kept the previous {}: {e}", kind.list().1);
            }
        }
        // Listed or failed, its part of the first round is over: a failed list
        // counts as an empty one, never as a kind not yet listed.
        self.first_round_step(&slot_name, instance, Some(kind.into()));
    }

    /// A tool list came (or failed) on a connection: an instance's is its server's.
    fn on_tools(
        &mut self,
        server: &Arc<str>,
        instance: u64,
        tools: Result<Vec<serde_json::Value>, crate::upstream::ListError>,
        cache: Option<(u64, bool)>,
    ) {
        let Some(slot) = self.current(server, instance) else {
            return;
        };
        // An instance's list is its server's (the last any instance reported):
        // listed and cached under the server, whose own slot never runs.
        if let Some(template) = slot.instance.as_ref().map(|i| i.template.clone()) {
            self.instance_tools(&template, instance, tools, cache);
            self.first_round_step(server, instance, Some(Kind::Tool));
            return;
        }
        if let Ok(raw) = &tools {
            let cfg = slot.cfg.clone();
            self.store.put_tools(&cfg, raw);
        }
        // Through the pins before anything else: held definitions go no further.
        let tools = tools.map(|t| self.gate_tools(server, Some(instance), t));
        let Some(slot) = self.slots.get_mut(server) else {
            return;
        };
        // The config's allow/deny lists and description overrides apply before
        // anything else sees the list.
        let filter = &slot.cfg.tools;
        let tools = tools.map(|t| {
            if filter.is_empty() {
                t
            } else {
                filter.apply(&t)
            }
        });
        let limit = self.name_limit;
        let registry = &mut self.registry;
        let outcome = tools.map_err(|e| e.to_string()).and_then(|t| {
            registry
                .replace(server, &t, limit)
                .map_err(|e| e.to_string())
        });
        self.own_tools_listed(server, outcome, cache);
        // The tool list is one of its first round's (and a lazy server started
        // to learn its catalog rests once the round is over).
        self.first_round_step(server, instance, Some(Kind::Tool));
        self.publish();
    }

    /// A server's own tool list was listed (or rejected, the previous one kept): its
    /// slot says so, and a start is over.
    fn own_tools_listed(
        &mut self,
        server: &Arc<str>,
        outcome: Result<usize, String>,
        cache: Option<(u64, bool)>,
    ) {
        let Some(slot) = self.slots.get_mut(server) else {
            return;
        };
        if outcome.is_ok() {
            slot.cache = cache;
        }
        match outcome {
            Ok(n) => {
                slot.catalog_error = None;
                tracing::info!(upstream = %server, tools = n, "catalog updated");
            }
            Err(e) => {
                tracing::warn!(upstream = %server, "kept the previous tool list: {e}");
                slot.catalog_error = Some(format!("new tool list rejected, previous kept: {e}"));
                // A server that will not even list its tools without more scope
                // is of no use until someone logs in again.
                let wants_scope = slot
                    .login
                    .as_ref()
                    .is_some_and(|l| !l.view().more_scope.is_empty());
                if wants_scope
                    && slot.state == ServerState::Starting
                    && let Some(r) = &slot.running
                {
                    slot.more_scope = true;
                    slot.after_exit = AfterExit::Recover;
                    r.cancel.cancel();
                }
            }
        }
        if slot.state == ServerState::Starting {
            slot.state = ServerState::Ready;
            slot.ready_since = Some(Instant::now());
            // What went wrong before is history now (`ctl status` keeps it).
            slot.last_error = None;
        }
    }
}

impl Supervisor {
    /// An instance's tool list, as its server's.
    fn instance_tools(
        &mut self,
        template: &std::sync::Arc<str>,
        instance: u64,
        tools: Result<Vec<serde_json::Value>, crate::upstream::ListError>,
        cache: Option<(u64, bool)>,
    ) {
        let Some(slot) = self.slots.get_mut(template) else {
            return;
        };
        let tools = match tools {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(upstream = %template, "kept the previous tool list: {e}");
                return;
            }
        };
        self.store.put_tools(&slot.cfg, &tools);
        // One pin set per server: an instance's list passes its server's pins.
        let tools = self.gate_tools(template, Some(instance), tools);
        let Some(slot) = self.slots.get_mut(template) else {
            return;
        };
        let tools = slot.cfg.tools.apply(&tools);
        match self.registry.replace(template, &tools, self.name_limit) {
            Ok(n) => {
                slot.catalog_error = None;
                slot.cache = cache;
                tracing::info!(upstream = %template, tools = n, "catalog updated from an instance");
            }
            Err(e) => {
                tracing::warn!(upstream = %template, "kept the previous tool list: {e}");
                slot.catalog_error = Some(format!("new tool list rejected, previous kept: {e}"));
            }
        }
        self.publish();
    }
}
