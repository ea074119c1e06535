//! Forwarding an agent's request to its server.
//!
//! The route, the caller's side of it (its outbox, era, capabilities), waiting for a
//! server that is starting or for the agent's own instance, and the call's plan (`call/`)
//! chosen once, whose branch is the future of the answer.

use super::call::fulfil::Fulfil;
use super::call::{AgentSide, Call, CallPlan, parked};
use super::params::Params;
use super::render::Rewrite;
use super::reply::{ReplyFuture, Step};
use super::resolve::Reach;
use super::session::Session;
use crate::upstream::{LogRoute, ProgressSink, ServerAsk, UpstreamHandle};
use futures::FutureExt;
use mcpd_runtime::outbox::Outbox;
use mcpd_wire::jsonrpc::{self, Id};
use mcpd_wire::protocol::era::{self, Era};
use serde_json::{Map, Value};
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

/// What a call needs to know about the agent making it, owned so a call can start
/// later (after its server is ready).
#[derive(Clone)]
pub struct Caller {
    outbox: Outbox,
    /// The agent's era: this request's, or the connection's.
    era: Era,
    /// The capabilities a legacy agent declared in `initialize`.
    caps: Arc<Value>,
    asks: mpsc::Sender<Box<ServerAsk>>,
    log_level: Option<String>,
    metrics: crate::metrics::Metrics,
}

impl Caller {
    /// The caller of a request of era `era` on `session`'s connection: a 2026-07-28
    /// request, or any request on a connection pinned to that era, is a modern call.
    pub fn of(outbox: &Outbox, session: &Session, era: Era) -> Caller {
        let modern = era == Era::Modern || session.era() == Some(Era::Modern);
        Caller {
            metrics: session.metrics().clone(),
            outbox: outbox.clone(),
            era: if modern { Era::Modern } else { Era::Legacy },
            caps: session.capabilities().clone(),
            asks: session.asks().clone(),
            log_level: session.log_level().cloned(),
        }
    }
}

/// Sends a routed request and returns the future of its answer: progress goes to the
/// agent, the server's requests during it are bridged to the agent's era.
pub fn launch(id: Id, target: Target, caller: &Caller) -> (Id, CancellationToken, ReplyFuture) {
    let cancel = CancellationToken::new();
    let fut = launch_with(id.clone(), target, caller, cancel.clone());
    (id, cancel, fut)
}

/// Sends a request wherever it can reach its server (`resolve.rs`): at once, or once its
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
    let plan = CallPlan::decide(caller.era, method, &rewrite);
    let progress = params
        .meta()
        .and_then(|m| m.get("progressToken"))
        .map(|token| ProgressSink {
            token: token.clone(),
            outbox: outbox.clone(),
        });
    // A 2026-07-28 agent asks for log messages per request; an agent of the `initialize`
    // era sets a level for its calls (or gets everything). A modern server is asked for
    // log messages at that level, upstream, when the request is dressed for its era.
    let logs = match plan.agent {
        AgentSide::Parks => params.parsed().and_then(requested_level).map(|l| LogRoute {
            outbox: outbox.clone(),
            threshold: Some(l.to_owned()),
        }),
        AgentSide::Fulfils => Some(LogRoute {
            outbox: outbox.clone(),
            threshold: caller.log_level.clone(),
        }),
    };
    if plan.agent == AgentSide::Fulfils {
        // The statuses of a 2025-11-25 task this call makes come from this connection.
        rewrite.route_statuses(&caller.outbox, handle.instance());
    }
    let call = Call {
        id,
        server,
        handle,
        call: next_call(),
        cancel,
        params,
        method,
        rewrite,
        progress,
        logs,
    };
    match plan.agent {
        AgentSide::Parks => parked::start(call, plan.work),
        AgentSide::Fulfils => Fulfil {
            call,
            work: plan.work,
            caps: caller.caps.clone(),
            asks: caller.asks.clone(),
        }
        .run(),
    }
}

/// The level a 2026-07-28 agent asks for in its request's `_meta`.
pub fn requested_level(params: &Map<String, Value>) -> Option<&str> {
    params.get("_meta")?.get(era::key::LOG_LEVEL)?.as_str()
}
