//! Resolving how a request reaches its server, for every method alike.
//!
//! A ready server's connection, the agent's ready instance (found in the catalog, no
//! actor asked), or the future of one that is starting, idle, or not made yet.

use super::session::Session;
use crate::errors::AgentError;
use crate::registry::{Availability, Catalog, InstanceKey};
use crate::supervisor::{SupervisorError, SupervisorHandle};
use crate::upstream::UpstreamHandle;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Where a request goes.
pub enum Reach {
    /// A connection that takes requests now.
    Now(UpstreamHandle),
    /// A server starting (or to be started): its connection once it is ready, or why not.
    Later(BoxFuture<'static, Result<UpstreamHandle, AgentError>>),
}

/// How `session`'s request reaches `server`, or why it cannot.
pub fn reach(
    catalog: &Catalog,
    watch: &watch::Receiver<Arc<Catalog>>,
    supervisor: &SupervisorHandle,
    session: &Session,
    server: &Arc<str>,
) -> Result<Reach, AgentError> {
    let (key, wait) = match catalog.availability(server) {
        Some(Availability::Ready(h)) => return Ok(Reach::Now(h.clone())),
        Some(Availability::Starting { wait } | Availability::Idle { wait }) => {
            let (watch, supervisor) = (watch.clone(), supervisor.clone());
            let fut = ready(server.clone(), *wait, watch, supervisor);
            return Ok(Reach::Later(fut.boxed()));
        }
        Some(Availability::PerAgent { wait }) => (InstanceKey::Agent(session.agent()), *wait),
        Some(Availability::PerProject { wait }) => {
            // Its directory or roots are being checked: the call waits for them.
            if let Some(seen) = session.project().waiting() {
                let (server, wait, sup) = (server.clone(), *wait, supervisor.clone());
                let fut = async move {
                    match super::project::settled(seen).await {
                        Ok(key) => instance(server, key, wait, sup).await,
                        Err(why) => {
                            let (server, why) = (server.to_string(), why.to_owned());
                            Err(AgentError::NoProject { server, why })
                        }
                    }
                };
                return Ok(Reach::Later(fut.boxed()));
            }
            match super::project::instance_key(session) {
                Ok(key) => (key, *wait),
                Err(why) => {
                    let (server, why) = (server.to_string(), why.to_owned());
                    return Err(AgentError::NoProject { server, why });
                }
            }
        }
        other => {
            let why = other.map_or_else(
                || "not configured any more".to_owned(),
                Availability::explain,
            );
            let server = server.to_string();
            return Err(AgentError::Unavailable { server, why });
        }
    };
    if let Some(h) = catalog.instance(server, &key) {
        return Ok(Reach::Now(h.clone()));
    }
    let fut = instance(server.clone(), key, wait, supervisor.clone());
    Ok(Reach::Later(fut.boxed()))
}

/// The handle of `server` once it is ready: an idle one is asked to start first.
async fn ready(
    server: Arc<str>,
    wait: Duration,
    mut catalog: watch::Receiver<Arc<Catalog>>,
    supervisor: SupervisorHandle,
) -> Result<UpstreamHandle, AgentError> {
    let ready = async {
        let mut asked = false;
        loop {
            let state = catalog.borrow_and_update().availability(&server).cloned();
            match state {
                Some(Availability::Starting { .. }) => {}
                Some(Availability::Idle { .. }) if !asked => {
                    // An idle server is started by the call that needs it.
                    asked = true;
                    let start = crate::supervisor::Action::Start;
                    if let Err(e) = supervisor.control(&server, start).await {
                        tracing::warn!(upstream = %server, "could not start an idle server: {e}");
                    }
                    continue;
                }
                Some(Availability::Idle { .. }) => {}
                other => return other,
            }
            if catalog.changed().await.is_err() {
                return None;
            }
        }
    };
    let state = tokio::time::timeout(wait, ready).await.ok().flatten();
    match state {
        Some(Availability::Ready(h)) => Ok(h),
        other => {
            let why = other.map_or_else(
                || format!("still starting after {}", humantime::format_duration(wait)),
                |a| a.explain(),
            );
            let server = server.to_string();
            Err(AgentError::Unavailable { server, why })
        }
    }
}

/// The agent's instance `key` of `server`, which the supervisor makes and starts if need
/// be, once it is ready (waited for up to `wait`).
async fn instance(
    server: Arc<str>,
    key: InstanceKey,
    wait: Duration,
    supervisor: SupervisorHandle,
) -> Result<UpstreamHandle, AgentError> {
    let got = tokio::time::timeout(wait, supervisor.instance(&server, key)).await;
    let server = server.to_string();
    match got {
        Ok(Ok(h)) => Ok(h),
        Ok(Err(SupervisorError::ProjectGone(dir))) => {
            let why = format!("its project directory {dir} does not exist any more");
            Err(AgentError::NoProject { server, why })
        }
        Ok(Err(why @ SupervisorError::TooManyProjects { .. })) => {
            let why = why.to_string();
            Err(AgentError::InstanceBusy { server, why })
        }
        Ok(Err(why)) => {
            let why = why.to_string();
            Err(AgentError::Unavailable { server, why })
        }
        Err(_) => {
            let why = format!(
                "still starting this agent's instance after {}",
                humantime::format_duration(wait)
            );
            Err(AgentError::Unavailable { server, why })
        }
    }
}

/// The connection `session` reaches `server` through now, without waiting for a start:
/// a task lives in one running process, so a server not running now has none of it.
pub fn now(
    catalog: &Catalog,
    session: &Session,
    server: &Arc<str>,
) -> Result<UpstreamHandle, AgentError> {
    let key = match catalog.availability(server) {
        Some(Availability::PerAgent { .. }) => Some(InstanceKey::Agent(session.agent())),
        Some(Availability::PerProject { .. }) => super::project::instance_key(session).ok(),
        _ => None,
    };
    match key {
        Some(key) => {
            catalog
                .instance(server, &key)
                .cloned()
                .ok_or_else(|| AgentError::Unavailable {
                    server: server.to_string(),
                    why: "not running for this agent now".into(),
                })
        }
        None => ready_handle(catalog, server),
    }
}

/// The handle of a server that can take requests now, or why it cannot.
pub fn ready_handle(catalog: &Catalog, server: &Arc<str>) -> Result<UpstreamHandle, AgentError> {
    match catalog.availability(server) {
        Some(Availability::Ready(h)) => Ok(h.clone()),
        other => {
            let why = other.map_or_else(
                || "not configured any more".to_owned(),
                Availability::explain,
            );
            Err(AgentError::Unavailable {
                server: server.to_string(),
                why,
            })
        }
    }
}
