//! The handle of an upstream connection's actor.
//!
//! The messages its mailbox takes, and the calls that send them and wait for the reply
//! within a backstop deadline.

use super::{CallId, CallOptions, CallParams, LiveStatus, RawReply, Reply, ReplyTo, UpstreamError};
use mcpd_runtime::outbox::Outbox;
use serde_json::Value;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

pub(crate) enum UpstreamMsg {
    Request {
        call: Option<CallId>,
        method: &'static str,
        params: CallParams,
        opts: CallOptions,
        respond_to: ReplyTo,
    },
    Cancel {
        call: CallId,
        reason: String,
    },
    Status {
        respond_to: oneshot::Sender<LiveStatus>,
    },
    /// An agent subscribes to (or unsubscribes from) updates of a resource.
    Subscribe {
        sub: Subscription,
        on: bool,
        respond_to: oneshot::Sender<Reply>,
    },
    /// An agent went away: drop all its subscriptions.
    Forget {
        agent: u64,
    },
}

/// One agent's subscription to one of a server's resources.
#[derive(Debug, Clone)]
pub struct Subscription {
    /// The server's own URI.
    pub uri: String,
    /// The URI the agent knows it by.
    pub presented: String,
    pub agent: u64,
    pub outbox: Outbox,
    /// For a modern agent, the `subscriptions/listen` it came with (its notifications
    /// carry that id).
    pub listen: Option<mcpd_wire::jsonrpc::Id>,
}

/// How long a 2025-11-25 `tasks/result` may wait for its task's end.
pub const TASK_WAIT: Duration = Duration::from_secs(24 * 3600);
/// How much longer than the connection's own timeout a caller waits at most.
pub(super) const BACKSTOP: Duration = Duration::from_secs(2);

/// The cloneable way to talk to one upstream connection.
#[derive(Debug, Clone)]
pub struct UpstreamHandle {
    pub(super) tx: mpsc::Sender<UpstreamMsg>,
    /// The longest a caller waits for a reply, whatever happens to the connection.
    pub(super) deadline: Duration,
    /// The connection's instance number, unique in the daemon: a server's task ids are
    /// its own process's, and a restarted server may give the same ids again.
    pub(super) instance: u64,
}

impl std::fmt::Debug for UpstreamMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpstreamMsg::Request { method, call, .. } => write!(f, "Request({method}, {call:?})"),
            UpstreamMsg::Cancel { call, .. } => write!(f, "Cancel({call})"),
            UpstreamMsg::Status { .. } => write!(f, "Status"),
            UpstreamMsg::Subscribe { sub, on, .. } => write!(f, "Subscribe({}, {on})", sub.uri),
            UpstreamMsg::Forget { agent } => write!(f, "Forget({agent})"),
        }
    }
}

fn request_msg(
    call: Option<CallId>,
    method: &'static str,
    params: CallParams,
    opts: CallOptions,
    respond_to: ReplyTo,
) -> UpstreamMsg {
    UpstreamMsg::Request {
        call,
        method,
        params,
        opts,
        respond_to,
    }
}

impl UpstreamHandle {
    /// The connection's instance number (the one [`super::TaskStatus`] carries).
    pub fn instance(&self) -> u64 {
        self.instance
    }

    /// Sends a request for an agent call and waits for its outcome. Waiting here never
    /// blocks the caller's actor: agents await this inside their in-flight set. The
    /// message is made before the future, which borrows nothing: it holds the message
    /// and the wait for its reply, not the arguments as well (each call's future is
    /// allocated, and moved while it is).
    pub fn call(
        &self,
        call: CallId,
        method: &'static str,
        params: impl Into<CallParams>,
        opts: CallOptions,
    ) -> impl Future<Output = RawReply> + Send + 'static {
        let deadline = match method {
            mcpd_wire::protocol::method::TASKS_RESULT => TASK_WAIT + BACKSTOP,
            _ => self.deadline,
        };
        let (respond_to, rx) = oneshot::channel();
        let msg = request_msg(
            Some(call),
            method,
            params.into(),
            opts,
            ReplyTo::Raw(respond_to),
        );
        self.send_request(deadline, msg, rx)
    }

    /// A request of mcpd's own (catalog fetches).
    pub async fn request(&self, method: &'static str, params: Option<Value>) -> Reply {
        let (respond_to, rx) = oneshot::channel();
        let msg = request_msg(
            None,
            method,
            params.into(),
            CallOptions::default(),
            ReplyTo::Value(respond_to),
        );
        self.send_request(self.deadline, msg, rx).await
    }

    /// Sends a message and waits for its reply, both within the backstop deadline: a
    /// connection whose mailbox stays full holds no caller longer than a slow one. The
    /// future borrows nothing (it holds its own sender).
    fn send_request<T: Send + 'static>(
        &self,
        deadline: Duration,
        msg: UpstreamMsg,
        rx: oneshot::Receiver<Result<T, UpstreamError>>,
    ) -> impl Future<Output = Result<T, UpstreamError>> + Send + 'static {
        let tx = self.tx.clone();
        async move {
            match mcpd_runtime::ask::deliver(&tx, deadline, msg, rx).await {
                Ok(reply) => reply,
                Err(mcpd_runtime::ask::AskError::Gone) => Err(UpstreamError::Gone),
                Err(mcpd_runtime::ask::AskError::Timeout(after)) => {
                    Err(UpstreamError::Timeout { after })
                }
            }
        }
    }

    /// Asks the connection to cancel a call: the server gets `notifications/cancelled`
    /// and a late answer is dropped.
    pub async fn cancel(&self, call: CallId, reason: &str) {
        let msg = UpstreamMsg::Cancel {
            call,
            reason: reason.to_owned(),
        };
        // The connection may have ended already; then there is nothing left to cancel.
        // A mailbox that stays full for the whole deadline belongs to a stuck
        // connection, whose own timeouts end the call.
        let _ = tokio::time::timeout(self.deadline, self.tx.send(msg)).await;
    }

    /// Subscribes an agent to a resource's updates (or ends it). The server hears of the
    /// first subscriber and of the last one leaving.
    pub async fn subscribe(&self, sub: Subscription, on: bool) -> Reply {
        let (respond_to, rx) = oneshot::channel();
        let msg = UpstreamMsg::Subscribe {
            sub,
            on,
            respond_to,
        };
        self.send_request(self.deadline, msg, rx).await
    }

    /// Drops every subscription of an agent that went away.
    pub fn forget(&self, agent: u64) {
        // If the mailbox is full or closed, the connection is busy or gone; its
        // subscriptions go with it in the second case and stay harmless in the first.
        let _ = self.tx.try_send(UpstreamMsg::Forget { agent });
    }

    pub async fn live_status(&self) -> Option<LiveStatus> {
        let (respond_to, rx) = oneshot::channel();
        self.tx
            .send(UpstreamMsg::Status { respond_to })
            .await
            .ok()?;
        rx.await.ok()
    }
}
