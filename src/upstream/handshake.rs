//! The legacy `initialize` handshake with a freshly started server.

use super::ServerIdentity;
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

/// Runs `initialize` / `notifications/initialized`. The caller bounds it in time and
/// watches the process. Lines that are not the answer are handled as the spec allows
/// before initialization: pings are answered, the rest is logged and skipped.
pub async fn initialize<S>(
    server: &str,
    frames: &mut S,
    out: &mpsc::Sender<String>,
    malformed: &mut u64,
) -> Result<ServerIdentity, String>
where
    S: Stream<Item = std::io::Result<Frame>> + Unpin,
{
    let id = Id::from(INITIALIZE_ID);
    send(
        out,
        jsonrpc::request_line(&id, method::INITIALIZE, Some(&initialize_params())),
    )
    .await?;
    loop {
        let line = match frames.next().await {
            None => return Err("the server closed its output during initialize".into()),
            Some(Err(e)) => {
                return Err(format!(
                    "reading from the server failed during initialize: {e}"
                ));
            }
            Some(Ok(Frame::Line(line))) => line,
            Some(Ok(Frame::TooLong | Frame::NotUtf8)) => {
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
                send(out, jsonrpc::notification_line(method::INITIALIZED, None)).await?;
                return Ok(identity);
            }
            Ok(Message::Request(r)) if r.method == method::PING => {
                send(out, jsonrpc::result_line(&r.id, &json!({}))).await?;
            }
            Ok(Message::Request(r)) => {
                let e = ErrorObject::new(
                    code::METHOD_NOT_FOUND,
                    format!("{} is not available before initialization", r.method),
                );
                send(out, jsonrpc::error_line(Some(&r.id), &e)).await?;
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

fn identity(outcome: Result<Value, ErrorObject>) -> Result<ServerIdentity, String> {
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
    })
}

async fn send(out: &mpsc::Sender<String>, line: String) -> Result<(), String> {
    out.send(line)
        .await
        .map_err(|_| "the server's stdin closed during initialize".to_owned())
}
