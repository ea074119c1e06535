//! An agent's `tools/call` answered -32021 (task only), followed as a task for the agent.
//!
//! The agent is a 2026-07-28 agent whose `tools/call` did not declare the Tasks
//! extension, to a server that may run the tool only as a task: the -32021 answer is
//! followed as a task for the agent.

use crate::agent::params::Params;
use crate::upstream::{CallId, CallOptions, RawReply, ServerAsk, UpstreamHandle};
use std::sync::Arc;
use tokio::sync::mpsc;

/// When its server runs the tool only as a task (-32021 naming the extension), mcpd
/// declares the extension itself and follows the task to its result, as it does for a
/// legacy agent (`fulfil.rs`): the agent gets the tool's result, its input requests as
/// `input_required` rounds. The params are kept for that retry: for a plain call, two
/// shared pointers.
pub async fn bridged(
    handle: UpstreamHandle,
    call: CallId,
    server: Arc<str>,
    (method, params): (&'static str, Params),
    opts: CallOptions,
    asks: mpsc::Sender<Box<ServerAsk>>,
) -> RawReply {
    let retry = params.clone();
    let reply = handle.call(call, method, params, opts).await;
    match reply {
        Ok(Err(e)) if mcpd_wire::protocol::tasks::requires_extension(&e) => {
            let params = retry.into_map();
            crate::agent::tasks::follow::follow(handle, call, server, params, asks, None).await
        }
        other => other,
    }
}
