//! One agent connection as an actor: reads requests, keeps its calls in flight concurrently, writes through its outbox.

use super::AgentContext;
use super::handlers::{self, Pending, Step};
use crate::errors::AgentError;
use crate::framing::{self, BoundedLines, Frame};
use crate::jsonrpc::{self, Id, Message};
use crate::outbox::Outbox;
use crate::protocol::era::Era;
use crate::protocol::method;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;
use tokio::net::UnixStream;
use tokio::time::Instant;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

/// How long cancellations of a closing connection's calls may take to reach upstream.
const CANCEL_FLUSH: Duration = Duration::from_secs(2);
/// How long queued replies may take to be written to a closing connection.
const WRITE_FLUSH: Duration = Duration::from_secs(2);

/// What the agent said in `initialize`.
#[derive(Debug, Default)]
pub struct Session {
    /// The connection's number, for logs.
    pub agent: u64,
    pub protocol_version: Option<String>,
    pub client_name: Option<String>,
    /// True after `notifications/initialized`: list-change notifications may be sent.
    pub initialized: bool,
    /// The era the connection is pinned to by its first decisive exchange.
    pub era: Option<Era>,
    /// The capabilities a legacy agent declared in `initialize`.
    pub capabilities: Value,
    /// Open `subscriptions/listen` requests of a modern agent, by request id.
    pub listens: HashMap<Id, super::modern::Listen>,
}

/// Why the loop ended, which decides what in-flight calls are told.
#[derive(Debug, PartialEq)]
enum Close {
    /// The agent closed its side or stopped reading; nobody is left to tell.
    Gone,
    /// The daemon is shutting down and the grace ran out: tell each caller so.
    Shutdown,
}

pub async fn serve(stream: UnixStream, agent: u64, ctx: AgentContext, shutdown: CancellationToken) {
    let (read, write) = stream.into_split();
    let (outbox, out_rx) = Outbox::new(ctx.queue);
    let writer = tokio::spawn(framing::write_lines(write, out_rx));
    let mut frames = FramedRead::new(read, BoundedLines::new(ctx.max_line));
    let max_in_flight = (ctx.queue / 2).max(8);
    let mut catalog = ctx.catalog.clone();
    let mut tools_version = catalog.borrow_and_update().tools_version;
    let mut session = Session {
        agent,
        ..Session::default()
    };
    let mut in_flight: HashMap<Id, CancellationToken> = HashMap::new();
    let mut calls: FuturesUnordered<Pending> = FuturesUnordered::new();
    let mut drain_deadline: Option<Instant> = None;

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
            Some((id, step)) = calls.next() => {
                in_flight.remove(&id);
                if let Step::Reply(line) = step {
                    outbox.send(line);
                }
            }
            Ok(()) = catalog.changed() => {
                let version = catalog.borrow_and_update().tools_version;
                if version != tools_version {
                    notify_tools_changed(&session, &outbox);
                }
                tools_version = version;
            }
            frame = frames.next() => match frame {
                None | Some(Err(_)) => break Close::Gone,
                Some(Ok(frame)) => {
                    let draining = drain_deadline.is_some();
                    let reply = on_frame(frame, agent, &ctx, &outbox, &mut session, &mut in_flight, &mut calls, max_in_flight, draining);
                    if let Some(line) = reply {
                        outbox.send(line);
                    }
                }
            },
        }
    };

    // Whatever is still in flight is cancelled upstream; on shutdown the caller is told.
    for token in in_flight.values() {
        token.cancel();
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
                Step::Cancelled => {}
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
    if tokio::time::timeout(WRITE_FLUSH, writer).await.is_err() {
        tracing::debug!(agent, "dropped replies to an agent that stopped reading");
    }
}

#[allow(clippy::too_many_arguments)]
fn on_frame(
    frame: Frame,
    agent: u64,
    ctx: &AgentContext,
    outbox: &Outbox,
    session: &mut Session,
    in_flight: &mut HashMap<Id, CancellationToken>,
    calls: &mut FuturesUnordered<Pending>,
    max_in_flight: usize,
    draining: bool,
) -> Option<String> {
    let line = match frame {
        Frame::Line(line) => line,
        Frame::TooLong => {
            tracing::warn!(agent, "discarded an over-long message");
            let e = AgentError::MessageTooLarge(ctx.max_line).to_error_object();
            return Some(jsonrpc::error_line(None, &e));
        }
        Frame::NotUtf8 => {
            return Some(jsonrpc::error_line(
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
            return Some(jsonrpc::error_line(e.id(), &e.to_error_object()));
        }
    };
    match msg {
        Message::Request(req) => {
            if draining {
                return Some(jsonrpc::error_line(
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
                return Some(jsonrpc::error_line(Some(&req.id), &e));
            }
            if in_flight.len() >= max_in_flight {
                let e = AgentError::TooManyInFlight(max_in_flight).to_error_object();
                return Some(jsonrpc::error_line(Some(&req.id), &e));
            }
            tracing::debug!(agent, rpc_id = %req.id, method = %req.method, "request");
            match handlers::handle(req, ctx, outbox, session) {
                handlers::Handled::Now(line) => Some(line),
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
            tracing::debug!(agent, rpc_id = %r.id, "ignored a response: mcpd sent no request");
            None
        }
    }
}

/// Tells the agent its tool list changed: a legacy agent by the plain notification once
/// it is initialized, a modern one on each subscription that asked for it.
fn notify_tools_changed(session: &Session, outbox: &Outbox) {
    if session.era != Some(Era::Modern) && session.initialized {
        outbox.send(jsonrpc::notification_line(method::TOOLS_LIST_CHANGED, None));
    }
    for (id, listen) in &session.listens {
        if listen.tools {
            outbox.send(super::modern::list_changed(id));
        }
    }
}

async fn sleep_until(when: Option<Instant>) {
    match when {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
