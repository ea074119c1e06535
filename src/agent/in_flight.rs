//! An agent connection's requests in flight.
//!
//! What cancels each, and what `ctl agents` and the dashboard show of it (method, tool,
//! since when), and the ones the daemon's user cancelled, whose agent is told so.

use mcpd_ctl::control_api::CallInfo;
use mcpd_wire::jsonrpc::Id;
use std::collections::HashMap;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// One request in flight.
struct Entry {
    cancel: CancellationToken,
    method: Box<str>,
    /// The tool, for `tools/call`.
    tool: Option<Box<str>>,
    since: Instant,
    /// Cancelled by the daemon's user (`mcpd/cancel`, the dashboard), not by the agent:
    /// the agent is owed an answer saying so.
    by_operator: bool,
}

/// The requests in flight, by the agent's id.
#[derive(Default)]
pub struct InFlight(HashMap<Id, Entry>);

/// How a request in flight ended, as far as the agent is concerned.
pub enum Ended {
    /// The agent cancelled it, or it finished: nothing more is owed.
    Plain,
    /// The daemon's user cancelled it: the agent gets an error answer.
    ByOperator,
}

impl InFlight {
    pub fn insert(&mut self, id: Id, cancel: CancellationToken, method: &str, tool: Option<&str>) {
        let entry = Entry {
            cancel,
            method: method.into(),
            tool: tool.map(Into::into),
            since: Instant::now(),
            by_operator: false,
        };
        self.0.insert(id, entry);
    }

    pub fn contains(&self, id: &Id) -> bool {
        self.0.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Forgets a request that ended.
    pub fn remove(&mut self, id: &Id) -> Ended {
        match self.0.remove(id) {
            Some(e) if e.by_operator => Ended::ByOperator,
            _ => Ended::Plain,
        }
    }

    /// The agent cancelled a request (`notifications/cancelled`).
    pub fn cancel(&self, id: &Id) {
        if let Some(e) = self.0.get(id) {
            e.cancel.cancel();
        }
    }

    /// The daemon's user cancelled a request; false if it is not in flight.
    pub fn cancel_by_operator(&mut self, id: &Id) -> bool {
        match self.0.get_mut(id) {
            Some(e) => {
                e.by_operator = true;
                e.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Cancels every request (the connection is closing).
    pub fn cancel_all(&self) {
        for e in self.0.values() {
            e.cancel.cancel();
        }
    }

    /// What `ctl agents` and the dashboard show, longest running first, at most `max`.
    pub fn describe(&self, max: usize) -> Vec<CallInfo> {
        let now = Instant::now();
        let mut calls: Vec<CallInfo> = self
            .0
            .iter()
            .map(|(id, e)| CallInfo {
                id: id.to_value().to_string(),
                method: e.method.to_string(),
                tool: e.tool.as_deref().map(str::to_owned),
                secs: now.duration_since(e.since).as_secs_f64(),
            })
            .collect();
        calls.sort_by(|a, b| b.secs.total_cmp(&a.secs));
        calls.truncate(max);
        calls
    }
}
