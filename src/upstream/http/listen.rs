//! The GET listener of the Streamable HTTP transport.
//!
//! The stream on which the server sends messages of its own.

use super::HttpInfo;
use super::client::{self, Endpoint, LAST_EVENT_ID};
use super::post::message_frame;
use crate::upstream::transport::Inbound;
use futures::StreamExt;
use reqwest::header::{ACCEPT, HeaderMap};
use reqwest::{Method, StatusCode};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Bounds on the GET listener's reconnection backoff.
const LISTEN_BACKOFF_MIN: Duration = Duration::from_secs(1);
const LISTEN_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The GET stream on which the server sends messages of its own.
pub(super) struct Listener {
    pub(super) ep: Endpoint,
    pub(super) headers: HeaderMap,
    pub(super) inbound: mpsc::Sender<Inbound>,
    pub(super) info: watch::Sender<HttpInfo>,
    pub(super) server: Arc<str>,
}

impl Listener {
    pub(super) async fn run(self) {
        let set = |state: &str| self.info.send_modify(|i| i.listen = state.into());
        let mut backoff = LISTEN_BACKOFF_MIN;
        let mut last_id: Option<String> = None;
        let mut retry: Option<Duration> = None;
        loop {
            let mut req = self
                .ep
                .request(Method::GET, &self.ep.url)
                .headers(self.headers.clone())
                .header(ACCEPT, "text/event-stream");
            if let Some(id) = &last_id {
                req = req.header(LAST_EVENT_ID, id.as_str());
            }
            let sent = match self.ep.send(req).await {
                Ok(client::Sent::Response(r)) => Ok(r),
                Ok(client::Sent::NeedsLogin(why) | client::Sent::NeedsScope(why)) => {
                    // The POSTs hear the same and end the connection.
                    tracing::debug!(upstream = %self.server, "the GET stream needs a login: {why}");
                    set("off");
                    return;
                }
                Err(e) => Err(e),
            };
            match sent {
                Ok(resp) if resp.status() == StatusCode::METHOD_NOT_ALLOWED => {
                    // The server has no stream of its own to offer; nothing to do.
                    tracing::debug!(upstream = %self.server, "the server offers no GET stream (405)");
                    set("unsupported");
                    return;
                }
                Ok(resp)
                    if resp.status().is_success()
                        && client::content_type(&resp) == "text/event-stream" =>
                {
                    set("open");
                    backoff = LISTEN_BACKOFF_MIN;
                    let mut events = std::pin::pin!(client::events(resp, self.ep.max_body));
                    while let Some(Ok(ev)) = events.next().await {
                        if ev.id.is_some() {
                            last_id = ev.id.clone();
                        }
                        if let Some(ms) = ev.retry {
                            retry = Some(Duration::from_millis(ms));
                        }
                        if let Some(frame) = message_frame(ev)
                            && self.inbound.send(Inbound::Frame(frame)).await.is_err()
                        {
                            return;
                        }
                    }
                    tracing::debug!(upstream = %self.server, "the GET stream closed; reconnecting");
                }
                Ok(resp) => {
                    tracing::debug!(upstream = %self.server, status = resp.status().as_u16(), "the GET stream was refused; retrying");
                }
                Err(e) => {
                    tracing::debug!(upstream = %self.server, "the GET stream failed: {}", client::describe_error(&e, &self.ep.shown_url()));
                }
            }
            set("reconnecting");
            let wait = retry.unwrap_or(backoff);
            backoff = (backoff * 2).min(LISTEN_BACKOFF_MAX);
            tokio::time::sleep(wait).await;
        }
    }
}
