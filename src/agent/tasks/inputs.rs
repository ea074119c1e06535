//! The input requests of 2025-11-25 tasks that modern agents hold.
//!
//! A 2025-11-25 server asks for a task's input only during a `tasks/result` for it, while
//! a modern agent polls `tasks/get` and answers with `tasks/update`; this actor holds
//! that `tasks/result` open and keeps the server's requests until an agent answers them.
//!
//! One actor for the daemon, since a task outlives the connection that made it. A
//! driver (one per task waiting for input) holds the server's `tasks/result` and hands
//! each of the server's requests to the actor, which keys it (`mcpd-1`, `mcpd-2`, …,
//! unique for the task's life) for `tasks/get` to show as `inputRequests`. An agent's
//! `tasks/update` answers them. The driver ends when `tasks/result` does (the task
//! ended, or the server's request timeout), and its unanswered requests are dropped
//! (the server gets an error for each). Bounded: tasks waiting at once, and requests per
//! task.

use crate::errors::TaskError;
use crate::upstream::{CallId, CallOptions, ServerAsk, UpstreamHandle};
use mcpd_runtime::ask::ask;
use mcpd_wire::jsonrpc::ErrorObject;
use mcpd_wire::protocol::{method, tasks};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Tasks whose input requests are held at once; requests held per task.
const MAX_TASKS: usize = 256;
const MAX_REQUESTS: usize = 16;
/// How long a `tasks/get` waits for a driver it started to bring the first request.
const FIRST_REQUEST_WAIT: Duration = Duration::from_millis(500);
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// A task's server and its own id, for a driver to wait on.
pub struct Upstream {
    pub handle: UpstreamHandle,
    pub call: CallId,
    pub task: String,
}

enum Msg {
    /// The requests held for `sealed`; starts a driver when none runs.
    Pending {
        sealed: Arc<str>,
        start: Upstream,
        respond_to: oneshot::Sender<Map<String, Value>>,
    },
    /// A server request a driver received.
    Add { sealed: Arc<str>, ask: ServerAsk },
    /// An agent's answers, by key.
    Answer {
        sealed: Arc<str>,
        responses: Map<String, Value>,
        respond_to: oneshot::Sender<()>,
    },
    /// A new driver's wait for the first request ran out.
    Waited { sealed: Arc<str> },
    /// A driver's `tasks/result` ended.
    Ended { sealed: Arc<str> },
}

/// The cloneable way to the actor.
#[derive(Clone)]
pub struct TaskInputs {
    tx: mpsc::Sender<Msg>,
}

struct Held {
    next_key: u64,
    /// Key → the request and where its answer goes.
    requests: BTreeMap<String, HeldRequest>,
    /// `tasks/get`s waiting for the first request a new driver brings.
    waiting: Vec<oneshot::Sender<Map<String, Value>>>,
    /// Until the first request comes or the wait for it runs out.
    starting: bool,
}

/// One of the server's requests, and where its answer goes.
struct HeldRequest {
    method: String,
    params: Option<Value>,
    respond_to: oneshot::Sender<Result<Value, ErrorObject>>,
}

struct InputsActor {
    rx: mpsc::Receiver<Msg>,
    /// Our own mailbox, for the drivers.
    tx: mpsc::WeakSender<Msg>,
    held: HashMap<Arc<str>, Held>,
}

impl TaskInputs {
    pub fn spawn() -> TaskInputs {
        let (tx, rx) = mpsc::channel(256);
        let actor = InputsActor {
            rx,
            tx: tx.downgrade(),
            held: HashMap::new(),
        };
        mcpd_runtime::tracker::spawn(actor.run());
        TaskInputs { tx }
    }

    /// The input requests held for the task `sealed` (the agent's id), as
    /// `inputRequests`; a driver is started on `start` if none waits on it.
    pub async fn pending(&self, sealed: Arc<str>, start: Upstream) -> Map<String, Value> {
        ask(&self.tx, FIRST_REQUEST_WAIT + ASK_TIMEOUT, |respond_to| {
            Msg::Pending {
                sealed,
                start,
                respond_to,
            }
        })
        .await
        .unwrap_or_default()
    }

    /// Answers held requests of `sealed`; unknown keys are ignored, as the extension says.
    pub async fn answer(&self, sealed: Arc<str>, responses: Map<String, Value>) {
        let _ = ask(&self.tx, ASK_TIMEOUT, |respond_to| Msg::Answer {
            sealed,
            responses,
            respond_to,
        })
        .await;
    }
}

impl InputsActor {
    async fn run(mut self) {
        while let Some(msg) = self.rx.recv().await {
            match msg {
                Msg::Pending {
                    sealed,
                    start,
                    respond_to,
                } => self.pending(sealed, start, respond_to),
                Msg::Add { sealed, ask } => self.add(&sealed, ask),
                Msg::Waited { sealed } => {
                    if let Some(held) = self.held.get_mut(&sealed) {
                        held.starting = false;
                        let now = shown(held);
                        for to in held.waiting.drain(..) {
                            let _ = to.send(now.clone());
                        }
                    }
                }
                Msg::Answer {
                    sealed,
                    responses,
                    respond_to,
                } => {
                    if let Some(held) = self.held.get_mut(&sealed) {
                        for (key, value) in responses {
                            if let Some(req) = held.requests.remove(&key) {
                                let _ = req.respond_to.send(Ok(value));
                            }
                        }
                    }
                    let _ = respond_to.send(());
                }
                Msg::Ended { sealed } => {
                    // Unanswered requests are dropped: the server gets an error for each.
                    if let Some(held) = self.held.remove(&sealed) {
                        for to in held.waiting {
                            let _ = to.send(Map::new());
                        }
                    }
                }
            }
        }
    }

    fn pending(
        &mut self,
        sealed: Arc<str>,
        start: Upstream,
        respond_to: oneshot::Sender<Map<String, Value>>,
    ) {
        if let Some(held) = self.held.get_mut(&sealed) {
            // A driver that has just started may bring its first request soon; one that
            // runs already has shown what it has.
            if held.requests.is_empty() && held.starting {
                held.waiting.push(respond_to);
            } else {
                let _ = respond_to.send(shown(held));
            }
            return;
        }
        if self.held.len() >= MAX_TASKS {
            tracing::warn!(
                "{MAX_TASKS} tasks are waiting for input already; a task's input requests wait for one of them to end"
            );
            let _ = respond_to.send(Map::new());
            return;
        }
        let Some(tx) = self.tx.upgrade() else {
            let _ = respond_to.send(Map::new());
            return;
        };
        self.held.insert(
            sealed.clone(),
            Held {
                next_key: 1,
                requests: BTreeMap::new(),
                waiting: vec![respond_to],
                starting: true,
            },
        );
        mcpd_runtime::tracker::spawn(drive(sealed.clone(), start, tx.clone()));
        // A driver that brings nothing soon still lets the `tasks/get` answer.
        mcpd_runtime::tracker::spawn(async move {
            tokio::time::sleep(FIRST_REQUEST_WAIT).await;
            let _ = tx.send(Msg::Waited { sealed }).await;
        });
    }

    fn add(&mut self, sealed: &Arc<str>, ask: ServerAsk) {
        let Some(held) = self.held.get_mut(sealed) else {
            return;
        };
        if held.requests.len() >= MAX_REQUESTS {
            let e = TaskError::TooManyInputRequests(MAX_REQUESTS).to_error_object();
            let _ = ask.respond_to.send(Err(e));
            return;
        }
        let key = format!("mcpd-{}", held.next_key);
        held.next_key += 1;
        let params = ask.params.map(without_related_task);
        let req = HeldRequest {
            method: ask.method,
            params,
            respond_to: ask.respond_to,
        };
        held.requests.insert(key, req);
        held.starting = false;
        let now = shown(held);
        for to in held.waiting.drain(..) {
            let _ = to.send(now.clone());
        }
    }
}

/// The held requests as `inputRequests`.
fn shown(held: &Held) -> Map<String, Value> {
    held.requests
        .iter()
        .map(|(k, held)| {
            let mut req = json!({ "method": held.method });
            if let Some(p) = &held.params {
                mcpd_wire::jsonrpc::set_member(&mut req, "params", p.clone());
            }
            (k.clone(), req)
        })
        .collect()
}

/// A server request's params without the related-task `_meta`, which names the
/// server's id (the extension's input requests carry none).
fn without_related_task(mut params: Value) -> Value {
    if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.remove(tasks::RELATED);
        if meta.is_empty()
            && let Some(p) = params.as_object_mut()
        {
            p.remove("_meta");
        }
    }
    params
}

/// Holds the server's `tasks/result` open, passing its requests to the actor.
async fn drive(sealed: Arc<str>, up: Upstream, tx: mpsc::Sender<Msg>) {
    let (asks_tx, mut asks) = mpsc::channel(4);
    let opts = CallOptions {
        asks: Some(asks_tx),
        ..CallOptions::default()
    };
    let params = json!({ "taskId": up.task });
    let result = up
        .handle
        .call(up.call, method::TASKS_RESULT, Some(params), opts);
    tokio::pin!(result);
    loop {
        tokio::select! {
            _ = &mut result => break,
            Some(ask) = asks.recv() => {
                if tx.send(Msg::Add { sealed: sealed.clone(), ask: *ask }).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = tx.send(Msg::Ended { sealed }).await;
}
