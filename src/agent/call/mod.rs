//! One forwarded call from its plan to its answer.
//!
//! The plan decided once per call (`plan.rs`), and the branch that carries it
//! (`parked.rs` for agents answered `input_required`, `fulfil.rs` for agents mcpd asks
//! itself, `bridge.rs` for a task-only answer).

pub mod bridge;
pub mod fulfil;
pub mod parked;
pub mod plan;

use super::params::Params;
use super::render::Rewrite;
use crate::upstream::{CallId, LogRoute, ProgressSink, UpstreamHandle};
use mcpd_wire::jsonrpc::Id;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub use plan::{AgentSide, CallPlan, Work};

/// One call on its way to its server, whichever branch carries it.
pub struct Call {
    /// The agent's request id the call answers.
    pub id: Id,
    pub server: Arc<str>,
    pub handle: UpstreamHandle,
    /// The daemon-wide id the server's connection knows the call by.
    pub call: CallId,
    /// The agent's cancellation of the call.
    pub cancel: CancellationToken,
    /// The params with the agent's names replaced by the server's own.
    pub params: Params,
    pub method: &'static str,
    /// How the server's result is changed on the way back.
    pub rewrite: Rewrite,
    /// Where the server's progress notifications go, when the agent asked for them.
    pub progress: Option<ProgressSink>,
    /// Where the server's log messages about the call go, as the agent's era asks.
    pub logs: Option<LogRoute>,
}
