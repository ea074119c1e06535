//! An agent connection inside the daemon, for the dashboard's try-it form.
//!
//! A tool is called through the same connection actor as any agent's (the same names,
//! checks, limits and metrics), the call shows in `ctl agents` with its duration while it
//! runs and can be cancelled there, and the connection closes when the answer came or the
//! page gave up.

use super::AgentContext;
use mcpd_ctl::control_api::AgentInfo;
use mcpd_runtime::framing::Frame;
use mcpd_wire::jsonrpc::{self, Id};
use serde_json::{Value, json};
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// The request id of the one call.
const CALL: u64 = 1;

/// Why a call from the dashboard got no answer.
#[derive(Debug, thiserror::Error)]
pub enum LocalCallError {
    #[error("no answer within {0:?}; the call was cancelled")]
    Timeout(Duration),
    #[error("the connection ended without an answer (mcpd may be stopping)")]
    Ended,
}

/// Calls `tool` (its qualified name) with `arguments` as an agent named `client` would,
/// working in `project` when given (as `mcpd connect` started there: a project server's
/// call goes to that project's instance), and returns the JSON-RPC answer (a `result`
/// or an `error` member). Dropping the future closes the connection, which cancels the
/// call upstream.
pub async fn call_tool(
    ctx: &AgentContext,
    client: &str,
    tool: &str,
    arguments: Value,
    project: Option<&str>,
    within: Duration,
    shutdown: CancellationToken,
) -> Result<Value, LocalCallError> {
    // The daemon's user, in the daemon itself: no peer process to look at.
    let ctx = ctx.with_peer(super::Peer::inside(ctx.access.own));
    let agent = ctx.daemon.next_agent.fetch_add(1, Ordering::Relaxed) + 1;
    let (outbox, mut out_rx) = mcpd_runtime::outbox::Outbox::new(ctx.queue, ctx.queue_bytes);
    let (answer_tx, answer_rx) = oneshot::channel::<String>();
    // The connection's writer: it waits for the call's answer and drops the rest (the
    // initialize result, notifications).
    let writer = mcpd_runtime::tracker::spawn(async move {
        let mut answer = Some(answer_tx);
        let mut bytes = 0u64;
        while let Some(out) = out_rx.recv().await {
            let (out, _charge) = out.split();
            bytes += out.line.len() as u64 + 1;
            if out.about == Some(Id::from(CALL))
                && let Some(tx) = answer.take()
            {
                let _ = tx.send(out.line); // the page may have gone
            }
        }
        Ok(bytes)
    });
    let (frames_tx, mut frames_rx) = mpsc::channel::<Frame>(4);
    let frames = futures::stream::poll_fn(move |cx| {
        frames_rx
            .poll_recv(cx)
            .map(|f| f.map(Ok::<_, std::io::Error>))
    });
    let seed = AgentInfo {
        agent,
        transport: Some("dashboard".into()),
        ..Default::default()
    };
    mcpd_runtime::tracker::spawn(super::conn::run(
        frames, outbox, writer, seed, ctx, shutdown,
    ));
    let init = json!({
        "protocolVersion": mcpd_wire::protocol::LATEST_LEGACY,
        "capabilities": {},
        "clientInfo": {"name": client, "version": env!("CARGO_PKG_VERSION")},
    });
    let call = json!({"name": tool, "arguments": arguments});
    let claim = project.map(|p| {
        let path = json!({ "path": p });
        jsonrpc::notification_line(mcpd_ctl::control_api::PROJECT_NOTIFICATION, Some(&path))
    });
    let lines = claim.into_iter().chain([
        jsonrpc::request_line(
            &Id::from(0),
            mcpd_wire::protocol::method::INITIALIZE,
            Some(&init),
        ),
        jsonrpc::notification_line(mcpd_wire::protocol::method::INITIALIZED, None),
        jsonrpc::request_line(
            &Id::from(CALL),
            mcpd_wire::protocol::method::TOOLS_CALL,
            Some(&call),
        ),
    ]);
    for line in lines {
        frames_tx
            .send(Frame::Line(line))
            .await
            .map_err(|_| LocalCallError::Ended)?;
    }
    // `frames_tx` is held until the answer: dropping it closes the connection.
    let answer = match tokio::time::timeout(within, answer_rx).await {
        Err(_) => return Err(LocalCallError::Timeout(within)),
        Ok(Err(_)) => return Err(LocalCallError::Ended),
        Ok(Ok(line)) => line,
    };
    drop(frames_tx);
    serde_json::from_str(&answer).map_err(|_| LocalCallError::Ended)
}
