//! The serving loop of one upstream connection.
//!
//! Owns the pending map, the id counter and the progress-token map.
//!
//! This file holds the actor's state, its constructor and `run` loop, and the mailbox; the
//! child modules hold the rest of its methods, one concern each.

use super::dress::ParamHeaders;
use super::list::ToolList;
use super::process::StderrTail;
use super::subscriptions::Subscriptions;
use super::transport::{Inbound, Outbound};
use super::{
    CallId, ConnectionEvent, LiveStatus, LogRoute, ProgressSink, ReplyTo, ServerAsk, UpstreamError,
    UpstreamHandle, UpstreamMsg,
};
use crate::config::ServerConfig;
use crate::upstream::list::ListError;
use futures::future::BoxFuture;
use futures::stream::{BoxStream, FuturesUnordered, SelectAll};
use futures::{Stream, StreamExt};
use mcpd_runtime::budget;
use mcpd_wire::jsonrpc::{ErrorObject, Id};
use mcpd_wire::protocol::ListKind;
use mcpd_wire::protocol::era::Era;
use rustc_hash::FxHashMap;
use serde_json::Value;
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod catalog;
mod listen;
mod liveness;
mod requests;
mod server;

/// A running fetch of some of a server's prompt, resource and template lists.
type SurfaceFetch = BoxFuture<'static, Vec<(ListKind, Result<ToolList, ListError>)>>;

/// What a server offers that the actor keeps up to date.
pub struct Offers {
    pub tools: bool,
    /// Modern servers announce list changes only on a subscription.
    pub listen: bool,
    pub lists: Vec<ListKind>,
    /// The server has the Tasks extension.
    pub tasks: bool,
}

/// What wakes the actor rarely: shutdown, the process's exit, a line of its stderr.
enum Rare {
    Stopped,
    Exited(String),
    Stderr(String),
}

impl Rare {
    /// The actor's rare sources as one stream, which polls a source only after it woke
    /// the task. As `select!` branches they would be polled on every turn of the loop,
    /// several per call, and each costs a lock or two (the token; the child's exit, a
    /// signal watch); a `SelectAll` (futures' per-stream wakers) checks one queue instead.
    fn of<'a, X>(
        cancel: &'a CancellationToken,
        exited: X,
        stderr: &'a mut mpsc::Receiver<String>,
    ) -> SelectAll<BoxStream<'a, Rare>>
    where
        X: Future<Output = String> + Send + 'a,
    {
        use futures::stream::{once, unfold};
        let stopped = once(cancel.cancelled()).map(|()| Rare::Stopped);
        let exited = once(exited).map(Rare::Exited);
        let stderr = unfold(stderr, |rx| async move {
            let line = rx.recv().await?;
            Some((Rare::Stderr(line), rx))
        });
        futures::stream::select_all([stopped.boxed(), exited.boxed(), stderr.boxed()])
    }
}

/// Requests queued in a connection's mailbox.
const MAILBOX: usize = 256;
/// Messages from the server handled in a row before the other branches get a turn.
const INBOUND_BURST: usize = 64;
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

struct PendingRequest {
    call: Option<CallId>,
    method: &'static str,
    respond_to: Responder,
    progress: Option<ProgressSink>,
    /// Its entry in the actor's `deadlines`; None for a request that may stay open
    /// forever (a subscription).
    deadline: Option<(Instant, u64)>,
    /// Where the server's own requests during this call go.
    asks: Option<mpsc::Sender<Box<ServerAsk>>>,
    /// Where the server's log messages about this call go.
    logs: Option<LogRoute>,
    /// Times its reply stream has been resumed.
    resumes: u8,
    /// The task a `tasks/result` waits for (the server's id).
    task: Option<String>,
}

enum Responder {
    Caller(ReplyTo),
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
    /// Keyed by mcpd's own ids (a counter), so a fast hasher is safe: a server's reply
    /// only looks an id up.
    pending: FxHashMap<u64, PendingRequest>,
    /// Agent call -> upstream id, so cancellations find their request.
    by_call: FxHashMap<CallId, u64>,
    /// How many of `pending` are agents' calls (not mcpd's own requests): whether the
    /// connection is busy is asked on every turn of the loop, and counting the map each
    /// time cost a walk of every pending request.
    calls_pending: usize,
    /// Each pending request's deadline with its id, earliest first; the loop's timer
    /// is armed for the first.
    deadlines: BTreeSet<(Instant, u64)>,
    out: budget::Sender<Outbound>,
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
    refresh: Option<BoxFuture<'static, Result<ToolList, ListError>>>,
    refresh_again: bool,
    /// The prompt/resource/template lists the server has (from its capabilities).
    surface_kinds: Vec<ListKind>,
    /// A running fetch of some of those lists, and the lists to fetch after it.
    surface_refresh: Option<SurfaceFetch>,
    surface_wanted: BTreeSet<ListKind>,
    /// Agents' resource subscriptions on this server.
    subs: Subscriptions,
    /// The server's era, which decides how requests are dressed.
    era: Era,
    /// Whether the transport is HTTP (request-metadata headers, `x-mcp-header`).
    http: bool,
    param_headers: ParamHeaders,
    /// The server has the Tasks extension: its tools are shown to 2025-11-25 agents as
    /// ones that may run as tasks (`execution.taskSupport: "optional"`).
    tasks: bool,
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
    /// Where the server's `notifications/tasks/status` go (set by `serve`; None drops them).
    pub task_status: Option<budget::Sender<super::TaskStatus>>,
}

impl Actor {
    pub fn new(
        server: Arc<str>,
        cfg: &ServerConfig,
        peer: String,
        out: budget::Sender<Outbound>,
        events: mpsc::Sender<ConnectionEvent>,
        instance: u64,
        era: Era,
    ) -> (Actor, UpstreamHandle) {
        let (tx, rx) = mpsc::channel(MAILBOX);
        // A backstop beyond the connection's own timeout, which normally fires first and
        // also cancels upstream: a caller never waits longer than this.
        let handle = UpstreamHandle {
            tx,
            deadline: cfg.timeout + super::BACKSTOP,
            instance,
        };
        let actor = Actor {
            server,
            peer,
            instance,
            timeout: cfg.timeout,
            max_in_flight: cfg.max_in_flight,
            ping_interval: cfg.health.ping_interval,
            ping_timeout: cfg.health.ping_timeout,
            next_id: super::INITIALIZE_ID + 1,
            pending: FxHashMap::default(),
            by_call: FxHashMap::default(),
            calls_pending: 0,
            deadlines: BTreeSet::new(),
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
            tasks: false,
            listen: ListenState::Off,
            refresh_at: None,
            answers: FuturesUnordered::new(),
            idle_timeout: cfg.idle_timeout,
            last_call: Instant::now(),
            idle_told: false,
            task_status: None,
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
        X: Future<Output = String> + Send,
    {
        if offers.tools {
            self.start_refresh();
        }
        self.surface_kinds = offers.lists;
        self.tasks = offers.tasks;
        for kind in self.surface_kinds.clone() {
            self.want_surface(kind);
        }
        if offers.listen {
            self.open_listen();
        }
        // Messages taken from the server in a row. A server whose output never pauses
        // (a notification flood) would otherwise keep the biased `select!` on its first
        // branches, and the mailbox (new requests, cancellations), timeouts and answers
        // to it would wait for the flood to end.
        let mut streak = 0usize;
        // What rarely fires is polled only when it wakes the actor (`Rare`).
        let mut rare = Rare::of(cancel, exited, stderr);
        // One timer for every wake (pings, TTLs, the idle timeout, each request's
        // deadline), moved only to an earlier time. When the next wake moves later (a
        // request answered, the next one sent: on a busy connection, every call) the
        // armed time stays, and the loop looks again when it comes; moving a timer takes
        // it out of the runtime's timer wheel and puts it back.
        let timer = tokio::time::sleep_until(Instant::now());
        tokio::pin!(timer);
        let mut armed: Option<Instant> = None;
        let end = loop {
            if let Some(t) = self.next_wake()
                && armed.is_none_or(|a| t < a)
            {
                timer.as_mut().reset(t);
                armed = Some(t);
            }
            tokio::select! {
                biased;
                Some(rare) = rare.next() => match rare {
                    Rare::Stopped => break End::Stopped,
                    Rare::Exited(status) => break End::Exited(status),
                    Rare::Stderr(line) => self.tail.push(line),
                },
                item = inbound.next(), if streak < INBOUND_BURST => {
                    streak += 1;
                    match item {
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
                            let status = async {
                                loop {
                                    match rare.next().await? {
                                        Rare::Exited(status) => return Some(status),
                                        Rare::Stderr(line) => self.tail.push(line),
                                        Rare::Stopped => {}
                                    }
                                }
                            };
                            break match tokio::time::timeout(Duration::from_millis(100), status).await {
                                Ok(Some(status)) => End::Exited(status),
                                _ => End::Failed("the server closed its output".into()),
                            };
                        }
                    }
                }
                Some(msg) = self.rx.recv() => self.on_msg(msg),
                Some((id, answer)) = self.answers.next(), if !self.answers.is_empty() => {
                    self.answer_server(&id, answer);
                }
                tools = poll_refresh(&mut self.refresh) => self.on_tools(tools).await,
                lists = poll_surface(&mut self.surface_refresh) => self.on_surface(lists).await,
                () = &mut timer, if armed.is_some() => {
                    armed = None;
                    self.expire_deadlines(Instant::now());
                    if let Some(why) = self.on_wake() {
                        break End::Failed(why);
                    }
                }
                // Nothing else was ready: the server's output may be read again.
                () = std::future::ready(()), if streak >= INBOUND_BURST => streak = 0,
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
                    respond_to.fail(error.clone());
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
                if let Some(&id) = self.by_call.get(&call)
                    && let Some(p) = self.take_pending(id)
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
                    in_flight: self.calls_pending,
                    malformed_lines: self.malformed,
                    oversized_lines: self.oversized,
                    session_renewals: self.renewals,
                    stderr_tail: self.tail.lines(),
                    since_call: self.last_call.elapsed(),
                }); // the asker may have given up waiting
            }
        }
    }
}

async fn poll_surface(
    refresh: &mut Option<SurfaceFetch>,
) -> Vec<(ListKind, Result<ToolList, ListError>)> {
    match refresh {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

async fn poll_refresh(
    refresh: &mut Option<BoxFuture<'static, Result<ToolList, ListError>>>,
) -> Result<ToolList, ListError> {
    match refresh {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}
