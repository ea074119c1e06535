//! One agent connection as an actor: reads requests, keeps its calls in flight concurrently, writes through its outbox.

use super::AgentContext;
use super::bridge;
use super::calls::{self, InFlight};
use super::handlers::{self, Pending, Step};
use crate::errors::AgentError;
use crate::framing::{self, BoundedLines, Frame};
use crate::jsonrpc::ErrorObject;
use crate::jsonrpc::{self, Id, Message};
use crate::outbox::{Held, Out, Outbox};
use crate::protocol::era::Era;
use crate::protocol::method;
use crate::upstream::ServerAsk;
use futures::stream::FuturesUnordered;
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

/// How long cancellations of a closing connection's calls may take to reach upstream.
const CANCEL_FLUSH: Duration = Duration::from_secs(2);
/// How long queued replies may take to be written to a closing connection.
const WRITE_FLUSH: Duration = Duration::from_secs(2);
/// How long replies to an agent's requests may wait for room in its queue, with no reply
/// moving, before the agent counts as not reading.
const READ_STALL: Duration = Duration::from_secs(5);

/// What the agent said in `initialize`, and the connection's era.
#[derive(Debug)]
pub struct Session {
    /// The connection's number, for logs.
    pub agent: u64,
    pub protocol_version: Option<String>,
    pub client_name: Option<String>,
    pub client_version: Option<String>,
    /// True after `notifications/initialized`: list-change notifications may be sent.
    pub initialized: bool,
    /// The era the connection is pinned to by its first decisive exchange.
    pub era: Option<Era>,
    /// The capabilities a legacy agent declared in `initialize`.
    pub capabilities: Value,
    /// Open `subscriptions/listen` requests of a modern agent, by request id.
    pub listens: HashMap<Id, super::modern::Listen>,
    /// The actor's service that sends a server's requests to this (legacy) agent.
    pub asks: mpsc::Sender<ServerAsk>,
    /// Servers this agent subscribed to resources on, to unsubscribe when it goes.
    pub subscribed: std::collections::HashSet<std::sync::Arc<str>>,
    /// The resources it subscribed to, as (server, the server's URI): at most
    /// `surface::MAX_SUBSCRIPTIONS`, so no agent grows a server's table without bound.
    pub resources: std::collections::HashSet<(std::sync::Arc<str>, String)>,
    /// The logging level a legacy agent set for its own calls.
    pub log_level: Option<String>,
    /// Call and byte counters.
    pub metrics: crate::metrics::Metrics,
    /// The profile the agent chose; None sees everything.
    pub profile: Option<std::sync::Arc<crate::config::Profile>>,
    /// Set once the connection acts as an agent (see `AgentGauge`).
    pub counted: Option<super::AgentGauge>,
}

impl Session {
    /// Whether the agent's profile includes this server.
    pub fn sees_server(&self, server: &str) -> bool {
        self.profile
            .as_ref()
            .is_none_or(|p| p.includes_server(server))
    }

    /// Whether the agent's profile includes this tool.
    pub fn sees_tool(&self, server: &str, qualified: &str) -> bool {
        self.profile
            .as_ref()
            .is_none_or(|p| p.includes_tool(server, qualified))
    }
}

/// Server requests queued for a legacy agent.
const AGENT_ASKS: usize = 16;
/// Calls of one modern agent parked while waiting for its input, at most.
const MAX_PARKED: usize = 64;
/// How long a parked call waits for the agent's retry, and a request of mcpd's to the
/// agent (an elicitation a person may be answering) for its answer.
const PARK_TIMEOUT: Duration = Duration::from_secs(300);
/// mcpd's requests to one agent waiting for its answer, at most.
const MAX_OUTGOING: usize = 64;

/// A modern agent's call waiting for the agent to retry it with its input.
struct Parked {
    respond_to: oneshot::Sender<Result<Value, ErrorObject>>,
    /// The key of the input request in `inputRequests`.
    key: String,
    call: InFlight,
    since: Instant,
}

/// The connection's bridge state: requests mcpd sent the agent, and parked calls.
struct Bridge {
    binding: bridge::Binding,
    next_out: u64,
    /// mcpd's requests to the agent, by the id mcpd gave them, with when they were sent.
    outgoing: HashMap<Id, (oneshot::Sender<Result<Value, ErrorObject>>, Instant)>,
    next_parked: u64,
    parked: HashMap<u64, Parked>,
}

/// Why the loop ended, which decides what in-flight calls are told.
#[derive(Debug, PartialEq)]
enum Close {
    /// The agent closed its side or stopped reading; nobody is left to tell.
    Gone,
    /// The daemon is shutting down and the grace ran out: tell each caller so.
    Shutdown,
}

/// Serves one agent on a Unix-socket connection.
pub async fn serve(stream: UnixStream, agent: u64, ctx: AgentContext, shutdown: CancellationToken) {
    let (read, write) = stream.into_split();
    let (outbox, out_rx) = Outbox::new(ctx.queue, ctx.queue_bytes);
    let writer = tokio::spawn(framing::write_lines(write, out_rx));
    let frames = FramedRead::new(read, BoundedLines::new(ctx.max_line));
    let exe = ctx
        .peer_pid
        .and_then(|p| {
            #[allow(
                clippy::disallowed_methods,
                reason = "a procfs link, which never waits"
            )]
            std::fs::read_link(format!("/proc/{p}/exe")).ok()
        })
        .map(|p| p.display().to_string());
    let seed = super::registry::AgentInfo {
        agent,
        pid: ctx.peer_pid,
        uid: ctx.peer_uid,
        exe,
        transport: Some("unix".into()),
        ..Default::default()
    };
    run(frames, outbox, writer, seed, ctx, shutdown).await;
}

/// Serves one agent whose messages arrive on `frames` and whose queued messages a task
/// of the transport's writes (`writer`, which ends once `outbox` and its copies are
/// dropped). `seed` is what `ctl agents` shows before the agent says who it is.
pub async fn run<S>(
    mut frames: S,
    outbox: Outbox,
    writer: JoinHandle<std::io::Result<u64>>,
    seed: super::registry::AgentInfo,
    ctx: AgentContext,
    shutdown: CancellationToken,
) where
    S: Stream<Item = std::io::Result<Frame>> + Unpin,
{
    let agent = seed.agent;
    let max_in_flight = (ctx.queue / 2).max(8);
    let mut catalog = ctx.catalog.clone();
    let mut seen_versions = {
        let c = catalog.borrow_and_update();
        (c.tools_version, c.prompts_version, c.resources_version)
    };
    let (asks_tx, mut asks_rx) = mpsc::channel(AGENT_ASKS);
    let mut session = Session {
        agent,
        protocol_version: None,
        client_name: None,
        client_version: None,
        initialized: false,
        era: None,
        // A connection that never sends `initialize` (`mcpd ctl call`) declared none.
        capabilities: json!({}),
        listens: HashMap::new(),
        asks: asks_tx,
        subscribed: Default::default(),
        resources: Default::default(),
        log_level: None,
        metrics: ctx.metrics.clone(),
        profile: None,
        counted: None,
    };
    let mut bridge = Bridge {
        binding: bridge::Binding {
            agent,
            nonce: rand::random(),
        },
        next_out: 0,
        outgoing: HashMap::new(),
        next_parked: 0,
        parked: HashMap::new(),
    };
    let mut in_flight: HashMap<Id, CancellationToken> = HashMap::new();
    let mut calls: FuturesUnordered<Pending> = FuturesUnordered::new();
    let mut drain_deadline: Option<Instant> = None;
    // Replies waiting for room in the outbox; no request is read while any wait.
    let mut held = Held::default();
    // Bytes read from the agent not yet reported to the metrics.
    let mut received = 0u64;
    let (ask_tx, mut ask_rx) = mpsc::channel(4);
    ctx.agents.join(seed, ask_tx);

    let close = loop {
        if drain_deadline.is_some() && calls.is_empty() {
            break Close::Shutdown;
        }
        tokio::select! {
            biased;
            () = shutdown.cancelled(), if drain_deadline.is_none() => {
                drain_deadline = Some(Instant::now() + ctx.drain_grace);
            }
            () = sleep_until(drain_deadline) => break Close::Shutdown,
            () = outbox.overflowed().cancelled() => {
                tracing::warn!(agent, queue = ctx.queue, "agent is not reading its socket; disconnecting it");
                break Close::Gone;
            }
            () = sleep_until(held.deadline(READ_STALL)) => {
                tracing::warn!(agent, queue = ctx.queue, "agent is not reading its socket; disconnecting it");
                break Close::Gone;
            }
            Some(permit) = outbox.reserve(held.next_bytes()), if !held.is_empty() => held.release(permit),
            Some((id, step)) = calls.next() => {
                in_flight.remove(&id);
                match step {
                    Step::Reply(line) => held.reply(&outbox, Out { line, about: Some(id) }),
                    Step::Cancelled => {}
                    Step::Park { ask, call } => park(&mut bridge, &outbox, &mut held, ask, *call),
                }
            }
            Some(ask) = asks_rx.recv() => ask_agent(&mut bridge, &session, &outbox, ask),
            Some(respond_to) = ask_rx.recv() => {
                let _ = respond_to.send(describe(&session, in_flight.len())); // the asker may have left
            }
            () = sleep_until(next_expiry(&bridge)) => expire_parked(&mut bridge, &mut calls),
            Ok(()) = catalog.changed() => {
                let versions = {
                    let c = catalog.borrow_and_update();
                    (c.tools_version, c.prompts_version, c.resources_version)
                };
                notify_changes(&session, &outbox, seen_versions, versions);
                seen_versions = versions;
            }
            frame = frames.next(), if held.is_empty() => match frame {
                None | Some(Err(_)) => break Close::Gone,
                Some(Ok(frame)) => {
                    if let Frame::Line(l) = &frame {
                        received += l.len() as u64 + 1;
                        // Reported in batches: one message per call would be wasteful.
                        if received >= 1 << 20 {
                            ctx.metrics.bytes(std::mem::take(&mut received), 0);
                        }
                    }
                    let draining = drain_deadline.is_some();
                    let reply = on_frame(frame, agent, &ctx, &outbox, &mut session, &mut bridge, &mut in_flight, &mut calls, max_in_flight, draining);
                    if let Some(out) = reply {
                        held.reply(&outbox, out);
                    }
                }
            },
        }
    };

    for Out { line, about } in held.drain() {
        // Best effort: an agent that is gone or not reading gets no more.
        let _ = match about {
            Some(id) => outbox.send_about(&id, line),
            None => outbox.send(line),
        };
    }
    // Whatever is still in flight is cancelled upstream; on shutdown the caller is told.
    for token in in_flight.values() {
        token.cancel();
    }
    ctx.agents.leave(agent);
    // Its own server instances (`share = "agent"`) go after a grace period.
    ctx.supervisor.agent_gone(agent);
    // Its resource subscriptions end with it.
    {
        let catalog = ctx.catalog.borrow();
        for server in &session.subscribed {
            if let Some(crate::registry::Availability::Ready(h)) = catalog.servers.get(server) {
                h.forget(agent);
            }
        }
    }
    for (_, p) in bridge.parked.drain() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let id = p.call.id.clone();
        calls.push(p.call.resume(id, cancel));
    }
    let flush = tokio::time::timeout(CANCEL_FLUSH, async {
        while let Some((id, step)) = calls.next().await {
            match step {
                Step::Reply(line) => {
                    outbox.send(line);
                }
                Step::Cancelled if close == Close::Shutdown => {
                    let e = AgentError::ShuttingDown.to_error_object();
                    outbox.send(jsonrpc::error_line(Some(&id), &e));
                }
                Step::Cancelled | Step::Park { .. } => {}
            }
        }
    });
    if flush.await.is_err() {
        tracing::warn!(
            agent,
            "some cancellations did not reach their servers in time"
        );
    }
    drop(outbox);
    let mut writer = writer;
    let sent = match tokio::time::timeout(WRITE_FLUSH, &mut writer).await {
        Ok(Ok(Ok(n))) => n,
        Ok(_) => 0,
        Err(_) => {
            // A writer blocked on an agent that does not read would hold the connection
            // open for as long as the agent likes: end it, which closes the socket.
            writer.abort();
            tracing::debug!(agent, "dropped replies to an agent that stopped reading");
            0
        }
    };
    ctx.metrics.bytes(received, sent);
}

/// A line that belongs to no request of the agent's.
fn unowned(line: String) -> Option<Out> {
    Some(Out { line, about: None })
}

/// Handles one frame from the agent; returns the reply to send at once, if any.
#[allow(clippy::too_many_arguments)]
fn on_frame(
    frame: Frame,
    agent: u64,
    ctx: &AgentContext,
    outbox: &Outbox,
    session: &mut Session,
    bridge: &mut Bridge,
    in_flight: &mut HashMap<Id, CancellationToken>,
    calls: &mut FuturesUnordered<Pending>,
    max_in_flight: usize,
    draining: bool,
) -> Option<Out> {
    let line = match frame {
        Frame::Line(line) => line,
        Frame::TooLong => {
            tracing::warn!(agent, "discarded an over-long message");
            let e = AgentError::MessageTooLarge(ctx.max_line).to_error_object();
            return unowned(jsonrpc::error_line(None, &e));
        }
        Frame::NotUtf8 => {
            return unowned(jsonrpc::error_line(
                None,
                &AgentError::NotUtf8.to_error_object(),
            ));
        }
    };
    if line.trim().is_empty() {
        return None;
    }
    let msg = match jsonrpc::parse(&line) {
        Ok(msg) => msg,
        Err(e) => {
            tracing::debug!(agent, error = %e, "unusable message from agent");
            return unowned(jsonrpc::error_line(e.id(), &e.to_error_object()));
        }
    };
    match msg {
        Message::Request(req) => {
            if draining {
                return unowned(jsonrpc::error_line(
                    Some(&req.id),
                    &AgentError::ShuttingDown.to_error_object(),
                ));
            }
            if in_flight.contains_key(&req.id) {
                let e = jsonrpc::ErrorObject::new(
                    jsonrpc::code::INVALID_REQUEST,
                    format!(
                        "request id {} is already in use by a request in flight",
                        req.id
                    ),
                );
                return unowned(jsonrpc::error_line(Some(&req.id), &e));
            }
            // An open subscription is a request in flight too.
            if in_flight.len() + session.listens.len() >= max_in_flight {
                let e = AgentError::TooManyInFlight(max_in_flight).to_error_object();
                return unowned(jsonrpc::error_line(Some(&req.id), &e));
            }
            tracing::debug!(agent, rpc_id = %req.id, method = %req.method, "request");
            if req.method == method::TOOLS_CALL {
                match resume_parked(bridge, &req) {
                    Resumed::NotARetry => {}
                    Resumed::Refused(line) => return unowned(line),
                    Resumed::Resume(call) => {
                        let cancel = CancellationToken::new();
                        in_flight.insert(req.id.clone(), cancel.clone());
                        calls.push(call.resume(req.id, cancel));
                        return None;
                    }
                }
            }
            let id = req.id.clone();
            match handlers::handle(req, ctx, outbox, session) {
                handlers::Handled::Now(line) => Some(Out {
                    line,
                    about: Some(id),
                }),
                handlers::Handled::Later { id, cancel, fut } => {
                    in_flight.insert(id, cancel);
                    calls.push(fut);
                    None
                }
            }
        }
        Message::Notification(n) => {
            match n.method.as_str() {
                method::INITIALIZED => session.initialized = true,
                method::CANCELLED => {
                    let id = n
                        .params
                        .as_ref()
                        .and_then(|p| p.get("requestId"))
                        .and_then(Id::from_value);
                    if let Some(id) = id {
                        if let Some(token) = in_flight.get(&id) {
                            token.cancel();
                        }
                        // Ending a subscription is silent: no response is due.
                        session.listens.remove(&id);
                    }
                }
                other => tracing::debug!(agent, method = other, "ignored a notification"),
            }
            None
        }
        Message::Response(r) => {
            match bridge.outgoing.remove(&r.id) {
                // The server may have given up waiting; then no one needs the answer.
                Some((respond_to, _)) => {
                    let _ = respond_to.send(r.outcome);
                }
                None => {
                    tracing::debug!(agent, rpc_id = %r.id, "ignored a response to no request of mcpd's")
                }
            }
            None
        }
    }
}

/// What this connection says about itself for `mcpd ctl agents`.
fn describe(session: &Session, in_flight: usize) -> super::registry::AgentInfo {
    super::registry::AgentInfo {
        agent: session.agent,
        client: session.client_name.clone(),
        client_version: session.client_version.clone(),
        era: session.era.map(|e| e.as_str().to_owned()),
        in_flight,
        profile: session.profile.as_ref().map(|p| p.name.clone()),
        ..Default::default()
    }
}

/// Sends a server's request to a legacy agent as a real request, if the agent declared
/// the capability it needs; the answer goes back through `respond_to`.
fn ask_agent(bridge: &mut Bridge, session: &Session, outbox: &Outbox, ask: ServerAsk) {
    if let Err(e) = calls::has_capability(&session.capabilities, &ask.method) {
        let _ = ask.respond_to.send(Err(e)); // the server side may have given up
        return;
    }
    // A server that gave up waiting needs no answer: its entry goes now.
    bridge
        .outgoing
        .retain(|_, (respond_to, _)| !respond_to.is_closed());
    if bridge.outgoing.len() >= MAX_OUTGOING {
        let e = ErrorObject::new(
            crate::errors::mcpd_code::BUSY,
            format!("{MAX_OUTGOING} requests to this agent already wait for its answer"),
        );
        let _ = ask.respond_to.send(Err(e)); // the server side may have given up
        return;
    }
    bridge.next_out += 1;
    let id = Id::Str(format!("mcpd-{}", bridge.next_out));
    let line = jsonrpc::request_line(&id, &ask.method, ask.params.as_ref());
    if outbox.send(line) {
        bridge.outgoing.insert(id, (ask.respond_to, Instant::now()));
    } else {
        let e = ErrorObject::new(
            jsonrpc::code::INTERNAL_ERROR,
            "the agent is not reading its connection".to_owned(),
        );
        let _ = ask.respond_to.send(Err(e));
    }
}

/// A legacy server asked for input during a modern agent's call: answer the agent
/// `input_required` with a sealed state, and keep the call until it retries. An agent
/// without the capability gets the error, and the server's request gets it too.
fn park(bridge: &mut Bridge, outbox: &Outbox, held: &mut Held, ask: ServerAsk, call: InFlight) {
    let id = call.id.clone();
    let refusal = calls::has_capability(&call.caps, &ask.method)
        .err()
        .or_else(|| {
            (bridge.parked.len() >= MAX_PARKED).then(|| {
                ErrorObject::new(
                    jsonrpc::code::INTERNAL_ERROR,
                    format!("{MAX_PARKED} calls already wait for this agent's input"),
                )
            })
        });
    if let Some(e) = refusal {
        let _ = ask.respond_to.send(Err(e.clone())); // the server may have given up
        let line = jsonrpc::error_line(Some(&id), &e);
        held.reply(
            outbox,
            Out {
                line,
                about: Some(id),
            },
        );
        call.cancel.cancel();
        return;
    }
    bridge.next_parked += 1;
    let n = bridge.next_parked;
    let key = format!("mcpd-{n}");
    let result = json!({
        "resultType": "input_required",
        "inputRequests": { key.clone(): { "method": ask.method, "params": ask.params } },
        "requestState": bridge::seal(bridge.binding, n),
        "_meta": { crate::protocol::era::key::SERVER_INFO: crate::protocol::era::server_info() },
    });
    let line = jsonrpc::result_line(&id, &result);
    held.reply(
        outbox,
        Out {
            line,
            about: Some(id),
        },
    );
    bridge.parked.insert(
        n,
        Parked {
            respond_to: ask.respond_to,
            key,
            call,
            since: Instant::now(),
        },
    );
}

enum Resumed {
    /// An ordinary call (or a retry carrying a server's own state).
    NotARetry,
    Refused(String),
    Resume(InFlight),
}

/// A modern agent's retry with one of mcpd's `requestState`s: deliver its input to the
/// waiting server request and resume the parked call under the retry's id.
fn resume_parked(bridge: &mut Bridge, req: &jsonrpc::Request) -> Resumed {
    let params = req.params.as_ref();
    let Some(state) = params
        .and_then(|p| p.get("requestState"))
        .and_then(Value::as_str)
    else {
        return Resumed::NotARetry;
    };
    let refuse = |why: String| {
        let e = ErrorObject::new(jsonrpc::code::INVALID_PARAMS, why);
        Resumed::Refused(jsonrpc::error_line(Some(&req.id), &e))
    };
    let n = match bridge::open(state, bridge.binding) {
        bridge::Opened::Foreign => return Resumed::NotARetry,
        bridge::Opened::Invalid(why) => {
            return refuse(format!("requestState was not accepted: {why}"));
        }
        bridge::Opened::Ours(n) => n,
    };
    let Some(p) = bridge.parked.remove(&n) else {
        return refuse(
            "requestState refers to a call that is no longer waiting (answered, expired or cancelled)"
                .into(),
        );
    };
    let answer = params
        .and_then(|p| p.get("inputResponses"))
        .and_then(|r| r.get(&p.key))
        .cloned()
        .ok_or_else(|| {
            ErrorObject::new(
                jsonrpc::code::INVALID_PARAMS,
                format!("the retry has no inputResponses.{}", p.key),
            )
        });
    // The server may have given up waiting; the call then ends with its error.
    let _ = p.respond_to.send(answer);
    Resumed::Resume(p.call)
}

fn next_expiry(bridge: &Bridge) -> Option<Instant> {
    let parked = bridge.parked.values().map(|p| p.since);
    let asked = bridge.outgoing.values().map(|(_, since)| *since);
    parked.chain(asked).min().map(|t| t + PARK_TIMEOUT)
}

/// Parked calls whose agent never retried are cancelled upstream; requests the agent
/// never answered are failed.
fn expire_parked(bridge: &mut Bridge, calls: &mut FuturesUnordered<Pending>) {
    let now = Instant::now();
    let unanswered: Vec<Id> = bridge
        .outgoing
        .iter()
        .filter(|(_, (_, since))| *since + PARK_TIMEOUT <= now)
        .map(|(id, _)| id.clone())
        .collect();
    for id in unanswered {
        if let Some((respond_to, _)) = bridge.outgoing.remove(&id) {
            let e = ErrorObject::new(
                crate::errors::mcpd_code::TIMEOUT,
                "the agent did not answer in time".to_owned(),
            );
            let _ = respond_to.send(Err(e)); // the server may have given up
        }
    }
    let expired: Vec<u64> = bridge
        .parked
        .iter()
        .filter(|(_, p)| p.since + PARK_TIMEOUT <= now)
        .map(|(n, _)| *n)
        .collect();
    for n in expired {
        if let Some(p) = bridge.parked.remove(&n) {
            let e = ErrorObject::new(
                jsonrpc::code::INTERNAL_ERROR,
                "the agent did not answer in time".to_owned(),
            );
            let _ = p.respond_to.send(Err(e));
            let cancel = CancellationToken::new();
            cancel.cancel();
            let id = p.call.id.clone();
            calls.push(p.call.resume(id, cancel));
        }
    }
}

/// Tells the agent which of its lists changed, once per change: a legacy agent by the
/// plain notifications once it is initialized, a modern one on each subscription that
/// asked for that kind.
fn notify_changes(session: &Session, outbox: &Outbox, old: (u64, u64, u64), new: (u64, u64, u64)) {
    let changed = [
        (old.0 != new.0, method::TOOLS_LIST_CHANGED),
        (old.1 != new.1, method::PROMPTS_LIST_CHANGED),
        (old.2 != new.2, method::RESOURCES_LIST_CHANGED),
    ];
    for (did, m) in changed {
        if !did {
            continue;
        }
        if session.era != Some(Era::Modern) && session.initialized {
            outbox.send(jsonrpc::notification_line(m, None));
        }
        for (id, listen) in &session.listens {
            if listen.wants(m) {
                outbox.send_about(id, super::modern::list_changed(m, id));
            }
        }
    }
}

async fn sleep_until(when: Option<Instant>) {
    match when {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
