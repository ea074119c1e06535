//! A legacy agent's call to a modern server: mcpd fulfils the server's `input_required` rounds by asking the agent real requests, and follows a task the server runs the call as (the Tasks extension) to its end, so the agent gets a plain result.

use super::render::{self, Rewrite, TaskMode};
use super::reply::Step;
use super::tasks::follow;
use crate::jsonrpc::{self, ErrorObject, Id};
use crate::protocol::{era, method, tasks};
use crate::upstream::{CallId, CallOptions, LogRoute, ProgressSink, ServerAsk, UpstreamHandle};
use futures::FutureExt;
use serde_json::{Map, Value};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Rounds of `input_required` mcpd fulfils for a legacy agent before giving up.
const MAX_INPUT_ROUNDS: usize = 10;
/// A legacy agent's call, which fulfils a modern server's `input_required` itself.
pub struct LegacyCall {
    pub id: Id,
    pub server: Arc<str>,
    pub handle: UpstreamHandle,
    pub call: CallId,
    pub cancel: CancellationToken,
    pub params: super::params::Params,
    pub progress: Option<ProgressSink>,
    /// The capabilities the agent declared in `initialize`.
    pub caps: Arc<Value>,
    /// The actor's service that sends requests to the agent.
    pub asks: mpsc::Sender<Box<ServerAsk>>,
    pub method: &'static str,
    pub rewrite: Rewrite,
    pub logs: Option<LogRoute>,
}

impl LegacyCall {
    /// Not an `async fn`: one keeps its argument twice in its state (the argument, and
    /// the local it is moved into), and this future is allocated for every call.
    #[allow(clippy::manual_async_fn, reason = "see above")]
    pub fn run(mut self) -> impl Future<Output = (Id, Step)> + Send + 'static {
        async move {
            let follow = matches!(
                self.rewrite,
                Rewrite::ToolResult {
                    tasks: TaskMode::Follow,
                    ..
                }
            );
            if follow {
                // A tool that runs only as a 2025-11-25 task, and the agent asked for none.
                let (h, s, p) = (
                    self.handle.clone(),
                    self.server.clone(),
                    self.params.clone().into_map(),
                );
                // Boxed, as are the other rare paths' futures: inline, they would make every
                // call's future (allocated and moved per call) several times larger.
                let followed = follow::follow_legacy(h, self.call, s, p, self.asks.clone()).boxed();
                let finish = Box::pin(self.finish(followed));
                return finish.await;
            }
            if let Rewrite::Task {
                sealed,
                legacy_view: true,
            } = &self.rewrite
                && matches!(self.method, method::TASKS_RESULT | tasks::CANCEL)
            {
                // The agent's 2025-11-25 task is an extension task at its server.
                let task = self
                    .params
                    .parsed()
                    .and_then(|p| p.get("taskId"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let (h, s, caps) = (
                    self.handle.clone(),
                    self.server.clone(),
                    (*self.caps).clone(),
                );
                let followed = if self.method == tasks::CANCEL {
                    follow::cancel_of(h, self.call, (s, task), caps).boxed()
                } else {
                    let ids = (s, task, sealed.clone());
                    follow::result_of(h, self.call, ids, self.asks.clone(), caps).boxed()
                };
                let finish = Box::pin(self.finish(followed));
                return finish.await;
            }
            for _ in 0..MAX_INPUT_ROUNDS {
                let opts = CallOptions {
                    progress: self.progress.clone(),
                    caps: Some(self.caps.clone()),
                    asks: Some(self.asks.clone()),
                    logs: self.logs.clone(),
                };
                let params = self.params.upstream();
                let mut pending = self
                    .handle
                    .call(self.call, self.method, params, opts)
                    .boxed();
                let reply = tokio::select! {
                    r = &mut pending => Some(r),
                    () = self.cancel.cancelled() => None,
                };
                let Some(reply) = reply else {
                    let (h, call) = (self.handle.clone(), self.call);
                    let abandon = Box::pin(super::tasks::abandon::abandon(
                        h,
                        call,
                        pending,
                        &self.rewrite,
                    ));
                    abandon.await;
                    return (self.id, Step::Cancelled);
                };
                // Only a result that may ask for input (a resultType other than complete) is
                // parsed here; any other is passed on.
                let reply = match reply {
                    Ok(Ok(raw)) => {
                        let members = raw.members();
                        let asks_input = members.as_ref().is_none_or(|m| {
                            m.get("resultType").is_some_and(|t| t != "\"complete\"")
                        });
                        if asks_input {
                            raw.to_value().map(Ok)
                        } else {
                            let plain = render::passed_on(members, false, &self.rewrite);
                            let line = render::render_members(
                                &self.id,
                                (&self.server, self.method),
                                raw,
                                plain,
                                false,
                                &self.rewrite,
                            );
                            return (self.id, Step::Reply(line));
                        }
                    }
                    Ok(Err(e)) => Ok(Err(e)),
                    Err(e) => Err(e),
                };
                match reply {
                    Ok(Err(e))
                        if self.method == method::TOOLS_CALL && tasks::requires_extension(&e) =>
                    {
                        // The agent cannot do tasks; mcpd can, and follows this one for it.
                        let (h, s, p) = (
                            self.handle.clone(),
                            self.server.clone(),
                            self.params.clone().into_map(),
                        );
                        let caps = Some((*self.caps).clone());
                        let followed =
                            follow::follow(h, self.call, s, p, self.asks.clone(), caps).boxed();
                        let finish = Box::pin(self.finish(followed));
                        return finish.await;
                    }
                    Ok(Ok(result)) if era::result_type(&result) == "input_required" => {
                        let fulfil = Box::pin(self.fulfil(&result));
                        match fulfil.await {
                            Ok(responses) => self.prepare_retry(&result, responses),
                            Err(e) => {
                                let line = jsonrpc::error_line(Some(&self.id), &e);
                                return (self.id, Step::Reply(line));
                            }
                        }
                    }
                    other => {
                        let line = render::render(
                            &self.id,
                            &self.server,
                            self.method,
                            other,
                            false,
                            &self.rewrite,
                        );
                        return (self.id, Step::Reply(line));
                    }
                }
            }
            let e = ErrorObject::new(
                jsonrpc::code::INTERNAL_ERROR,
                format!(
                    "server '{}' asked for input more than {MAX_INPUT_ROUNDS} times in one call; mcpd gave up",
                    self.server
                ),
            );
            (
                self.id.clone(),
                Step::Reply(jsonrpc::error_line(Some(&self.id), &e)),
            )
        }
    }

    /// The answer of a task mcpd follows for the agent (`tasks/follow.rs`), rendered for
    /// a legacy agent; the agent's cancellation drops the follow, which cancels the task.
    async fn finish(
        self,
        followed: impl std::future::Future<Output = crate::upstream::RawReply>,
    ) -> (Id, Step) {
        let reply = tokio::select! {
            r = followed => r,
            () = self.cancel.cancelled() => {
                self.handle.cancel(self.call, "cancelled by the agent").await;
                return (self.id, Step::Cancelled);
            }
        };
        let line = render::render_raw(
            &self.id,
            &self.server,
            self.method,
            reply,
            false,
            &self.rewrite,
        );
        (self.id, Step::Reply(line))
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
            let gone = || {
                ErrorObject::new(
                    jsonrpc::code::INTERNAL_ERROR,
                    "the agent connection is closing".to_owned(),
                )
            };
            self.asks.send(Box::new(ask)).await.map_err(|_| gone())?;
            let answer = tokio::select! {
                a = rx => a.map_err(|_| gone())?,
                () = self.cancel.cancelled() => return Err(gone()),
            };
            match answer {
                Ok(v) => {
                    responses.insert(key.clone(), v);
                }
                Err(e) => {
                    return Err(ErrorObject::new(
                        e.code,
                        format!(
                            "server '{}' needs {method} to finish this call: {}",
                            self.server, e.message
                        ),
                    ));
                }
            }
        }
        Ok(responses)
    }

    fn prepare_retry(&mut self, result: &Value, responses: Map<String, Value>) {
        self.params.change(|params| {
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
