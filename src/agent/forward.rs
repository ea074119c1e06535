//! Forwarding an agent's request to its server: the route, the caller's side of it (its outbox, era, capabilities), waiting for a server that is starting or for the agent's own instance, and the future of the answer.

use super::input;
use super::params::Params;
use super::reach::Reach;
use super::render::{Rewrite, TaskMode};
use super::reply::{InFlight, ReplyFuture, Step};
use super::session::Session;
use crate::jsonrpc::{self, Id};
use crate::outbox::Outbox;
use crate::protocol::era::{self, Era};
use crate::upstream::{CallOptions, LogRoute, ProgressSink, ServerAsk, UpstreamHandle};
use futures::FutureExt;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Daemon-wide call ids, so an upstream can tell apart calls from different agents.
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// A call id no other call has.
pub fn next_call() -> crate::upstream::CallId {
    NEXT_CALL.fetch_add(1, Ordering::Relaxed)
}

/// Server requests queued per modern-agent call.
const CALL_ASKS: usize = 4;

/// Where a request goes and what it says there, before its server's handle is known.
pub struct Route {
    pub server: Arc<str>,
    pub method: &'static str,
    /// The params with the agent's names replaced by the server's own.
    pub params: Params,
    /// How the server's result is changed on the way back.
    pub rewrite: Rewrite,
}

/// A route to a server that can take it now.
pub struct Target {
    pub route: Route,
    pub handle: UpstreamHandle,
}

/// Sends a routed request and returns the future of its answer: progress goes to the
/// agent, the server's requests during it are bridged to the agent's era.
/// What a call needs to know about the agent making it, owned so a call can start
/// later (after its server is ready).
#[derive(Clone)]
pub struct Caller {
    outbox: Outbox,
    /// The agent speaks the modern era (this request, or the connection).
    modern: bool,
    /// The capabilities a legacy agent declared in `initialize`.
    caps: Arc<Value>,
    asks: mpsc::Sender<Box<ServerAsk>>,
    log_level: Option<String>,
    metrics: crate::metrics::Metrics,
}

impl Caller {
    pub fn of(outbox: &Outbox, session: &Session, modern: bool) -> Caller {
        Caller {
            metrics: session.metrics.clone(),
            outbox: outbox.clone(),
            modern: modern || session.era == Some(Era::Modern),
            caps: session.capabilities.clone(),
            asks: session.asks.clone(),
            log_level: session.log_level.clone(),
        }
    }
}

pub fn launch(id: Id, target: Target, caller: &Caller) -> (Id, CancellationToken, ReplyFuture) {
    let cancel = CancellationToken::new();
    let fut = launch_with(id.clone(), target, caller, cancel.clone());
    (id, cancel, fut)
}

/// Sends a request wherever it can reach its server (`reach.rs`): at once, or once its
/// server (or the agent's instance) is ready; a cancellation meanwhile ends it at once.
pub fn go(
    id: Id,
    route: Route,
    reach: Reach,
    caller: &Caller,
) -> (Id, CancellationToken, ReplyFuture) {
    let handle = match reach {
        Reach::Now(handle) => return launch(id, Target { route, handle }, caller),
        Reach::Later(handle) => handle,
    };
    let cancel = CancellationToken::new();
    let token = cancel.clone();
    let reply_id = id.clone();
    let caller = caller.clone();
    let fut = async move {
        let got = tokio::select! {
            got = handle => got,
            () = token.cancelled() => return (reply_id, Step::Cancelled),
        };
        match got {
            Ok(handle) => launch_with(reply_id, Target { route, handle }, &caller, token).await,
            Err(e) => {
                let line = jsonrpc::error_line(Some(&reply_id), &e.to_error_object());
                (reply_id, Step::Reply(line))
            }
        }
    };
    (id, cancel, fut.boxed())
}

fn launch_with(id: Id, target: Target, caller: &Caller, cancel: CancellationToken) -> ReplyFuture {
    // Every routed request is timed for `mcpd ctl metrics`, whatever its outcome.
    let (metrics, server, method) = (
        caller.metrics.clone(),
        target.route.server.clone(),
        target.route.method,
    );
    let started = std::time::Instant::now();
    call_future(id, target, caller, cancel)
        .map(move |(id, step)| {
            let error = match &step {
                Step::Reply(line) => jsonrpc::is_error_line(line),
                Step::Cancelled => true,
                Step::Park { .. } | Step::Again(_) => false,
            };
            if !matches!(step, Step::Park { .. } | Step::Again(_)) {
                metrics.call(&server, method, started.elapsed(), error);
            }
            (id, step)
        })
        .boxed()
}

fn call_future(id: Id, target: Target, caller: &Caller, cancel: CancellationToken) -> ReplyFuture {
    let outbox = &caller.outbox.about(&id);
    let modern = caller.modern;
    let Target {
        route:
            Route {
                server,
                method,
                params,
                mut rewrite,
            },
        handle,
    } = target;
    let progress = params
        .meta()
        .and_then(|m| m.get("progressToken"))
        .map(|token| ProgressSink {
            token: token.clone(),
            outbox: outbox.clone(),
        });
    // A modern agent asks for log messages per request; a legacy one sets a level for
    // its calls (or gets everything).
    let logs = if modern {
        params.parsed().and_then(requested_level).map(|l| LogRoute {
            outbox: outbox.clone(),
            threshold: Some(l.to_owned()),
        })
    } else {
        // A modern server is asked for log messages at this level, upstream, when the
        // request is dressed for its era.
        Some(LogRoute {
            outbox: outbox.clone(),
            threshold: caller.log_level.clone(),
        })
    };
    let call = NEXT_CALL.fetch_add(1, Ordering::Relaxed);
    if modern {
        let caps = params
            .meta()
            .and_then(|m| m.get(era::key::CLIENT_CAPABILITIES))
            .cloned()
            .unwrap_or_else(|| json!({}));
        let (asks_tx, asks) = mpsc::channel(CALL_ASKS);
        // A tool that runs only as a 2025-11-25 task is made one and followed.
        let follow = matches!(
            rewrite,
            Rewrite::ToolResult {
                tasks: TaskMode::Follow,
                ..
            }
        );
        // An agent that did not declare the Tasks extension calling a tool: a modern
        // server that runs it only as a task answers -32021.
        let may_bridge = matches!(
            rewrite,
            Rewrite::ToolResult {
                tasks: TaskMode::None,
                ..
            }
        );
        let opts = CallOptions {
            progress,
            caps: None,
            asks: Some(asks_tx.clone()),
            logs,
        };
        let reply = if follow {
            let (h, s) = (handle.clone(), server.clone());
            let params = params.into_map();
            super::tasks::follow::follow_legacy(h, call, s, params, asks_tx).boxed()
        } else if may_bridge {
            bridged(
                handle.clone(),
                call,
                server.clone(),
                (method, params),
                opts,
                asks_tx,
            )
            .boxed()
        } else {
            // A plain call's arguments go on as the agent wrote them (`params.rs`).
            handle.call(call, method, params, opts).boxed()
        };
        input::drive(InFlight {
            id,
            server,
            handle,
            call,
            cancel: cancel.clone(),
            reply,
            asks,
            caps,
            method,
            rewrite,
        })
    } else {
        // The statuses of a 2025-11-25 task this call makes come from this connection.
        rewrite.route_statuses(&caller.outbox, handle.instance());
        let legacy = super::legacy_call::LegacyCall {
            id,
            server,
            handle,
            call,
            cancel: cancel.clone(),
            params,
            progress,
            caps: caller.caps.clone(),
            asks: caller.asks.clone(),
            method,
            rewrite,
            logs,
        };
        legacy.run().boxed()
    }
}

/// A modern agent's `tools/call` that did not declare the Tasks extension. When its
/// server runs the tool only as a task (-32021 naming the extension), mcpd declares the
/// extension itself and follows the task to its result, as it does for a legacy agent
/// (`legacy_call.rs`): the agent gets the tool's result, its input requests as
/// `input_required` rounds. The params are kept for that retry: for a plain call, two
/// shared pointers.
async fn bridged(
    handle: UpstreamHandle,
    call: crate::upstream::CallId,
    server: Arc<str>,
    (method, params): (&'static str, Params),
    opts: CallOptions,
    asks: mpsc::Sender<Box<ServerAsk>>,
) -> crate::upstream::RawReply {
    let retry = params.clone();
    let reply = handle.call(call, method, params, opts).await;
    match reply {
        Ok(Err(e)) if crate::protocol::tasks::requires_extension(&e) => {
            let params = retry.into_map();
            super::tasks::follow::follow(handle, call, server, params, asks, None).await
        }
        other => other,
    }
}

/// The level a modern agent asks for in its request's `_meta`.
pub fn requested_level(params: &Map<String, Value>) -> Option<&str> {
    params.get("_meta")?.get(era::key::LOG_LEVEL)?.as_str()
}
