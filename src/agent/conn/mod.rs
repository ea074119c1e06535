//! One agent connection as an actor.
//!
//! The `Conn` owns the session, the calls in flight and the cross-era input state, reads
//! the agent's frames, and sends every answer through the outbox.

mod catalog;
mod finish;
mod wakeups;

use super::AgentContext;
use super::handlers;
use super::in_flight::{Ended, InFlight};
use super::params::PlainArguments;
use super::pending_input::{self, Inputs, Resumed};
use super::project;
use super::reply::{Handled, ReplyFuture, Step};
use super::session::Session;
use crate::errors::AgentError;
use crate::upstream::ServerAsk;
use futures::stream::FuturesUnordered;
use futures::{Stream, StreamExt};
use mcpd_runtime::framing::{self, Frame};
use mcpd_runtime::outbox::{Held, Out, Outbox};
use mcpd_wire::jsonrpc::{self, Id, Message};
use mcpd_wire::protocol::method;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UnixStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use wakeups::Wakeup;

/// How long cancellations of a closing connection's calls may take to reach upstream.
const CANCEL_FLUSH: Duration = Duration::from_secs(2);
/// How long queued replies may take to be written to a closing connection.
const WRITE_FLUSH: Duration = Duration::from_secs(2);
/// How long replies to an agent's requests may wait for room in its queue, with no reply
/// moving, before the agent counts as not reading.
const READ_STALL: Duration = Duration::from_secs(5);
/// How long a bridge has to close its end after the daemon's closing note.
const BRIDGE_CLOSE: Duration = Duration::from_secs(2);

/// Why the loop ended, which decides what in-flight calls are told.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Close {
    /// The agent closed its side or stopped reading; nobody is left to tell.
    Gone,
    /// The daemon is shutting down and the grace ran out: tell each caller so.
    Shutdown,
}

/// The first size of an agent connection's read buffer.
const READ_BUFFER: usize = 1024;

/// Serves one agent on a Unix-socket connection: sets it up now, returns the future that
/// serves it. (Not `async fn`s down to the loop: each would keep a copy of its arguments.)
pub fn serve(
    stream: UnixStream,
    seed: mcpd_ctl::control_api::AgentInfo,
    ctx: AgentContext,
    shutdown: CancellationToken,
) -> impl Future<Output = ()> + use<> {
    let (read, write) = stream.into_split();
    let (outbox, out_rx) = Outbox::new(ctx.queue, ctx.queue_bytes);
    let writer = mcpd_runtime::tracker::spawn(framing::write_lines(write, out_rx));
    // A small first buffer: most agents are idle most of the time, and it grows (doubling)
    // for the first large request.
    let frames = framing::LineReader::with_capacity(read, ctx.max_line, READ_BUFFER);
    run(frames, outbox, writer, seed, ctx, shutdown)
}

/// Serves one agent whose messages arrive on `frames` and whose queued messages a task
/// of the transport's writes (`writer`, which ends once `outbox` and its copies are
/// dropped). `seed` is what `ctl agents` shows before the agent says who it is.
pub fn run<S>(
    frames: S,
    outbox: Outbox,
    writer: JoinHandle<std::io::Result<u64>>,
    seed: mcpd_ctl::control_api::AgentInfo,
    ctx: AgentContext,
    shutdown: CancellationToken,
) -> impl Future<Output = ()>
where
    S: Stream<Item = std::io::Result<Frame>> + Unpin,
{
    let agent = seed.agent;
    let (asks_tx, asks) = mpsc::channel(pending_input::AGENT_ASKS);
    let (describe_tx, describes) = mpsc::channel(4);
    let (project_tx, projects) = mpsc::channel(4);
    ctx.agents.join(seed, describe_tx);
    let conn = Conn::new(agent, ctx, outbox, asks_tx, project_tx);
    conn.serve(frames, writer, shutdown, asks, (describes, projects))
}

/// One agent connection: everything its actor owns.
struct Conn {
    agent: u64,
    ctx: AgentContext,
    outbox: Outbox,
    session: Session,
    inputs: Inputs,
    /// Requests in flight, by the agent's id, with what cancels them.
    in_flight: InFlight,
    calls: FuturesUnordered<ReplyFuture>,
    max_in_flight: usize,
    /// Set once shutdown began: the calls in flight may finish until then.
    drain_deadline: Option<Instant>,
    /// Replies waiting for room in the outbox; no request is read while any wait.
    held: Held,
    /// Bytes read from the agent not yet reported to the metrics.
    received: u64,
    /// Lines (frames) taken from the agent, for `mcpd connect`'s closing note.
    taken: u64,
    /// The agent is `mcpd connect` (it said so): while the daemon drains, its lines are
    /// left unread, and the last line it gets says how many were taken, so it sends the
    /// rest to the next daemon instead of failing them.
    bridge: bool,
    catalog: watch::Receiver<Arc<crate::registry::Catalog>>,
    /// The catalog's list versions the agent was last told about.
    seen_versions: (u64, u64, u64),
}

impl Conn {
    fn new(
        agent: u64,
        ctx: AgentContext,
        outbox: Outbox,
        asks: mpsc::Sender<Box<ServerAsk>>,
        projects: mpsc::Sender<super::project::News>,
    ) -> Conn {
        // Another user's agent (`allow_uids`) names no directory for project servers.
        let foreign = ctx.peer.uid.is_some_and(|u| u != ctx.access.own && u != 0);
        let mut catalog = ctx.catalog.clone();
        let seen_versions = {
            let c = catalog.borrow_and_update();
            c.versions()
        };
        let project = super::project::Project::new(projects, foreign);
        let session = Session::new(agent, asks, ctx.metrics.clone(), project);
        Conn {
            agent,
            max_in_flight: (ctx.queue / 2).max(8),
            ctx,
            outbox,
            session,
            inputs: Inputs::new(agent),
            in_flight: InFlight::default(),
            calls: FuturesUnordered::new(),
            drain_deadline: None,
            held: Held::default(),
            received: 0,
            taken: 0,
            bridge: false,
            catalog,
            seen_versions,
        }
    }

    /// The actor's loop, then its closing sequence. Not an `async fn`, which keeps its
    /// arguments twice (and the locals they move into), in every idle connection's state.
    #[allow(clippy::manual_async_fn, reason = "see above")]
    fn serve<S>(
        mut self,
        mut frames: S,
        writer: JoinHandle<std::io::Result<u64>>,
        shutdown: CancellationToken,
        asks: mpsc::Receiver<Box<ServerAsk>>,
        (describes, projects): (
            mpsc::Receiver<super::roster::RosterAsk>,
            mpsc::Receiver<super::project::News>,
        ),
    ) -> impl Future<Output = ()>
    where
        S: Stream<Item = std::io::Result<Frame>> + Unpin,
    {
        async move {
            let agent = self.agent;
            let queue = self.ctx.queue;
            // A permit for held replies borrows the queue it is for: a copy of the outbox
            // here, so the handlers may borrow the connection as they like.
            let room = self.outbox.clone();
            // What rarely fires is polled only when it wakes the connection (`Wakeup`).
            let mut wakeups = Wakeup::of(
                &shutdown,
                &self.outbox,
                &self.catalog,
                asks,
                describes,
                projects,
            );
            let close = loop {
                if self.drain_deadline.is_some() && self.calls.is_empty() {
                    break Close::Shutdown;
                }
                // The deadlines are seldom set; a branch without one is not polled.
                let drain = self.drain_deadline;
                let stall = self.held.deadline(READ_STALL);
                let expiry = self.inputs.next_expiry();
                tokio::select! {
                    biased;
                    Some(wakeup) = wakeups.next() => match wakeup {
                        Wakeup::Stopping => {
                            self.drain_deadline = Some(Instant::now() + self.ctx.drain_grace);
                        }
                        Wakeup::Overflowed => {
                            tracing::warn!(agent, queue, "agent is not reading its socket; disconnecting it");
                            break Close::Gone;
                        }
                        Wakeup::Ask(ask) => self.inputs.ask(&self.session, &self.outbox, *ask),
                        Wakeup::Roster(ask) => self.on_roster(ask),
                        Wakeup::Catalog => {
                            if !self.on_catalog() {
                                break Close::Gone;
                            }
                        }
                        Wakeup::Project(news) => project::on_news(&self.ctx, &mut self.session, news),
                    },
                    () = sleep_until(drain), if drain.is_some() => break Close::Shutdown,
                    () = sleep_until(stall), if stall.is_some() => {
                        tracing::warn!(agent, queue, "agent is not reading its socket; disconnecting it");
                        break Close::Gone;
                    }
                    Some(permit) = room.reserve(self.held.next_bytes()), if !self.held.is_empty() => {
                        self.held.release(permit);
                    }
                    Some((id, step)) = self.calls.next() => self.on_step(id, step),
                    () = sleep_until(expiry), if expiry.is_some() => self.inputs.expire(&mut self.calls),
                    frame = frames.next(), if self.held.is_empty() && !(self.bridge && self.drain_deadline.is_some()) => match frame {
                        None | Some(Err(_)) => break Close::Gone,
                        Some(Ok(frame)) => self.on_frame(frame),
                    },
                }
            };
            drop(room);
            let bridge = self.bridge && close == Close::Shutdown;
            // A bridge gets a closing note and then closes its end: what it sent meanwhile
            // is read and dropped (it sends that to the next daemon) until it does, so the
            // socket is not closed with unread bytes, which would reset it and could lose
            // the note on the way.
            let gone = async {
                if !bridge {
                    return std::future::pending().await;
                }
                let _ = tokio::time::timeout(BRIDGE_CLOSE, async {
                    while let Some(Ok(_)) = frames.next().await {}
                })
                .await;
            };
            // Boxed: it runs once, and its state would be part of every idle connection's.
            Box::pin(self.finish(close, writer, gone)).await;
        }
    }

    /// A request in flight ended, or paused for the agent's input.
    fn on_step(&mut self, id: Id, step: Step) {
        let ended = self.in_flight.remove(&id);
        match step {
            Step::Reply(line) => self.held.reply(
                &self.outbox,
                Out {
                    line,
                    about: Some(id),
                },
            ),
            Step::Cancelled => {
                if let Ended::ByOperator = ended {
                    let e = AgentError::CancelledByOperator.to_error_object();
                    let line = jsonrpc::error_line(Some(&id), &e);
                    self.held.reply(
                        &self.outbox,
                        Out {
                            line,
                            about: Some(id),
                        },
                    );
                }
            }
            Step::Park { ask, call } => {
                self.inputs.park(&self.outbox, &mut self.held, ask, *call);
            }
            Step::Again(again) => {
                let super::reply::Again { request, plain } = *again;
                self.session.set_redo(Some(request.id.clone()));
                let out = self.on_request(request, plain);
                self.session.set_redo(None);
                if let Some(out) = out {
                    self.held.reply(&self.outbox, out);
                }
            }
        }
    }

    /// The roster asks: for `ctl agents`, or to cancel a request for the daemon's user.
    fn on_roster(&mut self, ask: super::roster::RosterAsk) {
        use super::roster::RosterAsk;
        // The asker may have left; nothing is owed to it then.
        match ask {
            RosterAsk::Describe(respond_to) => {
                let _ = respond_to.send(self.session.describe(&self.in_flight));
            }
            RosterAsk::Cancel { id, respond_to } => {
                let found = self.in_flight.cancel_by_operator(&id);
                if found {
                    tracing::info!(agent = self.agent, rpc_id = %id, "request cancelled by the daemon's user");
                }
                let _ = respond_to.send(found);
            }
        }
    }

    /// Handles one frame from the agent, and queues the reply due at once, if any.
    fn on_frame(&mut self, frame: Frame) {
        self.taken += 1;
        if let Frame::Line(l) = &frame {
            self.received += l.len() as u64 + 1;
            // Reported in batches: one message per call would be wasteful.
            if self.received >= 1 << 20 {
                self.ctx
                    .metrics
                    .bytes(std::mem::take(&mut self.received), 0);
            }
        }
        if let Some(out) = self.reply_to(frame) {
            self.held.reply(&self.outbox, out);
        }
    }

    /// What a frame is answered with at once, if anything.
    fn reply_to(&mut self, frame: Frame) -> Option<Out> {
        let agent = self.agent;
        let line = match frame {
            Frame::Line(line) => line,
            Frame::TooLong => {
                tracing::warn!(agent, "discarded an over-long message");
                let e = AgentError::MessageTooLarge(self.ctx.max_line).to_error_object();
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
        // Most of an agent's requests are plain tool calls: see `params.rs`.
        if let Some(call) = jsonrpc::peek_tool_call(&line) {
            let (req, plain) = super::params::plain_call(call);
            return self.on_request(req, Some(plain));
        }
        match jsonrpc::parse(&line) {
            Ok(Message::Request(req)) => self.on_request(req, None),
            Ok(Message::Notification(n)) => {
                self.on_notification(n);
                None
            }
            Ok(Message::Response(r)) => {
                self.inputs.answered(r, agent);
                None
            }
            Err(e) => {
                tracing::debug!(agent, error = %e, "unusable message from agent");
                unowned(jsonrpc::error_line(e.id(), &e.to_error_object()))
            }
        }
    }

    /// A request (a plain `tools/call`'s arguments kept as text: `plain`).
    fn on_request(&mut self, req: jsonrpc::Request, plain: Option<PlainArguments>) -> Option<Out> {
        if self.drain_deadline.is_some() {
            return unowned(jsonrpc::error_line(
                Some(&req.id),
                &AgentError::ShuttingDown.to_error_object(),
            ));
        }
        if self.in_flight.contains(&req.id) {
            let e = AgentError::IdInUse(req.id.clone()).to_error_object();
            return unowned(jsonrpc::error_line(Some(&req.id), &e));
        }
        // An open subscription is a request in flight too.
        if self.in_flight.len() + self.session.listens().len() >= self.max_in_flight {
            let e = AgentError::TooManyInFlight(self.max_in_flight).to_error_object();
            return unowned(jsonrpc::error_line(Some(&req.id), &e));
        }
        tracing::debug!(agent = self.agent, rpc_id = %req.id, method = %req.method, "request");
        if req.method == method::TOOLS_CALL {
            match self.inputs.resume_parked(&req) {
                Resumed::NotARetry => {}
                Resumed::Refused(line) => return unowned(line),
                Resumed::Resume(call) => {
                    let cancel = CancellationToken::new();
                    let tool = req.params.as_ref().and_then(|p| p.get("name"));
                    let tool = tool.and_then(serde_json::Value::as_str);
                    self.in_flight
                        .insert(req.id.clone(), cancel.clone(), &req.method, tool);
                    let resumed = super::call::parked::resume(call, req.id, cancel);
                    self.calls.push(resumed);
                    return None;
                }
            }
        }
        let id = req.id.clone();
        // What `ctl agents` and the dashboard show of it while it runs.
        let method: Box<str> = req.method.as_str().into();
        let tool: Option<Box<str>> = (req.method == method::TOOLS_CALL)
            .then(|| req.params.as_ref()?.get("name")?.as_str().map(Into::into))
            .flatten();
        match handlers::handle(req, plain, &self.ctx, &self.outbox, &mut self.session) {
            Handled::Now(line) => Some(Out {
                line,
                about: Some(id),
            }),
            Handled::Later { id, cancel, fut } => {
                self.in_flight.insert(id, cancel, &method, tool.as_deref());
                self.calls.push(fut);
                None
            }
        }
    }

    fn on_notification(&mut self, n: jsonrpc::Notification) {
        match n.method.as_str() {
            method::INITIALIZED => {
                self.session.mark_initialized();
                project::ask_roots(
                    &mut self.inputs,
                    &mut self.session,
                    &self.outbox,
                    self.agent,
                );
            }
            method::ROOTS_LIST_CHANGED => {
                project::ask_roots(
                    &mut self.inputs,
                    &mut self.session,
                    &self.outbox,
                    self.agent,
                );
            }
            project::NOTIFICATION => project::on_notification(&mut self.session, n.params.as_ref()),
            mcpd_ctl::control_api::BRIDGE_NOTIFICATION => self.bridge = true,
            method::CANCELLED => {
                let id = n
                    .params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .and_then(Id::from_value);
                if let Some(id) = id {
                    self.in_flight.cancel(&id);
                    // Ending a subscription is silent: no response is due.
                    self.session.end_listen(&id);
                }
            }
            other => tracing::debug!(agent = self.agent, method = other, "ignored a notification"),
        }
    }
}

/// A line that belongs to no request of the agent's.
fn unowned(line: String) -> Option<Out> {
    Some(Out { line, about: None })
}

async fn sleep_until(when: Option<Instant>) {
    match when {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
