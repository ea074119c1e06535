//! The deprecated HTTP+SSE transport (2024-11-05).
//!
//! One GET stream carries every server message; messages are POSTed to the endpoint it
//! names.

use super::HttpInfo;
use super::client::{self, Endpoint};
use super::post::message_frame;
use crate::upstream::UpstreamError;
use crate::upstream::refused_message;
use crate::upstream::transport::{Inbound, Outbound};
use futures::StreamExt;
use mcpd_runtime::budget::Charged;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::{Method, StatusCode, Url};
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// How one POST to the message endpoint ended.
enum Outcome {
    Finished,
    /// The server refused our credentials or forgot the session: the connection is over.
    Fatal {
        error: String,
        fatal: bool,
    },
}

/// Runs the transport until the actor goes away or the stream ends. `first` is a message
/// to send as soon as the endpoint is known (the `initialize` of an `auto` fallback),
/// with the reason for the fallback.
pub async fn run(
    ep: Endpoint,
    inbound: mpsc::Sender<Inbound>,
    info: watch::Sender<HttpInfo>,
    mut rx: mpsc::Receiver<Charged<Outbound>>,
    first: Option<(String, String)>,
    server: Arc<str>,
) {
    let shown = ep.shown_url();
    let close = |error: String, fatal: bool| {
        let inbound = inbound.clone();
        async move {
            // If the actor is gone there is no one left to tell.
            let _ = inbound.send(Inbound::Closed { error, fatal }).await;
        }
    };
    let context = |e: String| match &first {
        Some((_, why)) => format!("{why}, and the HTTP+SSE fallback failed: {e}"),
        None => e,
    };
    let req = ep
        .request(Method::GET, &ep.url)
        .header(ACCEPT, "text/event-stream");
    let resp = match ep.send(req).await {
        Ok(client::Sent::Response(r)) => r,
        Ok(client::Sent::NeedsLogin(why) | client::Sent::NeedsScope(why)) => {
            return close(why, true).await;
        }
        Err(e) => return close(context(client::describe_error(&e, &shown)), false).await,
    };
    let status = resp.status();
    if client::is_auth_failure(status) {
        return close(refused_message(&client::auth_hint(&resp)), true).await;
    }
    if !status.is_success() || client::content_type(&resp) != "text/event-stream" {
        let e = format!(
            "GET {shown} did not open an SSE stream (HTTP {}, {:?})",
            status.as_u16(),
            client::content_type(&resp)
        );
        return close(context(e), false).await;
    }
    let mut events = std::pin::pin!(client::events(resp, ep.max_body));
    // The first event names where to POST.
    let post_url = loop {
        match events.next().await {
            Some(Ok(ev)) if ev.event == "endpoint" => match endpoint_url(&ep.url, &ev.data) {
                Ok(u) => break u,
                Err(e) => return close(e, false).await,
            },
            Some(Ok(_)) => continue,
            Some(Err(e)) => {
                return close(context(format!("the SSE stream broke: {e}")), false).await;
            }
            None => {
                let e = "the SSE stream ended before the server named its message endpoint";
                return close(context(e.into()), false).await;
            }
        }
    };
    info.send_modify(|i| {
        i.transport = "sse".into();
        i.session = true;
        i.listen = "open".into();
    });
    tracing::debug!(upstream = %server, "HTTP+SSE session open");
    let mut posts: JoinSet<Outcome> = JoinSet::new();
    let post = |line: String, id: Option<u64>| {
        post_message(ep.clone(), post_url.clone(), inbound.clone(), line, id)
    };
    if let Some((line, _)) = first {
        posts.spawn(post(line, Some(crate::upstream::INITIALIZE_ID)));
    }
    loop {
        tokio::select! {
            msg = rx.recv() => match msg.map(Charged::into_inner) {
                None => break,
                Some(Outbound::Message { line, request }) => {
                    posts.spawn(post(line, request.map(|r| r.id)));
                }
                // No per-request streams here: the actor's `notifications/cancelled` is
                // the whole cancellation, and there is nothing to resume.
                Some(Outbound::Abort(_) | Outbound::Negotiated { .. } | Outbound::Resume { .. }) => {}
            },
            ev = events.next() => match ev {
                Some(Ok(ev)) => {
                    if let Some(frame) = message_frame(ev)
                        && inbound.send(Inbound::Frame(frame)).await.is_err()
                    {
                        break;
                    }
                }
                Some(Err(e)) => {
                    close(format!("the SSE stream broke: {e}"), false).await;
                    break;
                }
                None => {
                    close("the server closed the SSE stream".into(), false).await;
                    break;
                }
            },
            Some(done) = posts.join_next() => {
                if let Ok(Outcome::Fatal { error, fatal }) = done {
                    close(error, fatal).await;
                    break;
                }
            }
        }
    }
    // The session is the stream: dropping it ends the session.
    posts.abort_all();
    info.send_modify(|i| i.listen = "off".into());
}

/// The message endpoint named by the `endpoint` event. It must be on the same origin
/// as the configured URL, so a server cannot send our headers (and token) elsewhere.
fn endpoint_url(base: &Url, data: &str) -> Result<Url, String> {
    let url = base
        .join(data.trim())
        .map_err(|e| format!("the server named an invalid message endpoint {data:?}: {e}"))?;
    if url.origin() != base.origin() {
        return Err(format!(
            "the server named a message endpoint on another origin ({}); mcpd only posts to {}",
            url.origin().ascii_serialization(),
            base.origin().ascii_serialization()
        ));
    }
    Ok(url)
}

async fn post_message(
    ep: Endpoint,
    url: Url,
    inbound: mpsc::Sender<Inbound>,
    line: String,
    id: Option<u64>,
) -> Outcome {
    let shown = crate::config::display_url(&url);
    let ended = |error: UpstreamError| {
        let inbound = inbound.clone();
        async move {
            if let Some(id) = id {
                // If the actor is gone no one waits for this request.
                let _ = inbound
                    .send(Inbound::Ended {
                        id,
                        error,
                        resume: None,
                    })
                    .await;
            }
        }
    };
    let req = ep
        .request(Method::POST, &url)
        .header(CONTENT_TYPE, "application/json")
        .body(line);
    let resp = match ep.send(req).await {
        Ok(client::Sent::Response(r)) => r,
        Ok(client::Sent::NeedsLogin(why)) => {
            ended(UpstreamError::NeedsLogin(why.clone())).await;
            return Outcome::Fatal {
                error: why,
                fatal: true,
            };
        }
        Ok(client::Sent::NeedsScope(why)) => {
            ended(UpstreamError::NeedsLogin(why)).await;
            return Outcome::Finished;
        }
        Err(e) => {
            let why = client::describe_error(&e, &shown);
            if client::is_unreachable(&e) {
                ended(UpstreamError::Unreachable(why.clone())).await;
                return Outcome::Fatal {
                    error: why,
                    fatal: false,
                };
            }
            if let Some(id) = id {
                ended(UpstreamError::NoResponse { id, why }).await;
            }
            return Outcome::Finished;
        }
    };
    let status = resp.status();
    if client::is_auth_failure(status) {
        let hint = client::auth_hint(&resp);
        ended(UpstreamError::Http {
            status: status.as_u16(),
            excerpt: hint.clone(),
        })
        .await;
        return Outcome::Fatal {
            error: refused_message(&hint),
            fatal: true,
        };
    }
    if status == StatusCode::NOT_FOUND {
        ended(UpstreamError::Http {
            status: 404,
            excerpt: "the server no longer knows this SSE session".into(),
        })
        .await;
        return Outcome::Fatal {
            error: "the server no longer knows this HTTP+SSE session (404)".into(),
            fatal: false,
        };
    }
    if !status.is_success() {
        let excerpt = client::excerpt(resp).await;
        let error = UpstreamError::Http {
            status: status.as_u16(),
            excerpt,
        };
        match id {
            Some(_) => ended(error).await,
            None => tracing::warn!(url = %shown, "a notification was refused: {error}"),
        }
    }
    Outcome::Finished
}
