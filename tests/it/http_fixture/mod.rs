//! An in-process HTTP MCP server for the integration tests: Streamable HTTP (legacy era or the
//! stateless 2026-07-28 era) or the 2024-11-05 HTTP+SSE transport, with misbehaviour chosen by
//! `FixtureOptions` and counters in `Stats`.
//!
//! It speaks `serde_json::Value` only and uses no type of the `mcpd` crate, so a bug in mcpd's
//! types cannot pass on both sides.
//!
//! Reading order: `state` (what is shared), `http` (router and auth gate), `streamable`,
//! `modern` and `legacy` (the transports), `rpc` (answering a request), `tools`, `sse` (the
//! wire format and long-lived streams), `net` (sockets).

// Each test uses the part of this API it needs; no single test uses all of it.
#![allow(dead_code)]

mod http;
mod legacy;
mod modern;
mod net;
mod rpc;
mod sse;
mod state;
mod streamable;
mod tools;

use axum::Router;
use axum::http::request::Parts;
use axum::response::Response;
use serde_json::{Value, json};
use state::{ListenerKind, Shared};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// How the fixture behaves; `FixtureOptions::default()` is a well-behaved Streamable HTTP
/// server answering with JSON bodies.
#[derive(Clone, Debug)]
pub struct FixtureOptions {
    /// How POSTed requests are answered.
    pub reply: Reply,
    /// True: GET `/mcp` opens the server-initiated SSE stream. False: GET answers 405.
    pub get_stream: bool,
    /// Some(token): every request must carry `Authorization: Bearer <token>`, else 401 with a
    /// `WWW-Authenticate` challenge naming the resource metadata and an `Mcp-Auth-Server` header.
    pub bearer: Option<String>,
    /// Every request gets 403 with `WWW-Authenticate: Bearer error="insufficient_scope", …`.
    pub forbidden: bool,
    /// SSE events carry `id:` fields (`<stream>-<seq>`), POST streams start with a priming
    /// event, and a GET with `Last-Event-ID` replays the rest of that event's stream.
    pub event_ids: bool,
    /// Speak only the 2024-11-05 HTTP+SSE transport: POST `/mcp` is 405, GET `/mcp` opens the
    /// session stream, messages go to `/messages?session=<id>`.
    pub legacy_sse: bool,
    /// Accept connections and read requests but never answer anything.
    pub stall: bool,
    /// When set, every SSE stream first sends `retry: <ms>`.
    pub retry_ms: Option<u64>,
    /// When set, every POST is answered with this status and a text/plain body.
    pub fail_status: Option<u16>,
    /// Speak only the stateless 2026-07-28 era over Streamable HTTP: POST only (GET and DELETE
    /// are 405), no sessions, `initialize` refused with -32022, every request checked for the
    /// `_meta` envelope and the request-metadata headers (`MCP-Protocol-Version`, `Mcp-Method`,
    /// `Mcp-Name`, `Mcp-Param-*`), `server/discover`, `subscriptions/listen`, and the tools
    /// `region` (arguments annotated with `x-mcp-header`) and `badheader` (an invalid annotation).
    pub modern: bool,
    /// The `ttlMs` of modern `server/discover` and `tools/list` results.
    pub ttl_ms: u64,
    /// When set, every request to `/mcp` (after its headers are recorded) is answered
    /// `307 Temporary Redirect` to this location: an absolute URL, or a path on this
    /// fixture such as `/moved`, where the fixture serves what `/mcp` would.
    pub redirect: Option<String>,
    /// Set by fixtures built on this one (the OAuth fixture): a check in front of the MCP
    /// endpoints and more routes on the same origin.
    pub wrap: Option<Wrap>,
}

impl Default for FixtureOptions {
    fn default() -> Self {
        FixtureOptions {
            reply: Reply::Json,
            get_stream: true,
            bearer: None,
            forbidden: false,
            event_ids: false,
            legacy_sse: false,
            stall: false,
            retry_ms: None,
            fail_status: None,
            modern: false,
            ttl_ms: 60_000,
            redirect: None,
            wrap: None,
        }
    }
}

/// What a fixture built on this one adds in front of it and beside it.
#[derive(Clone)]
pub struct Wrap {
    /// Runs on every request to the fixture's own endpoints once the gate has recorded its
    /// headers, before `redirect`, `bearer` and `forbidden`, with the whole body read (the
    /// handlers get the same body afterwards). `Some(response)` answers the request instead.
    pub check: Arc<WrapCheck>,
    /// Served on the same origin outside the gate. Its fallback, if any, answers every path
    /// the fixture does not serve.
    pub routes: Router,
}

/// The check of a `Wrap`: the request's head and whole body in, maybe an answer out.
pub type WrapCheck = dyn Fn(&Parts, &[u8]) -> Option<Response> + Send + Sync;

impl fmt::Debug for Wrap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wrap").finish_non_exhaustive()
    }
}

/// How a POSTed request is answered (Streamable HTTP only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reply {
    /// `Content-Type: application/json`, the response alone.
    #[default]
    Json,
    /// `Content-Type: text/event-stream`: related notifications, then the response, then the
    /// stream ends.
    Sse,
}

/// What the fixture has seen so far; `HttpFixture::stats` returns a snapshot.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// `initialize` requests answered.
    pub initializes: usize,
    /// Session ids handed out, in order (2024-11-05: one per session stream).
    pub sessions_issued: Vec<String>,
    /// Session ids of the DELETE requests received.
    pub deletes: Vec<String>,
    /// Server-initiated streams opened (GET streams, resumed GET streams, 2024-11-05 session
    /// streams); replays of a request's stream are not counted.
    pub get_streams_opened: usize,
    /// Every `Last-Event-ID` header received on a GET.
    pub last_event_ids: Vec<String>,
    /// The params of every `notifications/cancelled` received.
    pub cancelled: Vec<Value>,
    /// `MCP-Protocol-Version` values on POSTs other than `initialize`.
    pub protocol_headers: Vec<String>,
    /// `Authorization` values of every request (any method, any outcome).
    pub authorization: Vec<String>,
    /// `X-Fixture-Key` values of every request.
    pub custom_header: Vec<String>,
    /// POST requests received (any path, any outcome).
    pub posts: usize,
    /// Requests whose client went away before the answer (a request's SSE stream, a JSON
    /// reply still being worked on, or a 2024-11-05 session stream with a request in flight).
    pub disconnects: usize,
    /// GET requests received (any path, any outcome).
    pub get_requests: usize,
    /// DELETE requests received (any path, any outcome).
    pub delete_requests: usize,
    /// `Mcp-Method` values of every request (any mode, any outcome).
    pub methods: Vec<String>,
    /// `Mcp-Name` values of every request, decoded from the `=?base64?…?=` form when wrapped
    /// (as received when that form does not decode).
    pub names: Vec<String>,
    /// `Mcp-Param-{Name}` headers of every request as (`{Name}`, value as received): names
    /// arrive lowercased (header names are case-insensitive), values possibly base64-wrapped.
    pub param_headers: Vec<(String, String)>,
    /// Modern requests refused with 400 and -32020 because a request-metadata header was
    /// missing or did not match the body.
    pub header_errors: usize,
    /// `server/discover` requests answered with a `DiscoverResult` (modern only).
    pub discovers: usize,
    /// `tools/list` requests answered (any mode).
    pub tools_lists: usize,
    /// Modern `subscriptions/listen` streams opened.
    pub listens_opened: usize,
}

/// A running fixture server on 127.0.0.1. Dropping it stops it too, without waiting.
pub struct HttpFixture {
    shared: Arc<Shared>,
    /// The server task; taken by `stop`.
    task: Option<JoinHandle<()>>,
}

impl HttpFixture {
    /// Binds 127.0.0.1 on a free port and serves in a tokio task.
    pub async fn start(opts: FixtureOptions) -> HttpFixture {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0 for the HTTP fixture");
        HttpFixture::start_on(listener, opts)
    }

    /// Serves on `listener`, bound by the caller (who needs the port before the fixture
    /// starts, to name it in `wrap`'s routes).
    pub fn start_on(listener: TcpListener, opts: FixtureOptions) -> HttpFixture {
        let port = listener.local_addr().expect("local address").port();
        let stall = opts.stall;
        let shared = Arc::new(Shared::new(opts, port));
        let shutdown = shared.shutdown.clone();
        let task = if stall {
            tokio::spawn(net::stall(listener, shutdown))
        } else {
            let router = http::router(shared.clone());
            let listener = net::ClosingListener {
                inner: listener,
                shutdown: shutdown.clone(),
            };
            tokio::spawn(async move {
                let serve = axum::serve(listener, router)
                    .with_graceful_shutdown(shutdown.cancelled_owned());
                // An accept loop error cannot happen with axum's retrying listeners; a test that
                // needs the server notices its absence anyway.
                let _ = serve.await;
            })
        };
        HttpFixture {
            shared,
            task: Some(task),
        }
    }

    /// `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.shared.port)
    }

    pub fn port(&self) -> u16 {
        self.shared.port
    }

    pub fn stats(&self) -> Stats {
        self.shared.lock().stats.clone()
    }

    /// Forgets every session id: later requests carrying one get 404. Open Streamable HTTP GET
    /// streams stay open; a 2024-11-05 session stream *is* the session, so it is closed.
    pub fn expire_sessions(&self) {
        let mut inner = self.shared.lock();
        inner.sessions.clear();
        inner.close_listeners(|l| matches!(l.kind, ListenerKind::Legacy));
    }

    /// Adds one tool `extra_N` and sends `notifications/tools/list_changed` on every open
    /// server-initiated stream (GET streams, or 2024-11-05 session streams), or in the modern
    /// era on every `subscriptions/listen` stream that asked for it, tagged with its id.
    pub async fn notify_tools_changed(&self) {
        let mut inner = self.shared.lock();
        inner.extras += 1;
        for listener in inner.listeners.values() {
            let msg = match &listener.kind {
                ListenerKind::Get | ListenerKind::Legacy => {
                    json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
                }
                ListenerKind::Listen { id, tools: true } => modern::list_changed(id),
                ListenerKind::Listen { tools: false, .. } => continue,
            };
            // A stream whose client has gone is being removed by its own task.
            let _ = listener.out.send(msg);
        }
    }

    /// Adds one tool `extra_N` without telling anyone: only a client that fetches the list
    /// again (a lapsed `ttlMs`, say) sees it.
    pub fn add_tool_quietly(&self) {
        self.shared.lock().extras += 1;
    }

    /// Closes every open server-initiated stream from the server side (modern
    /// `subscriptions/listen` streams too).
    pub fn drop_get_streams(&self) {
        self.shared.lock().close_listeners(|_| true);
    }

    /// Stops listening and closes every connection.
    pub async fn stop(mut self) {
        self.shared.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}
