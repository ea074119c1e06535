//! The legacy `initialize` handshake with a freshly started server.

use super::ServerIdentity;
use super::transport::{Inbound, Outbound, Sent};
use crate::framing::Frame;
use crate::jsonrpc::{self, ErrorObject, Id, Message, code};
use crate::protocol::{self, method};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// The id of the `initialize` request; mcpd's later request ids start above it.
pub const INITIALIZE_ID: u64 = 0;

fn initialize_params() -> Value {
    json!({
        "protocolVersion": protocol::LATEST_LEGACY,
        "capabilities": {},
        "clientInfo": { "name": "mcpd", "version": env!("CARGO_PKG_VERSION") },
    })
}

/// Why a handshake failed.
#[derive(Debug)]
pub struct HandshakeError {
    pub message: String,
    /// The server refused our credentials; retrying will not help.
    pub fatal: bool,
}

impl From<String> for HandshakeError {
    fn from(message: String) -> Self {
        HandshakeError {
            message,
            fatal: false,
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
    out: &mpsc::Sender<Outbound>,
    malformed: &mut u64,
) -> Result<ServerIdentity, HandshakeError>
where
    S: Stream<Item = Inbound> + Unpin,
{
    let id = Id::from(INITIALIZE_ID);
    let line = jsonrpc::request_line(&id, method::INITIALIZE, Some(&initialize_params()));
    let request = Some(Sent {
        id: INITIALIZE_ID,
        method: method::INITIALIZE.into(),
    });
    send(out, Outbound::Message { line, request }).await?;
    loop {
        let line = match inbound.next().await {
            None => return Err("the server closed its output during initialize".into()),
            Some(Inbound::Closed { error, fatal }) => {
                return Err(HandshakeError {
                    message: error,
                    fatal,
                });
            }
            Some(Inbound::Ended { error, .. }) => return Err(error.to_string().into()),
            Some(Inbound::Renewed) => continue,
            Some(Inbound::Frame(Frame::Line(line))) => line,
            Some(Inbound::Frame(Frame::TooLong | Frame::NotUtf8)) => {
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
                let identity = identity(r.outcome)?;
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

/// Reads what a server said about itself in its `InitializeResult`.
pub fn identity(outcome: Result<Value, ErrorObject>) -> Result<ServerIdentity, String> {
    let result = outcome.map_err(|e| {
        format!(
            "the server rejected initialize: {} (code {})",
            e.message, e.code
        )
    })?;
    let version = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or("the initialize result has no protocolVersion")?;
    if !protocol::is_legacy_version(version) {
        return Err(format!(
            "the server answered protocol version {version:?}, which mcpd does not speak (it speaks {})",
            protocol::LEGACY_VERSIONS.join(", ")
        ));
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
    })
}

async fn send(out: &mpsc::Sender<Outbound>, msg: Outbound) -> Result<(), String> {
    out.send(msg)
        .await
        .map_err(|_| "the connection to the server closed during initialize".to_owned())
}
