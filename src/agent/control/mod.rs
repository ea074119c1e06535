//! mcpd's own methods on an agent's connection that show or change the daemon.
//!
//! They cover status, metrics, agents, reload, a server's start, stop and restart, the
//! HTTP token and the dashboard's launch URL, and who may use them; `login.rs` has the
//! login methods, handed to a server's credential.

pub(super) mod login;
pub(super) mod secrets;

use super::reply::{Handled, Step};
use super::session::Session;
use super::{AgentContext, PeerOrigin};
use crate::errors::{AgentError, ControlDenial};
use crate::supervisor::Action;
use futures::FutureExt;
use mcpd_wire::jsonrpc::{self, Id, Request};
use serde_json::{Value, json};
use std::sync::atomic::Ordering;
use tokio_util::sync::CancellationToken;

/// mcpd's own methods that show or change the daemon: every `mcpd/` method but
/// `mcpd/profile`, which only narrows what the connection itself sees.
pub(super) fn is_control(m: &str) -> bool {
    m.starts_with("mcpd/") && m != "mcpd/profile"
}

/// Control methods show every server's command line, stderr and clients, and change
/// the daemon: they are for its own user (or root) on the socket, on a connection that
/// has not narrowed itself to a profile, from a process that is not a server's (a
/// server runs as the daemon's user, so its uid proves nothing).
pub(super) fn may_control(ctx: &AgentContext, session: &Session) -> Result<(), ControlDenial> {
    if ctx.peer.over_http {
        Err(ControlDenial::Http)
    } else if !ctx.access.controls(ctx.peer.uid) {
        Err(ControlDenial::OtherUser)
    } else if let PeerOrigin::Server { .. } = ctx.peer.origin {
        Err(ControlDenial::Server)
    } else if ctx.peer.origin == PeerOrigin::Unknown {
        Err(ControlDenial::UnknownOrigin)
    } else if session.profile().is_some() {
        Err(ControlDenial::Profile)
    } else {
        Ok(())
    }
}

/// `mcpd/metrics`: the counters in the Prometheus text format, with the gauges.
pub(super) fn metrics(req: Request, ctx: &AgentContext) -> Handled {
    let (metrics, supervisor, daemon) = (
        ctx.metrics.clone(),
        ctx.supervisor.clone(),
        ctx.daemon.clone(),
    );
    later(req.id, |id| async move {
        let mut text = metrics.render().await;
        let servers = supervisor.status().await.unwrap_or_default();
        gauges(&mut text, &servers, daemon.agents.load(Ordering::Relaxed));
        jsonrpc::result_line(&id, &json!({ "text": text }))
    })
}

/// `mcpd/agents`: the agents connected now.
pub(super) fn agents(req: Request, ctx: &AgentContext) -> Handled {
    let agents = ctx.agents.clone();
    later(req.id, |id| async move {
        let list = agents.list().await;
        jsonrpc::result_line(&id, &json!({ "agents": list }))
    })
}

/// `mcpd/cancel`: cancels an agent's request in flight, as the agent could have.
pub(super) fn cancel(req: Request, ctx: &AgentContext) -> Handled {
    let params = req.params.as_ref();
    let agent = params.and_then(|p| p.get("agent")).and_then(Value::as_u64);
    let id = params.and_then(|p| p.get("id")).and_then(Value::as_str);
    let (Some(agent), Some(id)) = (agent, id.map(str::to_owned)) else {
        let e = AgentError::InvalidParams {
            method: req.method,
            reason: "\"agent\" (a number) and \"id\" (the request's id as JSON text, as mcpd ctl agents --json shows it) are required".into(),
        };
        return Handled::Now(jsonrpc::error_line(Some(&req.id), &e.to_error_object()));
    };
    let agents = ctx.agents.clone();
    later(req.id, |reply| async move {
        let done = agents.cancel(agent, &id).await.map(|()| json!({}));
        outcome(&reply, done.map_err(|why| why.to_string()))
    })
}

/// The metrics that are states rather than counts, from the supervisor and the daemon.
fn gauges(out: &mut String, servers: &[mcpd_ctl::control_api::ServerStatus], agents: usize) {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "# HELP mcpd_agents Agent connections now (mcpd ctl's own are not agents).\n# TYPE mcpd_agents gauge\nmcpd_agents {agents}"
    );
    let _ = writeln!(
        out,
        "# HELP mcpd_server_up Whether a server is ready (1) or not (0).\n# TYPE mcpd_server_up gauge"
    );
    for s in servers {
        let up = u8::from(s.state == mcpd_ctl::control_api::ServerState::Ready);
        let _ = writeln!(out, "mcpd_server_up{{server=\"{}\"}} {up}", s.name);
    }
    let _ = writeln!(
        out,
        "# HELP mcpd_server_restarts_total Processes (or sessions) started after the first.\n# TYPE mcpd_server_restarts_total counter"
    );
    for s in servers {
        let _ = writeln!(
            out,
            "mcpd_server_restarts_total{{server=\"{}\"}} {}",
            s.name, s.restarts
        );
    }
    let _ = writeln!(
        out,
        "# HELP mcpd_server_in_flight Requests in flight to a server.\n# TYPE mcpd_server_in_flight gauge"
    );
    for s in servers {
        let _ = writeln!(
            out,
            "mcpd_server_in_flight{{server=\"{}\"}} {}",
            s.name, s.in_flight
        );
    }
}

/// How long `mcpd/status` waits for a Secret Service to say where new secrets go.
const STORE_PROBE: std::time::Duration = std::time::Duration::from_millis(300);

pub(super) fn status(req: Request, ctx: &AgentContext) -> Handled {
    let supervisor = ctx.supervisor.clone();
    let daemon = ctx.daemon.clone();
    later(req.id, |id| async move {
        // Where `mcpd ctl secret set` would store now: the configured store, or under
        // "auto" whether a Secret Service answers (at once, or it counts as absent).
        let store = async {
            match daemon.secrets.preferred() {
                crate::secrets::Preferred::Auto => format!(
                    "{} ([daemon] secrets = \"auto\")",
                    daemon
                        .secrets
                        .default_store_within(STORE_PROBE)
                        .await
                        .describe()
                ),
                p => format!("{} ([daemon] secrets = \"{}\")", p.describe(), p.as_str()),
            }
        };
        let (servers, secrets) = tokio::join!(supervisor.status(), store);
        let servers = servers.unwrap_or_default();
        let result = json!({
            "daemon": {
                "pid": std::process::id(),
                "version": env!("CARGO_PKG_VERSION"),
                "uptime_secs": daemon.started.elapsed().as_secs_f64(),
                "upgrades": daemon.upgrades,
                "socket": daemon.socket,
                "config": daemon.config,
                "agents": daemon.agents.load(Ordering::Relaxed),
                "http": daemon.http.as_ref().map(|h| &h.url),
                "ui": daemon.ui.as_ref().map(|ui| ui.url()),
                "secrets": secrets,
            },
            "servers": servers,
        });
        jsonrpc::result_line(&id, &result)
    })
}

/// `mcpd/upgrade`: answered once the binary at mcpd's path is found good (or not); the
/// daemon then drains and executes it (`crate::upgrade`).
pub(super) fn upgrade(req: Request, ctx: &AgentContext) -> Handled {
    let upgrader = ctx.daemon.upgrader.clone();
    later(req.id, |id| async move {
        outcome(&id, upgrader.upgrade().await)
    })
}

pub(super) fn reload(req: Request, ctx: &AgentContext) -> Handled {
    let reloader = ctx.reloader.clone();
    later(req.id, |id| async move {
        let summary = reloader.reload().await.map_err(|why| why.to_string());
        outcome(&id, summary)
    })
}

pub(super) fn control(req: Request, ctx: &AgentContext, action: Action) -> Handled {
    let name = req
        .params
        .as_ref()
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str);
    let Some(name) = name.map(str::to_owned) else {
        let e = AgentError::InvalidParams {
            method: req.method,
            reason: "\"name\" (a server name) is required".into(),
        };
        return Handled::Now(jsonrpc::error_line(Some(&req.id), &e.to_error_object()));
    };
    let supervisor = ctx.supervisor.clone();
    later(req.id, |id| async move {
        let done = supervisor.control(&name, action).await.map(|()| json!({}));
        outcome(&id, done.map_err(|why| why.to_string()))
    })
}

/// `mcpd/pins`: `ctl diff`, `approve` and `forget`.
pub(super) fn pins(req: Request, ctx: &AgentContext) -> Handled {
    use crate::supervisor::PinOp;
    let params = req.params.as_ref();
    let field = |k: &str| params.and_then(|p| p.get(k)).and_then(Value::as_str);
    let names: Option<Vec<String>> = match params.and_then(|p| p.get("names")) {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Array(a)) => a.iter().map(|v| v.as_str().map(str::to_owned)).collect(),
        Some(_) => None,
    };
    let op = match (field("op"), names) {
        (Some("diff"), _) => Some(PinOp::Diff),
        (Some("approve"), Some(names)) => Some(PinOp::Approve(names)),
        (Some("forget"), _) => Some(PinOp::Forget),
        _ => None,
    };
    let (Some(name), Some(op)) = (field("name").map(str::to_owned), op) else {
        let e = AgentError::InvalidParams {
            method: req.method,
            reason: "\"name\" (a server), \"op\" (\"diff\", \"approve\" or \"forget\") and, to approve some, \"names\" (strings) are required".into(),
        };
        return Handled::Now(jsonrpc::error_line(Some(&req.id), &e.to_error_object()));
    };
    let supervisor = ctx.supervisor.clone();
    later(req.id, |id| async move {
        let done = supervisor.pins(&name, op).await;
        outcome(&id, done)
    })
}

/// The answer to request `id` that `answer` writes, once it is ready: the connection goes
/// on meanwhile.
pub(super) fn later<F: std::future::Future<Output = String> + Send + 'static>(
    id: Id,
    answer: impl FnOnce(Id) -> F,
) -> Handled {
    let fut = answer(id.clone());
    let reply_id = id.clone();
    Handled::Later {
        id,
        cancel: CancellationToken::new(),
        fut: async move { (reply_id, Step::Reply(fut.await)) }.boxed(),
    }
}

/// A change's result, or why it was refused (invalid params: the request named something
/// that cannot be done).
fn outcome(id: &Id, done: Result<impl serde::Serialize, String>) -> String {
    match done {
        Ok(result) => jsonrpc::result_line(id, &result),
        Err(why) => {
            let e = AgentError::ControlRefused(why);
            jsonrpc::error_line(Some(id), &e.to_error_object())
        }
    }
}

/// `mcpd/http-token`: the HTTP listener's URL and bearer token, for its own user only.
pub(super) fn http_token(id: &jsonrpc::Id, ctx: &AgentContext) -> String {
    let refuse = |why: &'static str| {
        let e = AgentError::ControlUnavailable(why);
        jsonrpc::error_line(Some(id), &e.to_error_object())
    };
    match &ctx.daemon.http {
        None => refuse("no HTTP listener is configured; set daemon.http_listen and restart mcpd"),
        Some(h) => match &h.token {
            None => refuse("the HTTP listener needs no token (daemon.http_auth = \"none\")"),
            Some(t) => jsonrpc::result_line(id, &json!({ "url": h.url, "token": t.expose() })),
        },
    }
}

/// `mcpd/ui`: a fresh launch URL for the dashboard (its token works once, for two minutes).
pub(super) fn ui(req: Request, ctx: &AgentContext) -> Handled {
    let ui = ctx.daemon.ui.clone();
    later(req.id, |id| async move {
        let launch = match ui {
            None => Err(
                "the dashboard is off (daemon.ui = false); set daemon.ui = true and restart mcpd"
                    .to_owned(),
            ),
            Some(ui) => ui
                .launch_url()
                .await
                .map(|(url, ttl)| json!({ "url": url, "expires_secs": ttl.as_secs() }))
                .map_err(|e| format!("the dashboard did not answer: {e}")),
        };
        outcome(&id, launch)
    })
}
