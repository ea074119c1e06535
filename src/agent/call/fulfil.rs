//! The branch of an `initialize`-era agent's call.
//!
//! mcpd fulfils a 2026-07-28 server's `input_required` rounds by asking the agent real
//! requests, and follows a task the server runs the call as (the Tasks extension) to its
//! end, so the agent gets a plain result in its era's shape.

use super::{Call, Work};
use crate::agent::render;
use crate::agent::reply::{ReplyFuture, Step};
use crate::agent::tasks::follow;
use crate::errors::InputError;
use crate::upstream::{CallOptions, RawReply, Reply, ServerAsk};
use futures::FutureExt;
use mcpd_wire::jsonrpc::{self, ErrorObject, Id};
use mcpd_wire::protocol::era::{self, Era};
use mcpd_wire::protocol::tasks;
use serde_json::{Map, Value};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// Rounds of `input_required` mcpd fulfils for an agent before giving up.
const MAX_INPUT_ROUNDS: usize = 10;

/// An agent's call whose server's `input_required` rounds mcpd fulfils itself.
pub struct Fulfil {
    pub call: Call,
    /// What the call asks of its server (its plan's `work`).
    pub work: Work,
    /// The capabilities the agent declared in `initialize`.
    pub caps: Arc<Value>,
    /// The actor's service that sends requests to the agent.
    pub asks: mpsc::Sender<Box<ServerAsk>>,
}

/// What one round's answer calls for.
enum Next {
    /// The agent's answer.
    Answer(String),
    /// The server runs the tool only as a task: mcpd follows it for the agent.
    FollowExtension,
    /// The server asks for input (the `input_required` result).
    Input(Value),
}

impl Fulfil {
    /// The future of the call's answer. Each path is its own future, boxed once as every
    /// call's is: one wrapping them would hold the call twice (its own argument, and the
    /// path's), and this future is allocated for every call.
    pub fn run(self) -> ReplyFuture {
        match self.work {
            Work::FollowTask => {
                // A tool that runs only as a 2025-11-25 task, and the agent asked for none.
                let c = &self.call;
                let (h, s, p) = (c.handle.clone(), c.server.clone(), c.params.clone());
                let followed = follow::follow_legacy(h, c.call, s, p.into_map(), self.asks.clone());
                self.finish(followed).boxed()
            }
            Work::TaskResult | Work::TaskCancel => self.extension_task(),
            Work::Plain | Work::BridgeTask => self.rounds().boxed(),
        }
    }

    /// The agent's 2025-11-25 task is an extension task at its server: its `tasks/result`
    /// or `tasks/cancel` is translated.
    fn extension_task(self) -> ReplyFuture {
        let c = &self.call;
        let crate::agent::render::Rewrite::Task { sealed, .. } = &c.rewrite else {
            // The plan names this path only for a task's rewrite.
            return self.rounds().boxed();
        };
        let task = c
            .params
            .parsed()
            .and_then(|p| p.get("taskId"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let (h, s, caps) = (c.handle.clone(), c.server.clone(), (*self.caps).clone());
        let followed = if self.work == Work::TaskCancel {
            follow::cancel_of(h, c.call, (s, task), caps).boxed()
        } else {
            let ids = (s, task, sealed.clone());
            follow::result_of(h, c.call, ids, self.asks.clone(), caps).boxed()
        };
        self.finish(followed).boxed()
    }

    /// Sends the call, fulfils the input its server asks for and sends it again, until
    /// the server answers (or asks too often). Not an `async fn`: one keeps its argument
    /// twice in its state (the argument, and the local it is moved into).
    #[allow(clippy::manual_async_fn, reason = "see above")]
    fn rounds(mut self) -> impl Future<Output = (Id, Step)> + Send + 'static {
        async move {
            for _ in 0..MAX_INPUT_ROUNDS {
                let Some(reply) = self.send().await else {
                    return (self.call.id, Step::Cancelled);
                };
                match self.read(reply) {
                    Next::Answer(line) => return (self.call.id, Step::Reply(line)),
                    Next::FollowExtension => {
                        // The agent cannot do tasks; mcpd can, and follows this one for it.
                        let c = &self.call;
                        let (h, s, p) = (c.handle.clone(), c.server.clone(), c.params.clone());
                        let caps = Some((*self.caps).clone());
                        let followed =
                            follow::follow(h, c.call, s, p.into_map(), self.asks.clone(), caps)
                                .boxed();
                        return Box::pin(self.finish(followed)).await;
                    }
                    Next::Input(result) => match Box::pin(self.fulfil(&result)).await {
                        Ok(responses) => self.prepare_retry(&result, responses),
                        Err(e) => {
                            let line = jsonrpc::error_line(Some(&self.call.id), &e);
                            return (self.call.id, Step::Reply(line));
                        }
                    },
                }
            }
            let e = InputError::TooManyRounds {
                server: self.call.server.to_string(),
                rounds: MAX_INPUT_ROUNDS,
            }
            .to_error_object();
            let line = jsonrpc::error_line(Some(&self.call.id), &e);
            (self.call.id, Step::Reply(line))
        }
    }

    /// Sends one round of the call; None when the agent cancelled it meanwhile (and the
    /// task it may have made is abandoned).
    async fn send(&self) -> Option<RawReply> {
        let c = &self.call;
        let opts = CallOptions {
            progress: c.progress.clone(),
            caps: Some(self.caps.clone()),
            asks: Some(self.asks.clone()),
            logs: c.logs.clone(),
        };
        let mut pending = c
            .handle
            .call(c.call, c.method, c.params.upstream(), opts)
            .boxed();
        let reply = tokio::select! {
            r = &mut pending => Some(r),
            () = c.cancel.cancelled() => None,
        };
        if reply.is_none() {
            let h = c.handle.clone();
            Box::pin(crate::agent::tasks::abandon::abandon(
                h, c.call, pending, &c.rewrite,
            ))
            .await;
        }
        reply
    }

    /// What one round's reply calls for. Only a result that may ask for input (a
    /// resultType other than complete) is parsed here; any other is passed on.
    fn read(&self, reply: RawReply) -> Next {
        let c = &self.call;
        let reply: Reply = match reply {
            Ok(Ok(raw)) => {
                let members = raw.members();
                let asks_input = members
                    .as_ref()
                    .is_none_or(|m| m.get("resultType").is_some_and(|t| t != "\"complete\""));
                if !asks_input {
                    let plain = render::passed_on(members, Era::Legacy, &c.rewrite);
                    let (server, method) = (&*c.server, c.method);
                    return Next::Answer(render::render_members(
                        &c.id,
                        (server, method),
                        raw,
                        plain,
                        Era::Legacy,
                        &c.rewrite,
                    ));
                }
                raw.to_value().map(Ok)
            }
            Ok(Err(e)) => Ok(Err(e)),
            Err(e) => Err(e),
        };
        match reply {
            Ok(Err(e)) if self.work == Work::BridgeTask && tasks::requires_extension(&e) => {
                Next::FollowExtension
            }
            Ok(Ok(result)) if era::result_type(&result) == "input_required" => Next::Input(result),
            other => Next::Answer(render::render(
                &c.id,
                &c.server,
                c.method,
                other,
                Era::Legacy,
                &c.rewrite,
            )),
        }
    }

    /// The answer of a task mcpd follows for the agent (`tasks/follow.rs`), rendered for
    /// the agent's era; the agent's cancellation drops the follow, which cancels the task.
    async fn finish(self, followed: impl Future<Output = RawReply>) -> (Id, Step) {
        let c = self.call;
        let reply = tokio::select! {
            r = followed => r,
            () = c.cancel.cancelled() => {
                c.handle.cancel(c.call, "cancelled by the agent").await;
                return (c.id, Step::Cancelled);
            }
        };
        let line = render::render_raw(&c.id, &c.server, c.method, reply, Era::Legacy, &c.rewrite);
        (c.id, Step::Reply(line))
    }

    /// Asks the agent each of the server's input requests, as real requests.
    async fn fulfil(&self, result: &Value) -> Result<Map<String, Value>, ErrorObject> {
        let mut responses = Map::new();
        let requests = result.get("inputRequests").and_then(Value::as_object);
        for (key, req) in requests.into_iter().flatten() {
            let method = req.get("method").and_then(Value::as_str).unwrap_or("");
            let (respond_to, rx) = oneshot::channel();
            let ask = ServerAsk {
                method: method.to_owned(),
                params: req.get("params").cloned(),
                respond_to,
            };
            let gone = || InputError::AgentClosing.to_error_object();
            self.asks.send(Box::new(ask)).await.map_err(|_| gone())?;
            let answer = tokio::select! {
                a = rx => a.map_err(|_| gone())?,
                () = self.call.cancel.cancelled() => return Err(gone()),
            };
            match answer {
                Ok(v) => {
                    responses.insert(key.clone(), v);
                }
                Err(e) => {
                    return Err(InputError::AgentRefused {
                        server: self.call.server.to_string(),
                        method: method.to_owned(),
                        refusal: e,
                    }
                    .to_error_object());
                }
            }
        }
        Ok(responses)
    }

    fn prepare_retry(&mut self, result: &Value, responses: Map<String, Value>) {
        self.call.params.change(|params| {
            params.insert("inputResponses".into(), Value::Object(responses));
            // The state is echoed byte for byte; without one, none is sent.
            match result.get("requestState") {
                Some(state) => {
                    params.insert("requestState".into(), state.clone());
                }
                None => {
                    params.remove("requestState");
                }
            }
        });
    }
}
