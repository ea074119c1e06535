//! One agent `tools/call` from routing to answer: progress, the server's requests during the call, and `input_required` across eras.
//!
//! A call is a future inside its agent's actor. For a legacy agent it also fulfils a
//! modern server's `input_required` by asking the agent real requests (through the
//! actor) and retrying. For a modern agent, a legacy server's request during the call
//! makes the future yield the call back to the actor, which answers `input_required`
//! and parks it until the agent retries.

use super::conn::Session;
use super::{AgentContext, bridge};
use crate::errors::AgentError;
use crate::jsonrpc::{self, ErrorObject, Id, Request};
use crate::outbox::Outbox;
use crate::protocol::era::{self, Era};
use crate::protocol::method;
use crate::protocol::results::{RawMembers, passes_unchanged};
use crate::registry::Availability;
use crate::upstream::{
    CallId, CallOptions, LogRoute, ProgressSink, RawReply, RawResult, Reply, ServerAsk,
    UpstreamHandle,
};
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Daemon-wide call ids, so an upstream can tell apart calls from different agents.
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// Rounds of `input_required` mcpd fulfils for a legacy agent before giving up.
const MAX_INPUT_ROUNDS: usize = 10;
/// Server requests queued per modern-agent call.
const CALL_ASKS: usize = 4;

/// An in-flight request of one agent, resolved inside the agent's actor.
pub type Pending = BoxFuture<'static, (Id, Step)>;

/// How an in-flight request ended, or paused.
pub enum Step {
    /// A line to send to the agent.
    Reply(String),
    /// Cancelled: by the agent (no reply is due) or by the connection closing.
    Cancelled,
    /// The server asked for input during a modern agent's call: the actor answers the
    /// agent `input_required` and parks the call.
    Park { ask: ServerAsk, call: Box<InFlight> },
}

/// A modern agent's call that can be paused for input and resumed under a new id.
pub struct InFlight {
    /// The agent's request id the call answers now (a retry has a new one).
    pub id: Id,
    pub server: Arc<str>,
    handle: UpstreamHandle,
    call: CallId,
    pub cancel: CancellationToken,
    reply: BoxFuture<'static, RawReply>,
    asks: mpsc::Receiver<ServerAsk>,
    /// The agent's declared capabilities for this call.
    pub caps: Value,
    method: &'static str,
    rewrite: Rewrite,
}

impl InFlight {
    /// Resumes a parked call as the answer to the agent's retry `id`.
    pub fn resume(mut self, id: Id, cancel: CancellationToken) -> Pending {
        self.id = id;
        self.cancel = cancel;
        drive(self)
    }
}

/// A request routed to a server: where it goes and what it says there.
pub struct Target {
    pub server: Arc<str>,
    pub handle: UpstreamHandle,
    pub method: &'static str,
    /// The params with the agent's names replaced by the server's own.
    pub params: Map<String, Value>,
    /// How the server's result is changed on the way back.
    pub rewrite: Rewrite,
}

/// A change made to a server's result before the agent sees it.
#[derive(Clone)]
pub enum Rewrite {
    None,
    /// `resources/read`: the contents' URIs become the ones agents see.
    ContentUris {
        surface: Arc<crate::registry::Surface>,
    },
    /// `tools/call`: the result is checked (shape, media, the tool's `outputSchema`).
    ToolResult {
        output_schema: Option<Arc<Value>>,
        limits: crate::protocol::results::Limits,
    },
}

/// The handle of a server that can take requests now, or the error line explaining why not.
pub fn ready_handle(
    catalog: &crate::registry::Catalog,
    server: &Arc<str>,
    id: &Id,
) -> Result<UpstreamHandle, String> {
    match catalog.servers.get(server) {
        Some(Availability::Ready(h)) => Ok(h.clone()),
        other => {
            let why = other.map_or_else(
                || "not configured any more".to_owned(),
                Availability::explain,
            );
            let e = AgentError::Unavailable {
                server: server.to_string(),
                why,
            };
            Err(jsonrpc::error_line(Some(id), &e.to_error_object()))
        }
    }
}

/// Starts a `tools/call`: finds the tool's server and returns the future of its answer.
pub fn start(
    req: Request,
    ctx: &AgentContext,
    outbox: &Outbox,
    session: &Session,
    modern: bool,
) -> Result<(Id, CancellationToken, Pending), String> {
    let Request { id, params, .. } = req;
    let fail = |e: AgentError| jsonrpc::error_line(Some(&id), &e.to_error_object());
    let Some(Value::Object(mut params)) = params else {
        return Err(fail(invalid("params must be an object with a \"name\"")));
    };
    let Some(Value::String(name)) = params.get("name") else {
        return Err(fail(invalid("\"name\" must be a string")));
    };
    let catalog = ctx.catalog.borrow().clone();
    let tool = catalog
        .tool(name)
        .filter(|t| session.sees_tool(&t.server, &t.qualified));
    let Some(tool) = tool else {
        // A tool of a server that has not listed its tools yet (it is starting, or has
        // never been reached) is not unknown: say what is wrong with the server.
        if let Some((server, availability)) = name
            .split_once(crate::protocol::naming::SEPARATOR)
            .and_then(|(prefix, _)| catalog.prefixes.get(prefix))
            .and_then(|server| catalog.servers.get_key_value(server))
            && !matches!(availability, Availability::Ready(_))
        {
            return Err(fail(AgentError::Unavailable {
                server: server.to_string(),
                why: availability.explain(),
            }));
        }
        return Err(fail(AgentError::UnknownTool(name.clone())));
    };
    let server = tool.server.clone();
    params.insert("name".into(), Value::String(tool.original.clone()));
    let output_schema = tool
        .definition
        .get("outputSchema")
        .filter(|s| s.is_object())
        .map(|s| Arc::new(s.clone()));
    let rewrite = Rewrite::ToolResult {
        output_schema,
        limits: ctx.limits,
    };
    let caller = Caller::of(outbox, session, modern);
    // A server still starting (its tools listed from the cached catalog) is waited for.
    // A server shared per agent: the call goes to this agent's own instance.
    if let Some(Availability::PerAgent { wait }) = catalog.servers.get(&server) {
        let s = ctx.supervisor.clone();
        let target = (server, method::TOOLS_CALL, params, rewrite);
        return Ok(instance_call(id, target, *wait, caller, s, session.agent));
    }
    // An idle one is started by this call, and waited for the same way.
    if let Some(Availability::Starting { wait } | Availability::Idle { wait }) =
        catalog.servers.get(&server)
    {
        let (c, s) = (ctx.catalog.clone(), ctx.supervisor.clone());
        let m = method::TOOLS_CALL;
        return Ok(deferred(
            id, server, m, params, rewrite, *wait, c, caller, s,
        ));
    }
    let handle = ready_handle(&catalog, &server, &id)?;
    let target = Target {
        server,
        handle,
        method: method::TOOLS_CALL,
        params,
        rewrite,
    };
    Ok(launch(id, target, &caller))
}

/// Sends a routed request and returns the future of its answer: progress goes to the
/// agent, the server's requests during it are bridged to the agent's era.
/// What a call needs to know about the agent making it, owned so a call can start
/// later (after its server is ready).
#[derive(Clone)]
pub struct Caller {
    outbox: Outbox,
    /// The agent speaks the modern era (this request, or the connection).
    modern: bool,
    /// The capabilities a legacy agent declared in `initialize`.
    caps: Value,
    asks: mpsc::Sender<ServerAsk>,
    log_level: Option<String>,
    metrics: crate::metrics::Metrics,
}

impl Caller {
    pub fn of(outbox: &Outbox, session: &Session, modern: bool) -> Caller {
        Caller {
            metrics: session.metrics.clone(),
            outbox: outbox.clone(),
            modern: modern || session.era == Some(Era::Modern),
            caps: session.capabilities.clone(),
            asks: session.asks.clone(),
            log_level: session.log_level.clone(),
        }
    }
}

pub fn launch(id: Id, target: Target, caller: &Caller) -> (Id, CancellationToken, Pending) {
    let cancel = CancellationToken::new();
    let fut = launch_with(id.clone(), target, caller, cancel.clone());
    (id, cancel, fut)
}

/// A call to a server that is still starting: waits (up to `wait`) for it to be ready,
/// then sends the request; a cancellation meanwhile ends it at once.
#[allow(clippy::too_many_arguments)] // the pieces of a target whose handle is not known yet
fn deferred(
    id: Id,
    server: Arc<str>,
    method: &'static str,
    params: Map<String, Value>,
    rewrite: Rewrite,
    wait: std::time::Duration,
    mut catalog: tokio::sync::watch::Receiver<Arc<crate::registry::Catalog>>,
    caller: Caller,
    supervisor: crate::supervisor::SupervisorHandle,
) -> (Id, CancellationToken, Pending) {
    let cancel = CancellationToken::new();
    let token = cancel.clone();
    let reply_id = id.clone();
    let fut = async move {
        let ready = async {
            let mut asked = false;
            loop {
                let state = catalog.borrow_and_update().servers.get(&server).cloned();
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
        let state = tokio::select! {
            s = tokio::time::timeout(wait, ready) => s.ok().flatten(),
            () = token.cancelled() => return (reply_id, Step::Cancelled),
        };
        let handle = match state {
            Some(Availability::Ready(h)) => h,
            other => {
                let why = other.map_or_else(
                    || format!("still starting after {}", humantime::format_duration(wait)),
                    |a| a.explain(),
                );
                let e = AgentError::Unavailable {
                    server: server.to_string(),
                    why,
                };
                let line = jsonrpc::error_line(Some(&reply_id), &e.to_error_object());
                return (reply_id, Step::Reply(line));
            }
        };
        let target = Target {
            server,
            handle,
            method,
            params,
            rewrite,
        };
        launch_with(reply_id, target, &caller, token).await
    };
    (id, cancel, fut.boxed())
}

/// A call to the agent's own instance of a `share = "agent"` server: the supervisor
/// starts it on first use (waited for up to `wait`), then the call goes to it.
fn instance_call(
    id: Id,
    (server, method, params, rewrite): (Arc<str>, &'static str, Map<String, Value>, Rewrite),
    wait: std::time::Duration,
    caller: Caller,
    supervisor: crate::supervisor::SupervisorHandle,
    agent: u64,
) -> (Id, CancellationToken, Pending) {
    let cancel = CancellationToken::new();
    let token = cancel.clone();
    let reply_id = id.clone();
    let fut = async move {
        let got = tokio::select! {
            r = tokio::time::timeout(wait, supervisor.instance(&server, agent)) => r,
            () = token.cancelled() => return (reply_id, Step::Cancelled),
        };
        let handle = match got {
            Ok(Ok(h)) => h,
            Ok(Err(why)) => return unavailable(reply_id, &server, why),
            Err(_) => {
                let why = format!(
                    "still starting this agent's instance after {}",
                    humantime::format_duration(wait)
                );
                return unavailable(reply_id, &server, why);
            }
        };
        let target = Target {
            server,
            handle,
            method,
            params,
            rewrite,
        };
        launch_with(reply_id, target, &caller, token).await
    };
    (id, cancel, fut.boxed())
}

fn unavailable(id: Id, server: &str, why: String) -> (Id, Step) {
    let e = AgentError::Unavailable {
        server: server.to_owned(),
        why,
    };
    let line = jsonrpc::error_line(Some(&id), &e.to_error_object());
    (id, Step::Reply(line))
}

fn launch_with(id: Id, target: Target, caller: &Caller, cancel: CancellationToken) -> Pending {
    // Every routed request is timed for `mcpd ctl metrics`, whatever its outcome.
    let (metrics, server, method) = (caller.metrics.clone(), target.server.clone(), target.method);
    let started = std::time::Instant::now();
    call_future(id, target, caller, cancel)
        .map(move |(id, step)| {
            let error = match &step {
                Step::Reply(line) => jsonrpc::is_error_line(line),
                Step::Cancelled => true,
                Step::Park { .. } => false,
            };
            if !matches!(step, Step::Park { .. }) {
                metrics.call(&server, method, started.elapsed(), error);
            }
            (id, step)
        })
        .boxed()
}

fn call_future(id: Id, target: Target, caller: &Caller, cancel: CancellationToken) -> Pending {
    let outbox = &caller.outbox.about(&id);
    let modern = caller.modern;
    let Target {
        server,
        handle,
        method,
        params,
        rewrite,
    } = target;
    let progress = params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .map(|token| ProgressSink {
            token: token.clone(),
            outbox: outbox.clone(),
        });
    // A modern agent asks for log messages per request; a legacy one sets a level for
    // its calls (or gets everything).
    let logs = if modern {
        super::surface::requested_level(&params).map(|l| LogRoute {
            outbox: outbox.clone(),
            threshold: Some(l.to_owned()),
        })
    } else {
        // A modern server is asked for log messages at this level, upstream, when the
        // request is dressed for its era.
        Some(LogRoute {
            outbox: outbox.clone(),
            threshold: caller.log_level.clone(),
        })
    };
    let call = NEXT_CALL.fetch_add(1, Ordering::Relaxed);
    if modern {
        let caps = params
            .get("_meta")
            .and_then(|m| m.get(era::key::CLIENT_CAPABILITIES))
            .cloned()
            .unwrap_or_else(|| json!({}));
        let (asks_tx, asks) = mpsc::channel(CALL_ASKS);
        let opts = CallOptions {
            progress,
            caps: None,
            asks: Some(asks_tx),
            logs,
        };
        let h = handle.clone();
        let reply = async move {
            h.call(call, method, Some(Value::Object(params)), opts)
                .await
        }
        .boxed();
        drive(InFlight {
            id,
            server,
            handle,
            call,
            cancel: cancel.clone(),
            reply,
            asks,
            caps,
            method,
            rewrite,
        })
    } else {
        let legacy = LegacyCall {
            id,
            server,
            handle,
            call,
            cancel: cancel.clone(),
            params,
            progress,
            caps: caller.caps.clone(),
            asks: caller.asks.clone(),
            method,
            rewrite,
            logs,
        };
        legacy.run().boxed()
    }
}

fn invalid(reason: &str) -> AgentError {
    AgentError::InvalidParams {
        method: method::TOOLS_CALL.into(),
        reason: reason.into(),
    }
}

/// Drives a modern agent's call until it answers, is cancelled, or needs input.
fn drive(mut c: InFlight) -> Pending {
    async move {
        enum Next {
            Reply(RawReply),
            Ask(ServerAsk),
            Cancelled,
        }
        let next = tokio::select! {
            reply = &mut c.reply => Next::Reply(reply),
            Some(ask) = c.asks.recv() => Next::Ask(ask),
            () = c.cancel.cancelled() => Next::Cancelled,
        };
        let id = c.id.clone();
        match next {
            Next::Reply(reply) => {
                let line = render_raw(&id, &c.server, c.method, reply, true, &c.rewrite);
                (id, Step::Reply(line))
            }
            Next::Ask(ask) => (
                id,
                Step::Park {
                    ask,
                    call: Box::new(c),
                },
            ),
            Next::Cancelled => {
                c.handle.cancel(c.call, "cancelled by the agent").await;
                (id, Step::Cancelled)
            }
        }
    }
    .boxed()
}

/// A legacy agent's call, which fulfils a modern server's `input_required` itself.
struct LegacyCall {
    id: Id,
    server: Arc<str>,
    handle: UpstreamHandle,
    call: CallId,
    cancel: CancellationToken,
    params: Map<String, Value>,
    progress: Option<ProgressSink>,
    /// The capabilities the agent declared in `initialize`.
    caps: Value,
    /// The actor's service that sends requests to the agent.
    asks: mpsc::Sender<ServerAsk>,
    method: &'static str,
    rewrite: Rewrite,
    logs: Option<LogRoute>,
}

impl LegacyCall {
    async fn run(mut self) -> (Id, Step) {
        for _ in 0..MAX_INPUT_ROUNDS {
            let opts = CallOptions {
                progress: self.progress.clone(),
                caps: Some(self.caps.clone()),
                asks: Some(self.asks.clone()),
                logs: self.logs.clone(),
            };
            let params = Some(Value::Object(self.params.clone()));
            let reply = tokio::select! {
                r = self.handle.call(self.call, self.method, params, opts) => r,
                () = self.cancel.cancelled() => {
                    self.handle.cancel(self.call, "cancelled by the agent").await;
                    return (self.id, Step::Cancelled);
                }
            };
            // Only a result that may ask for input (a resultType other than complete) is
            // parsed here; any other is passed on.
            let reply = match reply {
                Ok(Ok(raw)) => {
                    let members = RawMembers::of(raw.get());
                    let asks_input = members
                        .as_ref()
                        .is_none_or(|m| m.get("resultType").is_some_and(|t| t != "\"complete\""));
                    if asks_input {
                        raw.to_value().map(Ok)
                    } else {
                        let line = render_members(
                            &self.id,
                            (&self.server, self.method),
                            &raw,
                            members,
                            false,
                            &self.rewrite,
                        );
                        return (self.id, Step::Reply(line));
                    }
                }
                Ok(Err(e)) => Ok(Err(e)),
                Err(e) => Err(e),
            };
            match reply {
                Ok(Ok(result)) if era::result_type(&result) == "input_required" => {
                    match self.fulfil(&result).await {
                        Ok(responses) => self.prepare_retry(&result, responses),
                        Err(e) => {
                            let line = jsonrpc::error_line(Some(&self.id), &e);
                            return (self.id, Step::Reply(line));
                        }
                    }
                }
                other => {
                    let line = render(
                        &self.id,
                        &self.server,
                        self.method,
                        other,
                        false,
                        &self.rewrite,
                    );
                    return (self.id, Step::Reply(line));
                }
            }
        }
        let e = ErrorObject::new(
            jsonrpc::code::INTERNAL_ERROR,
            format!(
                "server '{}' asked for input more than {MAX_INPUT_ROUNDS} times in one call; mcpd gave up",
                self.server
            ),
        );
        (
            self.id.clone(),
            Step::Reply(jsonrpc::error_line(Some(&self.id), &e)),
        )
    }

    /// Asks the agent each of the server's input requests, as real requests.
    async fn fulfil(&self, result: &Value) -> Result<Map<String, Value>, ErrorObject> {
        let mut responses = Map::new();
        let requests = result.get("inputRequests").and_then(Value::as_object);
        for (key, req) in requests.into_iter().flatten() {
            let method = req.get("method").and_then(Value::as_str).unwrap_or("");
            let (respond_to, rx) = oneshot::channel();
            let ask = ServerAsk {
                method: method.to_owned(),
                params: req.get("params").cloned(),
                respond_to,
            };
            let gone = || {
                ErrorObject::new(
                    jsonrpc::code::INTERNAL_ERROR,
                    "the agent connection is closing".to_owned(),
                )
            };
            self.asks.send(ask).await.map_err(|_| gone())?;
            let answer = tokio::select! {
                a = rx => a.map_err(|_| gone())?,
                () = self.cancel.cancelled() => return Err(gone()),
            };
            match answer {
                Ok(v) => {
                    responses.insert(key.clone(), v);
                }
                Err(e) => {
                    return Err(ErrorObject::new(
                        e.code,
                        format!(
                            "server '{}' needs {method} to finish this call: {}",
                            self.server, e.message
                        ),
                    ));
                }
            }
        }
        Ok(responses)
    }

    fn prepare_retry(&mut self, result: &Value, responses: Map<String, Value>) {
        self.params
            .insert("inputResponses".into(), Value::Object(responses));
        // The state is echoed byte for byte; without one, none is sent.
        match result.get("requestState") {
            Some(state) => {
                self.params.insert("requestState".into(), state.clone());
            }
            None => {
                self.params.remove("requestState");
            }
        }
    }
}

/// [`render`] for a reply whose result is the server's text. A result mcpd has nothing
/// to check or change in is passed on as written (a large one is copied once, never
/// parsed into values or written out again); any other takes the full path.
pub fn render_raw(
    id: &Id,
    server: &str,
    method: &str,
    reply: RawReply,
    modern: bool,
    rewrite: &Rewrite,
) -> String {
    match reply {
        Ok(Ok(raw)) => {
            let members = RawMembers::of(raw.get());
            render_members(id, (server, method), &raw, members, modern, rewrite)
        }
        Ok(Err(e)) => render(id, server, method, Ok(Err(e)), modern, rewrite),
        Err(e) => render(id, server, method, Err(e), modern, rewrite),
    }
}

/// [`render_raw`] for a result whose top-level members were already read (None: it is not
/// an object, or names a member twice).
fn render_members(
    id: &Id,
    (server, method): (&str, &str),
    raw: &RawResult,
    members: Option<RawMembers>,
    modern: bool,
    rewrite: &Rewrite,
) -> String {
    if let Some(members) = members {
        let plain = match rewrite {
            Rewrite::None => true,
            Rewrite::ContentUris { .. } => false,
            Rewrite::ToolResult { output_schema, .. } => {
                passes_unchanged(&members, output_schema.as_deref())
            }
        };
        if plain {
            return match era::present_raw(&members, modern) {
                era::Presented::AsIs => jsonrpc::raw_result_line(id, raw.get()),
                era::Presented::Text(text) => jsonrpc::raw_result_line(id, &text),
            };
        }
    }
    render(id, server, method, raw.to_value().map(Ok), modern, rewrite)
}

/// The agent's answer for an upstream reply: the server's own result or error, or mcpd's
/// explanation of why there is none. A modern agent's result gets the modern shape.
pub fn render(
    id: &Id,
    server: &str,
    method: &str,
    reply: Reply,
    modern: bool,
    rewrite: &Rewrite,
) -> String {
    match reply {
        Ok(Ok(mut result)) => {
            match rewrite {
                Rewrite::None => {}
                Rewrite::ContentUris { surface } => present_contents(&mut result, surface, server),
                Rewrite::ToolResult {
                    output_schema,
                    limits,
                } => {
                    use crate::protocol::results::{Checked, check_call_result};
                    match check_call_result(&mut result, output_schema.as_deref(), limits) {
                        Checked::Ok => {}
                        Checked::Fixed(notes) => {
                            tracing::warn!(
                                upstream = server,
                                "changed a tool result before passing it on: {}",
                                notes.join("; ")
                            );
                        }
                        Checked::Invalid(why) => {
                            let e = AgentError::Upstream {
                                server: server.to_owned(),
                                method: method.to_owned(),
                                error: crate::upstream::UpstreamError::Protocol(format!(
                                    "the result is not a CallToolResult: {why}"
                                )),
                            };
                            return jsonrpc::error_line(Some(id), &e.to_error_object());
                        }
                    }
                }
            }
            if modern {
                era::modernize_result(&mut result);
            } else {
                era::legacy_result(&mut result);
            }
            jsonrpc::response_line(id, &Ok(result))
        }
        Ok(outcome) => jsonrpc::response_line(id, &outcome),
        Err(error) => {
            let e = AgentError::Upstream {
                server: server.to_owned(),
                method: method.to_owned(),
                error,
            };
            jsonrpc::error_line(Some(id), &e.to_error_object())
        }
    }
}

/// Gives each `resources/read` content the URI agents know it by.
fn present_contents(result: &mut Value, surface: &crate::registry::Surface, server: &str) {
    let Some(contents) = result.get_mut("contents").and_then(Value::as_array_mut) else {
        return;
    };
    for c in contents {
        if let Some(uri) = c.get("uri").and_then(Value::as_str) {
            let shown = surface.present_uri(server, uri);
            c["uri"] = Value::String(shown);
        }
    }
}

/// Whether an agent declared the capability a server request needs.
pub fn has_capability(caps: &Value, method: &str) -> Result<(), ErrorObject> {
    let Some(cap) = bridge::capability_for(method) else {
        return Err(ErrorObject::new(
            jsonrpc::code::METHOD_NOT_FOUND,
            format!("mcpd does not forward {method} to agents"),
        ));
    };
    if caps.get(cap).is_some_and(Value::is_object) {
        Ok(())
    } else {
        Err(ErrorObject::new(
            era::code::MISSING_CLIENT_CAPABILITY,
            format!("the agent did not declare the {cap} capability, which {method} needs"),
        )
        .with_data(json!({ "requiredCapabilities": { cap: {} } })))
    }
}
