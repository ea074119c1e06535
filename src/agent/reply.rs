//! What handling an agent's request gives the connection.
//!
//! An answer now, or a future of one; how that future ends (a reply, a cancellation, or a
//! call parked for the agent's input).

use super::render::Rewrite;
use crate::upstream::{CallId, RawReply, ServerAsk, UpstreamHandle};
use futures::future::BoxFuture;
use mcpd_wire::jsonrpc::Id;
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A request refused before it went anywhere: its id and why.
#[derive(Debug)]
pub struct Refusal {
    pub id: Id,
    pub error: crate::errors::AgentError,
}

impl Refusal {
    /// The error response for the agent.
    pub fn line(&self) -> String {
        mcpd_wire::jsonrpc::error_line(Some(&self.id), &self.error.to_error_object())
    }
}

/// How a request was taken.
pub enum Handled {
    /// Answered at once.
    Now(String),
    /// Answered when `fut` resolves; `cancel` cancels it.
    Later {
        id: Id,
        cancel: CancellationToken,
        fut: ReplyFuture,
    },
}

/// An in-flight request of one agent, resolved inside the agent's actor.
pub type ReplyFuture = BoxFuture<'static, (Id, Step)>;

/// How an in-flight request ended, or paused.
pub enum Step {
    /// A line to send to the agent.
    Reply(String),
    /// Cancelled: by the agent (no reply is due) or by the connection closing.
    Cancelled,
    /// The server asked for input during a modern agent's call: the actor answers the
    /// agent `input_required` and parks the call.
    Park { ask: ServerAsk, call: Box<InFlight> },
    /// The servers the request waited for are up (or the wait is over): the connection
    /// handles it again, with the catalog as it is now (`wait.rs`).
    Again(Box<Again>),
}

/// A request to handle again, as the agent sent it.
pub struct Again {
    pub request: mcpd_wire::jsonrpc::Request,
    pub plain: Option<super::params::PlainArguments>,
}

/// A modern agent's call that can be paused for input and resumed under a new id.
pub struct InFlight {
    /// The agent's request id the call answers now (a retry has a new one).
    pub id: Id,
    pub server: Arc<str>,
    pub(super) handle: UpstreamHandle,
    pub(super) call: CallId,
    pub cancel: CancellationToken,
    pub(super) reply: BoxFuture<'static, RawReply>,
    pub(super) asks: mpsc::Receiver<Box<ServerAsk>>,
    /// The agent's declared capabilities for this call.
    pub caps: Value,
    pub(super) method: &'static str,
    pub(super) rewrite: Rewrite,
}
