//! Relay benchmark: what the mcpd hop costs, against a direct stdio client and a bare byte relay.
//!
//! `cargo bench --bench relay [-- --duration SECS --concurrency LIST --quick]`
//!
//! One run measures, on the same machine, the same small MCP client (raw JSON lines:
//! `initialize`, `notifications/initialized`, then `tools/call`) in three set-ups:
//!
//! - **direct**: the client spawns `mcpd-fixture` and talks to it over stdio;
//! - **bare-hop**: the client connects to a Unix socket served by a byte relay running in
//!   this process (its own runtime on its own thread). The relay spawns one fixture per
//!   connection and copies bytes both ways without parsing: the floor for any socket daemon;
//! - **mcpd**: the client connects to a real `mcpd serve` with the fixture configured as
//!   server `fx` and calls `fx__echo` / `fx__big`.
//!
//! Load model: closed loop. Concurrency `c` means `c` requests in flight at all times, over
//! `min(c, 8)` connections with `c / conns` requests pipelined on each (the remainder goes
//! to the first connections); a connection sends its next request as soon as a response
//! arrives. In direct and bare-hop each connection has its own fixture process; under mcpd
//! all connections share the one `fx` process, which is the point of mcpd. Each measurement
//! opens fresh connections, runs a warm-up (`duration / 5`, at most 1 s) that is not
//! counted, then counts the responses that arrive during `duration`. Latency is from
//! writing a request to reading its response line. Every response is checked: its id must
//! be one in flight on that connection, an echo must return exactly the text sent (unique
//! per request, so crossed responses are caught) and `big` exactly 1 MiB. JSON-RPC errors,
//! wrong or unknown responses and read timeouts are counted and printed, never dropped.
//!
//! It also measures the daemon's resident memory (idle with 10 fixture servers, then with
//! many idle agent connections), `tools/list` latency with 20 servers × 100 tools, and the
//! time from starting `mcpd serve` to the first complete listing of those 2,000 tools.
//!
//! Every wait is bounded; every process it starts is stopped and reaped by a guard, also on
//! panic. It exits 1 when anything failed or any error was counted. Run without `--bench`
//! (as `cargo test --benches` does) it runs the `--quick` smoke mode. Linux only (/proc).

// Test code: a panic here is a failed test or a broken fixture, never the daemon's.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::disallowed_methods
)]

use futures::StreamExt;
use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::{Value, json};
use std::borrow::Cow;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::net::{UnixListener, UnixStream};

/// Bound on any single read, write, connect or process exit the bench waits for.
const WAIT: Duration = Duration::from_secs(20);
/// Bound on every configured server of a daemon becoming ready.
const READY_WAIT: Duration = Duration::from_secs(60);
/// How long mcpd gets to shut down after SIGTERM before it is killed.
const DAEMON_GRACE: Duration = Duration::from_secs(10);
/// The size of the large result.
const BIG: usize = 1 << 20;
/// Most connections a relay measurement opens; more concurrency is pipelined on them.
const MAX_CONNS: usize = 8;
/// Fixture servers of the idle-memory daemon.
const IDLE_SERVERS: usize = 10;
/// Servers and tools per server of the tools/list daemon.
const LIST_SERVERS: usize = 20;
const TOOLS_PER_SERVER: usize = 100;
/// Read buffer of a load connection (a 1 MiB result arrives in 64 KiB pipe-sized pieces).
const LOAD_BUF: usize = 64 * 1024;
/// Read buffer of an idle connection.
const IDLE_BUF: usize = 4 * 1024;
/// Concurrent connection attempts while opening the idle agents.
const OPEN_PARALLEL: usize = 32;

fn mcpd_bin() -> &'static str {
    env!("CARGO_BIN_EXE_mcpd")
}

fn fixture_bin() -> &'static str {
    env!("CARGO_BIN_EXE_mcpd-fixture")
}

// ------------------------------------------------------------------ options

struct Opts {
    duration: Duration,
    warmup: Duration,
    concurrency: Vec<usize>,
    quick: bool,
    /// Why quick mode was chosen without `--quick`, if it was.
    smoke_reason: Option<&'static str>,
    listings: usize,
    idle_agents: usize,
}

const USAGE: &str = "\
usage: cargo bench --bench relay [-- OPTIONS]
  --duration SECS      counted time per measurement (default 3; --quick 0.25)
  --concurrency LIST   requests in flight, comma-separated (default 1,8,64; --quick 1,8)
  --quick              CI smoke mode: tiny durations, concurrency 1 and 8, 20 listings,
                       100 idle agents instead of 1000
  --help               this text";

enum Parsed {
    Run(Opts),
    Help,
}

fn parse_args(args: &[String]) -> Result<Parsed, String> {
    let mut quick = false;
    let mut bench_flag = false;
    let mut duration: Option<Duration> = None;
    let mut concurrency: Option<Vec<usize>> = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => it.next().cloned().ok_or(format!("{name} needs a value")),
            }
        };
        match flag {
            "--bench" => bench_flag = true,
            "--quick" => quick = true,
            "--help" | "-h" => return Ok(Parsed::Help),
            "--duration" => {
                let v = value("--duration")?;
                let secs: f64 = v
                    .parse()
                    .map_err(|e| format!("--duration {v:?}: not a number of seconds ({e})"))?;
                if !(secs.is_finite() && secs > 0.0 && secs <= 3600.0) {
                    return Err(format!("--duration {v}: must be in (0, 3600] seconds"));
                }
                duration = Some(Duration::from_secs_f64(secs));
            }
            "--concurrency" => {
                let v = value("--concurrency")?;
                let list = v
                    .split(',')
                    .map(|s| match s.trim().parse::<usize>() {
                        Ok(n) if (1..=512).contains(&n) => Ok(n),
                        _ => Err(format!(
                            "--concurrency {v:?}: {s:?} is not an integer in 1..=512"
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                concurrency = Some(list);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let mut smoke_reason = None;
    if !bench_flag && !quick {
        quick = true;
        smoke_reason = Some("run without --bench (as `cargo test --benches` does): smoke mode");
    }
    let duration = duration.unwrap_or(if quick {
        Duration::from_millis(250)
    } else {
        Duration::from_secs(3)
    });
    Ok(Parsed::Run(Opts {
        duration,
        warmup: (duration / 5).min(Duration::from_secs(1)),
        concurrency: concurrency.unwrap_or(if quick { vec![1, 8] } else { vec![1, 8, 64] }),
        quick,
        smoke_reason,
        listings: if quick { 20 } else { 200 },
        idle_agents: if quick { 100 } else { 1000 },
    }))
}

// ------------------------------------------------------------------ machine facts

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".into())
}

fn proc_field(path: &str, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim_start_matches([':', ' ', '\t']).trim().to_owned())
}

fn machine_facts() -> String {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = proc_field("/proc/cpuinfo", "model name").unwrap_or_else(|| "?".into());
    let mem = proc_field("/proc/meminfo", "MemTotal").unwrap_or_else(|| "?".into());
    format!(
        "machine: nproc {nproc}, kernel {} {} {}, cpu {cpu}, MemTotal {mem}",
        read_trim("/proc/sys/kernel/ostype"),
        read_trim("/proc/sys/kernel/osrelease"),
        std::env::consts::ARCH,
    )
}

fn loadavg() -> String {
    read_trim("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A value of /proc/PID/status in KiB (VmRSS, VmHWM).
fn status_kib(pid: u32, key: &str) -> Option<u64> {
    proc_field(&format!("/proc/{pid}/status"), key)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The "Max open files" soft and hard limits of a process, as /proc shows them.
fn fd_limits_of(pid: u32) -> String {
    proc_field(&format!("/proc/{pid}/limits"), "Max open files")
        .map(|v| v.split_whitespace().take(2).collect::<Vec<_>>().join("/"))
        .unwrap_or_else(|| "?".into())
}

/// The command name and parent pid of a process, None once it is gone or a zombie.
fn comm_and_ppid(pid: u32) -> Option<(String, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    let mut rest = stat.get(close + 1..)?.split_whitespace();
    let state = rest.next()?;
    let ppid = rest.next()?.parse().ok()?;
    (state != "Z").then_some((comm, ppid))
}

/// Live children of `ppid` with their command names.
fn children_of(ppid: u32) -> Vec<(u32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let (comm, parent) = comm_and_ppid(pid)?;
            (parent == ppid).then_some((pid, comm))
        })
        .collect()
}

/// RLIMIT_NOFILE, raised so a thousand idle agents fit.
mod nofile {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};

    /// The soft and hard limits.
    pub fn get() -> Result<(u64, u64), String> {
        getrlimit(Resource::RLIMIT_NOFILE).map_err(|e| format!("getrlimit: {e}"))
    }

    /// Raises the soft limit to at least `want` (up to the hard limit); returns the result.
    pub fn raise(want: u64) -> Result<(u64, u64), String> {
        let (cur, max) = get()?;
        if cur >= want {
            return Ok((cur, max));
        }
        if max < want {
            return Err(format!(
                "RLIMIT_NOFILE hard limit {max} is below the {want} file descriptors needed"
            ));
        }
        setrlimit(Resource::RLIMIT_NOFILE, want, max)
            .map_err(|e| format!("setrlimit(RLIMIT_NOFILE, {want}): {e}"))?;
        get()
    }
}

// ------------------------------------------------------------------ processes

/// A child process that is always stopped and reaped: on `finish` or on drop (also while
/// unwinding). With a grace it gets SIGTERM first, then SIGKILL when the grace runs out.
struct Proc {
    child: Option<Child>,
    what: &'static str,
    grace: Duration,
}

impl Proc {
    fn spawn(cmd: &mut Command, what: &'static str, grace: Duration) -> Result<Proc, String> {
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {what}: {e}"))?;
        Ok(Proc {
            child: Some(child),
            what,
            grace,
        })
    }

    /// A fixture with piped stdin and stdout, its stderr discarded.
    fn fixture(args: &[String]) -> Result<Proc, String> {
        let mut cmd = Command::new(fixture_bin());
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        Proc::spawn(&mut cmd, "mcpd-fixture", Duration::ZERO)
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The child's stdin and stdout as async pipes; needs a tokio runtime.
    fn take_pipes(&mut self) -> Result<(pipe::Sender, pipe::Receiver), String> {
        let child = self.child.as_mut().ok_or("process already reaped")?;
        let stdin = child.stdin.take().ok_or("stdin is not piped")?;
        let stdout = child.stdout.take().ok_or("stdout is not piped")?;
        let tx = pipe::Sender::from_owned_fd(OwnedFd::from(stdin))
            .map_err(|e| format!("stdin pipe: {e}"))?;
        let rx = pipe::Receiver::from_owned_fd(OwnedFd::from(stdout))
            .map_err(|e| format!("stdout pipe: {e}"))?;
        Ok((tx, rx))
    }

    /// Stops and reaps the process (a no-op the second time); returns how it ended.
    fn finish(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if !self.grace.is_zero() {
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + self.grace;
            while Instant::now() < deadline {
                if let Ok(Some(status)) = child.try_wait() {
                    return Some(status);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            eprintln!(
                "warning: {} (pid {}) did not exit within {:?} of SIGTERM; killing it",
                self.what,
                child.id(),
                self.grace
            );
        }
        let _ = child.kill();
        match child.wait() {
            Ok(status) => Some(status),
            Err(e) => {
                eprintln!(
                    "warning: cannot reap {} (pid {}): {e}",
                    self.what,
                    child.id()
                );
                None
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.finish();
    }
}

// ------------------------------------------------------------------ the client

type BoxRead = Box<dyn AsyncRead + Unpin + Send>;
type BoxWrite = Box<dyn AsyncWrite + Unpin + Send>;

/// Bounds a future by `WAIT`.
async fn within<T>(what: &str, f: impl Future<Output = T>) -> Result<T, String> {
    tokio::time::timeout(WAIT, f)
        .await
        .map_err(|_| format!("timed out after {WAIT:?}: {what}"))
}

/// Cuts a message for display.
fn clip(s: &str) -> String {
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
struct Client {
    reader: BufReader<BoxRead>,
    writer: BoxWrite,
    line: Vec<u8>,
    next_id: u64,
    /// Direct mode: the fixture at the other end. Declared last so that the pipes close
    /// before it is stopped.
    _fixture: Option<Proc>,
}

impl Client {
    fn new(read: BoxRead, write: BoxWrite, buf: usize, fixture: Option<Proc>) -> Client {
        Client {
            reader: BufReader::with_capacity(buf, read),
            writer: write,
            line: Vec::with_capacity(buf),
            next_id: 1,
            _fixture: fixture,
        }
    }

    /// Spawns a fixture and talks to it over its stdin and stdout.
    fn over_stdio(buf: usize) -> Result<Client, String> {
        let mut proc = Proc::fixture(&[])?;
        let (tx, rx) = proc.take_pipes()?;
        Ok(Client::new(Box::new(rx), Box::new(tx), buf, Some(proc)))
    }

    async fn connect(socket: &Path, buf: usize) -> Result<Client, String> {
        let stream = within("connect", UnixStream::connect(socket))
            .await?
            .map_err(|e| format!("connect to {}: {e}", socket.display()))?;
        let (r, w) = stream.into_split();
        Ok(Client::new(Box::new(r), Box::new(w), buf, None))
    }

    async fn send(&mut self, line: &[u8]) -> Result<(), String> {
        within("write a request", self.writer.write_all(line))
            .await?
            .map_err(|e| format!("write failed: {e}"))
    }

    /// The next line, without its newline.
    async fn recv(&mut self) -> Result<&[u8], String> {
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
    async fn request<T: DeserializeOwned>(
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

    async fn initialize(&mut self) -> Result<(), String> {
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
    async fn list_tools(&mut self) -> Result<(usize, usize), String> {
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

// ------------------------------------------------------------------ the bare-hop relay

/// A byte relay on a Unix socket: per connection it spawns a fixture and copies bytes both
/// ways without parsing. Runs on its own runtime and thread; dropping it stops the runtime,
/// which drops every connection and so stops and reaps every fixture.
struct Relay {
    socket: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Relay {
    fn start() -> Result<Relay, String> {
        let dir = temp_dir()?;
        let socket = dir.path().join("relay.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket)
            .map_err(|e| format!("relay: bind {}: {e}", socket.display()))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("relay: {e}"))?;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("bare-hop".into())
            .spawn(move || relay_thread(listener, stop_rx))
            .map_err(|e| format!("relay thread: {e}"))?;
        Ok(Relay {
            socket,
            stop: Some(stop_tx),
            thread: Some(thread),
            _dir: dir,
        })
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            eprintln!("warning: the relay thread panicked");
        }
    }
}

fn relay_thread(
    listener: std::os::unix::net::UnixListener,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("bare-hop")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("relay: cannot build its runtime: {e}");
            return;
        }
    };
    rt.block_on(async move {
        let listener = match UnixListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("relay: {e}");
                return;
            }
        };
        loop {
            tokio::select! {
                _ = &mut stop => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        tokio::spawn(relay_one(stream));
                    }
                    Err(e) => {
                        eprintln!("relay: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                },
            }
        }
    });
    // Drops every connection task, and with it every fixture (stopped and reaped).
    rt.shutdown_timeout(Duration::from_secs(5));
}

async fn relay_one(stream: UnixStream) {
    let mut proc = match Proc::fixture(&[]) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("relay: {e}");
            return;
        }
    };
    let (mut stdin, stdout) = match proc.take_pipes() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("relay: {e}");
            return;
        }
    };
    let (sock_r, mut sock_w) = stream.into_split();
    let up = async move {
        let mut from = BufReader::with_capacity(LOAD_BUF, sock_r);
        let _ = tokio::io::copy_buf(&mut from, &mut stdin).await;
        drop(stdin); // EOF tells the fixture to exit
    };
    let down = async move {
        let mut from = BufReader::with_capacity(LOAD_BUF, stdout);
        let _ = tokio::io::copy_buf(&mut from, &mut sock_w).await;
        let _ = sock_w.shutdown().await;
    };
    tokio::join!(up, down);
    // Reaping blocks briefly; keep it off the relay's workers.
    let _ = tokio::task::spawn_blocking(move || drop(proc)).await;
}

// ------------------------------------------------------------------ the daemon

fn temp_dir() -> Result<tempfile::TempDir, String> {
    // Short paths: a Unix socket path must fit in about 108 bytes.
    tempfile::Builder::new()
        .prefix("mcpd-bench")
        .tempdir_in("/tmp")
        .map_err(|e| format!("temp dir: {e}"))
}

struct ServerDef {
    name: String,
    args: Vec<String>,
}

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// A running `mcpd serve` on a generated config in a temp dir. Dropping it (also while
/// unwinding) sends SIGTERM, then SIGKILL after `DAEMON_GRACE`, and reaps it.
struct Daemon {
    log: PathBuf,
    socket: PathBuf,
    servers: usize,
    proc: Proc,
    _dir: tempfile::TempDir,
}

impl Daemon {
    fn start(servers: &[ServerDef], daemon_lines: &[String]) -> Result<Daemon, String> {
        let dir = temp_dir()?;
        let mut config = String::from("[daemon]\n");
        // Each daemon keeps its catalog and era caches in its own directory unless told
        // otherwise, so what earlier runs cached never changes what this one measures.
        if !daemon_lines.iter().any(|l| l.starts_with("state_dir")) {
            let state = dir.path().join("state");
            config.push_str(&format!(
                "state_dir = {}\n",
                toml_str(&state.to_string_lossy())
            ));
        }
        for l in daemon_lines {
            config.push_str(l);
            config.push('\n');
        }
        for s in servers {
            config.push_str(&format!(
                "\n[servers.{}]\ncommand = {}\nargs = {}\n",
                s.name,
                toml_str(fixture_bin()),
                serde_json::to_string(&s.args).expect("args serialize"),
            ));
        }
        let config_path = dir.path().join("mcpd.toml");
        std::fs::write(&config_path, config).map_err(|e| format!("write config: {e}"))?;
        let socket = dir.path().join("mcpd.sock");
        let log = dir.path().join("daemon.log");
        let log_file = std::fs::File::create(&log).map_err(|e| format!("log file: {e}"))?;
        let mut cmd = Command::new(mcpd_bin());
        cmd.arg("serve")
            .arg("--config")
            .arg(&config_path)
            .arg("--socket")
            .arg(&socket)
            .env_remove("MCPD_SOCKET")
            .env_remove("MCPD_CONFIG")
            .env_remove("RUST_LOG")
            .env_remove("JOURNAL_STREAM")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log_file));
        let proc = Proc::spawn(&mut cmd, "mcpd", DAEMON_GRACE)?;
        Ok(Daemon {
            log,
            socket,
            servers: servers.len(),
            proc,
            _dir: dir,
        })
    }

    fn pid(&self) -> u32 {
        self.proc.pid()
    }

    fn rss_kib(&self) -> Option<u64> {
        status_kib(self.pid(), "VmRSS")
    }

    fn hwm_kib(&self) -> Option<u64> {
        status_kib(self.pid(), "VmHWM")
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Connects, retrying until the socket accepts or `WAIT` passes.
    async fn connect(&self, buf: usize) -> Result<Client, String> {
        let deadline = Instant::now() + WAIT;
        loop {
            match UnixStream::connect(&self.socket).await {
                Ok(stream) => {
                    let (r, w) = stream.into_split();
                    return Ok(Client::new(Box::new(r), Box::new(w), buf, None));
                }
                Err(e) if Instant::now() > deadline => {
                    return Err(format!(
                        "mcpd's socket did not accept within {WAIT:?}: {e}\n{}",
                        self.log_tail()
                    ));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(2)).await,
            }
        }
    }

    async fn status(&self) -> Result<Value, String> {
        let mut c = self.connect(IDLE_BUF).await?;
        c.request("mcpd/status", None).await
    }

    /// Polls `mcpd/status` until every configured server is `ready`.
    async fn wait_ready(&self) -> Result<Duration, String> {
        let start = Instant::now();
        loop {
            let status = self.status().await?;
            let servers = status["servers"].as_array().map_or(&[][..], Vec::as_slice);
            let ready = servers.iter().filter(|s| s["state"] == "ready").count();
            if servers.len() == self.servers && ready == self.servers {
                return Ok(start.elapsed());
            }
            if start.elapsed() > READY_WAIT {
                return Err(format!(
                    "only {ready} of {} servers ready after {READY_WAIT:?}: {}",
                    self.servers,
                    clip(&status.to_string())
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM, wait, reap; then checks that mcpd's children (servers, sentinel) are gone.
    fn shutdown(mut self) -> Result<(), String> {
        let children = children_of(self.pid());
        let status = self.proc.finish();
        let deadline = Instant::now() + Duration::from_secs(5);
        let left = loop {
            let left: Vec<String> = children
                .iter()
                .filter(|(pid, comm)| comm_and_ppid(*pid).is_some_and(|(c, _)| &c == comm))
                .map(|(pid, comm)| format!("{comm}[{pid}]"))
                .collect();
            if left.is_empty() || Instant::now() > deadline {
                break left;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        match status {
            Some(s) if s.success() && left.is_empty() => Ok(()),
            Some(s) if s.success() => Err(format!(
                "processes left running 5 s after mcpd exited: {}",
                left.join(" ")
            )),
            other => Err(format!(
                "mcpd did not exit cleanly after SIGTERM ({other:?}); left running: [{}]\n{}",
                left.join(" "),
                self.log_tail()
            )),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- mcpd log ({}) ---\n{}",
                self.log.display(),
                self.log_tail()
            );
        }
    }
}

// ------------------------------------------------------------------ relay measurements

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Direct,
    BareHop,
    Mcpd,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Direct, Mode::BareHop, Mode::Mcpd];

    fn name(self) -> &'static str {
        match self {
            Mode::Direct => "direct",
            Mode::BareHop => "bare-hop",
            Mode::Mcpd => "mcpd",
        }
    }

    fn tool_prefix(self) -> &'static str {
        match self {
            Mode::Mcpd => "fx__",
            _ => "",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Payload {
    Echo,
    Big,
}

impl Payload {
    fn name(self) -> &'static str {
        match self {
            Payload::Echo => "echo",
            Payload::Big => "1MiB",
        }
    }
}

fn call_line(id: u64, conn: usize, prefix: &str, payload: Payload) -> Vec<u8> {
    let line = match payload {
        Payload::Echo => format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"{prefix}echo\",\"arguments\":{{\"text\":\"c{conn}-{id}\"}}}}}}\n"
        ),
        Payload::Big => format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"{prefix}big\",\"arguments\":{{\"bytes\":{BIG}}}}}}}\n"
        ),
    };
    line.into_bytes()
}

#[derive(Deserialize)]
struct CallResponse<'a> {
    id: Option<Value>,
    method: Option<IgnoredAny>,
    #[serde(borrow)]
    result: Option<CallResult<'a>>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct CallResult<'a> {
    #[serde(borrow, default)]
    content: Vec<Content<'a>>,
    #[serde(rename = "isError", default)]
    is_error: bool,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
}

/// What one connection saw.
#[derive(Default)]
struct Tally {
    /// Latencies (ns) of the correct responses that arrived inside the counted window.
    lat_ns: Vec<u64>,
    /// JSON-RPC errors and `isError` results.
    rpc_errors: u64,
    /// Results with the wrong content (a crossed or corrupted response).
    wrong: u64,
    /// Lines that are not a response to a request in flight (unknown id, unparsable).
    stray: u64,
    /// The connection failed (closed, read timeout) with requests still in flight.
    broken: u64,
    samples: Vec<String>,
}

impl Tally {
    fn note(&mut self, s: String) {
        if self.samples.len() < 3 {
            self.samples.push(s);
        }
    }

    fn errors(&self) -> u64 {
        self.rpc_errors + self.wrong + self.stray + self.broken
    }

    fn merge(&mut self, other: Tally) {
        self.lat_ns.extend(other.lat_ns);
        self.rpc_errors += other.rpc_errors;
        self.wrong += other.wrong;
        self.stray += other.stray;
        self.broken += other.broken;
        for s in other.samples {
            self.note(s);
        }
    }
}

#[derive(Clone, Copy)]
struct Window {
    from: Instant,
    to: Instant,
}

enum Verdict {
    Ok,
    RpcError(String),
    Wrong(String),
}

fn judge(resp: &CallResponse<'_>, payload: Payload, conn: usize, id: u64) -> Verdict {
    if let Some(e) = &resp.error {
        return Verdict::RpcError(format!("id {id}: error {}", clip(&e.to_string())));
    }
    let Some(result) = &resp.result else {
        return Verdict::Wrong(format!("id {id}: neither result nor error"));
    };
    let text = result.content.first().and_then(|c| c.text.as_deref());
    if result.is_error {
        return Verdict::RpcError(format!(
            "id {id}: isError result: {}",
            clip(text.unwrap_or(""))
        ));
    }
    match (payload, text) {
        (Payload::Echo, Some(t)) if t == format!("c{conn}-{id}") => Verdict::Ok,
        (Payload::Big, Some(t)) if t.len() == BIG && t.starts_with('x') && t.ends_with('x') => {
            Verdict::Ok
        }
        (_, t) => Verdict::Wrong(format!(
            "id {id} on connection {conn}: unexpected text {}",
            clip(t.unwrap_or("<none>"))
        )),
    }
}

/// Runs one connection's closed loop: `depth` requests in flight until the window ends,
/// then waits for the rest.
async fn drive(
    mut client: Client,
    conn: usize,
    depth: usize,
    mode: Mode,
    payload: Payload,
    win: Window,
) -> (Client, Tally) {
    let mut t = Tally::default();
    let mut sent: HashMap<u64, Instant> = HashMap::with_capacity(depth * 2);
    let mut next_id = 1_000_000u64;
    let prefix = mode.tool_prefix();
    for _ in 0..depth {
        next_id += 1;
        let line = call_line(next_id, conn, prefix, payload);
        sent.insert(next_id, Instant::now());
        if let Err(e) = client.send(&line).await {
            t.broken += sent.len() as u64;
            t.note(format!("connection {conn}: {e}"));
            return (client, t);
        }
    }
    while !sent.is_empty() {
        let raw = match client.recv().await {
            Ok(raw) => raw,
            Err(e) => {
                t.broken += sent.len() as u64;
                t.note(format!(
                    "connection {conn}: {e} with {} requests in flight",
                    sent.len()
                ));
                break;
            }
        };
        let now = Instant::now();
        let resp: CallResponse<'_> = match serde_json::from_slice(raw) {
            Ok(r) => r,
            Err(e) => {
                t.stray += 1;
                let shown = clip(&String::from_utf8_lossy(raw));
                t.note(format!("connection {conn}: unparsable line ({e}): {shown}"));
                continue;
            }
        };
        if resp.method.is_some() && resp.id.is_none() {
            continue; // a notification
        }
        let id = resp.id.as_ref().and_then(Value::as_u64);
        let Some(started) = id.and_then(|id| sent.remove(&id)) else {
            t.stray += 1;
            let shown = clip(&String::from_utf8_lossy(raw));
            t.note(format!(
                "connection {conn}: response to no request in flight: {shown}"
            ));
            continue;
        };
        let id = id.unwrap_or_default();
        match judge(&resp, payload, conn, id) {
            Verdict::Ok => {
                if now >= win.from && now <= win.to {
                    t.lat_ns.push((now - started).as_nanos() as u64);
                }
            }
            Verdict::RpcError(m) => {
                t.rpc_errors += 1;
                t.note(m);
            }
            Verdict::Wrong(m) => {
                t.wrong += 1;
                t.note(m);
            }
        }
        if now < win.to {
            next_id += 1;
            let line = call_line(next_id, conn, prefix, payload);
            sent.insert(next_id, Instant::now());
            if let Err(e) = client.send(&line).await {
                t.broken += sent.len() as u64;
                t.note(format!("connection {conn}: {e}"));
                break;
            }
        }
    }
    (client, t)
}

struct Row {
    payload: Payload,
    concurrency: usize,
    layout: String,
    mode: Mode,
    calls_per_s: f64,
    p50_us: f64,
    p99_us: f64,
    counted: usize,
    tally: Tally,
    failure: Option<String>,
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1000.0
}

async fn open_clients(
    mode: Mode,
    n: usize,
    relay: &Relay,
    daemon: &Daemon,
) -> Result<Vec<Client>, String> {
    let mut clients = Vec::with_capacity(n);
    for _ in 0..n {
        let mut c = match mode {
            Mode::Direct => Client::over_stdio(LOAD_BUF)?,
            Mode::BareHop => Client::connect(&relay.socket, LOAD_BUF).await?,
            Mode::Mcpd => daemon.connect(LOAD_BUF).await?,
        };
        c.initialize()
            .await
            .map_err(|e| format!("{}: initialize: {e}", mode.name()))?;
        clients.push(c);
    }
    Ok(clients)
}

async fn measure(
    mode: Mode,
    payload: Payload,
    c: usize,
    opts: &Opts,
    relay: &Relay,
    daemon: &Daemon,
) -> Row {
    let conns = c.min(MAX_CONNS);
    let depths: Vec<usize> = (0..conns)
        .map(|i| c / conns + usize::from(i < c % conns))
        .collect();
    let layout = if c.is_multiple_of(conns) {
        format!("{conns}x{}", c / conns)
    } else {
        format!("{conns}x{}+", c / conns)
    };
    let mut row = Row {
        payload,
        concurrency: c,
        layout,
        mode,
        calls_per_s: 0.0,
        p50_us: f64::NAN,
        p99_us: f64::NAN,
        counted: 0,
        tally: Tally::default(),
        failure: None,
    };
    let clients = match open_clients(mode, conns, relay, daemon).await {
        Ok(c) => c,
        Err(e) => {
            row.failure = Some(e);
            return row;
        }
    };
    let start = Instant::now();
    let win = Window {
        from: start + opts.warmup,
        to: start + opts.warmup + opts.duration,
    };
    let handles: Vec<_> = clients
        .into_iter()
        .zip(depths)
        .enumerate()
        .map(|(i, (client, depth))| tokio::spawn(drive(client, i, depth, mode, payload, win)))
        .collect();
    let aborts: Vec<_> = handles.iter().map(|h| h.abort_handle()).collect();
    let limit = opts.warmup + opts.duration + 2 * WAIT;
    let mut finished = Vec::new();
    match tokio::time::timeout(limit, futures::future::join_all(handles)).await {
        Ok(results) => {
            for r in results {
                match r {
                    Ok((client, tally)) => {
                        row.tally.merge(tally);
                        finished.push(client);
                    }
                    Err(e) => row.failure = Some(format!("a connection task failed: {e}")),
                }
            }
        }
        Err(_) => {
            for a in aborts {
                a.abort();
            }
            row.failure = Some(format!("the measurement did not end within {limit:?}"));
        }
    }
    drop(finished); // closes the connections; direct fixtures are stopped and reaped
    row.tally.lat_ns.sort_unstable();
    let lat = &row.tally.lat_ns;
    row.counted = lat.len();
    row.calls_per_s = lat.len() as f64 / opts.duration.as_secs_f64();
    row.p50_us = percentile(lat, 0.50);
    row.p99_us = percentile(lat, 0.99);
    row
}

// ------------------------------------------------------------------ memory and listing

struct MemReport {
    servers_ready_in: Duration,
    idle_kib: Option<u64>,
    agents: usize,
    agents_opened: usize,
    agent_failures: Vec<String>,
    with_agents_kib: Option<u64>,
    after_close_kib: Option<u64>,
    daemon_fd_limit: String,
    still_answers: Result<(), String>,
    shutdown: Result<(), String>,
}

async fn measure_memory(opts: &Opts) -> Result<MemReport, String> {
    let servers: Vec<ServerDef> = (0..IDLE_SERVERS)
        .map(|i| ServerDef {
            name: format!("idle{i:02}"),
            args: Vec::new(),
        })
        .collect();
    let max_agents = format!("max_agents = {}", opts.idle_agents + 64);
    let daemon = Daemon::start(&servers, &[max_agents])?;
    let servers_ready_in = daemon.wait_ready().await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle_kib = daemon.rss_kib();
    let socket = daemon.socket.clone();
    let results: Vec<Result<Client, String>> = futures::stream::iter(0..opts.idle_agents)
        .map(|_| {
            let socket = socket.clone();
            async move {
                let mut c = Client::connect(&socket, IDLE_BUF).await?;
                c.initialize().await?;
                Ok(c)
            }
        })
        .buffer_unordered(OPEN_PARALLEL)
        .collect()
        .await;
    let mut agents = Vec::new();
    let mut agent_failures = Vec::new();
    for r in results {
        match r {
            Ok(c) => agents.push(c),
            Err(e) => agent_failures.push(e),
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let with_agents_kib = daemon.rss_kib();
    let still_answers = daemon.status().await.map(|_| ());
    let agents_opened = agents.len();
    drop(agents);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after_close_kib = daemon.rss_kib();
    let daemon_fd_limit = fd_limits_of(daemon.pid());
    let shutdown = daemon.shutdown();
    Ok(MemReport {
        servers_ready_in,
        idle_kib,
        agents: opts.idle_agents,
        agents_opened,
        agent_failures,
        with_agents_kib,
        after_close_kib,
        daemon_fd_limit,
        still_answers,
        shutdown,
    })
}

struct ListReport {
    /// From starting a daemon with nothing cached to its first complete listing.
    cold_full_list: Duration,
    socket_after: Duration,
    first_full_list: Duration,
    partial_listings: usize,
    pages: usize,
    lat_us: Vec<f64>,
    failures: Vec<String>,
    shutdown: Result<(), String>,
}

async fn measure_listing(opts: &Opts) -> Result<ListReport, String> {
    let servers: Vec<ServerDef> = (0..LIST_SERVERS)
        .map(|i| ServerDef {
            name: format!("list{i:02}"),
            args: vec![
                "--tools".into(),
                "echo".into(),
                "--extra-tools".into(),
                (TOOLS_PER_SERVER - 1).to_string(),
            ],
        })
        .collect();
    let want = LIST_SERVERS * TOOLS_PER_SERVER;
    // A first daemon starts with nothing cached and fills the catalog cache; the measured
    // one starts from that cache, as a restarted mcpd does.
    let state = temp_dir()?;
    let state_line = format!("state_dir = {}", toml_str(&state.path().to_string_lossy()));
    let t0 = Instant::now();
    let cold = Daemon::start(&servers, std::slice::from_ref(&state_line))?;
    let mut client = cold.connect(LOAD_BUF).await?;
    client.initialize().await?;
    let cold_full_list = loop {
        if client.list_tools().await?.0 == want {
            break t0.elapsed();
        }
        if t0.elapsed() > READY_WAIT {
            return Err(format!(
                "tools/list never had {want} tools after {READY_WAIT:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    drop(client);
    cold.shutdown()?;
    let t0 = Instant::now();
    let daemon = Daemon::start(&servers, &[state_line])?;
    let mut client = daemon.connect(LOAD_BUF).await?;
    let socket_after = t0.elapsed();
    client.initialize().await?;
    let mut partial_listings = 0;
    let (first_full_list, mut pages) = loop {
        let (tools, pages) = client.list_tools().await?;
        if tools == want {
            break (t0.elapsed(), pages);
        }
        if tools > want {
            return Err(format!(
                "tools/list returned {tools} tools, expected {want}"
            ));
        }
        partial_listings += 1;
        if t0.elapsed() > READY_WAIT {
            return Err(format!(
                "tools/list still had {tools} of {want} tools after {READY_WAIT:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    daemon.wait_ready().await?;
    let mut lat_us = Vec::with_capacity(opts.listings);
    let mut failures = Vec::new();
    for _ in 0..opts.listings {
        let start = Instant::now();
        match client.list_tools().await {
            Ok((tools, p)) if tools == want => {
                lat_us.push(start.elapsed().as_nanos() as f64 / 1000.0);
                pages = p;
            }
            Ok((tools, _)) => failures.push(format!("a listing had {tools} tools, not {want}")),
            Err(e) => {
                failures.push(e);
                break;
            }
        }
    }
    lat_us.sort_by(f64::total_cmp);
    drop(client);
    let shutdown = daemon.shutdown();
    Ok(ListReport {
        cold_full_list,
        socket_after,
        first_full_list,
        partial_listings,
        pages,
        lat_us,
        failures,
        shutdown,
    })
}

// ------------------------------------------------------------------ report

fn mib(kib: Option<u64>) -> String {
    kib.map_or("?".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
}

fn us(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else {
        format!("{v:.0}")
    }
}

fn ratio(a: f64, b: f64) -> String {
    if a.is_finite() && b.is_finite() && b > 0.0 {
        format!("{:.2}", a / b)
    } else {
        "-".into()
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn print_relay(rows: &[Row], opts: &Opts) {
    println!();
    println!(
        "tools/call through each path: closed loop, {:.2} s counted after {:.2} s warm-up; \
         conns x depth = connections x requests pipelined on each; latency in µs",
        opts.duration.as_secs_f64(),
        opts.warmup.as_secs_f64()
    );
    println!(
        "{:<7} {:>4} {:>6}  {:<9} {:>10} {:>9} {:>9} {:>8} {:>6}",
        "payload", "c", "conns", "path", "calls/s", "p50 µs", "p99 µs", "counted", "errors"
    );
    for r in rows {
        let errors = r.tally.errors() + u64::from(r.failure.is_some());
        println!(
            "{:<7} {:>4} {:>6}  {:<9} {:>10.0} {:>9} {:>9} {:>8} {:>6}",
            r.payload.name(),
            r.concurrency,
            r.layout,
            r.mode.name(),
            r.calls_per_s,
            us(r.p50_us),
            us(r.p99_us),
            r.counted,
            errors
        );
    }
    println!();
    println!(
        "ratios (mcpd ÷ baseline): throughput below 1 and p50 above 1 are what the mcpd hop costs"
    );
    println!(
        "{:<7} {:>4}  {:>16} {:>16} {:>16} {:>16}",
        "payload", "c", "thr mcpd/direct", "thr mcpd/bare", "p50 mcpd/direct", "p50 mcpd/bare"
    );
    let find = |p: Payload, c: usize, m: Mode| {
        rows.iter()
            .find(|r| r.payload == p && r.concurrency == c && r.mode == m)
    };
    for r in rows.iter().filter(|r| r.mode == Mode::Mcpd) {
        let (Some(d), Some(b)) = (
            find(r.payload, r.concurrency, Mode::Direct),
            find(r.payload, r.concurrency, Mode::BareHop),
        ) else {
            continue;
        };
        println!(
            "{:<7} {:>4}  {:>16} {:>16} {:>16} {:>16}",
            r.payload.name(),
            r.concurrency,
            ratio(r.calls_per_s, d.calls_per_s),
            ratio(r.calls_per_s, b.calls_per_s),
            ratio(r.p50_us, d.p50_us),
            ratio(r.p50_us, b.p50_us),
        );
    }
    println!(
        "note: at c > 1, direct and bare-hop run one fixture process per connection while all \
         of mcpd's connections share its one fx process, so those ratios include that fan-in \
         onto a single server, not only the hop"
    );
    let troubled: Vec<&Row> = rows
        .iter()
        .filter(|r| r.tally.errors() > 0 || r.failure.is_some())
        .collect();
    if !troubled.is_empty() {
        println!();
        println!("errors:");
        for r in troubled {
            let t = &r.tally;
            println!(
                "  {} c={} {}: {} JSON-RPC errors, {} wrong results, {} stray lines, {} lost to a broken connection{}",
                r.payload.name(),
                r.concurrency,
                r.mode.name(),
                t.rpc_errors,
                t.wrong,
                t.stray,
                t.broken,
                r.failure
                    .as_ref()
                    .map(|f| format!("; FAILED: {f}"))
                    .unwrap_or_default()
            );
            for s in &t.samples {
                println!("      e.g. {s}");
            }
        }
    }
}

fn print_memory(m: &Result<MemReport, String>, bench_fds: &str) -> bool {
    println!();
    let m = match m {
        Ok(m) => m,
        Err(e) => {
            println!("daemon memory: FAILED: {e}");
            return false;
        }
    };
    let mut ok = true;
    println!(
        "daemon memory (VmRSS of the mcpd process; the servers and the sentinel are other processes):"
    );
    let delta = match (m.idle_kib, m.with_agents_kib) {
        (Some(a), Some(b)) if m.agents_opened > 0 => format!(
            " (+{:.1} MiB, {:.1} KiB per connection)",
            (b as f64 - a as f64) / 1024.0,
            (b as f64 - a as f64) / m.agents_opened as f64
        ),
        _ => String::new(),
    };
    let rows = [
        (
            format!(
                "idle, {IDLE_SERVERS} fixture servers ready ({} after start)",
                ms(m.servers_ready_in)
            ),
            mib(m.idle_kib),
        ),
        (
            format!(
                "with {} idle initialized agent connections",
                m.agents_opened
            ),
            format!("{}{delta}", mib(m.with_agents_kib)),
        ),
        ("after closing them".into(), mib(m.after_close_kib)),
    ];
    for (label, value) in rows {
        println!("  {:<54} {value}", format!("{label}:"));
    }
    println!(
        "  RLIMIT_NOFILE soft/hard: bench {bench_fds}, mcpd {}; daemon.max_agents = {}",
        m.daemon_fd_limit,
        m.agents + 64
    );
    if !m.agent_failures.is_empty() {
        ok = false;
        println!(
            "  ERROR: {} of {} agent connections failed, e.g. {}",
            m.agent_failures.len(),
            m.agents,
            m.agent_failures[0]
        );
    }
    if let Err(e) = &m.still_answers {
        ok = false;
        println!("  ERROR: mcpd/status failed with the agents connected: {e}");
    }
    if let Err(e) = &m.shutdown {
        ok = false;
        println!("  ERROR at shutdown: {e}");
    }
    ok
}

fn print_listing(l: &Result<ListReport, String>) -> bool {
    println!();
    let l = match l {
        Ok(l) => l,
        Err(e) => {
            println!("tools/list: FAILED: {e}");
            return false;
        }
    };
    let mut ok = true;
    let want = LIST_SERVERS * TOOLS_PER_SERVER;
    println!(
        "tools/list with {LIST_SERVERS} servers x {TOOLS_PER_SERVER} tools = {want} tools ({} pages per listing):",
        l.pages
    );
    println!(
        "  mcpd serve start -> first complete listing of {want} tools, nothing cached: {}",
        ms(l.cold_full_list)
    );
    println!(
        "  mcpd serve start -> first complete listing of {want} tools, from the catalog cache: {} \
         (socket accepting after {}, {} incomplete listings before it)",
        ms(l.first_full_list),
        ms(l.socket_after),
        l.partial_listings,
    );
    println!(
        "  full listing latency over {} listings: p50 {} µs, p99 {} µs",
        l.lat_us.len(),
        us(pct_f(&l.lat_us, 0.50)),
        us(pct_f(&l.lat_us, 0.99))
    );
    for f in &l.failures {
        ok = false;
        println!("  ERROR: {f}");
    }
    if let Err(e) = &l.shutdown {
        ok = false;
        println!("  ERROR at shutdown: {e}");
    }
    ok
}

fn pct_f(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

// ------------------------------------------------------------------ main

fn command_line(args: &[String]) -> String {
    let shown: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "--bench")
        .collect();
    if shown.is_empty() {
        "cargo bench --bench relay".into()
    } else {
        format!("cargo bench --bench relay -- {}", shown.join(" "))
    }
}

async fn run(opts: Opts, args: Vec<String>) -> bool {
    let began = Instant::now();
    let argv0 = std::env::args().next().unwrap_or_default();
    println!("mcpd relay benchmark");
    println!(
        "command: {}   (binary: {argv0} {})",
        command_line(&args),
        args.join(" ")
    );
    println!("{}", machine_facts());
    println!("loadavg at start: {}", loadavg());
    if let Some(why) = opts.smoke_reason {
        println!("note: {why}");
    }
    println!(
        "settings: {} mode; {:.2} s counted per measurement after {:.2} s warm-up; concurrency {:?}; \
         {} listings; {} idle agents",
        if opts.quick { "quick" } else { "full" },
        opts.duration.as_secs_f64(),
        opts.warmup.as_secs_f64(),
        opts.concurrency,
        opts.listings,
        opts.idle_agents
    );
    println!("note: numbers are from one run on a shared machine; other work on it adds noise");

    let mut ok = true;
    // Enough descriptors for the idle agents here and in mcpd, which inherits the limit.
    let want_fds = (2 * opts.idle_agents + 512) as u64;
    let bench_fds = match nofile::raise(want_fds) {
        Ok((cur, max)) => format!("{cur}/{max}"),
        Err(e) => {
            println!("warning: {e}; the idle-agent measurement may fail");
            nofile::get().map_or("?".into(), |(c, m)| format!("{c}/{m}"))
        }
    };

    eprintln!(
        "[relay-bench] memory: {IDLE_SERVERS} servers, {} idle agents",
        opts.idle_agents
    );
    let mem = measure_memory(&opts).await;
    eprintln!("[relay-bench] tools/list: {LIST_SERVERS} x {TOOLS_PER_SERVER} tools");
    let list = measure_listing(&opts).await;

    let relay = match Relay::start() {
        Ok(r) => r,
        Err(e) => {
            println!("FAILED to start the relay: {e}");
            return false;
        }
    };
    let fx = [ServerDef {
        name: "fx".into(),
        args: Vec::new(),
    }];
    let daemon = match Daemon::start(&fx, &[]) {
        Ok(d) => d,
        Err(e) => {
            println!("FAILED to start mcpd: {e}");
            return false;
        }
    };
    if let Err(e) = daemon.wait_ready().await {
        println!("FAILED: mcpd never got ready: {e}");
        return false;
    }
    let mut rows = Vec::new();
    for payload in [Payload::Echo, Payload::Big] {
        for &c in &opts.concurrency {
            for mode in Mode::ALL {
                let row = measure(mode, payload, c, &opts, &relay, &daemon).await;
                eprintln!(
                    "[relay-bench] {:<5} c={:<3} {:<8} {:>8.0} calls/s  p50 {} µs  p99 {} µs  errors {}",
                    payload.name(),
                    c,
                    mode.name(),
                    row.calls_per_s,
                    us(row.p50_us),
                    us(row.p99_us),
                    row.tally.errors() + u64::from(row.failure.is_some())
                );
                ok &= row.failure.is_none() && row.tally.errors() == 0;
                rows.push(row);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    let relay_rss = daemon.rss_kib();
    let relay_hwm = daemon.hwm_kib();
    let relay_shutdown = daemon.shutdown();
    drop(relay);

    print_relay(&rows, &opts);
    println!();
    println!(
        "mcpd with the one fx server after the runs above: VmRSS {}, peak VmHWM {}",
        mib(relay_rss),
        mib(relay_hwm)
    );
    if let Err(e) = &relay_shutdown {
        ok = false;
        println!("  ERROR at shutdown: {e}");
    }
    ok &= print_memory(&mem, &bench_fds);
    ok &= print_listing(&list);
    println!();
    println!(
        "loadavg at end: {}; bench wall time {:.1} s; result: {}",
        loadavg(),
        began.elapsed().as_secs_f64(),
        if ok { "ok" } else { "ERRORS (see above)" }
    );
    ok
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match parse_args(&args) {
        Ok(Parsed::Run(o)) => o,
        Ok(Parsed::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n{USAGE}");
            return ExitCode::from(64);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("the bench's tokio runtime");
    let ok = rt.block_on(run(opts, args));
    // Connection tasks still holding fixtures are dropped here, which reaps them.
    rt.shutdown_timeout(Duration::from_secs(5));
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
