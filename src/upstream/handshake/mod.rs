//! The handshake with a freshly started server.
//!
//! The legacy `initialize` (here), `server/discover` (`discover.rs`), and finding a local
//! server's era on its own process (`in_place.rs`).

mod discover;
mod in_place;

pub(super) use discover::discovered;
pub use discover::{Discovered, classify, discover, discover_line, retry_with_supported};
pub use in_place::in_place;

use super::ServerIdentity;
use super::transport::{Inbound, Outbound, Sent};
use crate::upstream::refusal::ServerRequestRefusal;
use futures::{Stream, StreamExt};
use mcpd_runtime::budget;
use mcpd_runtime::framing::Frame;
use mcpd_wire::jsonrpc::{self, ErrorObject, Id, Message};
use mcpd_wire::protocol::{self, era, method};
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
    /// The process ended when asked `server/discover` before it answered: a legacy
    /// server that quits on any first request but `initialize`. Its next start speaks
    /// `initialize` at once; this says why.
    pub legacy_next: Option<String>,
}

impl HandshakeError {
    fn era(message: String) -> Self {
        HandshakeError {
            era_mismatch: true,
            ..message.into()
        }
    }

    /// The transport closed: `fatal` when the server refused mcpd's credentials.
    pub(super) fn closed(message: String, fatal: bool) -> Self {
        HandshakeError {
            fatal,
            ..message.into()
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
            legacy_next: None,
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
    let line = initialize_line(&id);
    let request = Some(Sent::new(INITIALIZE_ID, method::INITIALIZE));
    send(out, Outbound::Message { line, request }).await?;
    loop {
        let line = match inbound.next().await {
            None => return Err("the server closed its output during initialize".into()),
            Some(Inbound::Closed { error, fatal }) => {
                return Err(HandshakeError::closed(error, fatal));
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
            Ok(Message::Response(r)) if r.id == id => return initialized(out, r.outcome).await,
            Ok(Message::Request(r)) => answer_early_request(out, &r).await?,
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

/// The `initialize` request line with id `id`.
pub fn initialize_line(id: &Id) -> String {
    jsonrpc::request_line(id, method::INITIALIZE, Some(&initialize_params()))
}

/// The server answered `initialize`: its identity, once the version is agreed and
/// `notifications/initialized` sent.
pub(super) async fn initialized(
    out: &budget::Sender<Outbound>,
    outcome: Result<Value, ErrorObject>,
) -> Result<ServerIdentity, HandshakeError> {
    let identity = refuse_self(identity(outcome).map_err(|e| HandshakeError::era(e.to_string()))?)?;
    let version = identity.protocol_version.clone();
    send(out, Outbound::Negotiated { version }).await?;
    let line = jsonrpc::notification_line(method::INITIALIZED, None);
    let request = None;
    send(out, Outbound::Message { line, request }).await?;
    Ok(identity)
}

/// A request the server sent before the handshake ended: a ping is answered, anything
/// else refused (the spec allows no more before initialization).
pub(super) async fn answer_early_request(
    out: &budget::Sender<Outbound>,
    r: &jsonrpc::Request,
) -> Result<(), String> {
    let line = if r.method == method::PING {
        jsonrpc::result_line(&r.id, &json!({}))
    } else {
        let e = ServerRequestRefusal::BeforeInitialization(r.method.clone()).to_error_object();
        jsonrpc::error_line(Some(&r.id), &e)
    };
    let request = None;
    send(out, Outbound::Message { line, request }).await
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
    let server_info = result.get("serverInfo").cloned().unwrap_or(Value::Null);
    Ok(answered(version, server_info, &result))
}

/// A server's identity from its handshake answer `result`, in either era: what both
/// answers carry the same way.
fn answered(version: &str, server_info: Value, result: &Value) -> ServerIdentity {
    ServerIdentity {
        protocol_version: version.to_owned(),
        server_info,
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
        era_reason: None,
    }
}

/// A server that answers with this daemon's own instance id is this daemon reached
/// through its own socket (`mcpd connect` as a server entry): serving it would list
/// every tool again under its prefix, and again on every change. Retrying cannot help.
pub fn refuse_self(identity: ServerIdentity) -> Result<ServerIdentity, HandshakeError> {
    if identity.mcpd_instance.as_deref() == Some(era::instance()) {
        return Err(HandshakeError {
            never_serve: true,
            ..HandshakeError::closed("this server is this mcpd daemon itself, reached through its own socket; remove this [servers] entry (an agent uses mcpd through `mcpd connect`, mcpd does not use itself)".into(), true)
        });
    }
    // Another daemon that reaches this one through its own servers: each would list the
    // other's tools, its own among them, again and again.
    if identity.mcpd_behind.iter().any(|i| i == era::instance()) {
        return Err(HandshakeError {
            never_serve: true,
            ..HandshakeError::closed("this server is another mcpd daemon that has this daemon among its own servers (a loop: each would serve the other's tools back to it); remove one of the two entries".into(), true)
        });
    }
    Ok(identity)
}

pub(super) async fn send(out: &budget::Sender<Outbound>, msg: Outbound) -> Result<(), String> {
    out.send(msg)
        .await
        .map_err(|_| "the connection to the server closed during initialize".to_owned())
}
