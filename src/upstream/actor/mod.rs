//! The serving loop of one upstream connection: owns the pending map, the id counter and the progress-token map.

use super::Subscription;
use super::list::ToolList;
use super::modern::{self, Dress, ParamHeaders};
use super::process::StderrTail;
use super::subscriptions::{self, Subscriptions};
use super::transport::{Inbound, Outbound, Resume};
use super::{
    CallId, CallOptions, ConnectionEvent, LiveStatus, LogRoute, ProgressSink, Reply, ServerAsk,
    UpstreamError, UpstreamHandle, UpstreamMsg, fetch_list, fetch_tools,
};
use crate::config::ServerConfig;
use crate::framing::Frame;
use crate::jsonrpc::{self, ErrorObject, Id, Message, Notification, Request, Response, code};
use crate::protocol::era::Era;
use crate::protocol::method;
use crate::registry::Kind;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, Stream, StreamExt};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::time::{DelayQueue, delay_queue};

/// A running fetch of some of a server's prompt, resource and template lists.
type SurfaceFetch = BoxFuture<'static, Vec<(Kind, Result<ToolList, String>)>>;

/// What a server offers that the actor keeps up to date.
pub struct Offers {
    pub tools: bool,
    /// Modern servers announce list changes only on a subscription.
    pub listen: bool,
    pub lists: Vec<Kind>,
}

/// Requests queued in a connection's mailbox.
const MAILBOX: usize = 256;
/// Times one request's broken reply stream is resumed before the request fails.
const MAX_RESUMES: u8 = 3;
/// Wait before reopening a modern server's `subscriptions/listen` after it ended.
const LISTEN_RETRY: Duration = Duration::from_secs(2);
/// The shortest catalog refresh interval a server's `ttlMs` can cause.
const MIN_TTL_REFRESH: Duration = Duration::from_secs(1);

/// How a connection's serving loop ended.
pub enum End {
    /// The supervisor asked it to stop.
    Stopped,
    /// The process exited on its own; the status in words.
    Exited(String),
    /// The connection is unusable (closed output, failed liveness probe); the process may
    /// still be running and must be stopped.
    Failed(String),
    /// The server refused mcpd's credentials: retrying will not help until the
    /// configuration changes.
    Refused(String),
}

struct Pending {
    call: Option<CallId>,
    method: String,
    respond_to: Responder,
    progress: Option<ProgressSink>,
    /// None for a request that may stay open forever (a subscription).
    deadline: Option<delay_queue::Key>,
    /// Where the server's own requests during this call go.
    asks: Option<mpsc::Sender<ServerAsk>>,
    /// Where the server's log messages about this call go.
    logs: Option<LogRoute>,
    /// Times its reply stream has been resumed.
    resumes: u8,
}

enum Responder {
    Caller(oneshot::Sender<Reply>),
    /// A liveness probe of our own.
    Ping,
    /// Our `subscriptions/listen` to a modern server.
    Listen,
}

/// mcpd's subscription to a modern server's list changes.
enum ListenState {
    /// Not wanted: a legacy server, or one without `tools.listChanged`.
    Off,
    /// Open under this request id.
    Open(u64),
    /// Ended; reopen at this time.
    RetryAt(Instant),
}

pub struct Actor {
    server: Arc<str>,
    /// Names the other end in messages: "pid 42" or the server's URL.
    peer: String,
    instance: u64,
    timeout: Duration,
    max_in_flight: usize,
    ping_interval: Duration,
    ping_timeout: Duration,
    /// mcpd's own ids for this connection; 0 was the `initialize` request.
    next_id: u64,
    pending: HashMap<u64, Pending>,
    /// Agent call -> upstream id, so cancellations find their request.
    by_call: HashMap<CallId, u64>,
    deadlines: DelayQueue<u64>,
    out: mpsc::Sender<Outbound>,
    rx: mpsc::Receiver<UpstreamMsg>,
    /// Our own handle, for the catalog fetches that run inside this loop.
    handle: UpstreamHandle,
    events: mpsc::Sender<ConnectionEvent>,
    tail: StderrTail,
    /// Unusable lines from the server so far, the handshake's included.
    pub malformed: u64,
    oversized: u64,
    /// HTTP sessions renewed after the server forgot ours.
    renewals: u64,
    last_heard: Instant,
    ping: Option<(u64, Instant)>,
    refresh: Option<BoxFuture<'static, Result<ToolList, String>>>,
    refresh_again: bool,
    /// The prompt/resource/template lists the server has (from its capabilities).
    surface_kinds: Vec<Kind>,
    /// A running fetch of some of those lists, and the lists to fetch after it.
    surface_refresh: Option<SurfaceFetch>,
    surface_wanted: BTreeSet<Kind>,
    /// Agents' resource subscriptions on this server.
    subs: Subscriptions,
    /// The server's era, which decides how requests are dressed.
    era: Era,
    /// Whether the transport is HTTP (request-metadata headers, `x-mcp-header`).
    http: bool,
    param_headers: ParamHeaders,
    listen: ListenState,
    /// When the catalog's TTL (a modern server's `ttlMs`) lapses.
    refresh_at: Option<Instant>,
    /// Stop asking for calls after this long without any (`idle_timeout`).
    idle_timeout: Option<Duration>,
    /// When an agent call last started or ended.
    last_call: Instant,
    /// The supervisor was told the server is idle.
    idle_told: bool,
    /// Answers to the server's requests, as the agents give them.
    answers: FuturesUnordered<BoxFuture<'static, (Id, Result<Value, ErrorObject>)>>,
}

impl Actor {
    pub fn new(
        server: Arc<str>,
        cfg: &ServerConfig,
        peer: String,
        out: mpsc::Sender<Outbound>,
        events: mpsc::Sender<ConnectionEvent>,
        instance: u64,
        era: Era,
    ) -> (Actor, UpstreamHandle) {
        let (tx, rx) = mpsc::channel(MAILBOX);
        // A backstop beyond the connection's own timeout, which normally fires first and
        // also cancels upstream: a caller never waits longer than this.
        let handle = UpstreamHandle {
            tx,
            deadline: cfg.timeout + Duration::from_secs(2),
        };
        let actor = Actor {
            server,
            peer,
            instance,
            timeout: cfg.timeout,
            max_in_flight: cfg.max_in_flight,
            ping_interval: cfg.health.ping_interval,
            ping_timeout: cfg.health.ping_timeout,
            next_id: super::handshake::INITIALIZE_ID + 1,
            pending: HashMap::new(),
            by_call: HashMap::new(),
            deadlines: DelayQueue::new(),
            out,
            rx,
            handle: handle.clone(),
            events,
            tail: StderrTail::default(),
            malformed: 0,
            oversized: 0,
            renewals: 0,
            last_heard: Instant::now(),
            ping: None,
            refresh: None,
            refresh_again: false,
            surface_kinds: Vec::new(),
            surface_refresh: None,
            surface_wanted: BTreeSet::new(),
            subs: Subscriptions::default(),
            era,
            http: matches!(cfg.launch, crate::config::Launch::Http(_)),
            param_headers: ParamHeaders::new(),
            listen: ListenState::Off,
            refresh_at: None,
            answers: FuturesUnordered::new(),
            idle_timeout: cfg.idle_timeout,
            last_call: Instant::now(),
            idle_told: false,
        };
        (actor, handle)
    }

    /// Serves until the process exits (`exited` resolves with its status), the transport
    /// closes, or `cancel` fires. Every pending request has been answered when this returns.
    pub async fn run<S, X>(
        mut self,
        inbound: &mut S,
        exited: X,
        stderr: &mut mpsc::Receiver<String>,
        cancel: &CancellationToken,
        offers: Offers,
    ) -> (End, StderrTail)
    where
        S: Stream<Item = Inbound> + Unpin,
        X: Future<Output = String>,
    {
        if offers.tools {
            self.start_refresh();
        }
        self.surface_kinds = offers.lists;
        for kind in self.surface_kinds.clone() {
            self.want_surface(kind);
        }
        if offers.listen {
            self.open_listen();
        }
        tokio::pin!(exited);
        let end = loop {
            let wake = self.next_wake();
            tokio::select! {
                biased;
                () = cancel.cancelled() => break End::Stopped,
                status = &mut exited => break End::Exited(status),
                item = inbound.next() => match item {
                    Some(Inbound::Frame(frame)) => self.on_frame(frame, None),
                    Some(Inbound::Related(frame, request)) => self.on_frame(frame, Some(request)),
                    Some(Inbound::Ended { id, error, resume }) => self.on_ended(id, error, resume),
                    Some(Inbound::Renewed) => {
                        self.renewals += 1;
                        self.start_refresh();
                    }
                    Some(Inbound::Closed { error, fatal: true }) => break End::Refused(error),
                    Some(Inbound::Closed { error, fatal: false }) => break End::Failed(error),
                    None => {
                        // Output closed: usually the process is exiting. Prefer its
                        // exit status when it comes promptly.
                        break match tokio::time::timeout(Duration::from_millis(100), &mut exited).await {
                            Ok(status) => End::Exited(status),
                            Err(_) => End::Failed("the server closed its output".into()),
                        };
                    }
                },
                Some(msg) = self.rx.recv() => self.on_msg(msg),
                Some(expired) = self.deadlines.next(), if !self.deadlines.is_empty() => {
                    self.on_timeout(expired.into_inner());
                }
                Some(line) = stderr.recv() => self.tail.push(line),
                Some((id, answer)) = self.answers.next(), if !self.answers.is_empty() => {
                    self.answer_server(&id, answer);
                }
                tools = poll_refresh(&mut self.refresh) => self.on_tools(tools).await,
                lists = poll_surface(&mut self.surface_refresh) => self.on_surface(lists).await,
                () = sleep_until(wake) => {
                    if let Some(why) = self.on_wake() {
                        break End::Failed(why);
                    }
                }
            }
        };
        let error = match &end {
            End::Stopped => UpstreamError::Stopping,
            End::Exited(status) => UpstreamError::Exited {
                status: status.clone(),
            },
            End::Failed(_) | End::Refused(_) => UpstreamError::Gone,
        };
        self.fail_all(error.clone());
        // A request may have been queued while the loop was ending. Close the mailbox
        // and answer whatever is still in it, so no caller waits forever on a reply that
        // would never come. `recv` returns None once no sender can add more.
        self.rx.close();
        let drain = async {
            while let Some(msg) = self.rx.recv().await {
                if let UpstreamMsg::Request { respond_to, .. } = msg {
                    let _ = respond_to.send(Err(error.clone())); // the caller may be gone
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_millis(200), drain).await;
        (end, self.tail)
    }

    fn on_msg(&mut self, msg: UpstreamMsg) {
        match msg {
            UpstreamMsg::Request {
                call,
                method,
                params,
                opts,
                respond_to,
            } => self.send_request(call, method, params, opts, respond_to),
            UpstreamMsg::Cancel { call, reason } => {
                if let Some(id) = self.by_call.remove(&call)
                    && let Some(p) = self.pending.remove(&id)
                {
                    self.forget_deadline(&p);
                    self.send_cancelled(id, &reason);
                    // The POST of a request mcpd no longer waits for is dropped, which
                    // is also how a modern HTTP server learns of a cancellation.
                    let _ = self.out.try_send(Outbound::Abort(id)); // full: the transport is stuck anyway
                }
            }
            UpstreamMsg::Subscribe {
                sub,
                on,
                respond_to,
            } => self.on_subscribe(sub, on, respond_to),
            UpstreamMsg::Forget { agent } => {
                let emptied = self.subs.forget(agent);
                if !emptied.is_empty() {
                    self.subscriptions_changed(emptied);
                }
            }
            UpstreamMsg::Status { respond_to } => {
                let _ = respond_to.send(LiveStatus {
                    in_flight: self.pending.values().filter(|p| p.call.is_some()).count(),
                    malformed_lines: self.malformed,
                    oversized_lines: self.oversized,
                    session_renewals: self.renewals,
                    stderr_tail: self.tail.lines(),
                }); // the asker may have given up waiting
            }
        }
    }

    fn send_request(
        &mut self,
        call: Option<CallId>,
        method: String,
        mut params: Option<Value>,
        opts: CallOptions,
        respond_to: oneshot::Sender<Reply>,
    ) {
        let CallOptions {
            progress,
            caps,
            asks,
            logs,
        } = opts;
        if self.pending.len() >= self.max_in_flight {
            let _ = respond_to.send(Err(UpstreamError::Busy {
                limit: self.max_in_flight,
            }));
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        if progress.is_some() {
            // The server sees a token unique on this connection: our own request id.
            if let Some(meta) = params
                .as_mut()
                .and_then(|p| p.get_mut("_meta"))
                .and_then(Value::as_object_mut)
            {
                meta.insert("progressToken".into(), json!(id));
            }
        }
        let (line, sent) = self.dress().request(id, &method, params, caps.as_ref());
        let request = Some(sent);
        if let Err(e) = self.out.try_send(Outbound::Message { line, request }) {
            let err = match e {
                mpsc::error::TrySendError::Full(_) => UpstreamError::Busy {
                    limit: self.max_in_flight,
                },
                mpsc::error::TrySendError::Closed(_) => UpstreamError::Gone,
            };
            let _ = respond_to.send(Err(err)); // the caller may have gone; nothing to do
            return;
        }
        let deadline = Some(self.deadlines.insert(id, self.timeout));
        if call.is_some() {
            self.last_call = Instant::now();
            self.idle_told = false;
        }
        if let Some(call) = call {
            self.by_call.insert(call, id);
        }
        self.pending.insert(
            id,
            Pending {
                call,
                method,
                respond_to: Responder::Caller(respond_to),
                progress,
                deadline,
                resumes: 0,
                asks,
                logs,
            },
        );
    }

    fn dress(&self) -> Dress<'_> {
        Dress {
            era: self.era,
            http: self.http,
            param_headers: &self.param_headers,
        }
    }

    fn forget_deadline(&mut self, p: &Pending) {
        if let Some(key) = &p.deadline {
            self.deadlines.remove(key);
        }
    }

    /// Asks a modern server to tell us of tool-list changes. The request stays open
    /// without a deadline while the server is up.
    fn open_listen(&mut self) {
        let id = self.next_id;
        self.next_id += 1;
        let (line, sent) = self.dress().request(
            id,
            method::LISTEN,
            Some(modern::listen_params(&self.subs.uris())),
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
            Pending {
                call: None,
                method: method::LISTEN.into(),
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

    fn listen_ended(&mut self) {
        tracing::debug!(upstream = %self.server, "the server ended our subscription; reopening it soon");
        self.listen = ListenState::RetryAt(Instant::now() + LISTEN_RETRY);
    }

    fn send_cancelled(&mut self, id: u64, reason: &str) {
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

    fn on_timeout(&mut self, id: u64) {
        let Some(p) = self.pending.remove(&id) else {
            return;
        };
        if let Some(call) = p.call {
            self.by_call.remove(&call);
        }
        tracing::warn!(upstream = %self.server, rpc_id = id, method = %p.method, "request timed out");
        self.send_cancelled(
            id,
            &format!(
                "timed out after {}",
                humantime::format_duration(self.timeout)
            ),
        );
        let _ = self.out.try_send(Outbound::Abort(id)); // full: the transport is stuck anyway
        if let Responder::Caller(tx) = p.respond_to {
            let _ = tx.send(Err(UpstreamError::Timeout {
                after: self.timeout,
            }));
        }
    }

    /// A request's reply stream ended. If the answer came on it, the request is no
    /// longer pending and there is nothing to do; otherwise resume or fail it.
    fn on_ended(&mut self, id: u64, error: UpstreamError, resume: Option<Resume>) {
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
        let Some(p) = self.pending.remove(&id) else {
            return;
        };
        self.forget_deadline(&p);
        if let Some(call) = p.call {
            self.by_call.remove(&call);
        }
        match p.respond_to {
            Responder::Caller(tx) => {
                tracing::warn!(upstream = %self.server, rpc_id = id, method = %p.method, "request failed: {error}");
                let _ = tx.send(Err(error)); // the caller may have gone
            }
            Responder::Ping => self.ping = None,
            Responder::Listen => self.listen_ended(),
        }
    }

    fn on_frame(&mut self, frame: Frame, related: Option<u64>) {
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
        match jsonrpc::parse(&line) {
            Ok(Message::Response(r)) => self.on_response(r),
            Ok(Message::Notification(n)) => self.on_notification(n, related),
            Ok(Message::Request(r)) => self.on_server_request(r, related),
            Err(e) => self.malformed(&e.to_string()),
        }
    }

    fn malformed(&mut self, why: &str) {
        self.malformed += 1;
        tracing::warn!(upstream = %self.server, count = self.malformed, "skipped a malformed line from the server: {why}");
    }

    fn on_response(&mut self, r: Response) {
        let Some(p) = r.id.as_u64().and_then(|id| self.pending.remove(&id)) else {
            // A late answer to a request that timed out or was cancelled, or a bogus id.
            tracing::debug!(upstream = %self.server, rpc_id = %r.id, "dropped a response with no pending request");
            return;
        };
        self.forget_deadline(&p);
        if let Some(call) = p.call {
            self.by_call.remove(&call);
            self.last_call = Instant::now();
        }
        match p.respond_to {
            Responder::Caller(tx) => {
                let _ = tx.send(Ok(r.outcome)); // the caller may have gone
            }
            Responder::Ping => self.ping = None,
            Responder::Listen => self.listen_ended(),
        }
    }

    fn on_notification(&mut self, n: Notification, related: Option<u64>) {
        if let Some(sub) = modern::subscription_of(n.params.as_ref())
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
            method::PROMPTS_LIST_CHANGED => self.want_surface(Kind::Prompts),
            method::MESSAGE => self.route_log(n, related),
            method::RESOURCES_UPDATED => {
                if let Some(uri) = subscriptions::updated_uri(n.params.as_ref()) {
                    self.subs.deliver(uri);
                }
            }
            method::RESOURCES_LIST_CHANGED => {
                self.want_surface(Kind::Resources);
                self.want_surface(Kind::Templates);
            }
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
            Some(r) if crate::protocol::logging::passes(level, r.threshold.as_deref()) => {
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
            let e = ErrorObject::new(
                code::METHOD_NOT_FOUND,
                format!("mcpd does not forward {} from servers to agents", r.method),
            );
            return self.answer_server(&r.id, Err(e));
        }
        let calls: Vec<&Pending> = match related {
            Some(id) => self.pending.get(&id).into_iter().collect(),
            None => self.pending.values().filter(|p| p.call.is_some()).collect(),
        };
        let sink = match calls.as_slice() {
            [one] => one.asks.clone(),
            [] => {
                let e = ErrorObject::new(
                    code::INVALID_REQUEST,
                    format!(
                        "{} arrived while no agent call is in flight; mcpd cannot tell which agent it is for",
                        r.method
                    ),
                );
                return self.answer_server(&r.id, Err(e));
            }
            many => {
                let e = ErrorObject::new(
                    code::INVALID_REQUEST,
                    format!(
                        "{} arrived while {} agent calls are in flight; mcpd cannot tell which agent it is for",
                        r.method,
                        many.len()
                    ),
                );
                return self.answer_server(&r.id, Err(e));
            }
        };
        let Some(sink) = sink else {
            let e = ErrorObject::new(
                code::METHOD_NOT_FOUND,
                format!("{} is not available for this request", r.method),
            );
            return self.answer_server(&r.id, Err(e));
        };
        let (respond_to, rx) = oneshot::channel();
        let ask = ServerAsk {
            method: r.method.clone(),
            params: r.params,
            respond_to,
        };
        if sink.try_send(ask).is_err() {
            let e = ErrorObject::new(
                code::INTERNAL_ERROR,
                "the agent that owns this call is gone or busy".to_owned(),
            );
            return self.answer_server(&r.id, Err(e));
        }
        let id = r.id;
        self.answers.push(
            async move {
                let answer = rx.await.unwrap_or_else(|_| {
                    Err(ErrorObject::new(
                        code::INTERNAL_ERROR,
                        "the agent went away before answering".to_owned(),
                    ))
                });
                (id, answer)
            }
            .boxed(),
        );
    }

    /// Sends the server the answer to one of its requests.
    fn answer_server(&mut self, id: &Id, answer: Result<Value, ErrorObject>) {
        let line = jsonrpc::response_line(id, &answer);
        // A server that does not read its input gets no answer.
        let _ = self.out.try_send(Outbound::Message {
            line,
            request: None,
        });
    }

    /// An agent subscribes or unsubscribes. A legacy server hears `resources/subscribe`
    /// for the first subscriber of a URI and `resources/unsubscribe` for the last; a
    /// modern server gets a new `subscriptions/listen` with the new set of URIs.
    fn on_subscribe(&mut self, sub: Subscription, on: bool, respond_to: oneshot::Sender<Reply>) {
        let uri = sub.uri.clone();
        let changed = if on {
            self.subs.add(sub)
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
                    m.into(),
                    Some(json!({ "uri": uri })),
                    CallOptions::default(),
                    respond_to,
                );
            }
            Era::Modern => {
                self.reopen_listen();
                let _ = respond_to.send(Ok(Ok(json!({}))));
            }
        }
    }

    /// Nobody watches `uris` any more: tell the server.
    fn subscriptions_changed(&mut self, uris: Vec<String>) {
        match self.era {
            Era::Legacy => {
                for uri in uris {
                    // Nobody waits for this answer.
                    let (respond_to, _) = oneshot::channel();
                    let params = Some(json!({ "uri": uri }));
                    self.send_request(
                        None,
                        method::RESOURCES_UNSUBSCRIBE.into(),
                        params,
                        CallOptions::default(),
                        respond_to,
                    );
                }
            }
            Era::Modern => self.reopen_listen(),
        }
    }

    /// Replaces the modern server's subscription with one for the current filter.
    fn reopen_listen(&mut self) {
        if let ListenState::Open(id) = self.listen {
            self.pending.remove(&id);
            self.send_cancelled(id, "the subscription changed");
            let _ = self.out.try_send(Outbound::Abort(id)); // full: the transport is stuck anyway
        }
        self.open_listen();
    }

    /// Asks for a fresh copy of one of the server's other lists, batched with any
    /// others asked for meanwhile.
    fn want_surface(&mut self, kind: Kind) {
        if !self.surface_kinds.contains(&kind) {
            return;
        }
        self.surface_wanted.insert(kind);
        if self.surface_refresh.is_none() {
            let kinds = std::mem::take(&mut self.surface_wanted);
            let handle = self.handle.clone();
            self.surface_refresh = Some(
                async move {
                    let mut out = Vec::new();
                    for kind in kinds {
                        let (method, field) = kind.list();
                        out.push((kind, fetch_list(&handle, method, field).await));
                    }
                    out
                }
                .boxed(),
            );
        }
    }

    async fn on_surface(&mut self, lists: Vec<(Kind, Result<ToolList, String>)>) {
        self.surface_refresh = None;
        for (kind, list) in lists {
            let items = list.map(|l| l.tools);
            if let Err(e) = &items {
                tracing::warn!(upstream = %self.server, "could not fetch {}: {e}", kind.list().0);
            }
            let event = ConnectionEvent::List {
                server: self.server.clone(),
                instance: self.instance,
                kind,
                items,
            };
            // As for tools: the supervisor never waits on us.
            let _ = self.events.send(event).await;
        }
        if let Some(kind) = self.surface_wanted.iter().next().copied() {
            self.want_surface(kind);
        }
    }

    fn start_refresh(&mut self) {
        if self.refresh.is_some() {
            self.refresh_again = true;
            return;
        }
        let handle = self.handle.clone();
        self.refresh = Some(async move { fetch_tools(&handle).await }.boxed());
    }

    async fn on_tools(&mut self, list: Result<ToolList, String>) {
        self.refresh = None;
        let mut cache = None;
        let tools = match list {
            Ok(list) => {
                cache = list.ttl_ms.map(|ttl| (ttl, list.private));
                // A lapsed TTL means the list may be stale: fetch it again then.
                self.refresh_at = list
                    .ttl_ms
                    .filter(|ttl| *ttl > 0)
                    .map(|ttl| Instant::now() + Duration::from_millis(ttl).max(MIN_TTL_REFRESH));
                if self.http && self.era == Era::Modern {
                    let (kept, headers) = modern::check_tools(&self.server, list.tools);
                    self.param_headers = headers;
                    Ok(kept)
                } else {
                    Ok(list.tools)
                }
            }
            Err(e) => {
                tracing::warn!(upstream = %self.server, "could not fetch the tool list: {e}");
                Err(e)
            }
        };
        let event = ConnectionEvent::Tools {
            server: self.server.clone(),
            instance: self.instance,
            tools,
            cache,
        };
        // The supervisor never waits on us, so this wait is short; if it is gone the
        // daemon is shutting down and the cancel branch ends the loop.
        let _ = self.events.send(event).await;
        if std::mem::take(&mut self.refresh_again) {
            self.start_refresh();
        }
    }

    /// When the loop must next look at the clock: a ping's deadline, or the moment the
    /// idle connection is due for a ping.
    fn next_wake(&self) -> Option<Instant> {
        let listen = match self.listen {
            ListenState::RetryAt(t) => Some(t),
            _ => None,
        };
        let idle = match self.idle_timeout {
            Some(t) if !self.idle_told && !self.busy() => Some(self.last_call + t),
            _ => None,
        };
        [self.ping_wake(), listen, self.refresh_at, idle]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether an agent's request is in progress: then silence may be work, not a hang,
    /// and each request has its own timeout. mcpd's own requests (catalog fetches, the
    /// subscription) do not count: a server that stops answering them is probed.
    fn busy(&self) -> bool {
        self.pending.values().any(|p| p.call.is_some())
    }

    fn ping_wake(&self) -> Option<Instant> {
        if let Some((_, deadline)) = self.ping {
            return Some(deadline);
        }
        if self.ping_interval.is_zero() || self.busy() {
            return None;
        }
        Some(self.last_heard + self.ping_interval)
    }

    fn on_wake(&mut self) -> Option<String> {
        let now = Instant::now();
        if let Some(t) = self.idle_timeout
            && !self.idle_told
            && !self.busy()
            && now >= self.last_call + t
        {
            let event = ConnectionEvent::Idle {
                server: self.server.clone(),
                instance: self.instance,
            };
            // A full queue means the supervisor is busy: try again at the next wake.
            self.idle_told = self.events.try_send(event).is_ok();
        }
        if matches!(self.listen, ListenState::RetryAt(t) if t <= now) {
            self.open_listen();
        }
        if self.refresh_at.is_some_and(|t| t <= now) {
            self.refresh_at = None;
            tracing::debug!(upstream = %self.server, "the tool list's TTL lapsed; fetching it again");
            self.start_refresh();
        }
        if let Some((_, deadline)) = self.ping {
            if now >= deadline {
                return Some(format!(
                    "the server stopped answering: no reply to ping within {} ({})",
                    humantime::format_duration(self.ping_timeout),
                    self.peer
                ));
            }
            return None;
        }
        if !self.ping_interval.is_zero()
            && !self.busy()
            && now >= self.last_heard + self.ping_interval
        {
            let id = self.next_id;
            self.next_id += 1;
            // The modern era has no ping; `server/discover` is the cheapest request.
            let probe = match self.era {
                Era::Legacy => method::PING,
                Era::Modern => method::DISCOVER,
            };
            let (line, sent) = self.dress().request(id, probe, None, None);
            let _ = self.out.try_send(Outbound::Message {
                line,
                request: Some(sent),
            });
            // A far deadline in the queue; the ping's own deadline is `self.ping`.
            let deadline = Some(self.deadlines.insert(id, self.ping_timeout * 2));
            self.pending.insert(
                id,
                Pending {
                    call: None,
                    method: method::PING.into(),
                    respond_to: Responder::Ping,
                    progress: None,
                    deadline,
                    resumes: 0,
                    asks: None,
                    logs: None,
                },
            );
            self.ping = Some((id, now + self.ping_timeout));
        }
        None
    }

    fn fail_all(&mut self, error: UpstreamError) {
        for (_, p) in self.pending.drain() {
            if let Responder::Caller(tx) = p.respond_to {
                let _ = tx.send(Err(error.clone()));
            }
        }
        self.by_call.clear();
    }
}

async fn poll_surface(refresh: &mut Option<SurfaceFetch>) -> Vec<(Kind, Result<ToolList, String>)> {
    match refresh {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

async fn poll_refresh(
    refresh: &mut Option<BoxFuture<'static, Result<ToolList, String>>>,
) -> Result<ToolList, String> {
    match refresh {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(when: Option<Instant>) {
    match when {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
