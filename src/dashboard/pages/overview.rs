//! `GET /`: every server's state, pid, restarts, last error and stderr line, sandbox and pins, from the supervisor's status, as one HTML table (works without JavaScript). Every string in it comes from a server or its config and is escaped by the template.

use super::{Pages, html, message};
use crate::control_api::ServerStatus;
use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

#[derive(Template)]
#[template(path = "dashboard/overview.html")]
struct Overview {
    version: &'static str,
    rows: Vec<Row>,
}

/// One server (or one instance of a server run per agent or per project).
struct Row {
    name: String,
    /// The agent or project an instance serves, when it is one.
    instance: String,
    state: &'static str,
    pid: String,
    restarts: u32,
    last_error: String,
    /// The last line the server wrote to stderr.
    stderr: String,
    sandbox: String,
    pins: String,
}

impl Row {
    fn of(s: &ServerStatus) -> Row {
        let instance = match (&s.project, s.agent) {
            (Some(p), _) => format!("project {p}"),
            (None, Some(a)) => format!("agent {a}"),
            (None, None) => String::new(),
        };
        Row {
            name: s.name.clone(),
            instance,
            state: s.state.as_str(),
            pid: s.pid.map_or_else(|| "–".into(), |p| p.to_string()),
            restarts: s.restarts,
            last_error: s.last_error.clone().unwrap_or_default(),
            stderr: s.stderr_tail.last().cloned().unwrap_or_default(),
            sandbox: sandbox(s),
            pins: pins(s),
        }
    }
}

fn sandbox(s: &ServerStatus) -> String {
    match &s.sandbox {
        None => "none".into(),
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

fn pins(s: &ServerStatus) -> String {
    match &s.pins {
        None => "–".into(),
        Some(p) => match (&p.broken, p.held) {
            (Some(why), _) => format!("{}, broken: {why}", p.mode),
            (None, 0) => p.mode.clone(),
            (None, n) => format!("{}, {n} held", p.mode),
        },
    }
}

pub(super) async fn page(State(pages): State<Pages>) -> Response {
    let Some(servers) = pages.supervisor.status().await else {
        return message(
            StatusCode::SERVICE_UNAVAILABLE,
            "No answer",
            "The daemon's supervisor did not answer; it may be stopping.",
            "Reload the page in a moment.",
        );
    };
    let page = Overview {
        version: env!("CARGO_PKG_VERSION"),
        rows: servers.iter().map(Row::of).collect(),
    };
    html(StatusCode::OK, &page)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&";

    fn row(text: &str) -> Row {
        Row {
            name: text.into(),
            instance: text.into(),
            state: "failed",
            pid: "–".into(),
            restarts: 1,
            last_error: text.into(),
            stderr: text.into(),
            sandbox: text.into(),
            pins: text.into(),
        }
    }

    #[test]
    fn dashboard_overview_escapes_every_string_from_a_server() {
        let page = Overview {
            version: "0",
            rows: vec![row(HOSTILE)],
        };
        let html = page.render().unwrap();
        assert!(
            !html.contains("<script>alert") && !html.contains("<img"),
            "{html}"
        );
        assert!(
            html.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
            "{html}"
        );
        assert!(
            !html.contains("<script"),
            "the page has no script of its own: {html}"
        );
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
}
