//! An agent's project, for servers run per project.
//!
//! Where it comes from (the profile's `project`, the agent's MCP roots, the directory
//! `mcpd connect` started in), each claim checked off the connection's actor, and the
//! supervisor told when it changes.
//!
//! The order: a profile that sets `project` fixes it; otherwise the agent's first
//! `file://` root, asked with `roots/list` after it initializes and again on
//! `notifications/roots/list_changed`; otherwise the directory the shim reported. A
//! claim must name an existing directory, and never `/`, the daemon user's home, or a
//! hidden directory right under home (a client's own, such as `~/.codex`): a server
//! rooted there is the opposite of what the user wanted. A refused claim is logged at
//! debug level, not answered as an error.

pub(super) mod claim;

use claim::{CLAIM_WAIT, checked, first_root};
pub use claim::{News, Project, Seen, Source};
pub use mcpd_ctl::control_api::PROJECT_NOTIFICATION as NOTIFICATION;

use super::AgentContext;
use super::session::Session;
use crate::registry::{Availability, Catalog};
use crate::upstream::ServerAsk;
use mcpd_runtime::outbox::Outbox;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::oneshot;

/// Asks a legacy agent that declared `roots` for them (after `initialized`, and on
/// `notifications/roots/list_changed`); its answer becomes a claim.
pub fn ask_roots(
    inputs: &mut super::pending_input::Inputs,
    session: &mut Session,
    outbox: &Outbox,
    agent: u64,
) {
    if session.project().foreign
        || !session
            .capabilities()
            .get("roots")
            .is_some_and(Value::is_object)
    {
        return;
    }
    let (respond_to, answer) = oneshot::channel();
    let ask = ServerAsk {
        method: mcpd_wire::protocol::method::ROOTS_LIST.to_owned(),
        params: Some(json!({})),
        respond_to,
    };
    inputs.ask(session, outbox, ask);
    session.project_mut().pending();
    let tx = session.project().tx.clone();
    mcpd_runtime::tracker::spawn(async move {
        // An agent that does not answer in time gives no roots; a later
        // `roots/list_changed` asks again.
        let path = match tokio::time::timeout(CLAIM_WAIT, answer).await {
            Ok(Ok(Ok(result))) => first_root(&result),
            Ok(Ok(Err(e))) => {
                tracing::debug!(agent, "the agent did not list its roots: {}", e.message);
                None
            }
            Ok(Err(_)) | Err(_) => None, // the connection ended, or no answer
        };
        let path = match path {
            Some(p) => checked(agent, p).await,
            None => None,
        };
        let source = Source::Roots;
        let _ = tx.send(News { source, path }).await; // the agent may have gone
    });
}

/// The project servers this agent sees, whose instances start in the background.
fn project_servers(catalog: &Catalog, session: &Session) -> Vec<Arc<str>> {
    catalog
        .servers()
        .filter(|(s, a)| matches!(a, Availability::PerProject { .. }) && session.sees_server(s))
        .map(|(s, _)| s.clone())
        .collect()
}

/// A checked claim arrived: applies it, and tells the supervisor when the project in
/// force changed.
pub fn on_news(ctx: &AgentContext, session: &mut Session, news: News) {
    let Some(now) = session.project_mut().apply(news) else {
        return;
    };
    let agent = session.agent();
    match &now {
        Some(p) => tracing::info!(agent, project = %p.display(), "the agent works in a project"),
        None => tracing::info!(agent, "the agent works in no project now"),
    }
    let servers = project_servers(&ctx.catalog.borrow(), session);
    ctx.supervisor.agent_project(agent, now, servers);
}

/// The notification `mcpd connect` sends: the directory it was started in.
pub fn on_notification(session: &mut Session, params: Option<&Value>) {
    let path = params
        .and_then(|p| p.get("path"))
        .and_then(Value::as_str)
        .map(PathBuf::from);
    let agent = session.agent();
    session.project_mut().claim(agent, Source::Shim, path);
}

/// A profile was chosen: its `project`, if it sets one, fixes the agent's.
pub fn on_profile(session: &mut Session) {
    let fixed = session.profile().and_then(|p| p.project.clone());
    let agent = session.agent();
    session.project_mut().claim(agent, Source::Profile, fixed);
}

/// The key of a project instance once the agent's claims are checked (at most
/// `CLAIM_WAIT`), or why it has none.
pub async fn settled(mut seen: Seen) -> Result<crate::registry::InstanceKey, &'static str> {
    let done = seen.wait_for(|(pending, _)| *pending == 0);
    let _ = tokio::time::timeout(CLAIM_WAIT, done).await; // then as it stands
    match &seen.borrow().1 {
        Some(p) => Ok(crate::registry::InstanceKey::Project(p.clone())),
        None => Err(NO_PROJECT),
    }
}

const NO_PROJECT: &str = "this agent has no project: start `mcpd connect` in the project's directory, pass `mcpd connect --project DIR`, declare MCP roots, or choose a profile that sets `project`";

/// The key of this agent's project instance, or why it has none.
pub fn instance_key(session: &Session) -> Result<crate::registry::InstanceKey, &'static str> {
    if session.project().foreign {
        return Err(
            "servers run per project serve only the daemon's own user: another user's agent cannot name a directory for them",
        );
    }
    match &session.project().current {
        Some(p) => Ok(crate::registry::InstanceKey::Project(p.clone())),
        None => Err(NO_PROJECT),
    }
}
