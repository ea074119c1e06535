//! One POST (or resumed reply stream) of the Streamable HTTP transport.
//!
//! Sending a message and delivering its reply.

use super::client::{self, ACCEPT_BOTH, Body, Endpoint, LAST_EVENT_ID, SESSION_HEADER, Sent};
use super::sse::Event;
use crate::upstream::UpstreamError;
use crate::upstream::transport::{Inbound, Resume};
use futures::{Stream, StreamExt};
use mcpd_runtime::framing::Frame;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::time::Duration;
use tokio::sync::mpsc;

/// Wait before resuming a broken reply stream when the server gave no `retry`.
const RESUME_DELAY: Duration = Duration::from_millis(500);

/// How one POST ended, as far as the transport task must act on it.
pub(super) enum Outcome {
    Finished,
    /// 404 on a request carrying our session id: the server forgot the session.
    SessionExpired {
        line: String,
        id: Option<u64>,
        extra: Vec<(String, String)>,
        retried: bool,
    },
    Refused(String),
    /// The server needs a login mcpd does not have; says why and what to run.
    NeedsLogin(String),
    Unreachable(String),
}

pub(super) struct Done {
    pub(super) id: Option<u64>,
    /// The session generation the POST was sent in.
    pub(super) generation: u64,
    pub(super) outcome: Outcome,
}

/// What one POST (or resumed stream) needs, cloned out of the transport.
pub(super) struct PostCtx {
    pub(super) ep: Endpoint,
    pub(super) headers: HeaderMap,
    pub(super) inbound: mpsc::Sender<Inbound>,
    pub(super) generation: u64,
}

impl PostCtx {
    fn done(&self, id: Option<u64>, outcome: Outcome) -> Done {
        Done {
            id,
            generation: self.generation,
            outcome,
        }
    }

    async fn ended(&self, id: u64, error: UpstreamError) {
        // If the actor is gone, no one waits for this request any more.
        let _ = self
            .inbound
            .send(Inbound::Ended {
                id,
                error,
                resume: None,
            })
            .await;
    }

    pub(super) async fn post(
        self,
        line: String,
        id: Option<u64>,
        extra: Vec<(String, String)>,
        retried: bool,
    ) -> Done {
        let shown = self.ep.shown_url();
        let req = self
            .ep
            .request(Method::POST, &self.ep.url)
            .headers(self.headers.clone())
            .header(ACCEPT, ACCEPT_BOTH)
            .header(CONTENT_TYPE, "application/json")
            .body(line.clone());
        let resp = match self.ep.send(req).await {
            Ok(Sent::Response(r)) => r,
            Ok(Sent::NeedsLogin(why)) => {
                if let Some(id) = id {
                    self.ended(id, UpstreamError::NeedsLogin(why.clone())).await;
                }
                return self.done(id, Outcome::NeedsLogin(why));
            }
            Ok(Sent::NeedsScope(why)) => {
                if let Some(id) = id {
                    self.ended(id, UpstreamError::NeedsLogin(why)).await;
                }
                return self.done(id, Outcome::Finished);
            }
            Err(e) => {
                let why = client::describe_error(&e, &shown);
                if client::is_unreachable(&e) {
                    if let Some(id) = id {
                        self.ended(id, UpstreamError::Unreachable(why.clone()))
                            .await;
                    }
                    return self.done(id, Outcome::Unreachable(why));
                }
                if let Some(id) = id {
                    self.ended(id, UpstreamError::NoResponse { id, why }).await;
                }
                return self.done(id, Outcome::Finished);
            }
        };
        let status = resp.status();
        if status == StatusCode::NOT_FOUND && self.headers.contains_key(SESSION_HEADER) {
            return self.done(
                id,
                Outcome::SessionExpired {
                    line,
                    id,
                    extra,
                    retried,
                },
            );
        }
        if client::is_auth_failure(status) {
            let hint = client::auth_hint(&resp);
            if let Some(id) = id {
                let excerpt = hint.clone();
                self.ended(
                    id,
                    UpstreamError::Http {
                        status: status.as_u16(),
                        excerpt,
                    },
                )
                .await;
            }
            return self.done(id, Outcome::Refused(hint));
        }
        if !status.is_success() {
            let error = match id {
                // A JSON-RPC answer to the request in an error response (a modern
                // server's -32022 in a 400, say) is the server's answer: deliver it.
                Some(id) if client::content_type(&resp) == "application/json" => {
                    match client::read_body(resp, ERROR_BODY_MAX).await {
                        Ok(Body::Text(t)) if answers(&t, id) => {
                            let _ = self.inbound.send(Inbound::Frame(Frame::Line(t))).await;
                            return self.done(Some(id), Outcome::Finished);
                        }
                        Ok(Body::Text(t)) => UpstreamError::Http {
                            status: status.as_u16(),
                            excerpt: client::one_line(&t),
                        },
                        _ => UpstreamError::Http {
                            status: status.as_u16(),
                            excerpt: String::new(),
                        },
                    }
                }
                _ => UpstreamError::Http {
                    status: status.as_u16(),
                    excerpt: client::excerpt(resp).await,
                },
            };
            match id {
                Some(id) => self.ended(id, error).await,
                None => tracing::warn!(url = %shown, "a notification was refused: {error}"),
            }
            return self.done(id, Outcome::Finished);
        }
        if let Some(id) = id {
            deliver(resp, id, &self.inbound, self.ep.max_body).await;
        }
        self.done(id, Outcome::Finished)
    }

    /// Reopens a broken reply stream with `Last-Event-ID`, after the server's `retry`.
    pub(super) async fn resume(self, id: u64, resume: Resume) -> Done {
        let delay = resume
            .retry_ms
            .map(Duration::from_millis)
            .unwrap_or(RESUME_DELAY);
        tokio::time::sleep(delay).await;
        let req = self
            .ep
            .request(Method::GET, &self.ep.url)
            .headers(self.headers.clone())
            .header(ACCEPT, "text/event-stream")
            .header(LAST_EVENT_ID, resume.last_event_id.as_str());
        let failed = |why: String| UpstreamError::NoResponse { id, why };
        let sent = match self.ep.send(req).await {
            Ok(Sent::Response(r)) => Ok(r),
            Ok(Sent::NeedsLogin(why)) => {
                self.ended(id, UpstreamError::NeedsLogin(why.clone())).await;
                return self.done(Some(id), Outcome::NeedsLogin(why));
            }
            Ok(Sent::NeedsScope(why)) => {
                self.ended(id, UpstreamError::NeedsLogin(why)).await;
                return self.done(Some(id), Outcome::Finished);
            }
            Err(e) => Err(e),
        };
        match sent {
            Ok(resp)
                if resp.status().is_success()
                    && client::content_type(&resp) == "text/event-stream" =>
            {
                read_stream(client::events(resp, self.ep.max_body), id, &self.inbound).await;
            }
            Ok(resp) => {
                let why = format!(
                    "the stream broke and resuming it failed (HTTP {})",
                    resp.status().as_u16()
                );
                self.ended(id, failed(why)).await;
            }
            Err(e) => {
                let why = format!(
                    "the stream broke and resuming it failed: {}",
                    client::describe_error(&e, &self.ep.shown_url())
                );
                self.ended(id, failed(why)).await;
            }
        }
        self.done(Some(id), Outcome::Finished)
    }
}

/// Delivers the reply to request `id` (a JSON body or an SSE stream), then reports the
/// reply's end, so a request whose answer was not in it fails or resumes.
pub(super) async fn deliver(
    resp: reqwest::Response,
    id: u64,
    inbound: &mpsc::Sender<Inbound>,
    max: usize,
) {
    let status = resp.status();
    let kind = client::content_type(&resp);
    let why = match kind.as_str() {
        "text/event-stream" => {
            read_stream(client::events(resp, max), id, inbound).await;
            return;
        }
        "application/json" => {
            let frame = match client::read_body(resp, max).await {
                Ok(Body::Text(t)) => Frame::Line(t),
                Ok(Body::TooLong) => {
                    let why = format!(
                        "the reply was larger than max_message_bytes ({max} bytes) and was dropped"
                    );
                    let _ = inbound
                        .send(Inbound::Ended {
                            id,
                            error: UpstreamError::NoResponse { id, why },
                            resume: None,
                        })
                        .await;
                    return;
                }
                Err(e) => {
                    let why = format!("reading the reply failed: {e}");
                    let _ = inbound
                        .send(Inbound::Ended {
                            id,
                            error: UpstreamError::NoResponse { id, why },
                            resume: None,
                        })
                        .await;
                    return;
                }
            };
            // If the actor is gone the connection is ending.
            let _ = inbound.send(Inbound::Frame(frame)).await;
            "the server's JSON reply did not answer it".to_owned()
        }
        "" => format!(
            "the server accepted it (HTTP {}) but sent no reply",
            status.as_u16()
        ),
        other => format!("the server replied with content type {other:?}, not JSON or SSE"),
    };
    let _ = inbound
        .send(Inbound::Ended {
            id,
            error: UpstreamError::NoResponse { id, why },
            resume: None,
        })
        .await;
}

/// Forwards the messages of a reply stream, then reports its end, with where to resume
/// when the server gave event ids.
async fn read_stream<S>(events: S, id: u64, inbound: &mpsc::Sender<Inbound>)
where
    S: Stream<Item = std::io::Result<Event>>,
{
    let mut events = std::pin::pin!(events);
    let mut last_id = None;
    let mut retry_ms = None;
    let mut too_long = false;
    let why = loop {
        match events.next().await {
            None if too_long => {
                break "a message on the stream was larger than max_message_bytes and was dropped"
                    .to_owned();
            }
            None => break "the server closed the stream before answering".to_owned(),
            Some(Err(e)) => break format!("the stream broke: {e}"),
            Some(Ok(ev)) => {
                if ev.id.is_some() {
                    last_id = ev.id.clone();
                }
                if ev.retry.is_some() {
                    retry_ms = ev.retry;
                }
                too_long |= ev.too_long;
                if let Some(frame) = message_frame(ev)
                    && inbound.send(Inbound::Related(frame, id)).await.is_err()
                {
                    return;
                }
            }
        }
    };
    let resume = last_id.map(|last_event_id| Resume {
        last_event_id,
        retry_ms,
    });
    let _ = inbound
        .send(Inbound::Ended {
            id,
            error: UpstreamError::NoResponse { id, why },
            resume,
        })
        .await;
}

/// Bytes of an error response read to look for a JSON-RPC answer in it.
pub(super) const ERROR_BODY_MAX: usize = 64 * 1024;

/// Whether a body is a JSON-RPC response to request `id`.
pub(super) fn answers(text: &str, id: u64) -> bool {
    #[derive(serde::Deserialize)]
    struct Head {
        id: Option<Value>,
    }
    serde_json::from_str::<Head>(text)
        .ok()
        .and_then(|h| h.id)
        .is_some_and(|v| v.as_u64() == Some(id))
}

/// The JSON-RPC message an event carries, if it carries one.
pub fn message_frame(ev: Event) -> Option<Frame> {
    if !ev.is_message() {
        return None;
    }
    if ev.too_long {
        return Some(Frame::TooLong);
    }
    if ev.data.trim().is_empty() {
        return None; // a priming event: only an id
    }
    Some(Frame::Line(ev.data))
}

/// Reads the result of a repeated `initialize` from a JSON or SSE reply.
pub(super) async fn initialize_result(
    resp: reqwest::Response,
    max: usize,
) -> Result<Value, String> {
    let is_answer = |text: &str| -> Option<Result<Value, String>> {
        let v: Value = serde_json::from_str(text).ok()?;
        if v.get("id") != Some(&Value::from(crate::upstream::INITIALIZE_ID)) {
            return None;
        }
        Some(match (v.get("result"), v.get("error")) {
            (Some(r), _) => Ok(r.clone()),
            (None, Some(e)) => Err(format!("the server rejected initialize: {e}")),
            _ => Err("the initialize answer has no result".into()),
        })
    };
    if client::content_type(&resp) == "text/event-stream" {
        let mut events = std::pin::pin!(client::events(resp, max));
        while let Some(Ok(ev)) = events.next().await {
            if let Some(Frame::Line(text)) = message_frame(ev)
                && let Some(answer) = is_answer(&text)
            {
                return answer;
            }
        }
        return Err("the stream ended without an answer to initialize".into());
    }
    match client::read_body(resp, max).await {
        Ok(Body::Text(t)) => {
            is_answer(&t).unwrap_or_else(|| Err("the reply is not an answer to initialize".into()))
        }
        Ok(Body::TooLong) => Err("the reply is too long".into()),
        Err(e) => Err(format!("reading the reply failed: {e}")),
    }
}
