//! The small MCP client of the bench: raw JSON lines over a pipe or a Unix socket.

use crate::WAIT;
use crate::process::Proc;
use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::{Value, json};
use std::path::Path;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// The notification that tells mcpd an agent's project (what `mcpd connect` sends).
pub const PROJECT_NOTIFICATION: &str = "notifications/mcpd/project";

type BoxRead = Box<dyn AsyncRead + Unpin + Send>;
type BoxWrite = Box<dyn AsyncWrite + Unpin + Send>;

/// Bounds a future by `WAIT`.
pub async fn within<T>(what: &str, f: impl Future<Output = T>) -> Result<T, String> {
    tokio::time::timeout(WAIT, f)
        .await
        .map_err(|_| format!("timed out after {WAIT:?}: {what}"))
}

/// Cuts a message for display.
pub fn clip(s: &str) -> String {
    const MAX: usize = 200;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}… ({} bytes)", &s[..i], s.len()),
        None => s.to_owned(),
    }
}

/// Any JSON-RPC message, with `result` read as `T`.
#[derive(Deserialize)]
struct Envelope<T> {
    id: Option<Value>,
    method: Option<IgnoredAny>,
    result: Option<T>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ListResult {
    tools: Vec<IgnoredAny>,
    #[serde(rename = "nextCursor")]
    next_cursor: Option<String>,
}

/// The small MCP client of the bench: raw JSON lines over any byte stream.
pub struct Client {
    reader: BufReader<BoxRead>,
    writer: BoxWrite,
    line: Vec<u8>,
    next_id: u64,
    /// Direct mode: the fixture at the other end. Declared last so that the pipes close
    /// before it is stopped.
    _fixture: Option<Proc>,
}

impl Client {
    pub fn new(read: BoxRead, write: BoxWrite, buf: usize, fixture: Option<Proc>) -> Client {
        Client {
            reader: BufReader::with_capacity(buf, read),
            writer: write,
            line: Vec::with_capacity(buf),
            next_id: 1,
            _fixture: fixture,
        }
    }

    /// The CPU time so far of the process at the other end of a stdio client (the
    /// fixture, the shim, socat), over all its threads.
    pub fn process_cpu_ns(&self) -> Option<u64> {
        crate::machine::cpu_ns(self._fixture.as_ref()?.pid())
    }

    /// Spawns a fixture and talks to it over its stdin and stdout.
    pub fn over_stdio(buf: usize) -> Result<Client, String> {
        let mut proc = Proc::fixture(&[])?;
        let (tx, rx) = proc.take_pipes()?;
        Ok(Client::new(Box::new(rx), Box::new(tx), buf, Some(proc)))
    }

    pub async fn connect(socket: &Path, buf: usize) -> Result<Client, String> {
        let stream = within("connect", UnixStream::connect(socket))
            .await?
            .map_err(|e| format!("connect to {}: {e}", socket.display()))?;
        let (r, w) = stream.into_split();
        Ok(Client::new(Box::new(r), Box::new(w), buf, None))
    }

    pub async fn send(&mut self, line: &[u8]) -> Result<(), String> {
        within("write a request", self.writer.write_all(line))
            .await?
            .map_err(|e| format!("write failed: {e}"))
    }

    /// The next line, without its newline.
    pub async fn recv(&mut self) -> Result<&[u8], String> {
        self.line.clear();
        let n = within(
            "read a response",
            self.reader.read_until(b'\n', &mut self.line),
        )
        .await?
        .map_err(|e| format!("read failed: {e}"))?;
        if n == 0 {
            return Err("connection closed".into());
        }
        if self.line.last() == Some(&b'\n') {
            self.line.pop();
        }
        Ok(&self.line)
    }

    /// Sends a request and returns its result; notifications on the way are skipped.
    pub async fn request<T: DeserializeOwned>(
        &mut self,
        method: &str,
        params: Option<Value>,
    ) -> Result<T, String> {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(p) = params {
            msg["params"] = p;
        }
        let mut line = msg.to_string().into_bytes();
        line.push(b'\n');
        self.send(&line).await?;
        loop {
            let raw = self.recv().await?;
            let env: Envelope<T> = serde_json::from_slice(raw).map_err(|e| {
                format!(
                    "{method}: unreadable line ({e}): {}",
                    clip(&String::from_utf8_lossy(raw))
                )
            })?;
            if env.method.is_some() && env.id.is_none() {
                continue; // a notification
            }
            if env.id.as_ref().and_then(Value::as_u64) != Some(id) {
                return Err(format!(
                    "{method}: expected the response to id {id}, got: {}",
                    clip(&String::from_utf8_lossy(raw))
                ));
            }
            if let Some(e) = env.error {
                return Err(format!("{method} failed: {}", clip(&e.to_string())));
            }
            return env
                .result
                .ok_or_else(|| format!("{method}: a response without result or error"));
        }
    }

    /// Tells mcpd the agent's project, as `mcpd connect` does before anything else.
    pub async fn project(&mut self, dir: &Path) -> Result<(), String> {
        let msg = json!({
            "jsonrpc": "2.0",
            "method": PROJECT_NOTIFICATION,
            "params": {"path": dir},
        });
        let mut line = msg.to_string().into_bytes();
        line.push(b'\n');
        self.send(&line).await
    }

    pub async fn initialize(&mut self) -> Result<(), String> {
        let params = json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "relay-bench", "version": "1"},
        });
        self.request::<IgnoredAny>("initialize", Some(params))
            .await?;
        self.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await
    }

    /// A complete tools/list, following cursors: (tools, pages).
    pub async fn list_tools(&mut self) -> Result<(usize, usize), String> {
        let (mut tools, mut pages) = (0, 0);
        let mut cursor: Option<String> = None;
        loop {
            let params = cursor.take().map(|c| json!({"cursor": c}));
            let page: ListResult = self.request("tools/list", params).await?;
            tools += page.tools.len();
            pages += 1;
            match page.next_cursor {
                Some(c) if pages < 1000 => cursor = Some(c),
                Some(_) => return Err("tools/list: more than 1000 pages".into()),
                None => return Ok((tools, pages)),
            }
        }
    }
}
