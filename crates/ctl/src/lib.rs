//! The client side of the socket: `mcpd ctl` commands.
//!
//! `mcpd connect`'s stdio bridge is in `bridge.rs`.
//!
//! Also what the client shares with the daemon, so that neither names the other:
//! `control_api` (the control methods' names and shapes), `paths` (where the socket is),
//! `stdout` and `visible` (what reaches a terminal). The daemon depends on this crate for
//! those; this crate depends on nothing of the daemon.

use crate::control_api::ServerStatus;
use crate::stdout::{Out, OutputError};
use mcpd_wire::jsonrpc::{self, Id, Message};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

pub mod control_api;
pub mod paths;
pub mod stdout;
pub mod visible;

mod agents;
mod bridge;
mod launch;
mod login;
mod pins;
pub mod secret;
mod status;
mod table;
mod tools;
mod ui;
pub mod upgrade;

pub use agents::{agents, cancel};
pub use bridge::{Link, bridge};
pub use login::{login, logout};
pub use pins::{approve, diff, forget};
pub use status::status;
pub use tools::{search, tools};
pub use ui::ui;

/// Member `key` of a JSON object, or null: reading a field of the daemon's answer
/// never fails, whatever it sent.
fn at<'a>(value: &'a Value, key: &str) -> &'a Value {
    value.get(key).unwrap_or(&Value::Null)
}

/// How long a ctl command waits for the daemon.
const CTL_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// No daemon answers at any place its socket could be: `tried` names each with why.
    #[error(
        "mcpd is not running: no daemon socket at {tried}; start it with `mcpd serve` or `systemctl --user start mcpd` (or name the socket with --socket or $MCPD_SOCKET)"
    )]
    NotRunning { tried: String },
    #[error("the daemon did not answer within {0:?}")]
    Timeout(Duration),
    #[error("talking to the daemon failed: {0}")]
    Io(#[from] std::io::Error),
    /// Printing the answer failed (`main` ends quietly when the reader left).
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("the daemon closed the connection without answering")]
    Closed,
    #[error("{message} (code {code})")]
    Rpc { code: i64, message: String },
    #[error("unexpected answer from the daemon: {0}")]
    Unexpected(String),
    #[error("the tool reported an error")]
    ToolError,
    #[error("the login failed: {0}")]
    LoginFailed(String),
    #[error("the new configuration was rejected; the previous one stays in force:\n{0}")]
    Rejected(String),
}

pub async fn connect_socket(path: &Path) -> Result<UnixStream, CtlError> {
    UnixStream::connect(path)
        .await
        .map_err(|source| not_running(path, &source))
}

/// The socket file at `path` is there but nobody accepts on it.
fn not_running(path: &Path, source: &std::io::Error) -> CtlError {
    CtlError::NotRunning {
        tried: format!("{} ({source})", path.display()),
    }
}

/// The daemon's socket among `candidates` (`paths::socket_candidates`): the first that
/// exists; when none does, the error names every place tried.
pub fn locate(candidates: &[PathBuf]) -> Result<PathBuf, CtlError> {
    crate::paths::find_socket(candidates).map_err(|tried| CtlError::NotRunning {
        tried: crate::paths::describe_tried(&tried),
    })
}

/// Sends one request to the daemon and returns its result.
pub async fn request(
    socket: &Path,
    method: &str,
    params: Option<Value>,
) -> Result<Value, CtlError> {
    request_within(socket, method, params, CTL_TIMEOUT).await
}

/// Sends one request and waits at most `wait` for its result.
async fn request_within(
    socket: &Path,
    method: &str,
    params: Option<Value>,
    wait: Duration,
) -> Result<Value, CtlError> {
    let stream = connect_socket(socket).await?;
    tokio::time::timeout(wait, exchange(stream, method, params))
        .await
        .map_err(|_| CtlError::Timeout(wait))?
}

/// A tool call may take as long as its server's `timeout`, which the daemon enforces.
const CALL_WAIT: Duration = Duration::from_secs(3600);

async fn exchange(
    stream: UnixStream,
    method: &str,
    params: Option<Value>,
) -> Result<Value, CtlError> {
    let (read, mut write) = stream.into_split();
    let id = Id::from(1);
    let line = jsonrpc::request_line(&id, method, params.as_ref()) + "\n";
    // A daemon that refuses the connection (too many agents, a user it does not serve)
    // says why and closes at once, which can break this write: read its reason anyway.
    let written = write.write_all(line.as_bytes()).await;
    let mut lines = BufReader::new(read).lines();
    if let Err(e) = written {
        return match lines.next_line().await {
            Ok(Some(line)) => Err(refusal(&line).unwrap_or(CtlError::Io(e))),
            _ => Err(CtlError::Io(e)),
        };
    }
    while let Some(line) = lines.next_line().await? {
        match jsonrpc::parse(&line) {
            Ok(Message::Response(r)) if r.id == id => {
                return r.outcome.map_err(|e| CtlError::Rpc {
                    code: e.code,
                    message: e.message,
                });
            }
            Ok(_) => continue,
            Err(_) => {
                // A refusal (e.g. the agent cap) comes as an error with a null id.
                let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                if let Some(e) = v.get("error") {
                    return Err(CtlError::Rpc {
                        code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: e
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                    });
                }
                return Err(CtlError::Unexpected(line));
            }
        }
    }
    Err(CtlError::Closed)
}

/// The daemon's answer as it came, pretty-printed (`--json`).
fn print_json(out: &mut Out, result: &Value) -> Result<(), CtlError> {
    writeln!(
        out,
        "{}",
        serde_json::to_string_pretty(result).unwrap_or_default()
    )?;
    Ok(())
}

/// The error a daemon sent instead of an answer (a refused connection), if the line is one.
fn refusal(line: &str) -> Option<CtlError> {
    let v: Value = serde_json::from_str(line).ok()?;
    let e = v.get("error")?;
    Some(CtlError::Rpc {
        code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
        message: e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
    })
}

/// `mcpd ctl reload`: the daemon re-reads its config file and applies what changed.
pub async fn reload(socket: &Path) -> Result<(), CtlError> {
    let summary = match request(socket, "mcpd/reload", None).await {
        Ok(s) => s,
        Err(CtlError::Rpc { message, .. }) => return Err(CtlError::Rejected(message)),
        Err(e) => return Err(e),
    };
    let names = |k: &str| {
        at(&summary, k)
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "none".into())
    };
    let mut out = Out::lock();
    writeln!(
        out,
        "reloaded: added {}; removed {}; changed {}; renamed {}; {} unchanged",
        names("added"),
        names("removed"),
        names("changed"),
        names("renamed"),
        at(&summary, "unchanged")
    )?;
    Ok(())
}

pub async fn control(socket: &Path, method: &str, name: &str) -> Result<(), CtlError> {
    request(socket, method, Some(json!({ "name": name }))).await?;
    Ok(())
}

/// `mcpd ctl call TOOL ARGS`: calls a tool as an agent would and prints the result's text
/// blocks (other blocks as JSON), then its `structuredContent` unless a text block
/// already said it (servers are asked to repeat it as JSON text, and most do).
pub async fn call(
    socket: &Path,
    tool: &str,
    args: serde_json::Map<String, Value>,
) -> Result<(), CtlError> {
    let params = json!({ "name": tool, "arguments": args });
    let result = request_within(
        socket,
        mcpd_wire::protocol::method::TOOLS_CALL,
        Some(params),
        CALL_WAIT,
    )
    .await
    .map_err(|e| match e {
        // The daemon's answer speaks to agents; this one to a person.
        CtlError::Rpc { code, message } => CtlError::Rpc {
            code,
            message: message.replace(
                crate::control_api::UNKNOWN_TOOL_HINT,
                crate::control_api::UNKNOWN_TOOL_HINT_CLI,
            ),
        },
        e => e,
    })?;
    let mut out = Out::lock();
    let structured = result.get("structuredContent");
    let mut repeated = false;
    for block in at(&result, "content").as_array().into_iter().flatten() {
        match at(block, "text").as_str() {
            Some(text) if *at(block, "type") == "text" => {
                repeated |= structured.is_some_and(|s| says(text, s));
                writeln!(out, "{text}")?;
            }
            _ => writeln!(out, "{block}")?,
        }
    }
    if let Some(structured) = structured.filter(|_| !repeated) {
        writeln!(out, "{structured}")?;
    }
    if *at(&result, "isError") == Value::Bool(true) {
        return Err(CtlError::ToolError);
    }
    Ok(())
}

/// Whether `text` is the JSON of `value` (in any layout).
fn says(text: &str, value: &Value) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| v == *value)
}

/// One server's status row, or a clear error naming the configured servers.
async fn server_row(socket: &Path, name: &str) -> Result<ServerStatus, CtlError> {
    let result = request(socket, mcpd_wire::protocol::method::MCPD_STATUS, None).await?;
    let servers: Vec<ServerStatus> = serde_json::from_value(at(&result, "servers").clone())
        .map_err(|e| CtlError::Unexpected(format!("status servers: {e}")))?;
    let names: Vec<String> = servers.iter().map(|s| s.name.clone()).collect();
    servers
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| CtlError::Rpc {
            code: mcpd_wire::jsonrpc::code::INVALID_PARAMS,
            message: format!(
                "no server named '{name}' (configured: {})",
                names.join(", ")
            ),
        })
}

/// The lines of `new` after the last of `seen` (both are windows of one growing log).
fn fresh<'a>(seen: &[String], new: &'a [String]) -> &'a [String] {
    match seen.last() {
        None => new,
        Some(last) => match new.iter().rposition(|l| l == last) {
            Some(i) => new.get(i + 1..).unwrap_or_default(),
            None => new,
        },
    }
}

/// `mcpd ctl logs NAME [-n N] [--follow]`: the server's lifecycle events and stderr.
pub async fn logs(socket: &Path, name: &str, lines: usize, follow: bool) -> Result<(), CtlError> {
    let row = server_row(socket, name).await?;
    let last = |v: &[String]| -> Vec<String> {
        v.iter()
            .skip(v.len().saturating_sub(lines))
            .cloned()
            .collect()
    };
    let mut events = last(&row.history);
    let mut stderr = last(&row.stderr_tail);
    {
        let mut out = Out::lock();
        for e in &events {
            writeln!(out, "event | {e}")?;
        }
        for l in &stderr {
            writeln!(out, "stderr| {l}")?;
        }
    }
    if !follow {
        return Ok(());
    }
    // Until interrupted (Ctrl-C ends the process).
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let row = server_row(socket, name).await?;
        let mut out = Out::lock();
        for e in fresh(&events, &row.history) {
            writeln!(out, "event | {e}")?;
        }
        for l in fresh(&stderr, &row.stderr_tail) {
            writeln!(out, "stderr| {l}")?;
        }
        out.flush()?;
        events = row.history;
        stderr = row.stderr_tail;
    }
}

/// `mcpd ctl http-token`: the HTTP listener's bearer token (with `url`, its URL first).
pub async fn http_token(socket: &Path, url: bool) -> Result<(), CtlError> {
    let result = request(socket, "mcpd/http-token", None).await?;
    let mut out = Out::lock();
    let token = at(&result, "token").as_str().unwrap_or_default();
    if url {
        writeln!(
            out,
            "{} {token}",
            at(&result, "url").as_str().unwrap_or_default()
        )?;
    } else {
        writeln!(out, "{token}")?;
    }
    Ok(())
}

/// `mcpd ctl metrics`: the daemon's counters in Prometheus text format.
pub async fn metrics(socket: &Path) -> Result<(), CtlError> {
    let result = request(socket, "mcpd/metrics", None).await?;
    let mut out = Out::lock();
    write!(out, "{}", at(&result, "text").as_str().unwrap_or(""))?;
    Ok(())
}
