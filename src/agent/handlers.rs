//! What mcpd does with each request an agent sends.
//!
//! The handshake, listing, routing calls, and sending the daemon's own methods to
//! `control/`.

use super::params::PlainArguments;
use super::reply::Handled;
use super::session::Session;
use super::{AgentContext, calls, control, era_check, listen, self_description, surface, tasks};
use crate::errors::AgentError;
use crate::supervisor::Action;
use mcpd_runtime::outbox::Outbox;
use mcpd_wire::jsonrpc::{self, Id, Request};
use mcpd_wire::protocol::ListKind;
use mcpd_wire::protocol::era::Era;
use mcpd_wire::protocol::{self, method};
use serde_json::value::RawValue;
use serde_json::{Value, json};

fn error(id: &Id, e: AgentError) -> Handled {
    Handled::Now(jsonrpc::error_line(Some(id), &e.to_error_object()))
}

pub fn handle(
    req: Request,
    plain: Option<PlainArguments>,
    ctx: &AgentContext,
    outbox: &Outbox,
    session: &mut Session,
) -> Handled {
    let (req, plain) = only_for_tools(req, plain);
    if !control::is_control(&req.method) {
        session.count_as_agent(&ctx.daemon);
    }
    let era = match era_check::check(&req, session) {
        era_check::EraCheck::Refuse(line) => return Handled::Now(line),
        era_check::EraCheck::Serve { era } => era,
    };
    if control::is_control(&req.method)
        && let Err(why) = control::may_control(ctx, session)
    {
        let method = req.method.clone();
        return error(&req.id, AgentError::ControlDenied { method, why });
    }
    match req.method.as_str() {
        method::INITIALIZE => {
            // A socket client may choose a profile in initialize's `_meta`.
            let chosen = req
                .params
                .as_ref()
                .and_then(|p| p.pointer("/_meta/mcpd~1profile"))
                .and_then(Value::as_str);
            if let Some(name) = chosen
                && let Err(e) = choose_profile(name, ctx, session)
            {
                return error(&req.id, e);
            }
            let behind = ctx.catalog.borrow().mcpd_behind().to_vec();
            Handled::Now(initialize(&req, session, &behind))
        }
        "mcpd/profile" => {
            let name = req
                .params
                .as_ref()
                .and_then(|p| p.get("name"))
                .and_then(Value::as_str);
            let Some(name) = name else {
                return invalid(
                    &req.id,
                    &req.method,
                    "\"name\" (a profile name) is required",
                );
            };
            match choose_profile(name, ctx, session) {
                Ok(()) => Handled::Now(jsonrpc::result_line(&req.id, &json!({}))),
                Err(e) => error(&req.id, e),
            }
        }
        method::DISCOVER => {
            if let Some(i) = req
                .params
                .as_ref()
                .and_then(mcpd_wire::protocol::era::instance_in)
            {
                session.is_mcpd(i);
            }
            Handled::Now(self_description::discover(&req, ctx))
        }
        method::LISTEN if era == Era::Modern => {
            if let Err(e) = listen::may_listen(&req, session) {
                return Handled::Now(jsonrpc::error_line(Some(&req.id), &e));
            }
            // Watchers first: a refusal after them drops their guard, which ends them.
            let (watching, task_ids) = match tasks::watch::start(&req, ctx, outbox, session) {
                Ok(w) => w,
                Err(e) => return Handled::Now(jsonrpc::error_line(Some(&req.id), &e)),
            };
            if let Err(refusal) = surface::listen_resources(&req, ctx, outbox, session) {
                return refusal;
            }
            let count = task_ids.len();
            let (mut listen, ack) = listen::listen(&req, task_ids);
            listen.tasks = watching;
            listen.watching = count;
            session.open_listen(req.id.clone(), listen);
            Handled::Now(ack)
        }
        method::PROMPTS_LIST => surface::list(&req, ctx, ListKind::Prompts, era, session),
        method::RESOURCES_LIST => surface::list(&req, ctx, ListKind::Resources, era, session),
        method::RESOURCE_TEMPLATES_LIST => {
            surface::list(&req, ctx, ListKind::Templates, era, session)
        }
        method::PROMPTS_GET => surface::prompts_get(req, ctx, outbox, session, era),
        method::RESOURCES_READ => surface::resources_read(req, ctx, outbox, session, era),
        method::COMPLETE => surface::complete(req, ctx, outbox, session, era),
        method::RESOURCES_SUBSCRIBE => surface::subscribe(req, ctx, outbox, session, true),
        method::RESOURCES_UNSUBSCRIBE => surface::subscribe(req, ctx, outbox, session, false),
        method::SET_LEVEL => surface::set_level(&req, session),
        method::PING => Handled::Now(jsonrpc::result_line(&req.id, &json!({}))),
        method::TOOLS_LIST => {
            // A session's first list waits a little for servers still starting, so it
            // is complete (`wait.rs`).
            if session.first_listing() {
                let starting = super::wait::starting_for(&ctx.catalog.borrow(), session);
                if !starting.is_empty() {
                    let (id, cancel, fut) = super::wait::first_list(req, starting, ctx);
                    return Handled::Later { id, cancel, fut };
                }
            }
            tools_list(&req, ctx, era, session)
        }
        method::TOOLS_CALL if super::discover::is_meta(&req) => {
            super::discover::call(req, plain, ctx, outbox, session, era)
        }
        method::TOOLS_CALL => match calls::start(req, plain, ctx, outbox, session, era) {
            Ok((id, cancel, fut)) => Handled::Later { id, cancel, fut },
            Err(refusal) => Handled::Now(refusal.line()),
        },
        mcpd_wire::protocol::tasks::GET
        | mcpd_wire::protocol::tasks::UPDATE
        | mcpd_wire::protocol::tasks::CANCEL
        | method::TASKS_RESULT => tasks::handle(req, ctx, outbox, session, era),
        method::TASKS_LIST if era == Era::Legacy => tasks::list(req, ctx, session),
        method::MCPD_STATUS => control::status(req, ctx),
        "mcpd/reload" => control::reload(req, ctx),
        mcpd_ctl::control_api::UPGRADE => control::upgrade(req, ctx),
        "mcpd/metrics" => control::metrics(req, ctx),
        "mcpd/agents" => control::agents(req, ctx),
        "mcpd/http-token" => Handled::Now(control::http_token(&req.id, ctx)),
        mcpd_ctl::control_api::UI => control::ui(req, ctx),
        mcpd_ctl::control_api::CANCEL => control::cancel(req, ctx),
        mcpd_ctl::control_api::PINS => control::pins(req, ctx),
        mcpd_ctl::control_api::SECRETS => control::secrets::handle(req, ctx),
        "mcpd/restart" => control::control(req, ctx, Action::Restart),
        "mcpd/stop" => control::control(req, ctx, Action::Stop),
        "mcpd/start" => control::control(req, ctx, Action::Start),
        control::login::LOGIN
        | control::login::WAIT
        | control::login::REDIRECT
        | control::login::LOGOUT => control::login::handle(req, ctx),
        other => {
            let e = AgentError::UnknownMethod(other.to_owned());
            error(&req.id, e)
        }
    }
}

fn initialize(req: &Request, session: &mut Session, behind: &[String]) -> String {
    let params = req.params.as_ref();
    let requested = params
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str);
    // Echo a version we speak; otherwise offer our newest and let the agent decide.
    let version = match requested {
        Some(v) if protocol::is_legacy_version(v) => v,
        _ => protocol::LATEST_LEGACY,
    };
    let capabilities = params
        .and_then(|p| p.get("capabilities"))
        .filter(|c| c.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let field = |pointer: &str| {
        params
            .and_then(|p| p.pointer(pointer))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let client = super::session::Client {
        name: field("/clientInfo/name"),
        version: field("/clientInfo/version"),
        mcpd_instance: params.and_then(mcpd_wire::protocol::era::instance_in),
    };
    session.initialize(capabilities, client);
    tracing::info!(
        agent = session.agent(),
        client = session.client_name().unwrap_or("?"),
        protocol = version,
        "agent initialized"
    );
    let mut capabilities = self_description::capabilities();
    if version == protocol::TASKS_VERSION {
        // 2025-11-25 tool tasks pass through to the servers that run them (translated
        // for extension servers); `tasks/list` shows the agent's own, from mcpd's book.
        jsonrpc::set_member(
            &mut capabilities,
            "tasks",
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        );
    }
    let result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": mcpd_wire::protocol::era::server_info(),
        "instructions": self_description::INSTRUCTIONS,
        "_meta": mcpd_wire::protocol::era::daemon_meta(behind),
    });
    jsonrpc::result_line(&req.id, &result)
}

/// Sets the connection's profile, or says it is unknown.
fn choose_profile(name: &str, ctx: &AgentContext, session: &mut Session) -> Result<(), AgentError> {
    match ctx.profiles.get(name) {
        Some(p) => {
            tracing::info!(
                agent = session.agent(),
                profile = name,
                "agent chose a profile"
            );
            session.choose_profile(p.clone());
            super::project::on_profile(session);
            Ok(())
        }
        None => {
            let known: Vec<&str> = ctx.profiles.keys().map(String::as_str).collect();
            Err(AgentError::UnknownProfile {
                name: name.to_owned(),
                known: if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                },
            })
        }
    }
}

fn tools_list(req: &Request, ctx: &AgentContext, era: Era, session: &Session) -> Handled {
    let cursor = req.params.as_ref().and_then(|p| p.get("cursor"));
    let cursor = match cursor {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => Some(c.as_str()),
        Some(_) => return invalid(&req.id, method::TOOLS_LIST, "cursor must be a string"),
    };
    let catalog = ctx.catalog.borrow().clone();
    let all = req
        .params
        .as_ref()
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(mcpd_ctl::control_api::ALL_TOOLS))
        .and_then(Value::as_bool)
        == Some(true);
    if !all && super::discover::discovers(ctx, session, &catalog) {
        // The discovery list: this agent's own, so not cached past a change.
        #[derive(serde::Serialize)]
        struct Listed<'a> {
            tools: Vec<&'a RawValue>,
            #[serde(flatten, skip_serializing_if = "Option::is_none")]
            modern: Option<Value>,
        }
        let modern = (era == Era::Modern).then(|| {
            json!({
                "resultType": "complete",
                "ttlMs": 0,
                "cacheScope": "private",
                "_meta": { mcpd_wire::protocol::era::key::SERVER_INFO: mcpd_wire::protocol::era::server_info() },
            })
        });
        let result = Listed {
            tools: super::discover::list(ctx, session, &catalog),
            modern,
        };
        return Handled::Now(jsonrpc::result_line(&req.id, &result));
    }
    match catalog.page(cursor) {
        Ok((page, next)) => {
            // Serialised from the catalog's definitions directly: no copy of the page.
            #[derive(serde::Serialize)]
            struct Page<'a> {
                tools: Vec<&'a RawValue>,
                #[serde(rename = "nextCursor", skip_serializing_if = "Option::is_none")]
                next_cursor: Option<String>,
                /// The modern result shape: `resultType`, cache hints, server info.
                #[serde(flatten, skip_serializing_if = "Option::is_none")]
                modern: Option<Value>,
            }
            let modern = (era == Era::Modern).then(|| {
                let c = catalog.cache();
                json!({
                    "resultType": "complete",
                    "ttlMs": c.ttl_ms,
                    "cacheScope": if c.private { "private" } else { "public" },
                    "_meta": { mcpd_wire::protocol::era::key::SERVER_INFO: mcpd_wire::protocol::era::server_info() },
                })
            });
            let result = Page {
                // A profile filters within each page: pages may come out shorter,
                // and the cursors stay right.
                tools: page
                    .iter()
                    .filter(|t| session.sees_tool(&t.server, &t.qualified))
                    .map(|t| &*t.definition)
                    .collect(),
                next_cursor: next,
                modern,
            };
            Handled::Now(jsonrpc::result_line(&req.id, &result))
        }
        Err(why) => invalid(&req.id, method::TOOLS_LIST, &why),
    }
}

fn invalid(id: &Id, method: &str, reason: &str) -> Handled {
    error(
        id,
        AgentError::InvalidParams {
            method: method.to_owned(),
            reason: reason.to_owned(),
        },
    )
}

/// Plain arguments stay text only in a `tools/call` (a server's tool, or one named to
/// `mcpd__call_tool`; `discover::call` puts them back as values for the other meta-tools):
/// for any other method they are put back into the request's params as values.
fn only_for_tools(
    mut req: Request,
    plain: Option<PlainArguments>,
) -> (Request, Option<PlainArguments>) {
    match plain {
        Some(p) if req.method != mcpd_wire::protocol::method::TOOLS_CALL => {
            req.params = match req.params.take() {
                Some(Value::Object(params)) => Some(Value::Object(p.merged(params))),
                other => other,
            };
            (req, None)
        }
        other => (req, other),
    }
}
