//! The client side of the socket: `mcpd ctl` commands; `mcpd connect`'s stdio bridge is in `bridge.rs`.

use crate::jsonrpc::{self, Id, Message};
use crate::stdout::{Out, OutputError};
use crate::supervisor::ServerStatus;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

mod bridge;
mod login;
mod table;
mod tools;

pub use bridge::bridge;
pub use login::{login, logout};
pub use tools::{ALL_TOOLS, search, tools};

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

pub async fn status(socket: &Path, as_json: bool) -> Result<(), CtlError> {
    let result = request(socket, crate::protocol::method::MCPD_STATUS, None).await?;
    let mut out = Out::lock();
    if as_json {
        return print_json(&mut out, &result);
    }
    let servers: Vec<ServerStatus> = serde_json::from_value(at(&result, "servers").clone())
        .map_err(|e| CtlError::Unexpected(format!("status servers: {e}")))?;
    let d = at(&result, "daemon");
    writeln!(
        out,
        "mcpd {} pid {} up {} socket {} agents {}",
        at(d, "version").as_str().unwrap_or("?"),
        at(d, "pid"),
        human_secs(at(d, "uptime_secs").as_f64()),
        at(d, "socket").as_str().unwrap_or("?"),
        at(d, "agents"),
    )?;
    if let Some(url) = at(d, "http").as_str() {
        writeln!(out, "serving HTTP at {url}")?;
    }
    if servers.is_empty() {
        writeln!(
            out,
            "no servers configured; add a [servers.NAME] table to the config file (see docs/configuration.md)"
        )?;
        return Ok(());
    }
    // Names are up to 32 characters (an agent's instance adds `@N`): the column is as
    // wide as the longest.
    let w = servers
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(20);
    writeln!(
        out,
        "\n{:<w$} {:<11} {:<15} {:<7} {:<11} {:>8} {:>6} {:>9} {:>8} {:>8}",
        "SERVER",
        "STATE",
        "TRANSPORT",
        "ERA",
        "PROTOCOL",
        "PID",
        "TOOLS",
        "IN-FLIGHT",
        "RESTARTS",
        "UPTIME"
    )?;
    // Colour only for a person at a terminal; pipes and files get plain text.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stdout());
    for s in &servers {
        let state = if s.probing {
            "probing"
        } else {
            s.state.as_str()
        };
        let state = paint(state, s.state, colour);
        writeln!(
            out,
            "{:<w$} {} {:<15} {:<7} {:<11} {:>8} {:>6} {:>9} {:>8} {:>8}",
            s.name,
            state,
            s.transport,
            s.era.as_deref().unwrap_or("-"),
            s.protocol_version.as_deref().unwrap_or("-"),
            s.pid.map_or("-".into(), |p| p.to_string()),
            s.tools,
            s.in_flight,
            s.restarts,
            human_secs(s.uptime_secs),
        )?;
    }
    for s in &servers {
        let mut notes = Vec::new();
        if let Some(t) = s.next_retry_secs {
            notes.push(format!("next retry in {}", human_secs(Some(t))));
        }
        if let Some(a) = &s.auth {
            notes.extend(auth_note(&s.name, a));
        }
        if let Some(e) = &s.last_error {
            notes.push(format!("last error: {e}"));
        }
        if let Some(e) = &s.last_exit {
            notes.push(format!("last exit: {e}"));
        }
        if let Some(e) = &s.catalog_error {
            notes.push(format!("catalog: {e}"));
        }
        for c in &s.name_conflicts {
            notes.push(format!(
                "name conflict: {} {} is held by '{}'; this server's is not listed",
                c.kind, c.name, c.held_by
            ));
        }
        if let Some(r) = &s.era_reason
            && s.state != crate::supervisor::ServerState::Ready
        {
            notes.push(format!("protocol: {r}"));
        }
        if !notes.is_empty() {
            writeln!(out, "\n{}:", s.name)?;
            for n in notes {
                writeln!(out, "  {n}")?;
            }
            if s.state != crate::supervisor::ServerState::Ready {
                for line in s.stderr_tail.iter().rev().take(5).rev() {
                    writeln!(out, "  stderr| {line}")?;
                }
            }
        }
    }
    Ok(())
}

/// The auth lines of a server's status: its login, never a token.
fn auth_note(name: &str, a: &crate::oauth::credential::AuthView) -> Vec<String> {
    use crate::oauth::credential::AuthState;
    let mut notes = Vec::new();
    let mut about = Vec::new();
    if let Some(i) = &a.issuer {
        about.push(format!("issuer {i}"));
    }
    if let Some(s) = a.scopes.as_deref().filter(|s| !s.is_empty()) {
        about.push(format!("scopes {s}"));
    }
    let about = if about.is_empty() {
        String::new()
    } else {
        format!("; {}", about.join(", "))
    };
    match &a.state {
        AuthState::None => {}
        AuthState::LoggedIn { expires_at } => {
            let left = expires_at.map(|t| {
                let now = crate::oauth::store::epoch_secs(std::time::SystemTime::now());
                t.saturating_sub(now)
            });
            let when = match left {
                None => "no expiry given".to_owned(),
                Some(0) => "expired; refreshed on next use".to_owned(),
                Some(s) => format!("expires in {}", human_secs(Some(s as f64))),
            };
            notes.push(format!("auth: logged in ({when}){about}"));
        }
        AuthState::NeedsLogin(why) => {
            notes.push(format!(
                "auth: needs-login ({why}): run `mcpd ctl login {name}`"
            ));
        }
    }
    if a.pending {
        notes.push("auth: login pending (waiting for the browser's redirect)".into());
    }
    if !a.more_scope.is_empty() {
        notes.push(format!(
            "auth: the server asked for more scope ({}): run `mcpd ctl login {name}`",
            a.more_scope.join(" ")
        ));
    }
    notes
}

fn human_secs(secs: Option<f64>) -> String {
    match secs {
        None => "-".into(),
        Some(s) if s < 60.0 => format!("{s:.0}s"),
        Some(s) if s < 3600.0 => format!("{}m{}s", (s / 60.0) as u64, (s % 60.0) as u64),
        Some(s) => format!("{}h{}m", (s / 3600.0) as u64, ((s % 3600.0) / 60.0) as u64),
    }
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

/// The state column, padded to 11 columns, coloured when `colour` is on.
fn paint(text: &str, state: crate::supervisor::ServerState, colour: bool) -> String {
    use crate::supervisor::ServerState as S;
    let padded = format!("{text:<11}");
    if !colour {
        return padded;
    }
    let code = match state {
        S::Ready => "32",
        S::Starting | S::Idle => "36",
        S::Backoff => "33",
        S::Failed => "31",
        S::Stopped | S::Disabled => "2",
        S::NeedsLogin => "35",
    };
    format!("\x1b[{code}m{padded}\x1b[0m")
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
/// blocks (other blocks as JSON).
pub async fn call(
    socket: &Path,
    tool: &str,
    args: serde_json::Map<String, Value>,
) -> Result<(), CtlError> {
    let params = json!({ "name": tool, "arguments": args });
    let result = request_within(
        socket,
        crate::protocol::method::TOOLS_CALL,
        Some(params),
        CALL_WAIT,
    )
    .await
    .map_err(|e| match e {
        // The daemon's answer speaks to agents; this one to a person.
        CtlError::Rpc { code, message } => CtlError::Rpc {
            code,
            message: message.replace(
                crate::errors::UNKNOWN_TOOL_HINT,
                crate::errors::UNKNOWN_TOOL_HINT_CLI,
            ),
        },
        e => e,
    })?;
    let mut out = Out::lock();
    for block in at(&result, "content").as_array().into_iter().flatten() {
        match at(block, "text").as_str() {
            Some(text) if *at(block, "type") == "text" => writeln!(out, "{text}")?,
            _ => writeln!(out, "{block}")?,
        }
    }
    if let Some(structured) = result.get("structuredContent") {
        writeln!(out, "{structured}")?;
    }
    if *at(&result, "isError") == Value::Bool(true) {
        return Err(CtlError::ToolError);
    }
    Ok(())
}

/// One server's status row, or a clear error naming the configured servers.
async fn server_row(socket: &Path, name: &str) -> Result<ServerStatus, CtlError> {
    let result = request(socket, crate::protocol::method::MCPD_STATUS, None).await?;
    let servers: Vec<ServerStatus> = serde_json::from_value(at(&result, "servers").clone())
        .map_err(|e| CtlError::Unexpected(format!("status servers: {e}")))?;
    let names: Vec<String> = servers.iter().map(|s| s.name.clone()).collect();
    servers
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| CtlError::Rpc {
            code: crate::jsonrpc::code::INVALID_PARAMS,
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

/// `mcpd ctl agents [--json]`: who is connected, and doing what.
pub async fn agents(socket: &Path, as_json: bool) -> Result<(), CtlError> {
    let result = request(socket, "mcpd/agents", None).await?;
    let mut out = Out::lock();
    if as_json {
        return print_json(&mut out, &result);
    }
    let agents: Vec<crate::agent::roster::AgentInfo> =
        serde_json::from_value(at(&result, "agents").clone())
            .map_err(|e| CtlError::Unexpected(format!("agents: {e}")))?;
    use table::Align::{Left, Right};
    let mut rows = vec![
        [
            "AGENT",
            "PID",
            "EXECUTABLE",
            "CLIENT",
            "ERA",
            "IN-FLIGHT",
            "PROFILE",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for a in &agents {
        let client = match (&a.client, &a.client_version) {
            (Some(c), Some(v)) => format!("{c} {v}"),
            (Some(c), None) => c.clone(),
            _ => "-".into(),
        };
        // HTTP agents have no process to show; their transport and address stand in.
        // A path shows its file name: `--json` has the whole of it.
        let mut exe = match (&a.exe, &a.remote) {
            (Some(exe), _) => Path::new(exe)
                .file_name()
                .map_or_else(|| exe.clone(), |n| n.to_string_lossy().into_owned()),
            (None, Some(remote)) => {
                format!("{} {remote}", a.transport.as_deref().unwrap_or("http"))
            }
            (None, None) => "-".into(),
        };
        if let Some(via) = &a.via {
            exe = format!("{exe} (via {via})");
        }
        rows.push(vec![
            a.agent.to_string(),
            a.pid.map_or("-".into(), |p| p.to_string()),
            exe,
            client,
            a.era.clone().unwrap_or_else(|| "-".into()),
            a.in_flight.to_string(),
            a.profile.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    table::print(
        &mut out,
        &[Right, Right, Left, Left, Left, Right, Left],
        &rows,
    )?;
    Ok(())
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
