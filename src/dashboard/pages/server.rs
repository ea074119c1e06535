//! `/servers/NAME`: one server's (or one instance's) page.
//!
//! It shows the state and history, its tools with a try-it form each (`call.rs` says
//! where a call goes), restart, stop and start, login and logout for a remote server, its
//! held definitions with their diffs and Approve, and its latency chart. Its POSTs come
//! from its own forms (the guard checks their origin) and answer by showing the page
//! again.

use super::call::{self, Target};
use super::overview::{auth, pins, sandbox};
use super::tryit::{self, Answer, Field};
use super::{Pages, html, message, segment};
use crate::supervisor::{Action, PinOp};
use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use mcpd_ctl::control_api::ServerStatus;
use serde_json::Value;

#[derive(Template)]
#[template(path = "dashboard/server.html")]
struct ServerPage {
    title: String,
    version: &'static str,
    name: String,
    link: String,
    /// For an instance: its server, and whose instance it is ("project /p", "agent 3").
    parent: String,
    parent_link: String,
    instance: String,
    /// The latency chart's server: an instance's calls are counted as its server's.
    chart_link: String,
    notice: String,
    answer: Option<Answer>,
    state: &'static str,
    /// Start is offered: it is stopped, failed or idle, and not the own row of a server
    /// run as instances (the daemon starts those only as an agent's or a project's).
    can_start: bool,
    pid: String,
    runs: String,
    restarts: u32,
    era: String,
    auth: String,
    sandbox: String,
    pins: String,
    last_error: String,
    remote: bool,
    held: Vec<Held>,
    pin_note: String,
    tools: Vec<Tool>,
    /// The tools have forms to call them.
    callable: bool,
    /// What the page says about where its calls go.
    call_note: String,
    /// The own row of a server run per project with no instance: nothing to call.
    no_instance: bool,
    /// For a server run per project: the projects a call may go to, and the one chosen.
    projects: Vec<String>,
    chosen: String,
    history: Vec<String>,
    stderr: Vec<String>,
}

struct Tool {
    qualified: String,
    description: String,
    /// The input schema, as indented JSON.
    schema: String,
    fields: Vec<Field>,
    /// Shown open (the one just called).
    open: bool,
}

struct Held {
    /// "new" or "changed".
    what: &'static str,
    kind: String,
    id: String,
    fields: Vec<DiffField>,
}

struct DiffField {
    name: String,
    lines: Vec<DiffLine>,
}

struct DiffLine {
    /// "same", "add" or "del".
    class: &'static str,
    text: String,
}

/// What a POST showed, to render with the page.
#[derive(Default)]
struct Shown {
    notice: String,
    answer: Option<Answer>,
    tool: Option<String>,
    project: Option<String>,
}

/// `GET /servers/NAME` (`?done=VERB` after an action says it was done).
pub(super) async fn page(
    State(pages): State<Pages>,
    Path(name): Path<String>,
    uri: Uri,
) -> Response {
    let done = super::query(&uri, "done");
    let notice = match done.as_deref() {
        Some("restart") => "Restarted.",
        Some("stop") => "Stopped.",
        Some("start") => "Started.",
        Some("approve") => "Approved; agents were told its lists changed.",
        Some("logout") => "Logged out.",
        _ => "",
    };
    let shown = Shown {
        notice: notice.to_owned(),
        ..Default::default()
    };
    render(&pages, &name, shown, StatusCode::OK).await
}

async fn render(pages: &Pages, name: &str, shown: Shown, status: StatusCode) -> Response {
    let Some(servers) = pages.supervisor.status().await else {
        return super::overview::no_answer();
    };
    // A server's row or an instance's (`SERVER@AGENT`, `SERVER@/project`), by its name.
    let Some(s) = servers.iter().find(|s| s.name == name) else {
        return unknown(name);
    };
    let server = call::template(name);
    let parent = if server == name { "" } else { server };
    let instance = match (&s.project, s.agent) {
        (Some(p), _) => format!("project {p}"),
        (None, Some(a)) => format!("agent {a}"),
        (None, None) => String::new(),
    };
    let target = Target::of(s, &servers);
    let instanced = s.share != "shared" && parent.is_empty();
    let (held, pin_note) = held(pages, name, s).await;
    let tools = tools(pages, server, shown.tool.as_deref());
    let page = ServerPage {
        title: name.to_owned(),
        version: env!("CARGO_PKG_VERSION"),
        name: name.to_owned(),
        link: segment(name),
        parent: parent.to_owned(),
        parent_link: segment(parent),
        chart_link: segment(server),
        instance,
        notice: shown.notice,
        answer: shown.answer,
        state: s.state.as_str(),
        can_start: !instanced
            && matches!(s.state.as_str(), "stopped" | "disabled" | "failed" | "idle"),
        pid: s.pid.map_or_else(|| "–".into(), |p| p.to_string()),
        runs: match (&s.command, &s.url) {
            (Some(c), _) => c.clone(),
            (None, Some(u)) => u.clone(),
            (None, None) => "–".into(),
        },
        restarts: s.restarts,
        era: s.era.clone().unwrap_or_else(|| "–".into()),
        auth: auth(s),
        sandbox: sandbox(s),
        pins: pins(s),
        last_error: s.last_error.clone().unwrap_or_default(),
        remote: s.url.is_some(),
        held,
        pin_note,
        tools,
        callable: target.callable(),
        call_note: target.note(server),
        no_instance: target == Target::Projects(Vec::new()),
        chosen: shown.project.unwrap_or_default(),
        projects: match target {
            Target::Projects(p) => p,
            _ => Vec::new(),
        },
        history: s.history.clone(),
        stderr: s.stderr_tail.clone(),
    };
    html(status, &page)
}

fn unknown(name: &str) -> Response {
    message(
        StatusCode::NOT_FOUND,
        "No such server",
        &format!("mcpd has no server named {name}."),
        "Go back to the overview for the servers it has.",
    )
}

/// The server's tools as agents see them.
fn tools(pages: &Pages, name: &str, open: Option<&str>) -> Vec<Tool> {
    let catalog = pages.ctx.catalog.borrow().clone();
    catalog
        .all_tools()
        .iter()
        .filter(|t| &*t.server == name)
        .map(|t| {
            let def: Value = serde_json::from_str(t.definition.get()).unwrap_or_default();
            let schema = def.get("inputSchema").cloned().unwrap_or_default();
            Tool {
                qualified: t.qualified.clone(),
                description: def
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                schema: serde_json::to_string_pretty(&schema).unwrap_or_default(),
                fields: tryit::fields(&schema).unwrap_or_default(),
                open: open == Some(t.qualified.as_str()),
            }
        })
        .collect()
}

/// The held definitions with their diffs, and what to say about pinning.
async fn held(pages: &Pages, name: &str, s: &ServerStatus) -> (Vec<Held>, String) {
    let Some(view) = &s.pins else {
        return (Vec::new(), String::new());
    };
    if view.held == 0 && view.broken.is_none() {
        return (Vec::new(), String::new());
    }
    let diff = match pages.supervisor.pins(name, PinOp::Diff).await {
        Ok(d) => d,
        Err(why) => {
            return (
                Vec::new(),
                format!("The held definitions could not be read: {why}"),
            );
        }
    };
    let note = diff
        .get("broken")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let items = diff.get("held").and_then(Value::as_array);
    let held = items
        .into_iter()
        .flatten()
        .map(|h| {
            let text = |k: &str| h.get(k).and_then(Value::as_str).unwrap_or("?").to_owned();
            let (old, new) = (
                h.get("approved").unwrap_or(&Value::Null),
                h.get("held").unwrap_or(&Value::Null),
            );
            let fields = mcpd_wire::json::diff::fields(old, new)
                .into_iter()
                .map(|(name, before, after)| DiffField {
                    name,
                    lines: mcpd_wire::json::diff::line_diff(&before, &after)
                        .into_iter()
                        .map(|l| DiffLine {
                            class: match l.as_bytes().first() {
                                Some(b'+') => "add",
                                Some(b'-') => "del",
                                _ => "same",
                            },
                            text: l,
                        })
                        .collect(),
                })
                .collect();
            Held {
                what: if old.is_null() { "new" } else { "changed" },
                kind: text("kind"),
                id: text("id"),
                fields,
            }
        })
        .collect();
    (held, note)
}

/// `POST /servers/NAME/VERB`: restart, stop, start, approve, login, logout, call.
pub(super) async fn act(
    State(pages): State<Pages>,
    Path((name, verb)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let form: Vec<(String, String)> = url::form_urlencoded::parse(&body).into_owned().collect();
    let failed = |why: String| Shown {
        notice: why,
        ..Default::default()
    };
    let action = match verb.as_str() {
        "restart" => Some(Action::Restart),
        "stop" => Some(Action::Stop),
        "start" => Some(Action::Start),
        _ => None,
    };
    if let Some(action) = action {
        return match pages.supervisor.control(&name, action).await {
            Ok(()) => done(&name, &verb),
            Err(why) => render(&pages, &name, failed(why.to_string()), StatusCode::CONFLICT).await,
        };
    }
    match verb.as_str() {
        "approve" => {
            let names: Vec<String> = form
                .iter()
                .filter(|(k, _)| k == "name")
                .map(|(_, v)| v.clone())
                .collect();
            match pages.supervisor.pins(&name, PinOp::Approve(names)).await {
                Ok(_) => done(&name, "approve"),
                Err(why) => render(&pages, &name, failed(why), StatusCode::CONFLICT).await,
            }
        }
        "login" => login(&pages, &name).await,
        "logout" => {
            let out = match pages.supervisor.login(&name).await {
                Ok(login) => login.logout().await.map_err(|e| e.to_string()),
                Err(why) => Err(why.to_string()),
            };
            match out {
                Ok(_) => done(&name, "logout"),
                Err(why) => render(&pages, &name, failed(why), StatusCode::CONFLICT).await,
            }
        }
        "call" => call(&pages, &name, &form).await,
        _ => super::not_found().await,
    }
}

/// `303 See Other` to the server's page, saying what was done.
fn done(name: &str, verb: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    let to = format!("/servers/{}?done={verb}", segment(name));
    if let Ok(v) = HeaderValue::from_str(&to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// Starts (or joins) the server's login and shows where to continue it.
async fn login(pages: &Pages, name: &str) -> Response {
    let started = match pages.supervisor.login(name).await {
        // A machine grant needs no browser: it runs now, and the page shows the outcome.
        Ok(login) if login.machine().is_some() => {
            let notice = match login.renew().await {
                Ok(()) => "mcpd got a new token.".to_owned(),
                Err(why) => format!("The grant failed: {why}"),
            };
            let shown = Shown {
                notice,
                ..Default::default()
            };
            return render(pages, name, shown, StatusCode::OK).await;
        }
        Ok(login) => login.login().await.map_err(|e| e.to_string()),
        Err(why) => Err(why.to_string()),
    };
    let url = match started {
        Ok(url) => url,
        Err(why) => {
            let shown = Shown {
                notice: format!("The login could not start: {why}"),
                ..Default::default()
            };
            return render(pages, name, shown, StatusCode::CONFLICT).await;
        }
    };
    // The authorization server's address comes from the server's metadata: only a web
    // address becomes a link.
    if !matches!(url.scheme(), "https" | "http") {
        return message(
            StatusCode::BAD_GATEWAY,
            "Refused",
            "The server's authorization address is not a web address.",
            "Check the server's OAuth settings.",
        );
    }
    html(
        StatusCode::OK,
        &Continue {
            title: "Log in",
            version: env!("CARGO_PKG_VERSION"),
            name,
            link: segment(name),
            url: url.as_str(),
        },
    )
}

#[derive(Template)]
#[template(path = "dashboard/login.html")]
struct Continue<'a> {
    title: &'a str,
    version: &'static str,
    name: &'a str,
    link: String,
    url: &'a str,
}

/// Calls a tool of this server (or instance) as an agent would, and shows the answer.
async fn call(pages: &Pages, name: &str, form: &[(String, String)]) -> Response {
    let Some(servers) = pages.supervisor.status().await else {
        return super::overview::no_answer();
    };
    let Some(s) = servers.iter().find(|s| s.name == name) else {
        return unknown(name);
    };
    let called = call::call(pages, s, &servers, form).await;
    let shown = Shown {
        notice: called.notice,
        answer: called.answer,
        tool: called.tool,
        project: called.project,
    };
    render(pages, name, shown, called.status).await
}

/// `GET /servers/NAME/latency.svg`.
pub(super) async fn latency(State(pages): State<Pages>, Path(name): Path<String>) -> Response {
    let history = pages.ctx.metrics.history(&name).await.unwrap_or_default();
    let svg = super::chart::latency_svg(&history);
    ([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response()
}
