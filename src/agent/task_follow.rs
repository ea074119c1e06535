//! Calls a server runs only as a task, for agents that asked for none: mcpd makes the task (declaring the extension, or adding 2025-11-25's `task`) and follows it to its result, its input requests going to the agent as requests (legacy agents) or `input_required` rounds (modern ones).
//!
//! The follow is part of the call's future, so it lives inside the agent's actor like
//! any call. A task's input request becomes a server request on the call's request
//! channel, the path a server's elicitation takes during any call: a legacy agent gets a
//! real request; for a modern agent the actor parks the call, answers `input_required`
//! with a sealed `requestState`, and hands the agent's answer back. If the call ends
//! early (the agent cancels or goes away), the task is cancelled at its server.

use crate::jsonrpc::{ErrorObject, code};
use crate::protocol::era::key;
use crate::protocol::{method, tasks};
use crate::upstream::{CallId, CallOptions, RawReply, RawResult, ServerAsk, UpstreamHandle};
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
    ErrorObject::new(code::INTERNAL_ERROR, format!("server '{server}': {why}"))
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
        crate::tasks::spawn(async move {
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
    asks: mpsc::Sender<ServerAsk>,
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
                    meta.remove(super::task_ids::RELATED);
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

/// The call again, declaring the extension, followed to its end. `caps`: a legacy
/// agent's `initialize` capabilities, declared with it (a modern agent's are in its
/// request's `_meta`).
pub async fn follow(
    handle: UpstreamHandle,
    call: CallId,
    server: Arc<str>,
    mut params: Map<String, Value>,
    asks: mpsc::Sender<ServerAsk>,
    caps: Option<Value>,
) -> RawReply {
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    if let Some(m) = meta.as_object_mut() {
        let declared = m
            .entry(key::CLIENT_CAPABILITIES)
            .or_insert_with(|| json!({}));
        if let Some(caps) = caps {
            *declared = caps;
        }
        tasks::declare(declared);
    }
    let meta = meta.clone();
    let opts = || CallOptions {
        asks: Some(asks.clone()),
        ..CallOptions::default()
    };
    let raw = match handle
        .call(
            call,
            method::TOOLS_CALL,
            Some(Value::Object(params)),
            opts(),
        )
        .await
    {
        Ok(Ok(raw)) => raw,
        other => return other,
    };
    let mut status = match raw.to_value() {
        Ok(v) if crate::protocol::era::result_type(&v) == "task" => v,
        // Answered at once after all.
        _ => return Ok(Ok(raw)),
    };
    let Some(task) = status
        .get("taskId")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return Ok(Err(internal(&server, "the task has no taskId")));
    };
    let mut guard = Guard {
        handle: handle.clone(),
        call,
        meta: meta.clone(),
        task: Some(task.clone()),
    };
    let until = tokio::time::Instant::now()
        + status
            .get("ttlMs")
            .and_then(Value::as_u64)
            .map_or(FOLLOW_MAX, |ms| Duration::from_millis(ms).min(FOLLOW_MAX));
    let about = |extra: Value| {
        let mut p = json!({"taskId": task, "_meta": meta});
        if let (Some(p), Some(extra)) = (p.as_object_mut(), extra.as_object()) {
            p.extend(extra.clone());
        }
        p
    };
    let mut answered = HashSet::new();
    let mut rounds = 0;
    loop {
        let state = status.get("status").and_then(Value::as_str).unwrap_or("");
        let mut updated = false;
        match state {
            "completed" => {
                guard.task = None;
                let result = status.get("result").cloned().unwrap_or(Value::Null);
                return Ok(Ok(RawResult::from_value(&result)));
            }
            "failed" => {
                guard.task = None;
                let e = status.get("error").and_then(ErrorObject::from_value);
                return Ok(Err(e.unwrap_or_else(|| {
                    internal(&server, "the task failed without an error")
                })));
            }
            "cancelled" => {
                guard.task = None;
                return Ok(Err(internal(
                    &server,
                    "the server cancelled the task it ran this call as",
                )));
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
                        return Ok(Err(internal(
                            &server,
                            "the task asked for input too many times; mcpd cancelled it",
                        )));
                    }
                    let mut responses = Map::new();
                    for (k, req) in pending {
                        let (respond_to, answer) = oneshot::channel();
                        let ask = ServerAsk {
                            method: req
                                .get("method")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_owned(),
                            params: req.get("params").cloned(),
                            respond_to,
                        };
                        let gone = || {
                            internal(
                                &server,
                                "the agent's answer to the task's input request was lost",
                            )
                        };
                        if asks.send(ask).await.is_err() {
                            return Ok(Err(gone()));
                        }
                        match answer.await {
                            Ok(Ok(v)) => {
                                responses.insert(k.clone(), v);
                            }
                            Ok(Err(e)) => return Ok(Err(e)),
                            Err(_) => return Ok(Err(gone())),
                        }
                        answered.insert(k);
                    }
                    let update = about(json!({"inputResponses": responses}));
                    match handle.call(call, tasks::UPDATE, Some(update), opts()).await {
                        Ok(Ok(_)) => updated = true,
                        other => return other,
                    }
                }
            }
            "working" => {}
            other => {
                return Ok(Err(internal(
                    &server,
                    &format!("the task has an unknown status {other:?}"),
                )));
            }
        }
        if tokio::time::Instant::now() >= until {
            return Ok(Err(internal(
                &server,
                "the task outlived its ttlMs; mcpd cancelled it",
            )));
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
        status = match handle
            .call(call, tasks::GET, Some(about(json!({}))), opts())
            .await
        {
            Ok(Ok(raw)) => match raw.to_value() {
                Ok(v) => v,
                Err(e) => return Err(e),
            },
            other => return other,
        };
    }
}
