//! A try-it call to a project's instance: an agent connection of the page's own over the daemon's socket that names the project before it initializes, as `mcpd connect` started in that directory does, so the call goes through the same checks, names, limits and metrics as any agent's and reaches that project's instance.
//!
//! `agent::local`'s in-daemon connection names no project, and a project server is
//! reached only through an agent's project; the socket is the agents' way in, and its
//! rules (the daemon's user, not a server's process) hold for the daemon itself.

use crate::control_api::PROJECT_NOTIFICATION;
use crate::jsonrpc::{self, Id};
use futures::StreamExt;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio_util::codec::{FramedRead, LinesCodec};
use tokio_util::sync::CancellationToken;

/// The request id of the one call.
const CALL: u64 = 1;

/// Why a call to a project's instance got no answer.
#[derive(Debug, thiserror::Error)]
pub(super) enum ProjectCallError {
    #[error("the daemon's socket {path} did not take the call: {source}")]
    Socket {
        path: String,
        source: std::io::Error,
    },
    #[error("no answer within {0:?}; the call was cancelled")]
    Timeout(Duration),
    #[error("the connection ended without an answer (mcpd may be stopping)")]
    Ended,
}

/// What the call is, besides where it goes.
pub(super) struct Call<'a> {
    /// The page's name for itself (`clientInfo.name`).
    pub(super) client: &'a str,
    /// The qualified tool name.
    pub(super) tool: &'a str,
    pub(super) arguments: Value,
    /// The longest line read back (the daemon's own limit on a line to an agent).
    pub(super) max_line: usize,
    /// How long the page waits; then the connection is closed, which cancels the call.
    pub(super) within: Duration,
}

/// Calls `call.tool` in `project`'s instance through the daemon at `socket`; returns the
/// JSON-RPC answer (a `result` or an `error` member). Returning closes the connection,
/// which cancels a call still running upstream.
pub(super) async fn call_tool(
    socket: &Path,
    project: &str,
    call: Call<'_>,
    shutdown: CancellationToken,
) -> Result<Value, ProjectCallError> {
    let refused = |source| ProjectCallError::Socket {
        path: socket.display().to_string(),
        source,
    };
    let stream = UnixStream::connect(socket).await.map_err(refused)?;
    let (read, mut write) = stream.into_split();
    let mut answers = FramedRead::new(read, LinesCodec::new_with_max_length(call.max_line));
    let init = json!({
        "protocolVersion": crate::protocol::LATEST_LEGACY,
        "capabilities": {},
        "clientInfo": {"name": call.client, "version": env!("CARGO_PKG_VERSION")},
    });
    let params = json!({"name": call.tool, "arguments": call.arguments});
    let lines = [
        jsonrpc::notification_line(PROJECT_NOTIFICATION, Some(&json!({"path": project}))),
        jsonrpc::request_line(
            &Id::from(0),
            crate::protocol::method::INITIALIZE,
            Some(&init),
        ),
        jsonrpc::notification_line(crate::protocol::method::INITIALIZED, None),
        jsonrpc::request_line(
            &Id::from(CALL),
            crate::protocol::method::TOOLS_CALL,
            Some(&params),
        ),
    ];
    let talk = async {
        // Written whole before anything is read: the daemon reads an agent's lines
        // whatever it is writing, and what it writes before the answer (the initialize
        // result) fits in the socket's buffer.
        for line in lines {
            write
                .write_all(format!("{line}\n").as_bytes())
                .await
                .map_err(|_| ProjectCallError::Ended)?;
        }
        while let Some(line) = answers.next().await {
            let Ok(line) = line else {
                return Err(ProjectCallError::Ended);
            };
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            // The answer: the call's id and no method (a request of the daemon's could
            // carry the same id).
            if message.get("id") == Some(&json!(CALL)) && message.get("method").is_none() {
                return Ok(message);
            }
        }
        Err(ProjectCallError::Ended)
    };
    tokio::select! {
        answer = tokio::time::timeout(call.within, talk) => {
            answer.unwrap_or(Err(ProjectCallError::Timeout(call.within)))
        }
        () = shutdown.cancelled() => Err(ProjectCallError::Ended),
    }
}
