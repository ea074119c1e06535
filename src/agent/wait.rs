//! Requests that wait for servers still starting.
//!
//! A call to a tool its server has not listed yet (a first run, a new server, a project's
//! first instance) waits for that server, bounded by its start; a session's first
//! `tools/list` waits a few seconds at most for the servers it sees that are starting, so
//! it comes back complete. Either is then handled again (`Step::Again`) with the catalog
//! as it is by then, and never waits twice.

use super::AgentContext;
use super::params::PlainArguments;
use super::reply::{Again, ReplyFuture, Step};
use super::resolve::{Reach, reach};
use super::session::Session;
use crate::errors::AgentError;
use crate::registry::{Availability, Catalog};
use futures::FutureExt;
use futures::future::BoxFuture;
use mcpd_wire::jsonrpc::{self, Id, Request};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How long a session's first `tools/list` waits for the servers still starting.
pub const FIRST_LIST_WAIT: Duration = Duration::from_secs(5);

/// The servers `session` sees whose tools are on their way without a call: starting, or
/// run per project when the agent names one (its instance starts in the background).
pub fn starting_for(catalog: &Catalog, session: &Session) -> Vec<Arc<str>> {
    let has_project = session.project().current.is_some() || session.project().waiting().is_some();
    catalog
        .servers()
        .filter(|(s, _)| session.sees_server(s))
        .filter(|(_, a)| match a {
            Availability::Starting { .. } => true,
            Availability::PerProject { .. } => has_project,
            _ => false,
        })
        .filter(|(s, _)| !catalog.lists_tools_of(s))
        .map(|(s, _)| s.clone())
        .collect()
}

/// Whether `server`'s tools are on their way: it is starting (or idle, or run per agent
/// or per project), and lists none yet.
pub fn coming(catalog: &Catalog, server: &str) -> bool {
    let starting = matches!(
        catalog.availability(server),
        Some(
            Availability::Starting { .. }
                | Availability::Idle { .. }
                | Availability::PerAgent { .. }
                | Availability::PerProject { .. }
        )
    );
    starting && !catalog.lists_tools_of(server)
}

/// A `tools/call` of a tool `server` has not listed yet: handled again once the server
/// lists its tools (started first if need be), or answered with why it did not.
pub fn call(
    request: Request,
    plain: Option<PlainArguments>,
    server: Arc<str>,
    ctx: &AgentContext,
    session: &Session,
) -> Result<(Id, CancellationToken, ReplyFuture), AgentError> {
    let catalog = ctx.catalog.borrow().clone();
    let wait = match catalog.availability(&server) {
        Some(
            Availability::Starting { wait }
            | Availability::Idle { wait }
            | Availability::PerAgent { wait }
            | Availability::PerProject { wait },
        ) => *wait,
        _ => Duration::ZERO,
    };
    // What starts the server (or the agent's instance of it) and waits for it.
    let start = match reach(&catalog, &ctx.catalog, &ctx.supervisor, session, &server)? {
        Reach::Now(_) => None,
        Reach::Later(fut) => Some(fut.map(|r| r.map(|_| ())).boxed()),
    };
    let listed = listed(server, wait, ctx.catalog.clone(), start);
    Ok(again_after(request, plain, listed.boxed()))
}

/// A session's first `tools/list`, while servers it sees are starting: handled again
/// once they list their tools, or after [`FIRST_LIST_WAIT`] as things stand then.
pub fn first_list(
    request: Request,
    servers: Vec<Arc<str>>,
    ctx: &AgentContext,
) -> (Id, CancellationToken, ReplyFuture) {
    let watch = ctx.catalog.clone();
    let all = async move {
        let waits = servers
            .into_iter()
            .map(|s| listed(s, FIRST_LIST_WAIT, watch.clone(), None));
        // Each fails only in the sense that its server did not come: the list is sent
        // as it stands then.
        let _ = futures::future::join_all(waits).await;
        Ok(())
    };
    again_after(request, None, all.boxed())
}

/// Waits until `server` lists its tools or cannot (it failed, or was stopped), at most
/// `wait`. `start`, when given, is what brings the server up: its failure ends the wait.
async fn listed(
    server: Arc<str>,
    wait: Duration,
    mut catalog: watch::Receiver<Arc<Catalog>>,
    mut start: Option<BoxFuture<'static, Result<(), AgentError>>>,
) -> Result<(), AgentError> {
    let waited = async {
        loop {
            let why = {
                let c = catalog.borrow_and_update();
                if c.lists_tools_of(&server) {
                    return Ok(());
                }
                match c.availability(&server) {
                    Some(Availability::Ready(_)) => return Ok(()),
                    Some(_) if coming(&c, &server) || start.is_some() => None,
                    Some(a) => Some(a.explain()),
                    None => Some("not configured any more".to_owned()),
                }
            };
            if let Some(why) = why {
                let server = server.to_string();
                return Err(AgentError::Unavailable { server, why });
            }
            let starting = async {
                match start.as_mut() {
                    Some(f) => f.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = catalog.changed() => if changed.is_err() {
                    return Ok(()); // the daemon is stopping
                },
                r = starting => {
                    start = None;
                    r?;
                }
            }
        }
    };
    match tokio::time::timeout(wait, waited).await {
        Ok(r) => r,
        Err(_) => Err(AgentError::Unavailable {
            server: server.to_string(),
            why: format!(
                "still starting after {}: it has not completed its handshake and listed its tools yet (`mcpd ctl status {server}` shows what it is doing)",
                humantime::format_duration(wait)
            ),
        }),
    }
}

/// The request handled again once `ready` ends well; its error answered otherwise.
fn again_after(
    request: Request,
    plain: Option<PlainArguments>,
    ready: BoxFuture<'static, Result<(), AgentError>>,
) -> (Id, CancellationToken, ReplyFuture) {
    let cancel = CancellationToken::new();
    let token = cancel.clone();
    let id = request.id.clone();
    let fut = async move {
        let id = request.id.clone();
        tokio::select! {
            r = ready => match r {
                Ok(()) => (id, Step::Again(Box::new(Again { request, plain }))),
                Err(e) => {
                    let line = jsonrpc::error_line(Some(&id), &e.to_error_object());
                    (id, Step::Reply(line))
                }
            },
            () = token.cancelled() => (id, Step::Cancelled),
        }
    };
    (id, cancel, fut.boxed())
}
