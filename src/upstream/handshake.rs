//! The legacy `initialize` handshake with a freshly started server.

use super::ServerIdentity;
use super::transport::{Inbound, Outbound, Sent};
use crate::budget;
use crate::framing::Frame;
use crate::jsonrpc::{self, ErrorObject, Id, Message, code};
use crate::protocol::{self, era, method};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};

pub use super::INITIALIZE_ID;

fn initialize_params() -> Value {
    json!({
        "protocolVersion": protocol::LATEST_LEGACY,
        // mcpd forwards these requests to the agent whose call they belong to (or turns
        // them into input_required for a modern agent). Roots are not declared: one
        // shared server cannot have each agent's roots.
        "capabilities": { "elicitation": {}, "sampling": {} },
        "clientInfo": { "name": "mcpd", "version": env!("CARGO_PKG_VERSION") },
        // Who this daemon is, for a server that is another daemon (`era::instance_in`).
        "_meta": { era::key::MCPD_INSTANCE: era::instance() },
    })
}

/// Why a handshake failed.
#[derive(Debug)]
pub struct HandshakeError {
    pub message: String,
    /// The server refused our credentials; retrying will not help.
    pub fatal: bool,
    /// The server does not speak the era mcpd tried (a cached verdict may be stale).
    pub era_mismatch: bool,
    /// The server is this daemon, or another one in a loop with it (`refuse_self`):
    /// nothing it listed through an earlier connection may be served either.
    pub never_serve: bool,
}

impl HandshakeError {
    fn era(message: String) -> Self {
        HandshakeError {
            message,
            fatal: false,
            era_mismatch: true,
            never_serve: false,
        }
    }
}

impl From<String> for HandshakeError {
    fn from(message: String) -> Self {
        HandshakeError {
            message,
            fatal: false,
            era_mismatch: false,
            never_serve: false,
        }
    }
}

impl From<&str> for HandshakeError {
    fn from(message: &str) -> Self {
        message.to_owned().into()
    }
}

/// Runs `initialize` / `notifications/initialized`. The caller bounds it in time and
/// watches the process. Lines that are not the answer are handled as the spec allows
/// before initialization: pings are answered, the rest is logged and skipped.
pub async fn initialize<S>(
    server: &str,
    inbound: &mut S,
    out: &budget::Sender<Outbound>,
    malformed: &mut u64,
) -> Result<ServerIdentity, HandshakeError>
where
    S: Stream<Item = Inbound> + Unpin,
{
    let id = Id::from(INITIALIZE_ID);
    let line = jsonrpc::request_line(&id, method::INITIALIZE, Some(&initialize_params()));
    let request = Some(Sent::new(INITIALIZE_ID, method::INITIALIZE));
    send(out, Outbound::Message { line, request }).await?;
    loop {
        let line = match inbound.next().await {
            None => return Err("the server closed its output during initialize".into()),
            Some(Inbound::Closed { error, fatal }) => {
                return Err(HandshakeError {
                    message: error,
                    fatal,
                    era_mismatch: false,
                    never_serve: false,
                });
            }
            Some(Inbound::Ended { error, .. }) => return Err(error.to_string().into()),
            Some(Inbound::Renewed) => continue,
            Some(Inbound::Frame(Frame::Line(line)) | Inbound::Related(Frame::Line(line), _)) => {
                line
            }
            Some(Inbound::Frame(_) | Inbound::Related(..)) => {
                *malformed += 1;
                tracing::warn!(
                    upstream = server,
                    "skipped an unreadable line during initialize"
                );
                continue;
            }
        };
        match jsonrpc::parse(&line) {
            Ok(Message::Response(r)) if r.id == id => {
                let identity = refuse_self(
                    identity(r.outcome).map_err(|e| HandshakeError::era(e.to_string()))?,
                )?;
                let version = identity.protocol_version.clone();
                send(out, Outbound::Negotiated { version }).await?;
                let line = jsonrpc::notification_line(method::INITIALIZED, None);
                send(
                    out,
                    Outbound::Message {
                        line,
                        request: None,
                    },
                )
                .await?;
                return Ok(identity);
            }
            Ok(Message::Request(r)) if r.method == method::PING => {
                let line = jsonrpc::result_line(&r.id, &json!({}));
                send(
                    out,
                    Outbound::Message {
                        line,
                        request: None,
                    },
                )
                .await?;
            }
            Ok(Message::Request(r)) => {
                let e = ErrorObject::new(
                    code::METHOD_NOT_FOUND,
                    format!("{} is not available before initialization", r.method),
                );
                let line = jsonrpc::error_line(Some(&r.id), &e);
                send(
                    out,
                    Outbound::Message {
                        line,
                        request: None,
                    },
                )
                .await?;
            }
            Ok(other) => tracing::debug!(
                upstream = server,
                ?other,
                "ignored a message during initialize"
            ),
            Err(e) => {
                *malformed += 1;
                tracing::warn!(upstream = server, error = %e, "skipped a malformed line during initialize")
            }
        }
    }
}

/// Why an `initialize` answer gives no identity mcpd can serve; each one means the
/// server may speak another era, so the caller retries the other way.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("the server rejected initialize: {message} (code {code})")]
    Rejected { message: String, code: i64 },
    #[error("the initialize result has no protocolVersion")]
    NoVersion,
    #[error("the server answered protocol version {0:?}, which mcpd does not speak (it speaks {speaks})", speaks = protocol::LEGACY_VERSIONS.join(", "))]
    UnknownVersion(String),
}

/// Reads what a server said about itself in its `InitializeResult`.
pub fn identity(outcome: Result<Value, ErrorObject>) -> Result<ServerIdentity, IdentityError> {
    let result = outcome.map_err(|e| IdentityError::Rejected {
        message: e.message.clone(),
        code: e.code,
    })?;
    let version = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or(IdentityError::NoVersion)?;
    if !protocol::is_legacy_version(version) {
        return Err(IdentityError::UnknownVersion(version.to_owned()));
    }
    Ok(ServerIdentity {
        protocol_version: version.to_owned(),
        server_info: result.get("serverInfo").cloned().unwrap_or(Value::Null),
        capabilities: result
            .get("capabilities")
            .cloned()
            .unwrap_or_else(|| json!({})),
        instructions: result
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_owned),
        pid: None,
        transport: None,
        mcpd_instance: era::instance_in(&result),
        mcpd_behind: era::behind_in(&result),
    })
}

/// A server that answers with this daemon's own instance id is this daemon reached
/// through its own socket (`mcpd connect` as a server entry): serving it would list
/// every tool again under its prefix, and again on every change. Retrying cannot help.
pub fn refuse_self(identity: ServerIdentity) -> Result<ServerIdentity, HandshakeError> {
    if identity.mcpd_instance.as_deref() == Some(era::instance()) {
        return Err(HandshakeError {
            message: "this server is this mcpd daemon itself, reached through its own socket; remove this [servers] entry (an agent uses mcpd through `mcpd connect`, mcpd does not use itself)".into(),
            fatal: true,
            era_mismatch: false,
            never_serve: true,
        });
    }
    // Another daemon that reaches this one through its own servers: each would list the
    // other's tools, its own among them, again and again.
    if identity.mcpd_behind.iter().any(|i| i == era::instance()) {
        return Err(HandshakeError {
            message: "this server is another mcpd daemon that has this daemon among its own servers (a loop: each would serve the other's tools back to it); remove one of the two entries".into(),
            fatal: true,
            era_mismatch: false,
            never_serve: true,
        });
    }
    Ok(identity)
}

async fn send(out: &budget::Sender<Outbound>, msg: Outbound) -> Result<(), String> {
    out.send(msg)
        .await
        .map_err(|_| "the connection to the server closed during initialize".to_owned())
}

/// What a `server/discover` exchange says about a server's era.
#[derive(Debug, PartialEq)]
pub enum Discovered {
    /// A modern server; its identity when it answered with a `DiscoverResult`.
    Modern(Option<Box<ServerIdentity>>, String),
    /// A legacy server (or one with no modern version in common): use `initialize`.
    Legacy(String),
}

/// The `server/discover` request, with mcpd's modern envelope.
pub fn discover_line(id: &Id) -> String {
    let mut params = None;
    era::add_envelope(&mut params, &json!({}));
    // Who this daemon is, for a server that is another daemon (`era::instance_in`).
    if let Some(meta) = params
        .as_mut()
        .and_then(|p| p.get_mut("_meta"))
        .and_then(Value::as_object_mut)
    {
        meta.insert(era::key::MCPD_INSTANCE.into(), json!(era::instance()));
    }
    jsonrpc::request_line(id, method::DISCOVER, params.as_ref())
}

/// Classifies the answer to `server/discover`, as the spec and the official SDKs do. A
/// `-32020` or `-32021` is taken as modern evidence (only a modern server knows those
/// codes); the server's complaint is kept in the reason and shows in `ctl status`.
pub fn classify(outcome: Result<Value, ErrorObject>) -> Discovered {
    match outcome {
        Ok(result) => {
            let shared = result
                .get("supportedVersions")
                .and_then(Value::as_array)
                .is_some_and(|v| v.iter().any(|s| s == era::MODERN_VERSION));
            if shared {
                let identity = discover_identity(&result);
                Discovered::Modern(Some(Box::new(identity)), "answered server/discover".into())
            } else if let Some(listed) = result.get("supportedVersions") {
                Discovered::Legacy(format!(
                    "server/discover lists no version mcpd speaks ({listed})"
                ))
            } else {
                Discovered::Legacy(
                    "server/discover answered something that is not a DiscoverResult".into(),
                )
            }
        }
        Err(e) if e.code == era::code::UNSUPPORTED_VERSION => {
            if lists_modern(&e) {
                Discovered::Modern(
                    None,
                    format!(
                        "server/discover refused with -32022 ({}) but the server lists {}",
                        e.message,
                        era::MODERN_VERSION
                    ),
                )
            } else {
                Discovered::Legacy(format!(
                    "server/discover refused with -32022 ({}); no modern version in common",
                    e.message
                ))
            }
        }
        Err(e)
            if e.code == era::code::HEADER_MISMATCH
                || e.code == era::code::MISSING_CLIENT_CAPABILITY =>
        {
            Discovered::Modern(
                None,
                format!(
                    "server/discover refused with {} ({}), which only modern servers send",
                    e.code, e.message
                ),
            )
        }
        Err(e) => Discovered::Legacy(format!(
            "server/discover failed with {} ({})",
            e.code, e.message
        )),
    }
}

/// A modern server's identity from its `DiscoverResult`.
pub fn discover_identity(result: &Value) -> ServerIdentity {
    ServerIdentity {
        protocol_version: era::MODERN_VERSION.to_owned(),
        server_info: result
            .pointer("/_meta")
            .and_then(|m| m.get(era::key::SERVER_INFO))
            .cloned()
            .unwrap_or(Value::Null),
        capabilities: result
            .get("capabilities")
            .cloned()
            .unwrap_or_else(|| json!({})),
        instructions: result
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_owned),
        pid: None,
        transport: None,
        mcpd_instance: era::instance_in(result),
        mcpd_behind: era::behind_in(result),
    }
}

/// Whether a refused `server/discover` asks for another try: a -32022 whose `supported`
/// list names the version mcpd speaks (the server refused its first choice, or wants it
/// asked again). The spec's client then retries at once with that version; so does mcpd,
/// once.
pub fn retry_with_supported(outcome: &Result<Value, ErrorObject>) -> bool {
    matches!(outcome, Err(e) if e.code == era::code::UNSUPPORTED_VERSION && lists_modern(e))
}

fn lists_modern(e: &ErrorObject) -> bool {
    e.data
        .as_ref()
        .and_then(|d| d.get("supported"))
        .and_then(Value::as_array)
        .is_some_and(|v| v.iter().any(|s| s == era::MODERN_VERSION))
}

/// Asks a modern server who it is (`server/discover`) on the serving connection. Over
/// HTTP with `auto`, `legacy_fallback` lets a legacy answer go on to `initialize`. A
/// -32022 that lists 2026-07-28 is answered by asking again at once, once; a second one
/// is an error.
pub async fn discover<S>(
    server: &str,
    inbound: &mut S,
    out: &budget::Sender<Outbound>,
    malformed: &mut u64,
    legacy_fallback: bool,
) -> Result<ServerIdentity, HandshakeError>
where
    S: Stream<Item = Inbound> + Unpin,
{
    let mut outcome = discover_exchange(server, inbound, out, malformed).await?;
    if retry_with_supported(&outcome) {
        tracing::info!(
            upstream = server,
            "server/discover refused with -32022 listing {}; asking again with it",
            era::MODERN_VERSION
        );
        outcome = discover_exchange(server, inbound, out, malformed).await?;
    }
    match classify(outcome) {
        Discovered::Modern(identity, reason) => {
            tracing::info!(upstream = server, "modern server: {reason}");
            let identity = match identity {
                Some(i) => *i,
                None => {
                    return Err(HandshakeError::era(format!(
                        "the server speaks 2026-07-28 but refused server/discover: {reason}"
                    )));
                }
            };
            let identity = refuse_self(identity)?;
            send(
                out,
                Outbound::Negotiated {
                    version: era::MODERN_VERSION.into(),
                },
            )
            .await?;
            Ok(identity)
        }
        Discovered::Legacy(reason) if legacy_fallback => {
            tracing::info!(
                upstream = server,
                "not a modern server ({reason}); using initialize"
            );
            initialize(server, inbound, out, malformed).await
        }
        Discovered::Legacy(reason) => Err(HandshakeError::era(format!(
            "the server does not speak 2026-07-28: {reason}"
        ))),
    }
}

/// One `server/discover` request and its answer: the server's outcome, an HTTP 4xx
/// without a JSON-RPC body as an error of that code, or why the exchange failed.
async fn discover_exchange<S>(
    server: &str,
    inbound: &mut S,
    out: &budget::Sender<Outbound>,
    malformed: &mut u64,
) -> Result<Result<Value, ErrorObject>, HandshakeError>
where
    S: Stream<Item = Inbound> + Unpin,
{
    let id = Id::from(INITIALIZE_ID);
    let request = Some(Sent::modern(INITIALIZE_ID, method::DISCOVER, None));
    send(
        out,
        Outbound::Message {
            line: discover_line(&id),
            request,
        },
    )
    .await?;
    let outcome = loop {
        let line = match inbound.next().await {
            None => return Err("the server closed its output during server/discover".into()),
            Some(Inbound::Closed { error, fatal }) => {
                return Err(HandshakeError {
                    message: error,
                    fatal,
                    era_mismatch: false,
                    never_serve: false,
                });
            }
            Some(Inbound::Ended { error, .. }) => {
                // An HTTP 4xx without a modern error body is a legacy server's answer;
                // anything else (5xx, a broken connection) says nothing about the era.
                match &error {
                    // 401/403 are about credentials, never about the era.
                    super::UpstreamError::Http {
                        status: 401 | 403,
                        excerpt,
                    } => {
                        return Err(HandshakeError {
                            message: super::refused_message(excerpt),
                            fatal: true,
                            era_mismatch: false,
                            never_serve: false,
                        });
                    }
                    super::UpstreamError::Http { status, .. } if (400..500).contains(status) => {
                        break Err(ErrorObject::new(i64::from(*status), error.to_string()));
                    }
                    _ => return Err(error.to_string().into()),
                }
            }
            Some(Inbound::Renewed) => continue,
            Some(Inbound::Frame(Frame::Line(line)) | Inbound::Related(Frame::Line(line), _)) => {
                line
            }
            Some(Inbound::Frame(_) | Inbound::Related(..)) => {
                *malformed += 1;
                continue;
            }
        };
        match jsonrpc::parse(&line) {
            Ok(Message::Response(r)) if r.id == id => break r.outcome,
            Ok(_) => tracing::debug!(
                upstream = server,
                "ignored a message during server/discover"
            ),
            Err(_) => *malformed += 1,
        }
    };
    Ok(outcome)
}
