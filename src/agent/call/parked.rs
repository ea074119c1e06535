//! The branch of a 2026-07-28 agent's call.
//!
//! The server's requests during it make the call yield to the connection, which answers
//! the agent `input_required` and parks the call (`pending_input.rs`) until the agent
//! retries; the result gets that era's shape.

use super::{Call, Work};
use crate::agent::render;
use crate::agent::reply::{InFlight, ReplyFuture, Step};
use crate::upstream::{CallOptions, RawReply, ServerAsk};
use futures::FutureExt;
use mcpd_wire::jsonrpc::Id;
use mcpd_wire::protocol::era::{self, Era};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Server requests queued per call.
const CALL_ASKS: usize = 4;

/// Sends the call as its plan's `work` says and returns the future of its answer.
pub fn start(c: Call, work: Work) -> ReplyFuture {
    let Call {
        id,
        server,
        handle,
        call,
        cancel,
        params,
        method,
        rewrite,
        progress,
        logs,
    } = c;
    // The agent's capabilities come with each of its requests.
    let caps = params
        .meta()
        .and_then(|m| m.get(era::key::CLIENT_CAPABILITIES))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let (asks_tx, asks) = mpsc::channel(CALL_ASKS);
    let opts = CallOptions {
        progress,
        caps: None,
        asks: Some(asks_tx.clone()),
        logs,
    };
    let reply = match work {
        Work::FollowTask => {
            let (h, s) = (handle.clone(), server.clone());
            let params = params.into_map();
            crate::agent::tasks::follow::follow_legacy(h, call, s, params, asks_tx).boxed()
        }
        Work::BridgeTask => super::bridge::bridged(
            handle.clone(),
            call,
            server.clone(),
            (method, params),
            opts,
            asks_tx,
        )
        .boxed(),
        // A plain call's arguments go on as the agent wrote them (`params.rs`).
        Work::Plain | Work::TaskResult | Work::TaskCancel => {
            handle.call(call, method, params, opts).boxed()
        }
    };
    drive(InFlight {
        id,
        server,
        handle,
        call,
        cancel,
        reply,
        asks,
        caps,
        method,
        rewrite,
    })
}

/// Resumes a parked call as the answer to the agent's retry `id`.
pub fn resume(mut call: InFlight, id: Id, cancel: CancellationToken) -> ReplyFuture {
    call.id = id;
    call.cancel = cancel;
    drive(call)
}

/// Drives the call until it answers, is cancelled, or needs input.
fn drive(mut c: InFlight) -> ReplyFuture {
    async move {
        enum Next {
            Reply(RawReply),
            Ask(ServerAsk),
            Cancelled,
        }
        let next = tokio::select! {
            reply = &mut c.reply => Next::Reply(reply),
            Some(ask) = c.asks.recv() => Next::Ask(*ask),
            () = c.cancel.cancelled() => Next::Cancelled,
        };
        let id = c.id.clone();
        match next {
            Next::Reply(reply) => {
                let line =
                    render::render_raw(&id, &c.server, c.method, reply, Era::Modern, &c.rewrite);
                (id, Step::Reply(line))
            }
            Next::Ask(ask) => (
                id,
                Step::Park {
                    ask,
                    call: Box::new(c),
                },
            ),
            Next::Cancelled => {
                crate::agent::tasks::abandon::abandon(c.handle, c.call, c.reply, &c.rewrite).await;
                (id, Step::Cancelled)
            }
        }
    }
    .boxed()
}
