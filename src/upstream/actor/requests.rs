//! Requests mcpd sends the server.
//!
//! Dressing and sending them, deadlines, cancellation, and failing them when their reply
//! stream or the connection ends.
//!
//! The ids here are mcpd's own, not a rename of an agent's: the actor writes each
//! request itself, from the call's params, under the next number of `next_id`. The agent's
//! id never reaches this actor (it stays in the agent actor's `reply::InFlight`); the
//! answer goes back through the caller's `ReplyTo`, and the agent actor writes its own id.
//! So nothing is restored here, and the number is more than a name: it is the progress
//! token the server sees, the key of `deadlines`, of the transport's `Sent`, `Abort` and
//! `Related` reply streams, and of `by_call`. The stateless HTTP relay's `h<N>` renaming
//! (`agent/http/wire.rs`) is the other id rewriting in the daemon, and a different job: it
//! edits lines already written and gives the client's exact id text back. What the two
//! share is a counter and a map, whose values, keys and bounds differ (a `PendingRequest`
//! by number, capped by `max_in_flight`; a response stream by any `Id`, bounded by the
//! agent connection's in-flight cap), so they keep a counter each rather than a common type.

use super::{Actor, MAX_RESUMES, PendingRequest, Responder};
use crate::upstream::dress::Dress;
use crate::upstream::transport::Sent;
use crate::upstream::transport::{Outbound, Resume};
use crate::upstream::{CallId, CallOptions, CallParams, LogRoute, ReplyTo, UpstreamError};
use mcpd_wire::jsonrpc;
use mcpd_wire::protocol::era::Era;
use mcpd_wire::protocol::method;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

impl Actor {
    pub(super) fn send_request(
        &mut self,
        call: Option<CallId>,
        method: &'static str,
        params: CallParams,
        opts: CallOptions,
        respond_to: ReplyTo,
    ) {
        let CallOptions {
            progress,
            caps,
            asks,
            logs,
        } = opts;
        if self.pending.len() >= self.max_in_flight {
            respond_to.fail(UpstreamError::Busy {
                limit: self.max_in_flight,
            });
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        // A plain call to a legacy server is written with the agent's arguments as they
        // are: nothing is added to its params (no progress token, no envelope).
        let (line, sent, task) = match params {
            CallParams::ToolCall(plain)
                if self.era == Era::Legacy && progress.is_none() && plain.params.len() == 1 =>
            {
                let line = jsonrpc::tool_call_line(id, plain.name(), plain.arguments.as_deref());
                (line, Sent::new(id, method), None)
            }
            // Everything but the arguments is dressed as any request is (a modern server's
            // envelope, mcpd's progress token); the arguments are then written in as the
            // agent wrote them, unless some become HTTP headers (which need their values).
            CallParams::ToolCall(plain)
                if !(self.http && self.param_headers.contains_key(plain.name())) =>
            {
                let params = Some(Value::Object((*plain.params).clone()));
                let (progress, logs) = (progress.is_some(), logs.as_ref());
                let caps = caps.as_deref();
                let (line, sent, task) =
                    self.dress_request(id, method, params, progress, logs, caps);
                match plain.arguments.as_deref() {
                    None => (line, sent, task),
                    Some(arguments) => match jsonrpc::with_arguments(line, arguments) {
                        Some(line) => (line, sent, task),
                        // Not a line `request_line` writes; parsed, the arguments go anyway.
                        None => {
                            let params = CallParams::ToolCall(plain).into_value();
                            self.dress_request(id, method, params, progress, logs, caps)
                        }
                    },
                }
            }
            other => {
                let params = other.into_value();
                let (progress, logs) = (progress.is_some(), logs.as_ref());
                self.dress_request(id, method, params, progress, logs, caps.as_deref())
            }
        };
        let request = Some(sent);
        if let Err(e) = self.out.try_send(Outbound::Message { line, request }) {
            let err = match e {
                mpsc::error::TrySendError::Full(_) => UpstreamError::Busy {
                    limit: self.max_in_flight,
                },
                mpsc::error::TrySendError::Closed(_) => UpstreamError::Gone,
            };
            respond_to.fail(err);
            return;
        }
        let now = Instant::now();
        let deadline = Some(self.add_deadline(now + self.timeout_of(method), id));
        if call.is_some() {
            self.last_call = now;
            self.idle_told = false;
        }
        if let Some(call) = call {
            self.by_call.insert(call, id);
            self.calls_pending += 1;
        }
        self.pending.insert(
            id,
            PendingRequest {
                call,
                method,
                respond_to: Responder::Caller(respond_to),
                progress,
                deadline,
                resumes: 0,
                asks,
                logs,
                task,
            },
        );
    }

    /// A request's line from its params as values: the progress token, a modern
    /// server's log level, and the era's envelope added. Also the task a `tasks/result`
    /// is about.
    fn dress_request(
        &self,
        id: u64,
        method: &'static str,
        mut params: Option<Value>,
        progress: bool,
        logs: Option<&LogRoute>,
        caps: Option<&Value>,
    ) -> (String, Sent, Option<String>) {
        if progress {
            // The server sees a token unique on this connection: our own request id.
            if let Some(meta) = params
                .as_mut()
                .and_then(|p| p.get_mut("_meta"))
                .and_then(Value::as_object_mut)
            {
                meta.insert("progressToken".into(), json!(id));
            }
        }
        // A modern server sends log messages only when a request asks for them. A call
        // with a log route but no level asked (a legacy agent's) asks at the route's
        // level, or for everything, as a legacy server would send.
        if self.era == Era::Modern
            && let Some(route) = logs
            && let Some(obj) = params.as_mut().and_then(Value::as_object_mut)
            && let Some(meta) = obj
                .entry("_meta")
                .or_insert_with(|| json!({}))
                .as_object_mut()
        {
            let level = route.threshold.as_deref().unwrap_or("debug");
            meta.entry(mcpd_wire::protocol::era::key::LOG_LEVEL)
                .or_insert_with(|| json!(level));
        }
        // A 2025-11-25 server asks for a task's input during a `tasks/result` for it, and
        // ties the request to the task: that names the call it is for.
        let task = (method == mcpd_wire::protocol::method::TASKS_RESULT)
            .then(|| params.as_ref()?.get("taskId")?.as_str().map(str::to_owned))
            .flatten();
        let (line, sent) = self.dress().request(id, method, params, caps);
        (line, sent, task)
    }

    pub(super) fn dress(&self) -> Dress<'_> {
        Dress {
            era: self.era,
            http: self.http,
            param_headers: &self.param_headers,
        }
    }

    /// Adds a request's deadline; the returned key takes it out again.
    pub(super) fn add_deadline(&mut self, at: Instant, id: u64) -> (Instant, u64) {
        self.deadlines.insert((at, id));
        (at, id)
    }

    pub(super) fn forget_deadline(&mut self, p: &PendingRequest) {
        if let Some(key) = &p.deadline {
            self.deadlines.remove(key);
        }
    }

    /// Times out every request whose deadline has come.
    pub(super) fn expire_deadlines(&mut self, now: Instant) {
        while let Some(&(at, id)) = self.deadlines.first()
            && at <= now
        {
            self.deadlines.pop_first();
            self.on_timeout(id);
        }
    }

    pub(super) fn send_cancelled(&mut self, id: u64, reason: &str) {
        if self.http && self.era == Era::Modern {
            // Over modern HTTP, dropping the request's stream (`Outbound::Abort`) is the
            // cancellation; the server expects no notification.
            return;
        }
        let params = json!({ "requestId": id, "reason": reason });
        // If stdin is full or closed the server is stuck or gone; the answer is dropped anyway.
        let line = jsonrpc::notification_line(method::CANCELLED, Some(&params));
        let _ = self.out.try_send(Outbound::Message {
            line,
            request: None,
        });
    }

    /// How long a request may wait for its answer: the server's `timeout`, except a
    /// 2025-11-25 `tasks/result`, which waits for the task's end (it may run for hours:
    /// that is why it is a task).
    pub(super) fn timeout_of(&self, method: &str) -> std::time::Duration {
        if method == mcpd_wire::protocol::method::TASKS_RESULT {
            crate::upstream::TASK_WAIT
        } else {
            self.timeout
        }
    }

    /// Takes request `id` out of the pending map, and an agent's call out of `by_call`
    /// and the count of calls: every removal but `fail_all`'s goes through here.
    pub(super) fn take_pending(&mut self, id: u64) -> Option<PendingRequest> {
        let p = self.pending.remove(&id)?;
        if let Some(call) = p.call {
            self.by_call.remove(&call);
            self.calls_pending -= 1;
        }
        Some(p)
    }

    pub(super) fn on_timeout(&mut self, id: u64) {
        let Some(p) = self.take_pending(id) else {
            return;
        };
        let timeout = self.timeout_of(p.method);
        tracing::warn!(upstream = %self.server, rpc_id = id, method = %p.method, "request timed out");
        self.send_cancelled(
            id,
            &format!("timed out after {}", humantime::format_duration(timeout)),
        );
        let _ = self.out.try_send(Outbound::Abort(id)); // full: the transport is stuck anyway
        if let Responder::Caller(tx) = p.respond_to {
            tx.fail(UpstreamError::Timeout { after: timeout });
        }
    }

    /// A request's reply stream ended. If the answer came on it, the request is no
    /// longer pending and there is nothing to do; otherwise resume or fail it.
    pub(super) fn on_ended(&mut self, id: u64, error: UpstreamError, resume: Option<Resume>) {
        let Some(p) = self.pending.get_mut(&id) else {
            return;
        };
        if let Some(resume) = resume
            && p.resumes < MAX_RESUMES
        {
            p.resumes += 1;
            tracing::debug!(upstream = %self.server, rpc_id = id, "resuming a broken reply stream");
            if self.out.try_send(Outbound::Resume { id, resume }).is_ok() {
                return;
            }
        }
        let Some(p) = self.take_pending(id) else {
            return;
        };
        self.forget_deadline(&p);
        match p.respond_to {
            Responder::Caller(tx) => {
                tracing::warn!(upstream = %self.server, rpc_id = id, method = %p.method, "request failed: {error}");
                tx.fail(error);
            }
            Responder::Ping => self.ping = None,
            Responder::Listen => self.listen_ended(),
        }
    }

    pub(super) fn fail_all(&mut self, error: UpstreamError) {
        self.deadlines.clear();
        for (_, p) in self.pending.drain() {
            if let Responder::Caller(tx) = p.respond_to {
                tx.fail(error.clone());
            }
        }
        self.by_call.clear();
        self.calls_pending = 0;
    }
}
