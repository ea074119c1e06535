//! Subscriptions to the server's changes.
//!
//! A modern server's `subscriptions/listen` and agents' resource subscriptions.

use super::{Actor, LISTEN_RETRY, ListenState, PendingRequest, Responder};
use crate::upstream::dress;
use crate::upstream::transport::Outbound;
use crate::upstream::{CallOptions, Reply, ReplyTo, Subscription};
use mcpd_wire::jsonrpc::ErrorObject;
use mcpd_wire::protocol::era::Era;
use mcpd_wire::protocol::method;
use serde_json::json;
use tokio::sync::oneshot;
use tokio::time::Instant;

impl Actor {
    /// Asks a modern server to tell us of tool-list changes. The request stays open
    /// without a deadline while the server is up.
    pub(super) fn open_listen(&mut self) {
        let id = self.next_id;
        self.next_id += 1;
        let (line, sent) = self.dress().request(
            id,
            method::LISTEN,
            Some(dress::listen_params(&self.subs.uris())),
            None,
        );
        if self
            .out
            .try_send(Outbound::Message {
                line,
                request: Some(sent),
            })
            .is_err()
        {
            self.listen = ListenState::RetryAt(Instant::now() + LISTEN_RETRY);
            return;
        }
        self.pending.insert(
            id,
            PendingRequest {
                call: None,
                task: None,
                method: method::LISTEN,
                respond_to: Responder::Listen,
                progress: None,
                deadline: None,
                resumes: 0,
                asks: None,
                logs: None,
            },
        );
        self.listen = ListenState::Open(id);
    }

    pub(super) fn listen_ended(&mut self) {
        tracing::debug!(upstream = %self.server, "the server ended our subscription; reopening it soon");
        self.listen = ListenState::RetryAt(Instant::now() + LISTEN_RETRY);
    }

    /// An agent subscribes or unsubscribes. A legacy server hears `resources/subscribe`
    /// for the first subscriber of a URI and `resources/unsubscribe` for the last; a
    /// modern server gets a new `subscriptions/listen` with the new set of URIs.
    pub(super) fn on_subscribe(
        &mut self,
        sub: Subscription,
        on: bool,
        respond_to: oneshot::Sender<Reply>,
    ) {
        let uri = sub.uri.clone();
        let changed = if on {
            match self.subs.add(sub) {
                Ok(first) => first,
                Err(too_many) => {
                    // Mapped here, not in `errors` (which names the upstream side: an
                    // import loop); tidy's error_codes::ALLOWED says so too.
                    let e =
                        ErrorObject::new(mcpd_wire::jsonrpc::mcpd_code::BUSY, too_many.to_string());
                    let _ = respond_to.send(Ok(Err(e))); // the agent may have gone
                    return;
                }
            }
        } else {
            self.subs.remove(&uri, sub.agent)
        };
        if !changed {
            let _ = respond_to.send(Ok(Ok(json!({})))); // the agent may have gone
            return;
        }
        match self.era {
            Era::Legacy => {
                let m = if on {
                    method::RESOURCES_SUBSCRIBE
                } else {
                    method::RESOURCES_UNSUBSCRIBE
                };
                self.send_request(
                    None,
                    m,
                    Some(json!({ "uri": uri })).into(),
                    CallOptions::default(),
                    ReplyTo::Value(respond_to),
                );
            }
            Era::Modern => {
                self.reopen_listen();
                let _ = respond_to.send(Ok(Ok(json!({}))));
            }
        }
    }

    /// Nobody watches `uris` any more: tell the server.
    pub(super) fn subscriptions_changed(&mut self, uris: Vec<String>) {
        match self.era {
            Era::Legacy => {
                for uri in uris {
                    // Nobody waits for this answer.
                    let (respond_to, _) = oneshot::channel();
                    let params = Some(json!({ "uri": uri }));
                    self.send_request(
                        None,
                        method::RESOURCES_UNSUBSCRIBE,
                        params.into(),
                        CallOptions::default(),
                        ReplyTo::Value(respond_to),
                    );
                }
            }
            Era::Modern => self.reopen_listen(),
        }
    }

    /// Replaces the modern server's subscription with one for the current filter.
    fn reopen_listen(&mut self) {
        if let ListenState::Open(id) = self.listen {
            self.take_pending(id);
            self.send_cancelled(id, "the subscription changed");
            let _ = self.out.try_send(Outbound::Abort(id)); // full: the transport is stuck anyway
        }
        self.open_listen();
    }
}
