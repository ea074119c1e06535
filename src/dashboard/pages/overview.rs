//! `GET /`: every server, the connected agents and the calls in flight.
//!
//! Each server (and instance) is shown with its state, pid, uptime, restarts and retry
//! countdown, era, login, last error and stderr line, sandbox and pins; the calls in
//! flight have a Cancel button. The same fragment (`Live`) is what the event stream sends
//! as it changes. Every string in it comes from a server, an agent or the config and is
//! escaped by the template.

use super::{Pages, html, message};
use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use mcpd_ctl::control_api::{AgentInfo, AuthState, ServerState, ServerStatus};

#[derive(Template)]
#[template(path = "dashboard/overview.html")]
struct Overview {
    title: &'static str,
    version: &'static str,
    /// The rendered `Live` fragment (escaped by its own template).
    live: String,
}

/// The part of the overview that changes: servers, agents, calls. Times are shown as
/// text and carried as instants (`data-since-ms`, `data-until-ms`) that the page's script
/// counts from, so the fragment changes only when something happens.
#[derive(Template, Clone)]
#[template(path = "dashboard/live.html")]
pub(super) struct Live {
    servers: Vec<Row>,
    agents: Vec<AgentRow>,
    calls: Vec<CallRow>,
}

/// One server (or one instance of a server run per agent or per project).
#[derive(Clone)]
struct Row {
    name: String,
    /// The name as a path segment.
    link: String,
    /// The agent or project an instance serves, when it is one.
    instance: String,
    state: &'static str,
    /// "retry in 4s" while in backoff, and when (ms since the epoch; 0: not waiting).
    retry: String,
    retry_at: u64,
    pid: String,
    uptime: String,
    /// Since when it is up (ms since the epoch; 0: not up).
    up_since: u64,
    restarts: u32,
    era: String,
    auth: String,
    last_error: String,
    /// The last line the server wrote to stderr.
    stderr: String,
    sandbox: String,
    pins: String,
}

impl Row {
    fn of(s: &ServerStatus, now: u64) -> Row {
        let instance = match (&s.project, s.agent) {
            (Some(p), _) => format!("project {p}"),
            (None, Some(a)) => format!("agent {a}"),
            (None, None) => String::new(),
        };
        Row {
            name: s.name.clone(),
            link: super::segment(&s.name),
            instance,
            state: s.state.as_str(),
            retry: s
                .next_retry_secs
                .map(|t| format!("retry in {}", duration(t)))
                .unwrap_or_default(),
            retry_at: s.next_retry_secs.map_or(0, |t| now + millis(t)),
            pid: s.pid.map_or_else(|| "–".into(), |p| p.to_string()),
            uptime: s.uptime_secs.map_or_else(|| "–".into(), duration),
            up_since: s.uptime_secs.map_or(0, |t| now.saturating_sub(millis(t))),
            restarts: s.restarts,
            era: s.era.clone().unwrap_or_else(|| "–".into()),
            auth: auth(s),
            last_error: s.last_error.clone().unwrap_or_default(),
            // Under "last error" only: a server that runs writes what it likes to
            // stderr (a banner, a notice), which is no error of its.
            stderr: match s.state {
                ServerState::Failed | ServerState::Backoff => {
                    s.stderr_tail.last().cloned().unwrap_or_default()
                }
                _ => String::new(),
            },
            sandbox: sandbox(s),
            pins: pins(s),
        }
    }
}

/// Now, in ms since the epoch.
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn millis(secs: f64) -> u64 {
    (secs.max(0.0) * 1000.0) as u64
}

/// 42s, 3m 12s, 2h 5m, 3d 4h (the page's script writes the same).
pub(super) fn duration(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        3600..86400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86400, s % 86400 / 3600),
    }
}

pub(super) fn auth(s: &ServerStatus) -> String {
    let Some(a) = &s.auth else {
        return "–".into();
    };
    let mut text = match &a.state {
        AuthState::None => "none".to_owned(),
        AuthState::LoggedIn { expires_at } => match expires_at {
            Some(at) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                format!(
                    "logged in, expires in {}",
                    duration(at.saturating_sub(now) as f64)
                )
            }
            None => "logged in".to_owned(),
        },
        AuthState::NeedsLogin(why) => format!("needs login: {why}"),
    };
    if let Some(g) = &a.grant {
        text = format!("{}: {text}", g.replace('_', " "));
    }
    if a.dpop {
        text.push_str(", DPoP");
    }
    if a.pending {
        text.push_str(" (login pending)");
    }
    text
}

pub(super) fn sandbox(s: &ServerStatus) -> String {
    match &s.sandbox {
        None => "none".into(),
        Some(v) if v.per_instance() => {
            let mut text = format!(
                "{} (ABI {}) in each instance: network {}",
                v.mechanism, v.abi, v.network
            );
            if let Some(note) = &v.note {
                text.push_str("; ");
                text.push_str(note);
            }
            text
        }
        Some(v) => {
            let mut text = format!(
                "{} (ABI {}): {} read, {} write, network {}",
                v.mechanism, v.abi, v.read, v.write, v.network
            );
            if let Some(note) = &v.note {
                text.push_str("; ");
                text.push_str(note);
            }
            text
        }
    }
}

pub(super) fn pins(s: &ServerStatus) -> String {
    match &s.pins {
        None => "–".into(),
        Some(p) => match (&p.broken, p.held) {
            (Some(why), _) => format!("{}, broken: {why}", p.mode),
            (None, 0) => p.mode.clone(),
            (None, n) => format!("{}, {n} held", p.mode),
        },
    }
}

/// One connected agent.
#[derive(Clone)]
struct AgentRow {
    number: u64,
    pid: String,
    /// The executable's file name, or how it is connected.
    program: String,
    /// Its command line (from procfs), in full.
    command: String,
    client: String,
    era: String,
    profile: String,
    project: String,
    in_flight: usize,
}

impl AgentRow {
    fn of(a: &AgentInfo) -> AgentRow {
        let program = match (&a.exe, &a.transport) {
            (Some(exe), _) => std::path::Path::new(exe)
                .file_name()
                .map_or_else(|| exe.clone(), |n| n.to_string_lossy().into_owned()),
            (None, Some(t)) => t.clone(),
            (None, None) => "–".into(),
        };
        let program = match &a.via {
            Some(via) => format!("{program} (via {via})"),
            None => program,
        };
        let client = match (&a.client, &a.client_version) {
            (Some(c), Some(v)) => format!("{c} {v}"),
            (Some(c), None) => c.clone(),
            _ => "–".into(),
        };
        AgentRow {
            number: a.agent,
            pid: a.pid.map_or_else(|| "–".into(), |p| p.to_string()),
            program,
            command: a.pid.and_then(command_line).unwrap_or_default(),
            client,
            era: a.era.clone().unwrap_or_else(|| "–".into()),
            profile: a.profile.clone().unwrap_or_else(|| "–".into()),
            project: a.project.clone().unwrap_or_else(|| "–".into()),
            in_flight: a.in_flight,
        }
    }
}

/// The command line of process `pid`, its arguments joined by spaces, at most 1 KiB.
fn command_line(pid: i32) -> Option<String> {
    #[allow(
        clippy::disallowed_methods,
        reason = "a procfs file, which never waits"
    )]
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let mut text: String = String::from_utf8_lossy(&raw)
        .split('\0')
        .filter(|a| !a.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if text.len() > 1024 {
        let mut cut = 1024;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    Some(text)
}

/// One request in flight.
#[derive(Clone)]
struct CallRow {
    agent: u64,
    /// The request id as JSON text, for the Cancel form.
    id: String,
    method: String,
    tool: String,
    running: String,
    /// Since when (ms since the epoch).
    since: u64,
}

impl Live {
    /// The fragment with its times left out: what tells whether anything happened.
    pub(super) fn without_times(&self) -> Live {
        let mut quiet = self.clone();
        for r in &mut quiet.servers {
            (r.retry_at, r.up_since) = (0, 0);
            r.uptime.clear();
            r.retry.clear();
        }
        for c in &mut quiet.calls {
            c.since = 0;
            c.running.clear();
        }
        quiet
    }

    /// The fragment now, or None when the supervisor does not answer.
    pub(super) async fn now(pages: &Pages) -> Option<Live> {
        let (servers, agents) = tokio::join!(pages.supervisor.status(), pages.ctx.agents.list());
        let servers = servers?;
        let now = now_ms();
        let calls = agents
            .iter()
            .flat_map(|a| {
                a.calls.iter().map(|c| CallRow {
                    agent: a.agent,
                    id: c.id.clone(),
                    method: c.method.clone(),
                    tool: c.tool.clone().unwrap_or_default(),
                    running: duration(c.secs),
                    since: now.saturating_sub(millis(c.secs)),
                })
            })
            .collect();
        Some(Live {
            servers: servers.iter().map(|s| Row::of(s, now)).collect(),
            agents: agents.iter().map(AgentRow::of).collect(),
            calls,
        })
    }
}

pub(super) async fn page(State(pages): State<Pages>) -> Response {
    let Some(live) = Live::now(&pages).await else {
        return no_answer();
    };
    let live = match live.render() {
        Ok(text) => text,
        Err(e) => {
            tracing::error!("dashboard fragment failed to render: {e}");
            String::new()
        }
    };
    let page = Overview {
        title: "Overview",
        version: env!("CARGO_PKG_VERSION"),
        live,
    };
    html(StatusCode::OK, &page)
}

pub(super) fn no_answer() -> Response {
    message(
        StatusCode::SERVICE_UNAVAILABLE,
        "No answer",
        "The daemon's supervisor did not answer; it may be stopping.",
        "Reload the page in a moment.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&";

    fn row(text: &str) -> Row {
        Row {
            name: text.into(),
            link: text.into(),
            instance: text.into(),
            state: "failed",
            retry: text.into(),
            retry_at: 1,
            pid: "–".into(),
            uptime: text.into(),
            up_since: 1,
            restarts: 1,
            era: text.into(),
            auth: text.into(),
            last_error: text.into(),
            stderr: text.into(),
            sandbox: text.into(),
            pins: text.into(),
        }
    }

    fn agent(text: &str) -> AgentRow {
        AgentRow {
            number: 1,
            pid: text.into(),
            program: text.into(),
            command: text.into(),
            client: text.into(),
            era: text.into(),
            profile: text.into(),
            project: text.into(),
            in_flight: 1,
        }
    }

    fn call(text: &str) -> CallRow {
        CallRow {
            agent: 1,
            id: text.into(),
            method: text.into(),
            tool: text.into(),
            running: text.into(),
            since: 1,
        }
    }

    #[test]
    fn dashboard_overview_escapes_every_string_from_a_server_or_agent() {
        let live = Live {
            servers: vec![row(HOSTILE)],
            agents: vec![agent(HOSTILE)],
            calls: vec![call(HOSTILE)],
        };
        let html = live.render().unwrap();
        assert!(
            !html.contains("<script") && !html.contains("<img"),
            "{html}"
        );
        assert!(
            html.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
            "{html}"
        );
        // Attribute values too: a quote cannot end one.
        assert!(!html.contains("value=\"<"), "{html}");
        assert!(!html.contains("\"'&\""), "{html}");
    }

    /// The same text through a template that does not escape: the check above would
    /// see it.
    #[derive(Template)]
    #[template(source = "<td>{{ text|safe }}</td>", ext = "html")]
    struct Unescaped<'a> {
        text: &'a str,
    }

    #[test]
    fn dashboard_overview_escaping_check_sees_unescaped_text() {
        let html = Unescaped { text: HOSTILE }.render().unwrap();
        assert!(
            html.contains("<script>alert") && html.contains("<img"),
            "{html}"
        );
    }

    #[test]
    fn durations_read_as_a_person_says_them() {
        assert_eq!(duration(0.4), "0s");
        assert_eq!(duration(192.0), "3m 12s");
        assert_eq!(duration(7500.0), "2h 5m");
        assert_eq!(duration(-3.0), "0s");
    }
}
