//! What the server sends.
//!
//! Its lines, responses and notifications, its own requests and their answers, and the
//! routing of its log and progress messages.

use super::{Actor, ListenState, PendingRequest, Responder};
use crate::upstream::dress;
use crate::upstream::refusal::ServerRequestRefusal as Refusal;
use crate::upstream::subscriptions;
use crate::upstream::transport::Outbound;
use crate::upstream::{RawResult, ServerAsk, TaskStatus};
use futures::FutureExt;
use mcpd_runtime::framing::Frame;
use mcpd_wire::jsonrpc::{self, ErrorObject, Id, Message, Notification, Request, Response};
use mcpd_wire::protocol::ListKind;
use mcpd_wire::protocol::method;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// A server's answer to one of our requests.
enum Answer {
    /// A result, as the text the server wrote.
    Raw(RawResult),
    /// An error, or a result that came in an unusual form and was parsed.
    Value(Result<Value, ErrorObject>),
}

impl Actor {
    pub(super) fn on_frame(&mut self, frame: Frame, related: Option<u64>) {
        self.last_heard = Instant::now();
        let line = match frame {
            Frame::Line(line) => line,
            Frame::TooLong => {
                self.oversized += 1;
                tracing::warn!(upstream = %self.server, count = self.oversized, "dropped an over-long line from the server (max_message_bytes)");
                return;
            }
            Frame::NotUtf8 => return self.malformed("the line is not UTF-8"),
        };
        // A result to one of our requests (every call's answer) is found without being
        // parsed into values: it is passed on as the server wrote it.
        if let Some(p) = jsonrpc::peek_result(&line) {
            let raw = RawResult::new(line, p.range).with_long_strings(p.long_strings);
            return self.on_answer(p.id, Answer::Raw(raw));
        }
        match jsonrpc::parse(&line) {
            Ok(Message::Response(r)) => self.on_response(r),
            Ok(Message::Notification(n)) => self.on_notification(n, related, line.len()),
            Ok(Message::Request(r)) => self.on_server_request(r, related),
            Err(e) => self.malformed(&e.to_string()),
        }
    }

    fn malformed(&mut self, why: &str) {
        self.malformed += 1;
        tracing::warn!(upstream = %self.server, count = self.malformed, "skipped a malformed line from the server: {why}");
    }

    fn on_response(&mut self, r: Response) {
        match r.id.as_u64() {
            Some(id) => self.on_answer(id, Answer::Value(r.outcome)),
            None => {
                tracing::debug!(upstream = %self.server, rpc_id = %r.id, "dropped a response with no pending request");
            }
        }
    }

    fn on_answer(&mut self, id: u64, answer: Answer) {
        let Some(p) = self.take_pending(id) else {
            // A late answer to a request that timed out or was cancelled, or a bogus id.
            tracing::debug!(upstream = %self.server, rpc_id = id, "dropped a response with no pending request");
            return;
        };
        self.forget_deadline(&p);
        if p.call.is_some() {
            self.last_call = Instant::now();
        }
        match p.respond_to {
            Responder::Caller(tx) => match answer {
                Answer::Raw(raw) => tx.send(Ok(Ok(raw))),
                Answer::Value(outcome) => tx.send_value(outcome),
            },
            Responder::Ping => self.ping = None,
            Responder::Listen => self.listen_ended(),
        }
    }

    /// A notification from the server, `bytes` long on the wire.
    fn on_notification(&mut self, n: Notification, related: Option<u64>, bytes: usize) {
        if let Some(sub) = dress::subscription_of(n.params.as_ref())
            && !matches!(self.listen, ListenState::Open(id) if id == sub)
        {
            tracing::debug!(upstream = %self.server, "dropped a notification for an unknown subscription");
            return;
        }
        match n.method.as_str() {
            method::SUBSCRIPTIONS_ACKNOWLEDGED => {
                tracing::debug!(upstream = %self.server, "the server acknowledged our subscription");
            }
            method::PROGRESS => self.route_progress(n),
            method::TOOLS_LIST_CHANGED => {
                tracing::info!(upstream = %self.server, "server says its tools changed");
                self.start_refresh();
            }
            method::PROMPTS_LIST_CHANGED => self.want_surface(ListKind::Prompts),
            method::MESSAGE => self.route_log(n, related),
            method::RESOURCES_UPDATED => {
                if let Some(uri) = subscriptions::updated_uri(n.params.as_ref()) {
                    self.subs.deliver(uri);
                }
            }
            method::RESOURCES_LIST_CHANGED => {
                self.want_surface(ListKind::Resources);
                self.want_surface(ListKind::Templates);
            }
            method::TASKS_STATUS => self.pass_task_status(n, bytes),
            _ => {
                tracing::debug!(upstream = %self.server, method = %n.method, "ignored a notification")
            }
        }
    }

    fn route_progress(&mut self, mut n: Notification) {
        let token = n
            .params
            .as_ref()
            .and_then(|p| p.get("progressToken"))
            .and_then(Value::as_u64);
        let Some(sink) = token
            .and_then(|t| self.pending.get(&t))
            .and_then(|p| p.progress.as_ref())
        else {
            tracing::debug!(upstream = %self.server, "dropped progress for no pending call");
            return;
        };
        if let Some(p) = n.params.as_mut().and_then(Value::as_object_mut) {
            p.insert("progressToken".into(), sink.token.clone());
        }
        sink.outbox
            .send(jsonrpc::notification_line(&n.method, n.params.as_ref()));
    }

    /// A 2025-11-25 task's status goes to the agent side, which alone knows the task's
    /// owner and the id it was shown (this actor knows neither). Best effort, as the
    /// notification is optional: when the agent side is behind, it is dropped.
    fn pass_task_status(&mut self, n: Notification, bytes: usize) {
        let (Some(tx), Some(params)) = (&self.task_status, n.params) else {
            tracing::debug!(upstream = %self.server, "dropped a task status without params");
            return;
        };
        let status = TaskStatus {
            server: self.server.clone(),
            instance: self.instance,
            params,
            bytes,
        };
        if tx.try_send(status).is_err() {
            tracing::debug!(upstream = %self.server, "dropped a task status: the agent side is behind");
        }
    }

    /// A log message reaches only the agent whose call it is about: the call whose reply
    /// stream carried it, or the only call in flight. Others are logged here and dropped.
    fn route_log(&mut self, n: Notification, related: Option<u64>) {
        let route = match related {
            Some(id) => self.pending.get(&id).and_then(|p| p.logs.as_ref()),
            None => {
                let mut calls = self.pending.values().filter(|p| p.call.is_some());
                match (calls.next(), calls.next()) {
                    (Some(one), None) => one.logs.as_ref(),
                    _ => None,
                }
            }
        };
        let level = n
            .params
            .as_ref()
            .and_then(|p| p.get("level"))
            .and_then(Value::as_str);
        match route {
            Some(r) if mcpd_wire::protocol::logging::passes(level, r.threshold.as_deref()) => {
                // Log messages are best effort: one the agent has no room for is dropped
                // rather than counting against the agent (a flood must not disconnect it).
                r.outbox
                    .offer(jsonrpc::notification_line(&n.method, n.params.as_ref()));
            }
            Some(_) => {}
            None => {
                tracing::debug!(upstream = %self.server, level, "a log message for no single call: {}", n.params.as_ref().map(|p| p.to_string()).unwrap_or_default());
            }
        }
    }

    /// A request from the server. `ping` is answered here; a request about an agent's
    /// call (elicitation, sampling, roots) goes to that call's agent, which must be
    /// identified without doubt: by the reply stream it came on (HTTP), or by being the
    /// only call in flight. Anything else gets a clear error.
    fn on_server_request(&mut self, r: Request, related: Option<u64>) {
        if r.method == method::PING {
            return self.answer_server(&r.id, Ok(json!({})));
        }
        if !matches!(
            r.method.as_str(),
            "elicitation/create" | "sampling/createMessage" | "roots/list"
        ) {
            let e = Refusal::NotForwarded(r.method).to_error_object();
            return self.answer_server(&r.id, Err(e));
        }
        let task = r
            .params
            .as_ref()
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(mcpd_wire::protocol::tasks::RELATED))
            .and_then(|t| t.get("taskId"))
            .and_then(Value::as_str);
        let waiting_on_task: Vec<&PendingRequest> = match task {
            Some(t) => self
                .pending
                .values()
                .filter(|p| p.task.as_deref() == Some(t))
                .collect(),
            None => Vec::new(),
        };
        let calls: Vec<&PendingRequest> = match related {
            Some(id) => self.pending.get(&id).into_iter().collect(),
            None if !waiting_on_task.is_empty() => waiting_on_task,
            None => self.pending.values().filter(|p| p.call.is_some()).collect(),
        };
        let sink = match calls.as_slice() {
            [one] => one.asks.clone(),
            [] => {
                let e = Refusal::NoCallInFlight(r.method).to_error_object();
                return self.answer_server(&r.id, Err(e));
            }
            many => {
                let (method, calls) = (r.method, many.len());
                let e = Refusal::ManyCallsInFlight { method, calls }.to_error_object();
                return self.answer_server(&r.id, Err(e));
            }
        };
        let Some(sink) = sink else {
            let e = Refusal::NoAgentToAsk(r.method).to_error_object();
            return self.answer_server(&r.id, Err(e));
        };
        let (respond_to, rx) = oneshot::channel();
        let ask = ServerAsk {
            method: r.method.clone(),
            params: r.params,
            respond_to,
        };
        if sink.try_send(Box::new(ask)).is_err() {
            let e = Refusal::AgentGoneOrBusy.to_error_object();
            return self.answer_server(&r.id, Err(e));
        }
        let id = r.id;
        self.answers.push(
            async move {
                let answer = rx
                    .await
                    .unwrap_or_else(|_| Err(Refusal::AgentWentAway.to_error_object()));
                (id, answer)
            }
            .boxed(),
        );
    }

    /// Sends the server the answer to one of its requests.
    pub(super) fn answer_server(&mut self, id: &Id, answer: Result<Value, ErrorObject>) {
        let line = jsonrpc::response_line(id, &answer);
        // A server that does not read its input gets no answer.
        let _ = self.out.try_send(Outbound::Message {
            line,
            request: None,
        });
    }
}
