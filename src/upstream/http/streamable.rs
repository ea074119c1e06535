//! The Streamable HTTP transport (2025-03-26 … 2025-11-25).
//!
//! One POST per message, JSON or SSE replies, the session, the GET listener.

use super::HttpInfo;
use super::client::{self, ACCEPT_BOTH, Body, Endpoint, SESSION_HEADER, Sent, VERSION_HEADER};
use super::listen::Listener;
use super::post::{Done, ERROR_BODY_MAX, Outcome, PostCtx, answers, deliver, initialize_result};
use crate::upstream::transport::{Inbound, Outbound, Resume};
use crate::upstream::{UpstreamError, refused_message};
use mcpd_runtime::budget::Charged;
use mcpd_runtime::framing::Frame;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::{AbortHandle, JoinHandle, JoinSet};

/// The first protocol version that has the `MCP-Protocol-Version` header.
const VERSION_HEADER_SINCE: &str = "2025-06-18";
/// How long the final DELETE may take.
const DELETE_TIMEOUT: Duration = Duration::from_secs(2);

/// How the transport ended.
pub enum Finish {
    Done,
    /// In `auto` mode the server refused the first POST the way an HTTP+SSE server does:
    /// hand the `initialize` line over to the legacy transport.
    Fallback {
        first: String,
        why: String,
    },
}

/// Why the initialize exchange did not go through.
enum InitError {
    Fallback(String),
    Closed,
}

pub struct Streamable {
    ep: Endpoint,
    server: Arc<str>,
    auto: bool,
    inbound: mpsc::Sender<Inbound>,
    info: watch::Sender<HttpInfo>,
    session: Option<HeaderValue>,
    /// Bumped with each new session, so a late 404 from an old one does not renew twice.
    generation: u64,
    version: Option<String>,
    /// The `initialize` request, kept to start a new session after a 404.
    init_line: Option<String>,
    posts: JoinSet<Done>,
    /// Open POSTs of requests, so a cancelled request's POST can be dropped.
    aborts: HashMap<u64, AbortHandle>,
    listener: Option<JoinHandle<()>>,
}

impl Streamable {
    pub fn new(
        ep: Endpoint,
        auto: bool,
        inbound: mpsc::Sender<Inbound>,
        info: watch::Sender<HttpInfo>,
        server: Arc<str>,
    ) -> Streamable {
        Streamable {
            ep,
            server,
            auto,
            inbound,
            info,
            session: None,
            generation: 0,
            version: None,
            init_line: None,
            posts: JoinSet::new(),
            aborts: HashMap::new(),
            listener: None,
        }
    }

    /// Serves the actor's messages until it goes away or the connection fails.
    pub async fn run(mut self, rx: &mut mpsc::Receiver<Charged<Outbound>>) -> Finish {
        loop {
            tokio::select! {
                msg = rx.recv() => match msg.map(Charged::into_inner) {
                    None => break,
                    Some(msg) => match self.on_outbound(msg).await {
                        Ok(()) => {}
                        Err(InitError::Fallback(why)) => {
                            self.stop_tasks();
                            let first = self.init_line.take().unwrap_or_default();
                            return Finish::Fallback { first, why };
                        }
                        Err(InitError::Closed) => break,
                    },
                },
                Some(done) = self.posts.join_next() => {
                    // An aborted POST was already forgotten when it was aborted.
                    let Ok(done) = done else { continue };
                    if !self.on_done(done).await {
                        break;
                    }
                }
            }
        }
        self.end_session().await;
        Finish::Done
    }

    async fn on_outbound(&mut self, msg: Outbound) -> Result<(), InitError> {
        match msg {
            Outbound::Message { line, request } => match request {
                Some(r) if r.method == mcpd_wire::protocol::method::INITIALIZE => {
                    self.init_line = Some(line.clone());
                    self.initialize(line, r.id).await?;
                }
                Some(r) => self.spawn_post(line, Some(r.id), r.headers, false),
                None => self.spawn_post(line, None, Vec::new(), false),
            },
            Outbound::Negotiated { version } => {
                // A modern server has no sessions and no GET stream: its notifications
                // come on a subscription the actor opens.
                let modern = version.as_str() >= mcpd_wire::protocol::era::MODERN_VERSION;
                self.version = Some(version);
                if !modern {
                    self.start_listener();
                }
            }
            Outbound::Abort(id) => {
                if let Some(h) = self.aborts.remove(&id) {
                    h.abort();
                }
            }
            Outbound::Resume { id, resume } => self.spawn_resume(id, resume),
        }
        Ok(())
    }

    /// Headers of every request after initialize: the session and protocol version.
    fn session_headers(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(s) = &self.session {
            h.insert(SESSION_HEADER, s.clone());
        }
        if let Some(v) = &self.version
            && v.as_str() >= VERSION_HEADER_SINCE
            && let Ok(v) = HeaderValue::from_str(v)
        {
            h.insert(VERSION_HEADER, v);
        }
        h
    }

    fn post_ctx(&self) -> PostCtx {
        PostCtx {
            ep: self.ep.clone(),
            headers: self.session_headers(),
            inbound: self.inbound.clone(),
            generation: self.generation,
        }
    }

    fn spawn_post(
        &mut self,
        line: String,
        id: Option<u64>,
        extra: Vec<(String, String)>,
        retried: bool,
    ) {
        let mut ctx = self.post_ctx();
        for (name, value) in &extra {
            if let (Ok(n), Ok(v)) = (
                reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                ctx.headers.insert(n, v);
            }
        }
        let handle = self.posts.spawn(ctx.post(line, id, extra, retried));
        if let Some(id) = id {
            self.aborts.insert(id, handle);
        }
    }

    fn spawn_resume(&mut self, id: u64, resume: Resume) {
        let ctx = self.post_ctx();
        let handle = self.posts.spawn(ctx.resume(id, resume));
        self.aborts.insert(id, handle);
    }

    /// Acts on a finished POST. Returns false when the connection cannot go on.
    async fn on_done(&mut self, done: Done) -> bool {
        if let Some(id) = done.id {
            self.aborts.remove(&id);
        }
        match done.outcome {
            Outcome::Finished => true,
            Outcome::SessionExpired {
                line,
                id,
                extra,
                retried,
            } => {
                if retried {
                    let why = "the server forgot the session again right after it was renewed";
                    self.close(why.into(), false).await;
                    return false;
                }
                if done.generation == self.generation
                    && let Err(e) = self.renew().await
                {
                    self.close(
                        format!("the session expired and a new one could not be started: {e}"),
                        false,
                    )
                    .await;
                    return false;
                }
                self.spawn_post(line, id, extra, true);
                true
            }
            Outcome::Refused(hint) => {
                self.close(refused_message(&hint), true).await;
                false
            }
            Outcome::NeedsLogin(why) => {
                self.close(why, true).await;
                false
            }
            Outcome::Unreachable(why) => {
                self.close(why, false).await;
                false
            }
        }
    }

    async fn close(&self, error: String, fatal: bool) {
        // If the actor is gone there is no one left to tell.
        let _ = self.inbound.send(Inbound::Closed { error, fatal }).await;
    }

    /// Sends `initialize`, keeps the session id it assigns, and delivers the answer.
    async fn initialize(&mut self, line: String, id: u64) -> Result<(), InitError> {
        let shown = self.ep.shown_url();
        let req = self
            .ep
            .request(Method::POST, &self.ep.url)
            .header(ACCEPT, ACCEPT_BOTH)
            .header(CONTENT_TYPE, "application/json")
            .body(line);
        let resp = match self.ep.send(req).await {
            Ok(Sent::Response(r)) => r,
            Ok(Sent::NeedsLogin(why) | Sent::NeedsScope(why)) => {
                self.close(why, true).await;
                return Err(InitError::Closed);
            }
            Err(e) => {
                self.close(client::describe_error(&e, &shown), false).await;
                return Err(InitError::Closed);
            }
        };
        let status = resp.status();
        if client::is_auth_failure(status) {
            let hint = client::auth_hint(&resp);
            self.close(refused_message(&hint), true).await;
            return Err(InitError::Closed);
        }
        if !status.is_success() {
            // A JSON-RPC answer in the error response (a modern server's -32022, say) is
            // the server's own word: deliver it, and never take it as a reason to fall
            // back to HTTP+SSE.
            let body = match client::read_body(resp, ERROR_BODY_MAX).await {
                Ok(Body::Text(t)) => t,
                _ => String::new(),
            };
            if answers(&body, id) {
                let _ = self.inbound.send(Inbound::Frame(Frame::Line(body))).await;
                return Ok(());
            }
            if self.auto
                && matches!(
                    status,
                    StatusCode::BAD_REQUEST
                        | StatusCode::NOT_FOUND
                        | StatusCode::METHOD_NOT_ALLOWED
                )
            {
                return Err(InitError::Fallback(format!(
                    "{shown} answered the Streamable HTTP initialize with HTTP {}",
                    status.as_u16()
                )));
            }
            let e = UpstreamError::Http {
                status: status.as_u16(),
                excerpt: client::one_line(&body),
            };
            self.close(format!("{shown}: {e}"), false).await;
            return Err(InitError::Closed);
        }
        match client::session_id(&resp) {
            Some(Ok(s)) => self.session = Some(s),
            Some(Err(e)) => {
                self.close(e, false).await;
                return Err(InitError::Closed);
            }
            None => {}
        }
        self.info.send_modify(|i| {
            i.transport = "streamable-http".into();
            i.session = self.session.is_some();
        });
        deliver(resp, id, &self.inbound, self.ep.max_body).await;
        Ok(())
    }

    /// Starts a new session after the server forgot ours: `initialize` again, then
    /// `notifications/initialized`, then a new GET listener.
    async fn renew(&mut self) -> Result<(), String> {
        tracing::warn!(upstream = %self.server, "the server forgot the HTTP session (404); starting a new one");
        let line = self
            .init_line
            .clone()
            .ok_or("no initialize request to repeat")?;
        self.session = None;
        if let Some(l) = self.listener.take() {
            l.abort();
        }
        let req = self
            .ep
            .request(Method::POST, &self.ep.url)
            .header(ACCEPT, ACCEPT_BOTH)
            .header(CONTENT_TYPE, "application/json")
            .body(line);
        let resp = match self.ep.send(req).await {
            Ok(Sent::Response(r)) => r,
            Ok(Sent::NeedsLogin(why) | Sent::NeedsScope(why)) => return Err(why),
            Err(e) => return Err(client::describe_error(&e, &self.ep.shown_url())),
        };
        let status = resp.status();
        if !status.is_success() {
            return Err(format!("initialize answered HTTP {}", status.as_u16()));
        }
        self.session = match client::session_id(&resp) {
            Some(s) => Some(s?),
            None => None,
        };
        let result = initialize_result(resp, self.ep.max_body).await?;
        if let Some(v) = result.get("protocolVersion").and_then(Value::as_str) {
            self.version = Some(v.to_owned());
        }
        self.generation += 1;
        let initialized =
            mcpd_wire::jsonrpc::notification_line(mcpd_wire::protocol::method::INITIALIZED, None);
        self.spawn_post(initialized, None, Vec::new(), false);
        self.info
            .send_modify(|i| i.session = self.session.is_some());
        self.start_listener();
        // If the actor is gone the connection is ending anyway.
        let _ = self.inbound.send(Inbound::Renewed).await;
        Ok(())
    }

    fn start_listener(&mut self) {
        if let Some(l) = self.listener.take() {
            l.abort();
        }
        let listener = Listener {
            ep: self.ep.clone(),
            headers: self.session_headers(),
            inbound: self.inbound.clone(),
            info: self.info.clone(),
            server: self.server.clone(),
        };
        self.listener = Some(mcpd_runtime::tracker::spawn(listener.run()));
    }

    fn stop_tasks(&mut self) {
        self.posts.abort_all();
        self.aborts.clear();
        if let Some(l) = self.listener.take() {
            l.abort();
        }
    }

    /// Ends the session with a DELETE, as the spec asks; failures are ignored.
    async fn end_session(&mut self) {
        self.stop_tasks();
        let Some(session) = self.session.take() else {
            return;
        };
        let req = self
            .ep
            .request(Method::DELETE, &self.ep.url)
            .headers(self.session_headers())
            .header(SESSION_HEADER, session);
        match tokio::time::timeout(DELETE_TIMEOUT, self.ep.send(req)).await {
            Ok(Ok(Sent::NeedsLogin(_) | Sent::NeedsScope(_))) => {
                tracing::debug!(upstream = %self.server, "ending the HTTP session needs a login; left to expire")
            }
            Ok(Ok(Sent::Response(r))) => {
                tracing::debug!(upstream = %self.server, status = r.status().as_u16(), "ended the HTTP session")
            }
            Ok(Err(e)) => {
                tracing::debug!(upstream = %self.server, "ending the HTTP session failed: {}", client::describe_error(&e, &self.ep.shown_url()))
            }
            Err(_) => tracing::debug!(upstream = %self.server, "ending the HTTP session timed out"),
        }
    }
}
