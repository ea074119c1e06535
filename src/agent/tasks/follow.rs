//! Calls a server runs only as a task, for agents that asked for none.
//!
//! mcpd makes the task (declaring the extension, or adding 2025-11-25's `task`) and
//! follows it to its result, its input requests going to the agent as requests (legacy
//! agents) or `input_required` rounds (modern ones).
//!
//! The follow is part of the call's future, so it lives inside the agent's actor like
//! any call. A task's input request becomes a server request on the call's request
//! channel, the path a server's elicitation takes during any call: a legacy agent gets a
//! real request; for a modern agent the actor parks the call, answers `input_required`
//! with a sealed `requestState`, and hands the agent's answer back. If the call ends
//! early (the agent cancels or goes away), the task is cancelled at its server.

use crate::errors::TaskError;
use crate::upstream::{CallId, CallOptions, RawReply, RawResult, ServerAsk, UpstreamHandle};
use mcpd_wire::jsonrpc::ErrorObject;
use mcpd_wire::protocol::era::key;
use mcpd_wire::protocol::{method, tasks};
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How often a task is polled when its server does not say, and the bounds put on what
/// it says; how long it is followed at most; rounds of input at most.
const POLL_DEFAULT: Duration = Duration::from_secs(1);
const POLL_MIN: Duration = Duration::from_millis(10);
const POLL_MAX: Duration = Duration::from_secs(30);
const FOLLOW_MAX: Duration = Duration::from_secs(24 * 3600);
const MAX_INPUT_ROUNDS: usize = 10;

fn internal(server: &str, why: &str) -> ErrorObject {
    let (server, why) = (server.to_owned(), why.to_owned());
    TaskError::Server { server, why }.to_error_object()
}

/// Cancels the task at its server if the follow is dropped before the task ended.
struct Guard {
    handle: UpstreamHandle,
    call: CallId,
    meta: Value,
    task: Option<String>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let Some(task) = self.task.take() else {
            return;
        };
        let (handle, call) = (self.handle.clone(), self.call);
        let params = json!({"taskId": task, "_meta": self.meta.clone()});
        mcpd_runtime::tracker::spawn(async move {
            let cancel = handle.call(call, tasks::CANCEL, Some(params), CallOptions::default());
            // Best effort: the call is over either way.
            let _ = tokio::time::timeout(Duration::from_secs(5), cancel).await;
        });
    }
}

/// A modern agent's call of a tool that runs only as a 2025-11-25 task (`taskSupport:
/// "required"`) on a legacy server: the call with the `task` parameter, then
/// `tasks/result`, which waits for the end. The server's requests meanwhile take the
/// call's channel, so they reach the agent as `input_required` rounds.
pub async fn follow_legacy(
    handle: UpstreamHandle,
    call: CallId,
    server: Arc<str>,
    mut params: Map<String, Value>,
    asks: mpsc::Sender<Box<ServerAsk>>,
) -> RawReply {
    params.insert("task".into(), json!({}));
    let opts = || CallOptions {
        asks: Some(asks.clone()),
        ..CallOptions::default()
    };
    let created = match handle
        .call(
            call,
            method::TOOLS_CALL,
            Some(Value::Object(params)),
            opts(),
        )
        .await
    {
        Ok(Ok(raw)) => match raw.to_value() {
            Ok(v) => v,
            Err(e) => return Err(e),
        },
        other => return other,
    };
    let Some(task) = created
        .pointer("/task/taskId")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        // Answered at once after all.
        return Ok(Ok(RawResult::from_value(&created)));
    };
    let mut guard = Guard {
        handle: handle.clone(),
        call,
        meta: json!({}),
        task: Some(task.clone()),
    };
    let reply = handle
        .call(
            call,
            method::TASKS_RESULT,
            Some(json!({"taskId": task})),
            opts(),
        )
        .await;
    guard.task = None;
    match reply {
        Ok(Ok(raw)) => match raw.to_value() {
            Ok(mut result) => {
                if let Some(meta) = result.get_mut("_meta").and_then(Value::as_object_mut) {
                    meta.remove(super::ids::RELATED);
                }
                Ok(Ok(RawResult::from_value(&result)))
            }
            Err(e) => Err(e),
        },
        Ok(Err(e)) => Ok(Err(internal(
            &server,
            &format!("its task ended with an error: {}", e.message),
        ))),
        Err(e) => Err(e),
    }
}

/// The `_meta` of mcpd's requests about an extension task: the caller's capabilities
/// (a legacy agent's `initialize` ones, or a modern agent's request's), with the
/// extension declared.
fn declaring(caps: Option<Value>, meta: Option<&mut Value>) -> Value {
    let mut fresh = json!({});
    let meta = meta.unwrap_or(&mut fresh);
    if !meta.is_object() {
        *meta = json!({});
    }
    if let Some(m) = meta.as_object_mut() {
        let declared = m
            .entry(key::CLIENT_CAPABILITIES)
            .or_insert_with(|| json!({}));
        if let Some(caps) = caps {
            *declared = caps;
        }
        tasks::declare(declared);
    }
    meta.clone()
}

/// The call again, declaring the extension, followed to its end. `caps`: a legacy
/// agent's `initialize` capabilities, declared with it (a modern agent's are in its
/// request's `_meta`).
pub async fn follow(
    handle: UpstreamHandle,
    call: CallId,
    server: Arc<str>,
    mut params: Map<String, Value>,
    asks: mpsc::Sender<Box<ServerAsk>>,
    caps: Option<Value>,
) -> RawReply {
    let meta = declaring(
        caps,
        Some(params.entry("_meta").or_insert_with(|| json!({}))),
    );
    let follower = Follower {
        handle,
        call,
        server,
        meta,
        asks,
        related: None,
    };
    let opts = follower.opts();
    let raw = match follower
        .handle
        .call(call, method::TOOLS_CALL, Some(Value::Object(params)), opts)
        .await
    {
        Ok(Ok(raw)) => raw,
        other => return other,
    };
    let status = match raw.to_value() {
        Ok(v) if mcpd_wire::protocol::era::result_type(&v) == "task" => v,
        // Answered at once after all.
        _ => return Ok(Ok(raw)),
    };
    let Some(task) = status.get("taskId").and_then(Value::as_str) else {
        return Ok(Err(internal(&follower.server, "the task has no taskId")));
    };
    let mut guard = Guard {
        handle: follower.handle.clone(),
        call,
        meta: follower.meta.clone(),
        task: Some(task.to_owned()),
    };
    let (reply, ended) = follower.until_done(task.to_owned(), status).await;
    if ended {
        guard.task = None;
    }
    reply
}

/// A 2025-11-25 agent's `tasks/result` for an extension task (`task`, the server's id;
/// `sealed`, the agent's): mcpd follows it to its end and answers with its result, its
/// related-task `_meta` naming the agent's id, or with its error. The server's input
/// requests reach the agent as requests tied to the task the same way. Ending the wait
/// early leaves the task running, as in 2025-11-25 (`tasks/cancel` ends a task).
pub async fn result_of(
    handle: UpstreamHandle,
    call: CallId,
    (server, task, sealed): (Arc<str>, String, Arc<str>),
    asks: mpsc::Sender<Box<ServerAsk>>,
    caps: Value,
) -> RawReply {
    let follower = Follower {
        handle,
        call,
        server,
        meta: declaring(Some(caps), None),
        asks,
        related: Some(sealed.clone()),
    };
    let status = match follower.get(&task).await {
        Ok(v) => v,
        Err(reply) => return reply,
    };
    let (reply, _) = follower.until_done(task, status).await;
    let Ok(Ok(raw)) = reply else {
        return reply;
    };
    let mut result = match raw.to_value() {
        Ok(v) => v,
        Err(e) => return Err(e),
    };
    let key = format!("/_meta/{}", super::ids::RELATED.replace('/', "~1"));
    if result.pointer(&key).is_none() {
        let meta = result
            .as_object_mut()
            .map(|r| r.entry("_meta").or_insert_with(|| json!({})));
        if let Some(Value::Object(m)) = meta {
            m.insert(super::ids::RELATED.into(), json!({"taskId": &*sealed}));
        }
    }
    Ok(Ok(RawResult::from_value(&result)))
}

/// A 2025-11-25 agent's `tasks/cancel` of an extension task: the extension acknowledges
/// a cancellation with an empty result, 2025-11-25 answers with the task, so mcpd asks
/// for the task after cancelling it.
pub async fn cancel_of(
    handle: UpstreamHandle,
    call: CallId,
    (server, task): (Arc<str>, String),
    caps: Value,
) -> RawReply {
    let (asks, _) = mpsc::channel(1);
    let follower = Follower {
        handle,
        call,
        server,
        meta: declaring(Some(caps), None),
        asks,
        related: None,
    };
    let params = follower.about(&task, json!({}));
    let opts = follower.opts();
    match follower
        .handle
        .call(call, tasks::CANCEL, Some(params), opts)
        .await
    {
        Ok(Ok(_)) => {}
        other => return other,
    }
    match follower.get(&task).await {
        Ok(v) => Ok(Ok(RawResult::from_value(&v))),
        Err(reply) => reply,
    }
}

/// What following one extension task needs.
struct Follower {
    handle: UpstreamHandle,
    call: CallId,
    server: Arc<str>,
    /// The `_meta` of every request about the task (it declares the extension).
    meta: Value,
    /// Where the task's input requests go.
    asks: mpsc::Sender<Box<ServerAsk>>,
    /// The agent's id of the task, put in the input requests' related-task `_meta` (a
    /// 2025-11-25 agent that holds the task); None: the agent asked for no task.
    related: Option<Arc<str>>,
}

impl Follower {
    fn opts(&self) -> CallOptions {
        CallOptions {
            asks: Some(self.asks.clone()),
            ..CallOptions::default()
        }
    }

    fn about(&self, task: &str, extra: Value) -> Value {
        let mut p = json!({"taskId": task, "_meta": self.meta});
        if let (Some(p), Some(extra)) = (p.as_object_mut(), extra.as_object()) {
            p.extend(extra.clone());
        }
        p
    }

    /// The task's status now, or the reply that ends the follow.
    async fn get(&self, task: &str) -> Result<Value, RawReply> {
        let params = self.about(task, json!({}));
        match self
            .handle
            .call(self.call, tasks::GET, Some(params), self.opts())
            .await
        {
            Ok(Ok(raw)) => raw.to_value().map_err(Err),
            other => Err(other),
        }
    }

    /// Polls the task from `status` on until it ends, answering its input requests; and
    /// whether it ended (false: the follow gave up on a task that may still run).
    async fn until_done(&self, task: String, mut status: Value) -> (RawReply, bool) {
        let ended = |reply| (reply, true);
        let gave_up = |reply| (reply, false);
        let server = &self.server;
        let until = tokio::time::Instant::now()
            + status
                .get("ttlMs")
                .and_then(Value::as_u64)
                .map_or(FOLLOW_MAX, |ms| Duration::from_millis(ms).min(FOLLOW_MAX));
        let mut answered = HashSet::new();
        let mut rounds = 0;
        loop {
            let state = status.get("status").and_then(Value::as_str).unwrap_or("");
            let mut updated = false;
            match state {
                "completed" => {
                    let result = status.get("result").cloned().unwrap_or(Value::Null);
                    return ended(Ok(Ok(RawResult::from_value(&result))));
                }
                "failed" => {
                    let e = status.get("error").and_then(ErrorObject::from_value);
                    return ended(Ok(Err(e.unwrap_or_else(|| {
                        internal(server, "the task failed without an error")
                    }))));
                }
                "cancelled" => {
                    return ended(Ok(Err(internal(server, "the task was cancelled"))));
                }
                "input_required" => {
                    let pending: Vec<(String, Value)> = status
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
                            return gave_up(Ok(Err(internal(
                                server,
                                "the task asked for input too many times; mcpd cancelled it",
                            ))));
                        }
                        let mut responses = Map::new();
                        for (k, req) in pending {
                            match self.ask(&req).await {
                                Ok(v) => {
                                    responses.insert(k.clone(), v);
                                }
                                Err(e) => return gave_up(Ok(Err(e))),
                            }
                            answered.insert(k);
                        }
                        let update = self.about(&task, json!({"inputResponses": responses}));
                        match self
                            .handle
                            .call(self.call, tasks::UPDATE, Some(update), self.opts())
                            .await
                        {
                            Ok(Ok(_)) => updated = true,
                            other => return gave_up(other),
                        }
                    }
                }
                "working" => {}
                other => {
                    return gave_up(Ok(Err(internal(
                        server,
                        &format!("the task has an unknown status {other:?}"),
                    ))));
                }
            }
            if tokio::time::Instant::now() >= until {
                return gave_up(Ok(Err(internal(
                    server,
                    "the task outlived its ttlMs; mcpd cancelled it",
                ))));
            }
            // Answers may move the task on at once; otherwise wait as the server asks.
            if !updated {
                let wait = status
                    .get("pollIntervalMs")
                    .and_then(Value::as_u64)
                    .map_or(POLL_DEFAULT, Duration::from_millis)
                    .clamp(POLL_MIN, POLL_MAX);
                tokio::time::sleep(wait).await;
            }
            status = match self.get(&task).await {
                Ok(v) => v,
                Err(reply) => return gave_up(reply),
            };
        }
    }

    /// One of the task's input requests, asked of the agent.
    async fn ask(&self, req: &Value) -> Result<Value, ErrorObject> {
        let gone = || {
            internal(
                &self.server,
                "the agent's answer to the task's input request was lost",
            )
        };
        let mut params = req.get("params").cloned();
        if let (Some(sealed), Some(Value::Object(p))) = (&self.related, params.as_mut()) {
            let meta = p.entry("_meta").or_insert_with(|| json!({}));
            if let Some(m) = meta.as_object_mut() {
                m.insert(super::ids::RELATED.into(), json!({"taskId": &**sealed}));
            }
        }
        let (respond_to, answer) = oneshot::channel();
        let ask = ServerAsk {
            method: req
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            params,
            respond_to,
        };
        if self.asks.send(Box::new(ask)).await.is_err() {
            return Err(gone());
        }
        answer.await.unwrap_or_else(|_| Err(gone()))
    }
}
