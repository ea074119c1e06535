//! The Streamable HTTP transport (2025-03-26 … 2025-11-25): one POST per message, JSON or SSE replies, the session, the GET listener.

use super::HttpInfo;
use super::client::{
    self, ACCEPT_BOTH, Body, Endpoint, LAST_EVENT_ID, SESSION_HEADER, VERSION_HEADER,
};
use super::sse::Event;
use crate::framing::Frame;
use crate::upstream::UpstreamError;
use crate::upstream::transport::{Inbound, Outbound, Resume};
use futures::{Stream, StreamExt};
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
/// Wait before resuming a broken reply stream when the server gave no `retry`.
const RESUME_DELAY: Duration = Duration::from_millis(500);
/// Bounds on the GET listener's reconnection backoff.
const LISTEN_BACKOFF_MIN: Duration = Duration::from_secs(1);
const LISTEN_BACKOFF_MAX: Duration = Duration::from_secs(30);
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

/// How one POST ended, as far as the transport task must act on it.
enum Outcome {
    Finished,
    /// 404 on a request carrying our session id: the server forgot the session.
    SessionExpired {
        line: String,
        id: Option<u64>,
        extra: Vec<(String, String)>,
        retried: bool,
    },
    Refused(String),
    Unreachable(String),
}

struct Done {
    id: Option<u64>,
    /// The session generation the POST was sent in.
    generation: u64,
    outcome: Outcome,
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
    pub async fn run(mut self, rx: &mut mpsc::Receiver<Outbound>) -> Finish {
        loop {
            tokio::select! {
                msg = rx.recv() => match msg {
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
                Some(r) if r.method == crate::protocol::method::INITIALIZE => {
                    self.init_line = Some(line.clone());
                    self.initialize(line, r.id).await?;
                }
                Some(r) => self.spawn_post(line, Some(r.id), r.headers, false),
                None => self.spawn_post(line, None, Vec::new(), false),
            },
            Outbound::Negotiated { version } => {
                // A modern server has no sessions and no GET stream: its notifications
                // come on a subscription the actor opens.
                let modern = version.as_str() >= crate::protocol::era::MODERN_VERSION;
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
        let sent = self
            .ep
            .request(Method::POST, &self.ep.url)
            .header(ACCEPT, ACCEPT_BOTH)
            .header(CONTENT_TYPE, "application/json")
            .body(line)
            .send()
            .await;
        let resp = match sent {
            Ok(r) => r,
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
        let resp = self
            .ep
            .request(Method::POST, &self.ep.url)
            .header(ACCEPT, ACCEPT_BOTH)
            .header(CONTENT_TYPE, "application/json")
            .body(line)
            .send()
            .await
            .map_err(|e| client::describe_error(&e, &self.ep.shown_url()))?;
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
            crate::jsonrpc::notification_line(crate::protocol::method::INITIALIZED, None);
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
        self.listener = Some(tokio::spawn(listener.run()));
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
            .header(SESSION_HEADER, session)
            .send();
        match tokio::time::timeout(DELETE_TIMEOUT, req).await {
            Ok(Ok(r)) => {
                tracing::debug!(upstream = %self.server, status = r.status().as_u16(), "ended the HTTP session")
            }
            Ok(Err(e)) => {
                tracing::debug!(upstream = %self.server, "ending the HTTP session failed: {}", client::describe_error(&e, &self.ep.shown_url()))
            }
            Err(_) => tracing::debug!(upstream = %self.server, "ending the HTTP session timed out"),
        }
    }
}

/// The message for a server that refused our credentials.
pub fn refused_message(hint: &str) -> String {
    format!(
        "the server refused mcpd's credentials ({hint}); set `bearer_token_env` or `headers` for this server, then run `mcpd ctl restart`"
    )
}

/// What one POST (or resumed stream) needs, cloned out of the transport.
struct PostCtx {
    ep: Endpoint,
    headers: HeaderMap,
    inbound: mpsc::Sender<Inbound>,
    generation: u64,
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

    async fn post(
        self,
        line: String,
        id: Option<u64>,
        extra: Vec<(String, String)>,
        retried: bool,
    ) -> Done {
        let shown = self.ep.shown_url();
        let sent = self
            .ep
            .request(Method::POST, &self.ep.url)
            .headers(self.headers.clone())
            .header(ACCEPT, ACCEPT_BOTH)
            .header(CONTENT_TYPE, "application/json")
            .body(line.clone())
            .send()
            .await;
        let resp = match sent {
            Ok(r) => r,
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
    async fn resume(self, id: u64, resume: Resume) -> Done {
        let delay = resume
            .retry_ms
            .map(Duration::from_millis)
            .unwrap_or(RESUME_DELAY);
        tokio::time::sleep(delay).await;
        let sent = self
            .ep
            .request(Method::GET, &self.ep.url)
            .headers(self.headers.clone())
            .header(ACCEPT, "text/event-stream")
            .header(LAST_EVENT_ID, resume.last_event_id.as_str())
            .send()
            .await;
        let failed = |why: String| UpstreamError::NoResponse { id, why };
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
async fn deliver(resp: reqwest::Response, id: u64, inbound: &mpsc::Sender<Inbound>, max: usize) {
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
const ERROR_BODY_MAX: usize = 64 * 1024;

/// Whether a body is a JSON-RPC response to request `id`.
fn answers(text: &str, id: u64) -> bool {
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
async fn initialize_result(resp: reqwest::Response, max: usize) -> Result<Value, String> {
    let is_answer = |text: &str| -> Option<Result<Value, String>> {
        let v: Value = serde_json::from_str(text).ok()?;
        if v.get("id") != Some(&Value::from(crate::upstream::handshake::INITIALIZE_ID)) {
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

/// The GET stream on which the server sends messages of its own.
struct Listener {
    ep: Endpoint,
    headers: HeaderMap,
    inbound: mpsc::Sender<Inbound>,
    info: watch::Sender<HttpInfo>,
    server: Arc<str>,
}

impl Listener {
    async fn run(self) {
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
            match req.send().await {
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
