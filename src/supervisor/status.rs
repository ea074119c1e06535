//! What `mcpd ctl status` shows about each server.
//!
//! It is assembled from the supervisor's slots and each connection's live counters.

use super::{Slot, Supervisor};
use crate::config::{Launch, ProtocolMode};
use crate::registry::{Collision, InstanceKey};
use mcpd_ctl::control_api::{NameConflict, SandboxView, ServerStatus};
use mcpd_wire::protocol::era::Era;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// How long status waits for a busy connection's live counters before showing without them.
const LIVE_TIMEOUT: Duration = Duration::from_millis(500);

impl From<&Collision> for NameConflict {
    fn from(c: &Collision) -> Self {
        NameConflict {
            kind: c.kind.as_str().to_owned(),
            name: c.name.clone(),
            held_by: c.holder.to_string(),
        }
    }
}

impl Slot {
    fn status(&self, name: &str, tools: usize) -> ServerStatus {
        let now = Instant::now();
        let identity = self.identity.as_ref();
        let http = self
            .running
            .as_ref()
            .and_then(|r| r.http.as_ref())
            .map(|h| h.borrow().clone());
        let (transport, command, url) = match &self.cfg.launch {
            Launch::Stdio(s) => ("stdio".to_owned(), Some(s.command.clone()), None),
            Launch::Http(h) => {
                let chosen = identity
                    .and_then(|i| i.transport)
                    .map(str::to_owned)
                    .or_else(|| http.as_ref().map(|i| i.transport.clone()))
                    .unwrap_or_else(|| h.transport.as_str().to_owned());
                (chosen, None, Some(h.display_url()))
            }
        };
        let era = identity
            .map(|i| Era::of_version(&i.protocol_version).as_str().to_owned())
            .or_else(|| match self.cfg.protocol {
                ProtocolMode::Legacy => Some("legacy".into()),
                ProtocolMode::Modern => Some("modern".into()),
                ProtocolMode::Auto => None,
            });
        ServerStatus {
            name: name.to_owned(),
            state: self.state,
            transport,
            command,
            url,
            http,
            session_renewals: 0,
            auth: self.login.as_ref().map(|l| l.view()),
            era,
            era_reason: self.era_reason.clone().or_else(|| match self.cfg.protocol {
                ProtocolMode::Auto => None,
                other => Some(format!("protocol = \"{}\" in the config", other.as_str())),
            }),
            probing: self.running.as_ref().is_some_and(|r| r.probing),
            instances: 0,
            agent: match self.instance.as_ref().map(|i| &i.key) {
                Some(InstanceKey::Agent(a)) => Some(*a),
                _ => None,
            },
            project: match self.instance.as_ref().map(|i| &i.key) {
                Some(InstanceKey::Project(p)) => Some(p.display().to_string()),
                _ => None,
            },
            share: self.cfg.share.as_str().to_owned(),
            agents: 0,
            idle_secs: None,
            sandbox: self
                .running
                .as_ref()
                .and_then(|r| r.sandbox.clone())
                .or_else(|| self.instances_sandbox()),
            pins: None,
            protocol_version: identity.map(|i| i.protocol_version.clone()),
            server_info: identity.map(|i| i.server_info.clone()),
            pid: self.running.as_ref().and_then(|r| r.pid),
            tools,
            in_flight: 0,
            restarts: self.restarts,
            uptime_secs: self
                .ready_since
                .map(|t| now.duration_since(t).as_secs_f64()),
            next_retry_secs: self
                .retry_at
                .map(|t| t.saturating_duration_since(now).as_secs_f64()),
            last_error: self.last_error.clone(),
            last_exit: self.last_exit.clone(),
            catalog_error: self.catalog_error.clone(),
            name_conflicts: Vec::new(),
            malformed_lines: 0,
            oversized_lines: 0,
            stderr_tail: self.stderr_tail.clone(),
            secrets: self.cfg.secrets.clone(),
            history: self.history.iter().cloned().collect(),
        }
    }
}

impl Slot {
    /// On the own row of a server run as instances, which runs no process (or one only to
    /// list its tools): the sandbox each instance gets, from the config's profile. Each
    /// instance's paths are its own (resolved in its project as it starts), so none are
    /// counted here (`SandboxView::per_instance`); the instances' rows count them.
    fn instances_sandbox(&self) -> Option<SandboxView> {
        if !self.cfg.share.instanced() || self.instance.is_some() {
            return None;
        }
        let (Some(profile), Launch::Stdio(_)) = (&self.cfg.sandbox, &self.cfg.launch) else {
            return None;
        };
        Some(SandboxView {
            mechanism: "landlock".into(),
            abi: u32::try_from(crate::upstream::sandbox::kernel_abi()).unwrap_or(0),
            read: 0,
            write: 0,
            network: profile.network.as_str().into(),
            note: Some(INSTANCES_SANDBOX.into()),
        })
    }
}

/// The note of a server's own row whose instances are confined.
const INSTANCES_SANDBOX: &str = "each instance's paths are counted on its own row";

impl Supervisor {
    /// Logs the name collisions that appeared or went away since `before`.
    pub(super) fn report_collisions(&self, before: &[Collision]) {
        let now: Vec<&Collision> = self.registry.collisions().collect();
        for c in now.iter().filter(|c| !before.contains(c)) {
            tracing::warn!(
                upstream = %c.server,
                holder = %c.holder,
                kind = c.kind.as_str(),
                name = %c.name,
                "'{}' also presents the {} name {:?}, which '{}' had first; agents reach '{}' under it and '{}' keeps its other names",
                c.server, c.kind.as_str(), c.name, c.holder, c.holder, c.server
            );
        }
        for c in before.iter().filter(|c| !now.contains(c)) {
            tracing::info!(
                upstream = %c.server,
                kind = c.kind.as_str(),
                name = %c.name,
                "the {} name {:?} no longer collides with '{}'",
                c.kind.as_str(), c.name, c.holder
            );
        }
    }

    /// Answers a status request. Live counters come from each connection, asked by a
    /// separate task so a busy connection never stalls the supervisor.
    pub(super) fn status(&self, respond_to: oneshot::Sender<Vec<ServerStatus>>) {
        let mut rows = Vec::new();
        let mut live = Vec::new();
        for (name, slot) in &self.slots {
            // An instance serves its server's list.
            let listed = slot.template().unwrap_or(name);
            let mut row = slot.status(name, self.registry.tool_count(listed));
            row.instances = self.instance_count(name);
            if slot.instance.is_none() {
                row.pins = self.pin_view(name);
            }
            if let Some(InstanceKey::Project(_)) = slot.instance.as_ref().map(|i| &i.key) {
                row.agents = self.agents_in(slot);
            }
            row.name_conflicts = self
                .registry
                .collisions_of(name)
                .iter()
                .map(NameConflict::from)
                .collect();
            rows.push(row);
            if let Some(h) = slot.running.as_ref().and_then(|r| r.handle.clone()) {
                live.push((rows.len() - 1, h));
            }
        }
        mcpd_runtime::tracker::spawn(async move {
            for (i, handle) in live {
                if let Ok(Some(s)) = tokio::time::timeout(LIVE_TIMEOUT, handle.live_status()).await
                {
                    let Some(row) = rows.get_mut(i) else {
                        continue;
                    };
                    row.in_flight = s.in_flight;
                    row.malformed_lines = s.malformed_lines;
                    row.oversized_lines = s.oversized_lines;
                    row.session_renewals = s.session_renewals;
                    row.stderr_tail = s.stderr_tail;
                    if row.project.is_some() {
                        row.idle_secs = Some(s.since_call.as_secs());
                    }
                }
            }
            let _ = respond_to.send(rows); // the asker may have disconnected
        });
    }
}
