//! Where a server page's try-it calls go (`Target`), and a call made.
//!
//! The `Target` is an agent connection of the page's own; for a server run per project,
//! the instance of a project that has one; for one agent's instance, nowhere. A call made
//! is the form read back, the call sent, and its answer or why it was not sent.

use super::tryit::{self, Answer};
use super::{Pages, segment};
use axum::http::StatusCode;
use mcpd_ctl::control_api::ServerStatus;
use serde_json::Value;
use std::time::Duration;

/// How long a call from the page may take before the page gives up on it (and the call
/// is cancelled). The server's own `call_timeout` usually ends it first.
const CALL_WAIT: Duration = Duration::from_secs(15 * 60);
/// What the page calls itself to servers (`clientInfo.name`).
const CLIENT: &str = "mcpd dashboard";

/// Where the calls of a server's page go.
#[derive(Debug, PartialEq)]
pub(super) enum Target {
    /// An agent connection of the page's own: a shared server, or the own row of a server
    /// run per agent (the connection gets an instance of its own).
    Own,
    /// The own row of a server run per project: the projects that have an instance now,
    /// one of which the form names (none: there is nothing to call).
    Projects(Vec<String>),
    /// One project's instance.
    Project(String),
    /// One agent's instance, which serves that agent alone: the page does not call it.
    AgentInstance(u64),
}

impl Target {
    /// Where calls from `s`'s page go, `servers` being every status row.
    pub(super) fn of(s: &ServerStatus, servers: &[ServerStatus]) -> Target {
        match (&s.project, s.agent) {
            (Some(p), _) => Target::Project(p.clone()),
            (None, Some(a)) => Target::AgentInstance(a),
            (None, None) if s.share == "project" => {
                let mut projects: Vec<String> = servers
                    .iter()
                    .filter_map(|r| {
                        let p = r.project.as_ref()?;
                        (template(&r.name) == s.name).then(|| p.clone())
                    })
                    .collect();
                projects.sort();
                Target::Projects(projects)
            }
            (None, None) => Target::Own,
        }
    }

    /// Whether the page shows forms to call.
    pub(super) fn callable(&self) -> bool {
        match self {
            Target::Own | Target::Project(_) => true,
            Target::Projects(p) => !p.is_empty(),
            Target::AgentInstance(_) => false,
        }
    }

    /// What the page says about its calls, if anything.
    pub(super) fn note(&self, server: &str) -> String {
        match self {
            Target::Own => String::new(),
            Target::Projects(p) if p.is_empty() => format!(
                "{server} runs one instance per project, and no project has one now, so there \
                 is nothing to call. An instance starts when an agent working in that project \
                 uses {server}; its project can then be chosen here."
            ),
            Target::Projects(_) => format!(
                "{server} runs one instance per project: each call goes to the instance of the \
                 project chosen in its form (the projects that have one now)."
            ),
            Target::Project(p) => format!("Calls from this page go to this instance, in {p}."),
            Target::AgentInstance(a) => format!(
                "This instance serves agent {a} alone, so this page does not call it; \
                 {server}'s own page calls an instance of the page's own."
            ),
        }
    }
}

/// The server an instance belongs to (instances are named `SERVER@AGENT` and
/// `SERVER@/project`; a server's own name has no `@`), or the server itself.
pub(super) fn template(name: &str) -> &str {
    name.split_once('@').map_or(name, |(server, _)| server)
}

/// A call's outcome, to show on the server's page.
pub(super) struct Called {
    pub(super) status: StatusCode,
    pub(super) notice: String,
    pub(super) answer: Option<Answer>,
    /// The tool called (its form is shown open).
    pub(super) tool: Option<String>,
    /// The project it was called in (chosen again in the forms).
    pub(super) project: Option<String>,
}

impl Called {
    fn refused(status: StatusCode, notice: String, tool: Option<String>) -> Called {
        Called {
            status,
            notice,
            answer: None,
            tool,
            project: None,
        }
    }
}

/// Calls a tool of `s` (a server or an instance) as an agent would, where `Target` says.
pub(super) async fn call(
    pages: &Pages,
    s: &ServerStatus,
    servers: &[ServerStatus],
    form: &[(String, String)],
) -> Called {
    let value = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let tool = value("tool").unwrap_or_default();
    let server = template(&s.name);
    let project = match Target::of(s, servers) {
        Target::Own => None,
        Target::Project(p) => Some(p),
        Target::Projects(projects) => {
            let chosen = value("project").unwrap_or_default();
            if projects.contains(&chosen) {
                Some(chosen)
            } else {
                let why = if projects.is_empty() {
                    format!("Not called: {server} has no instance now.")
                } else {
                    format!(
                        "Not called: {server} has no instance for {chosen:?} now; choose one of \
                         the projects listed."
                    )
                };
                return Called::refused(StatusCode::CONFLICT, why, Some(tool));
            }
        }
        Target::AgentInstance(a) => {
            let why = format!(
                "Not called: this instance serves agent {a} alone; call {server}'s tools from \
                 its own page (/servers/{}).",
                segment(server)
            );
            return Called::refused(StatusCode::CONFLICT, why, Some(tool));
        }
    };
    let fields = {
        let catalog = pages.ctx.catalog.borrow();
        catalog
            .tool(&tool)
            .filter(|t| &*t.server == server)
            .map(|t| {
                let def: Value = serde_json::from_str(t.definition.get()).unwrap_or_default();
                tryit::fields(def.get("inputSchema").unwrap_or(&Value::Null)).unwrap_or_default()
            })
    };
    let Some(fields) = fields else {
        let why = format!("{server} lists no tool {tool} now.");
        return Called::refused(StatusCode::NOT_FOUND, why, None);
    };
    let arguments = match tryit::arguments(form, &fields) {
        Ok(a) => a,
        Err(why) => return Called::refused(StatusCode::UNPROCESSABLE_ENTITY, why, Some(tool)),
    };
    let shutdown = pages.shutdown.clone();
    // A project server's call names the project, so it reaches that project's instance.
    let answer = crate::agent::local::call_tool(
        &pages.ctx,
        CLIENT,
        &tool,
        arguments.clone(),
        project.as_deref(),
        CALL_WAIT,
        shutdown,
    )
    .await
    .map_err(|e| e.to_string());
    let answer = match answer {
        Ok(v) => Answer::of(&tool, &arguments, &v),
        Err(failure) => Answer {
            tool: tool.clone(),
            failure,
            ..Default::default()
        },
    };
    Called {
        status: StatusCode::OK,
        notice: String::new(),
        answer: Some(answer),
        tool: Some(tool),
        project,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, share: &str, project: Option<&str>, agent: Option<u64>) -> ServerStatus {
        let mut s: ServerStatus = serde_json::from_value(serde_json::json!({
            "name": name, "state": "ready", "transport": "stdio", "command": null, "url": null,
            "http": null, "session_renewals": 0, "era": null, "era_reason": null,
            "probing": false, "instances": 0, "agent": null, "protocol_version": null,
            "server_info": null, "pid": null, "tools": 0, "in_flight": 0, "restarts": 0,
            "uptime_secs": null, "next_retry_secs": null, "last_error": null,
            "last_exit": null, "catalog_error": null, "malformed_lines": 0,
            "oversized_lines": 0, "stderr_tail": []
        }))
        .unwrap();
        s.share = share.into();
        s.project = project.map(str::to_owned);
        s.agent = agent;
        s
    }

    #[test]
    fn a_project_servers_page_calls_the_projects_that_have_an_instance() {
        let rows = vec![
            row("fx", "project", None, None),
            row("fx@/p/b", "project", Some("/p/b"), None),
            row("fx@/p/a", "project", Some("/p/a"), None),
            row("fxy@/p/c", "project", Some("/p/c"), None),
            row("ag", "agent", None, None),
            row("ag@3", "agent", None, Some(3)),
            row("plain", "shared", None, None),
        ];
        let of = |i: usize| Target::of(&rows[i], &rows);
        assert_eq!(of(0), Target::Projects(vec!["/p/a".into(), "/p/b".into()]));
        assert_eq!(of(1), Target::Project("/p/b".into()));
        assert_eq!(of(4), Target::Own);
        assert_eq!(of(5), Target::AgentInstance(3));
        assert_eq!(of(6), Target::Own);
        assert!(!Target::Projects(Vec::new()).callable());
        assert!(!of(5).callable());
        assert!(of(0).callable() && of(1).callable());
        let none = Target::Projects(Vec::new()).note("fx");
        assert!(none.contains("an agent working in that project"), "{none}");
        assert_eq!(template("fx@/p/a@b"), "fx");
        assert_eq!(template("fx"), "fx");
    }
}
