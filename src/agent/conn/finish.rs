//! An agent connection's end.
//!
//! Replies still queued go out as far as they can, its calls in flight are cancelled
//! upstream (on shutdown their callers are told), it leaves the roster, its instances and
//! subscriptions, and its writer gets a last deadline.

use super::{CANCEL_FLUSH, Close, Conn, WRITE_FLUSH};
use crate::agent::reply::Step;
use crate::errors::AgentError;
use futures::StreamExt;
use mcpd_runtime::outbox::Out;
use mcpd_wire::jsonrpc;
use tokio::task::JoinHandle;

impl Conn {
    /// The connection's end: queued replies go out as far as they can, calls in flight
    /// are cancelled upstream (on shutdown their callers are told), the agent leaves
    /// its instances and subscriptions, and the writer gets a last deadline.
    /// `gone` ends when the agent closed its end after all it wanted (a bridge after the
    /// closing note): the writer is then not waited for.
    pub(super) async fn finish(
        mut self,
        close: Close,
        mut writer: JoinHandle<std::io::Result<u64>>,
        gone: impl std::future::Future<Output = ()>,
    ) {
        let agent = self.agent;
        for Out { line, about } in self.held.drain() {
            // Best effort: an agent that is gone or not reading gets no more.
            let _ = match about {
                Some(id) => self.outbox.send_about(&id, line),
                None => self.outbox.send(line),
            };
        }
        self.in_flight.cancel_all();
        self.ctx.agents.leave(agent);
        // Its own server instances (`share = "agent"`) go after a grace period.
        self.ctx.supervisor.agent_gone(agent);
        // Its resource subscriptions end with it.
        {
            let catalog = self.ctx.catalog.borrow();
            for server in self.session.subscribed() {
                if let Ok(h) = crate::agent::resolve::now(&catalog, &self.session, server) {
                    h.forget(agent);
                }
            }
        }
        self.inputs.cancel_parked(&mut self.calls);
        let (calls, outbox) = (&mut self.calls, &self.outbox);
        let flush = tokio::time::timeout(CANCEL_FLUSH, async {
            while let Some((id, step)) = calls.next().await {
                match step {
                    Step::Reply(line) => {
                        outbox.send(line);
                    }
                    Step::Cancelled | Step::Again(_) if close == Close::Shutdown => {
                        let e = AgentError::ShuttingDown.to_error_object();
                        outbox.send(jsonrpc::error_line(Some(&id), &e));
                    }
                    Step::Cancelled | Step::Park { .. } | Step::Again(_) => {}
                }
            }
        });
        if flush.await.is_err() {
            tracing::warn!(
                agent,
                "some cancellations did not reach their servers in time"
            );
        }
        if self.bridge && close == Close::Shutdown {
            // The last line: how many of its lines were taken; it sends the others to
            // the next daemon.
            let params = serde_json::json!({ "taken": self.taken });
            let note = mcpd_ctl::control_api::CLOSING_NOTIFICATION;
            self.outbox
                .send(jsonrpc::notification_line(note, Some(&params)));
        }
        let Conn {
            ctx,
            outbox,
            received,
            ..
        } = self;
        drop(outbox);
        // A subscription's copy of the outbox may keep the writer open a while: a bridge
        // that closed after its closing note has all it wanted.
        let written = async {
            tokio::select! {
                w = &mut writer => Some(w),
                () = gone => None,
            }
        };
        let sent = match tokio::time::timeout(WRITE_FLUSH, written).await {
            Ok(Some(Ok(Ok(n)))) => n,
            Ok(None) => {
                writer.abort();
                0
            }
            Ok(_) => 0,
            Err(_) => {
                // A writer blocked on an agent that does not read would hold the connection
                // open for as long as the agent likes: end it, which closes the socket.
                writer.abort();
                tracing::debug!(agent, "dropped replies to an agent that stopped reading");
                0
            }
        };
        ctx.metrics.bytes(received, sent);
    }
}
