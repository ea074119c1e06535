//! A legacy agent's call to a modern server: mcpd fulfils the server's `input_required` rounds by asking the agent real requests, and follows a task the server runs the call as (the Tasks extension) to its end, so the agent gets a plain result.

use super::render::{self, Rewrite, TaskMode};
use super::reply::Step;
use crate::jsonrpc::{self, ErrorObject, Id};
use crate::protocol::results::RawMembers;
use crate::protocol::{era, method, tasks};
use crate::upstream::{CallId, CallOptions, LogRoute, ProgressSink, ServerAsk, UpstreamHandle};
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Rounds of `input_required` mcpd fulfils for a legacy agent before giving up.
const MAX_INPUT_ROUNDS: usize = 10;
/// How often a task is polled when its server does not say (`pollIntervalMs`), and the
/// bounds put on what it says.
const POLL_DEFAULT: Duration = Duration::from_secs(1);
const POLL_MIN: Duration = Duration::from_millis(10);
const POLL_MAX: Duration = Duration::from_secs(30);
/// How long mcpd follows a task whose server gave it no lifetime (`ttlMs`).
const FOLLOW_MAX: Duration = Duration::from_secs(24 * 3600);
/// How long a `tasks/cancel` mcpd sends is waited for.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

fn internal(message: &str) -> ErrorObject {
    ErrorObject::new(jsonrpc::code::INTERNAL_ERROR, message.to_owned())
}

/// A legacy agent's call, which fulfils a modern server's `input_required` itself.
pub struct LegacyCall {
    pub id: Id,
    pub server: Arc<str>,
    pub handle: UpstreamHandle,
    pub call: CallId,
    pub cancel: CancellationToken,
    pub params: Map<String, Value>,
    pub progress: Option<ProgressSink>,
    /// The capabilities the agent declared in `initialize`.
    pub caps: Value,
    /// The actor's service that sends requests to the agent.
    pub asks: mpsc::Sender<ServerAsk>,
    pub method: &'static str,
    pub rewrite: Rewrite,
    pub logs: Option<LogRoute>,
    /// mcpd declared the Tasks extension for this call (the server said it runs the
    /// tool only as a task), and follows the task itself.
    pub tasks: bool,
}

impl LegacyCall {
    pub async fn run(mut self) -> (Id, Step) {
        let follow = matches!(
            self.rewrite,
            Rewrite::ToolResult {
                tasks: TaskMode::Follow,
                ..
            }
        );
        if follow {
            self.params.insert("task".into(), json!({}));
        }
        for _ in 0..MAX_INPUT_ROUNDS {
            let opts = CallOptions {
                progress: self.progress.clone(),
                caps: Some(self.caps.clone()),
                asks: Some(self.asks.clone()),
                logs: self.logs.clone(),
            };
            let params = Some(Value::Object(self.params.clone()));
            let reply = tokio::select! {
                r = self.handle.call(self.call, self.method, params, opts) => r,
                () = self.cancel.cancelled() => {
                    self.handle.cancel(self.call, "cancelled by the agent").await;
                    return (self.id, Step::Cancelled);
                }
            };
            // Only a result that may ask for input (a resultType other than complete) is
            // parsed here; any other is passed on.
            let reply = match reply {
                Ok(Ok(raw)) => {
                    let members = RawMembers::of(raw.get());
                    let asks_input = members
                        .as_ref()
                        .is_none_or(|m| m.get("resultType").is_some_and(|t| t != "\"complete\""));
                    if asks_input || follow {
                        raw.to_value().map(Ok)
                    } else {
                        let line = render::render_members(
                            &self.id,
                            (&self.server, self.method),
                            &raw,
                            members,
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
                Ok(Ok(result)) if follow && result.pointer("/task/taskId").is_some() => {
                    return self.follow_legacy(&result).await;
                }
                Ok(Ok(result)) if self.tasks && era::result_type(&result) == "task" => {
                    return self.follow(result).await;
                }
                Ok(Err(e))
                    if !self.tasks
                        && self.method == method::TOOLS_CALL
                        && tasks::requires_extension(&e) =>
                {
                    // The agent cannot do tasks; mcpd can, and follows this one for it.
                    tasks::declare(&mut self.caps);
                    self.tasks = true;
                }
                Ok(Ok(result)) if era::result_type(&result) == "input_required" => {
                    match self.fulfil(&result).await {
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

    /// Follows the task the server made of this call to its end: polls `tasks/get` as
    /// often as the server asks, fulfils its input requests through the agent
    /// (`tasks/update`), and answers the call with the task's result or error. The
    /// agent's cancellation (or its leaving) cancels the task.
    async fn follow(mut self, created: Value) -> (Id, Step) {
        let Some(task) = created
            .get("taskId")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return self.fail("the server's task has no taskId");
        };
        let lifetime = created
            .get("ttlMs")
            .and_then(Value::as_u64)
            .map_or(FOLLOW_MAX, |ms| Duration::from_millis(ms).min(FOLLOW_MAX));
        let until = tokio::time::Instant::now() + lifetime;
        let mut status = created;
        let mut answered = HashSet::new();
        let mut rounds = 0;
        loop {
            match status.get("status").and_then(Value::as_str).unwrap_or("") {
                "completed" => {
                    let result = status.get("result").cloned().unwrap_or(Value::Null);
                    let line = render::render(
                        &self.id,
                        &self.server,
                        self.method,
                        Ok(Ok(result)),
                        false,
                        &self.rewrite,
                    );
                    return (self.id, Step::Reply(line));
                }
                "failed" => {
                    let e = status
                        .get("error")
                        .and_then(ErrorObject::from_value)
                        .unwrap_or_else(|| internal("the server's task failed without an error"));
                    return (
                        self.id.clone(),
                        Step::Reply(jsonrpc::error_line(Some(&self.id), &e)),
                    );
                }
                "cancelled" => {
                    return self.fail("the server cancelled the task it ran this call as");
                }
                "input_required" => {
                    let pending: Map<String, Value> = status
                        .get("inputRequests")
                        .and_then(Value::as_object)
                        .into_iter()
                        .flatten()
                        .filter(|(k, _)| !answered.contains(*k))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    if !pending.is_empty() {
                        rounds += 1;
                        if rounds > MAX_INPUT_ROUNDS {
                            self.cancel_task(&task).await;
                            return self.fail("the server's task asked for input too many times; mcpd cancelled it");
                        }
                        answered.extend(pending.keys().cloned());
                        let responses = match self.fulfil(&json!({"inputRequests": pending})).await
                        {
                            Ok(r) => r,
                            Err(e) => {
                                self.cancel_task(&task).await;
                                return (
                                    self.id.clone(),
                                    Step::Reply(jsonrpc::error_line(Some(&self.id), &e)),
                                );
                            }
                        };
                        let update = json!({"taskId": task, "inputResponses": responses});
                        if let Err(step) = self.task_request(tasks::UPDATE, update).await {
                            return step;
                        }
                        // The answers may move the task on at once.
                        status = match self.task_request(tasks::GET, json!({"taskId": task})).await
                        {
                            Ok(v) => v,
                            Err(step) => return step,
                        };
                        continue;
                    }
                }
                "working" => {}
                other => {
                    self.cancel_task(&task).await;
                    return self.fail(&format!(
                        "the server's task has an unknown status {other:?}"
                    ));
                }
            }
            if tokio::time::Instant::now() >= until {
                self.cancel_task(&task).await;
                return self.fail("the server's task outlived its ttlMs; mcpd cancelled it");
            }
            let wait = status
                .get("pollIntervalMs")
                .and_then(Value::as_u64)
                .map_or(POLL_DEFAULT, Duration::from_millis)
                .clamp(POLL_MIN, POLL_MAX);
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.cancel.cancelled() => {
                    self.cancel_task(&task).await;
                    return (self.id, Step::Cancelled);
                }
            }
            status = match self.task_request(tasks::GET, json!({"taskId": task})).await {
                Ok(v) => v,
                Err(step) => return step,
            };
        }
    }

    /// Follows a 2025-11-25 task mcpd asked for: `tasks/result` waits for its end (the
    /// server's requests meanwhile reach the agent as during any call), and its result,
    /// without the related-task `_meta`, answers the call. The agent's cancellation
    /// cancels the task.
    async fn follow_legacy(mut self, created: &Value) -> (Id, Step) {
        let Some(task) = created
            .pointer("/task/taskId")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return self.fail("the server's task has no taskId");
        };
        let mut result = match self
            .task_request(method::TASKS_RESULT, json!({"taskId": task}))
            .await
        {
            Ok(v) => v,
            Err(step) => return step,
        };
        if let Some(meta) = result.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.remove(super::task_ids::RELATED);
        }
        let plain = Rewrite::ToolResult {
            output_schema: None,
            limits: crate::protocol::results::Limits::default(),
            tasks: TaskMode::None,
        };
        let rewrite = match &self.rewrite {
            Rewrite::ToolResult {
                output_schema,
                limits,
                ..
            } => Rewrite::ToolResult {
                output_schema: output_schema.clone(),
                limits: *limits,
                tasks: TaskMode::None,
            },
            _ => plain,
        };
        let line = render::render(
            &self.id,
            &self.server,
            self.method,
            Ok(Ok(result)),
            false,
            &rewrite,
        );
        (self.id, Step::Reply(line))
    }

    /// One request about the task, with the extension declared; Err is the call's
    /// answer (the server's error, or why there is none), or its cancellation.
    async fn task_request(
        &mut self,
        method: &'static str,
        params: Value,
    ) -> Result<Value, (Id, Step)> {
        let opts = CallOptions {
            progress: None,
            caps: Some(self.caps.clone()),
            asks: Some(self.asks.clone()),
            logs: self.logs.clone(),
        };
        let reply = tokio::select! {
            r = self.handle.call(self.call, method, Some(params.clone()), opts) => r,
            () = self.cancel.cancelled() => {
                self.handle.cancel(self.call, "cancelled by the agent").await;
                if let Some(task) = params.get("taskId").and_then(Value::as_str) {
                    self.cancel_task(task).await;
                }
                return Err((self.id.clone(), Step::Cancelled));
            }
        };
        match reply.map(|r| r.map(|raw| raw.to_value())) {
            Ok(Ok(Ok(v))) => Ok(v),
            Ok(Ok(Err(e))) => {
                Err(self.fail(&format!("the server's {method} answer is not JSON: {e}")))
            }
            Ok(Err(e)) => Err((
                self.id.clone(),
                Step::Reply(jsonrpc::error_line(Some(&self.id), &e)),
            )),
            Err(e) => {
                let line = render::render(
                    &self.id,
                    &self.server,
                    method,
                    Err(e),
                    false,
                    &Rewrite::None,
                );
                Err((self.id.clone(), Step::Reply(line)))
            }
        }
    }

    /// Asks the server to cancel the task, best effort: the call is over either way.
    async fn cancel_task(&self, task: &str) {
        let opts = CallOptions {
            progress: None,
            caps: Some(self.caps.clone()),
            asks: None,
            logs: None,
        };
        let params = Some(json!({"taskId": task}));
        let cancel = self.handle.call(self.call, tasks::CANCEL, params, opts);
        if tokio::time::timeout(CANCEL_WAIT, cancel).await.is_err() {
            tracing::debug!(upstream = %self.server, "tasks/cancel got no answer in time");
        }
    }

    fn fail(&self, why: &str) -> (Id, Step) {
        let e = internal(&format!("server '{}': {why}", self.server));
        (
            self.id.clone(),
            Step::Reply(jsonrpc::error_line(Some(&self.id), &e)),
        )
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
            self.asks.send(ask).await.map_err(|_| gone())?;
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
        self.params
            .insert("inputResponses".into(), Value::Object(responses));
        // The state is echoed byte for byte; without one, none is sent.
        match result.get("requestState") {
            Some(state) => {
                self.params.insert("requestState".into(), state.clone());
            }
            None => {
                self.params.remove("requestState");
            }
        }
    }
}
