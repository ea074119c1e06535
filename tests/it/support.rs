//! Test harness: a temp dir, a config builder that starts the real `mcpd` binary.
//!
//! Also a raw line-speaking agent, and `eventually`.

#![allow(dead_code)]

use serde_json::{Value, json};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

/// Every single wait in a test is bounded by this, unless it says otherwise.
pub const WAIT: Duration = Duration::from_secs(20);

/// An HTTP client for tests that speak to HTTP fixtures directly. mcpd builds reqwest
/// without a default TLS provider (it installs ring itself), so the test process installs
/// the same one first.
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default(); // installed already: fine
    reqwest::Client::new()
}

pub fn mcpd_bin() -> &'static str {
    env!("CARGO_BIN_EXE_mcpd")
}

pub fn fixture_bin() -> &'static str {
    env!("CARGO_BIN_EXE_mcpd-fixture")
}

/// Waits until `check` returns Some, polling; panics with `what` after `deadline`.
pub async fn eventually<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = tokio::time::Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if start.elapsed() > deadline {
            panic!("timed out after {deadline:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Bounds a future by `WAIT`.
pub async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(WAIT, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {WAIT:?}: {what}"),
    }
}

/// A server entry of a generated config.
pub struct ServerSpec {
    name: String,
    /// What runs it: a command line, or the URL of a remote server.
    launch: Launch,
    extra: String,
}

enum Launch {
    Command { command: String, args: Vec<String> },
    Url(String),
}

/// Builds a config file and starts `mcpd serve` on it.
pub struct DaemonBuilder {
    dir: tempfile::TempDir,
    daemon_toml: String,
    servers: Vec<ServerSpec>,
    env: Vec<(String, String)>,
    /// `[profiles.NAME]` tables: (name, body).
    profiles: Vec<(String, String)>,
    /// A soft limit on open files to start the daemon with.
    open_files: Option<u64>,
    /// A descriptor of the test's that the daemon inherits (not close-on-exec).
    inherit_fd: Option<i32>,
    /// The mcpd binary to run, when not the one this build made (an upgrade replaces it).
    bin: Option<PathBuf>,
}

impl DaemonBuilder {
    pub fn new() -> DaemonBuilder {
        // Short paths: a Unix socket path must fit in about 108 bytes.
        let dir = tempfile::Builder::new()
            .prefix("mcpd-it")
            .tempdir_in("/tmp")
            .expect("temp dir");
        DaemonBuilder {
            dir,
            daemon_toml: String::new(),
            servers: Vec::new(),
            env: Vec::new(),
            profiles: Vec::new(),
            open_files: None,
            inherit_fd: None,
            bin: None,
        }
    }

    /// Runs the daemon from `bin` instead of this build's binary.
    pub fn binary(mut self, bin: PathBuf) -> Self {
        self.bin = Some(bin);
        self
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Starts the daemon with this soft limit on open files (through `sh`'s `ulimit`).
    pub fn open_files(mut self, soft: u64) -> Self {
        self.open_files = Some(soft);
        self
    }

    /// Starts the daemon with the test's descriptor `fd` open, as a careless parent
    /// would leave it: not close-on-exec. The test keeps it open until then.
    pub fn inherit_fd(mut self, fd: i32) -> Self {
        self.inherit_fd = Some(fd);
        self
    }

    /// Sets a variable in the daemon's environment (for `${VAR}` secrets in the config).
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Adds a `[profiles.NAME]` table with these lines.
    pub fn profile(mut self, name: &str, body: &str) -> Self {
        self.profiles.push((name.to_owned(), body.to_owned()));
        self
    }

    /// Adds a line to the `[daemon]` table.
    pub fn daemon(mut self, line: &str) -> Self {
        self.daemon_toml.push_str(line);
        self.daemon_toml.push('\n');
        self
    }

    /// A fixture server with these flags.
    pub fn fixture(self, name: &str, args: &[&str]) -> Self {
        self.fixture_with(name, args, "")
    }

    /// A fixture server with flags and extra TOML lines for its table.
    pub fn fixture_with(self, name: &str, args: &[&str], extra: &str) -> Self {
        let command = fixture_bin().to_owned();
        self.server(name, &command, args, extra)
    }

    pub fn server(mut self, name: &str, command: &str, args: &[&str], extra: &str) -> Self {
        self.servers.push(ServerSpec {
            name: name.to_owned(),
            launch: Launch::Command {
                command: command.to_owned(),
                args: args.iter().map(|s| s.to_string()).collect(),
            },
            extra: extra.to_owned(),
        });
        self
    }

    /// A remote (HTTP) server at `url`, with extra TOML lines for its table
    /// (`transport = "sse"`, `headers = {...}`, ...).
    pub fn remote(mut self, name: &str, url: &str, extra: &str) -> Self {
        self.servers.push(ServerSpec {
            name: name.to_owned(),
            launch: Launch::Url(url.to_owned()),
            extra: extra.to_owned(),
        });
        self
    }

    pub fn config_text(&self) -> String {
        // Each daemon keeps its state (the era cache) in its own directory.
        let state = self.dir.path().join("state");
        let mut t = format!(
            "[daemon]\nstate_dir = {}\n{}\n",
            toml_str(&state.to_string_lossy()),
            self.daemon_toml
        );
        for s in &self.servers {
            let launch = match &s.launch {
                Launch::Command { command, args } => format!(
                    "command = {}\nargs = {}",
                    toml_str(command),
                    serde_json::to_string(args).expect("args")
                ),
                Launch::Url(url) => format!("url = {}", toml_str(url)),
            };
            t.push_str(&format!("[servers.{}]\n{launch}\n{}\n", s.name, s.extra));
        }
        for (name, body) in &self.profiles {
            t.push_str(&format!("[profiles.{name}]\n{body}\n"));
        }
        t
    }

    /// Writes the config, starts the daemon and waits until its socket answers.
    pub async fn start(self) -> Daemon {
        let config = self.dir.path().join("mcpd.toml");
        std::fs::write(&config, self.config_text()).expect("write config");
        let socket = self.dir.path().join("mcpd.sock");
        let log = self.dir.path().join("daemon.log");
        let names = self.servers.iter().map(|s| s.name.clone()).collect();
        let mut d = Daemon {
            dir: self.dir,
            config,
            socket,
            log,
            child: None,
            names,
            env: self.env,
            open_files: self.open_files,
            inherit_fd: self.inherit_fd,
            bin: self.bin,
        };
        d.spawn().await;
        d
    }
}

impl Default for DaemonBuilder {
    fn default() -> Self {
        Self::new()
    }
}

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("string")
}

/// A running `mcpd serve`. Dropping it kills the daemon (its children follow by their
/// parent-death signal).
pub struct Daemon {
    dir: tempfile::TempDir,
    pub config: PathBuf,
    pub socket: PathBuf,
    pub log: PathBuf,
    child: Option<tokio::process::Child>,
    names: Vec<String>,
    env: Vec<(String, String)>,
    open_files: Option<u64>,
    inherit_fd: Option<i32>,
    bin: Option<PathBuf>,
}

impl Daemon {
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    async fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log file");
        let mut cmd = match self.open_files {
            Some(soft) => {
                let mut sh = tokio::process::Command::new("sh");
                sh.arg("-c")
                    .arg(format!("ulimit -Sn {soft} && exec \"$0\" \"$@\""))
                    .arg(
                        self.bin
                            .as_deref()
                            .map_or(mcpd_bin().as_ref(), Path::as_os_str),
                    );
                sh
            }
            None => tokio::process::Command::new(
                self.bin
                    .as_deref()
                    .map_or(mcpd_bin().as_ref(), Path::as_os_str),
            ),
        };
        if let Some(fd) = self.inherit_fd {
            // SAFETY: fcntl is async-signal-safe; it runs in the child before exec.
            unsafe {
                cmd.pre_exec(move || {
                    if nix::libc::fcntl(fd, nix::libc::F_SETFD, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = cmd
            .args(["serve", "--config"])
            .arg(&self.config)
            .arg("--socket")
            .arg(&self.socket)
            .env("RUST_LOG", "mcpd=debug")
            .env_remove("MCPD_SOCKET")
            .env_remove("MCPD_CONFIG")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .expect("start mcpd");
        self.child = Some(child);
        let socket = self.socket.clone();
        eventually("the daemon's socket accepts connections", WAIT, || {
            let socket = socket.clone();
            async move { UnixStream::connect(&socket).await.ok().map(|_| ()) }
        })
        .await;
    }

    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .and_then(|c| c.id())
            .expect("daemon pid")
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub async fn agent(&self) -> Agent {
        Agent::connect(&self.socket).await
    }

    /// A new agent that has completed the handshake.
    pub async fn initialized_agent(&self) -> Agent {
        let mut a = self.agent().await;
        a.initialize().await;
        a
    }

    /// The result of `mcpd/status`.
    pub async fn status(&self) -> Value {
        let mut a = self.agent().await;
        a.request("mcpd/status", None).await["result"].clone()
    }

    pub async fn server_status(&self, name: &str) -> Value {
        let s = self.status().await;
        s["servers"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["name"] == name).cloned())
            .unwrap_or_else(|| panic!("no server {name} in status {s}"))
    }

    /// Waits until every configured server is `ready`.
    pub async fn wait_ready(&self) -> Value {
        self.wait_status("every server ready", |s| {
            s["servers"]
                .as_array()
                .is_some_and(|a| a.iter().all(|s| s["state"] == "ready"))
        })
        .await
    }

    /// Waits until the status satisfies `pred`; returns that status.
    pub async fn wait_status(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let pred = &pred;
        eventually(what, WAIT, || async move {
            let s = self.status().await;
            pred(&s).then_some(s)
        })
        .await
    }

    pub async fn wait_server(
        &self,
        name: &str,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let pred = &pred;
        eventually(what, WAIT, || async move {
            let s = self.server_status(name).await;
            pred(&s).then_some(s)
        })
        .await
    }

    /// Sends a signal to the daemon.
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid() as i32), sig).expect("signal");
    }

    /// Waits for the daemon to exit and returns its exit code. A clean exit also means
    /// every task it spawned ended first (the last step of shutdown says otherwise).
    pub async fn wait_exit(&mut self) -> Option<i32> {
        let child = self.child.as_mut().expect("running");
        let status = within("the daemon exits", child.wait())
            .await
            .expect("wait");
        if status.code() == Some(0) {
            let log = self.log_text();
            assert!(
                !log.contains("still running at exit"),
                "a task outlived the shutdown: {log}"
            );
        }
        status.code()
    }

    /// Stops the daemon with SIGTERM and starts it again on the same config and state.
    /// Starts the daemon again after it stopped (`signal` and `wait_exit`).
    pub async fn start_again(&mut self) {
        self.spawn().await;
    }

    pub async fn restart_daemon(&mut self) {
        self.signal(nix::sys::signal::Signal::SIGTERM);
        assert_eq!(self.wait_exit().await, Some(0), "the daemon stops cleanly");
        self.spawn().await;
    }

    /// Waits until `ctl agents` shows a call of `tool` in flight (it reached its server).
    pub async fn wait_call_in_flight(&self, tool: &str) {
        eventually(
            &format!("a call of {tool} in flight"),
            WAIT,
            || async move {
                let (_, out, _) = self.run_cli(&["ctl", "agents", "--json"]).await;
                out.contains(tool).then_some(())
            },
        )
        .await;
    }

    /// Runs `mcpd ARGS` against this daemon's socket; returns (code, stdout, stderr).
    pub async fn run_cli(&self, args: &[&str]) -> (i32, String, String) {
        run_mcpd(args, Some(&self.socket)).await
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(pid) = self.child.as_ref().and_then(|c| c.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        if std::thread::panicking() {
            eprintln!(
                "--- daemon log ({}) ---\n{}",
                self.log.display(),
                self.log_text()
            );
        }
    }
}

/// Runs the `mcpd` binary with `args` (and `--socket` when given).
pub async fn run_mcpd(args: &[&str], socket: Option<&Path>) -> (i32, String, String) {
    let mut cmd = tokio::process::Command::new(mcpd_bin());
    cmd.args(args)
        .env_remove("MCPD_SOCKET")
        .env_remove("MCPD_CONFIG");
    if let Some(s) = socket {
        cmd.arg("--socket").arg(s);
    }
    let out = within("mcpd command", cmd.output())
        .await
        .expect("run mcpd");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A raw agent: writes lines, reads lines, keeps notifications that arrive while it waits
/// for a response.
pub struct Agent {
    lines: Lines<BufReader<OwnedReadHalf>>,
    write: OwnedWriteHalf,
    next_id: u64,
    pub notifications: Vec<Value>,
    /// Responses read while waiting for another id.
    pub stray: Vec<Value>,
}

impl Agent {
    pub async fn connect(socket: &Path) -> Agent {
        let stream = within("connect", UnixStream::connect(socket))
            .await
            .expect("connect to mcpd");
        let (read, write) = stream.into_split();
        Agent {
            lines: BufReader::new(read).lines(),
            write,
            next_id: 1000,
            notifications: Vec::new(),
            stray: Vec::new(),
        }
    }

    pub async fn send_raw(&mut self, line: &str) {
        self.try_send_raw(line).await.expect("write to mcpd");
    }

    /// Writes a line; an error when mcpd has closed the connection (a refused one).
    pub async fn try_send_raw(&mut self, line: &str) -> std::io::Result<()> {
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        within("write", self.write.write_all(&bytes)).await
    }

    pub async fn send(&mut self, msg: Value) {
        self.send_raw(&msg.to_string()).await;
    }

    /// The next line as JSON; None at EOF.
    pub async fn recv(&mut self) -> Option<Value> {
        let line = within("read a line from mcpd", self.lines.next_line())
            .await
            .ok()??;
        Some(
            serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("mcpd sent non-JSON {line:?}: {e}")),
        )
    }

    /// The next message that is not a notification (a server's list-changed may come
    /// at any time just after it is ready). Panics at EOF.
    pub async fn recv_answer(&mut self) -> Value {
        loop {
            let m = self.recv().await.expect("mcpd closed the connection");
            if m.get("method").is_none() {
                return m;
            }
        }
    }

    /// Reads until the response with `id` (within `WAIT`), keeping what came before.
    pub async fn response(&mut self, id: &Value) -> Value {
        self.response_within(id, WAIT).await
    }

    pub fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Sends a request and returns the whole response message.
    pub async fn request(&mut self, method: &str, params: Option<Value>) -> Value {
        let id = self.fresh_id();
        let mut msg = json!({ "jsonrpc": "2.0", "id": id, "method": method });
        if let Some(p) = params {
            msg["params"] = p;
        }
        self.send(msg).await;
        self.response(&json!(id)).await
    }

    pub async fn initialize(&mut self) -> Value {
        let r = self
            .request(
                "initialize",
                Some(json!({
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": { "name": "it", "version": "1" },
                })),
            )
            .await;
        self.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .await;
        r
    }

    /// All tool names, following cursors.
    pub async fn tool_names(&mut self) -> Vec<String> {
        let mut names = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
            let r = self.request("tools/list", params).await;
            let tools = r["result"]["tools"]
                .as_array()
                .unwrap_or_else(|| panic!("bad tools/list {r}"));
            names.extend(
                tools
                    .iter()
                    .map(|t| t["name"].as_str().expect("name").to_owned()),
            );
            match r["result"]["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return names,
            }
        }
    }

    pub async fn call(&mut self, tool: &str, args: Value) -> Value {
        self.request(
            "tools/call",
            Some(json!({ "name": tool, "arguments": args })),
        )
        .await
    }

    /// Sends a request without waiting; returns its id.
    pub async fn send_request(&mut self, method: &str, params: Option<Value>) -> Value {
        let id = json!(self.fresh_id());
        let mut msg = json!({ "jsonrpc": "2.0", "id": id, "method": method });
        if let Some(p) = params {
            msg["params"] = p;
        }
        self.send(msg).await;
        id
    }

    /// Sends a call without waiting; returns its id.
    pub async fn start_call(&mut self, tool: &str, args: Value) -> Value {
        let id = json!(self.fresh_id());
        self.send(json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": tool, "arguments": args },
        }))
        .await;
        id
    }
}

/// The text of the first content block of a tools/call response.
pub fn text(response: &Value) -> &str {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text result in {response}"))
}

/// The state letter of a process from /proc (R, S, Z, …), None when it no longer exists.
pub fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state follows the command name, which is in parentheses and may contain spaces.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
}

/// Whether a process exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    matches!(proc_state(pid), Some(s) if s != 'Z')
}

/// Pids whose parent is `ppid`.
pub fn children_of(ppid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if parent == Some(ppid) {
            out.push(pid);
        }
    }
    out
}

/// A started daemon whose one fixture server `s` has the `hang` and `pid` tools and
/// records what it receives, an initialized agent, and the server's record file.
pub struct Hanging {
    pub d: Daemon,
    pub agent: Agent,
    pub log: PathBuf,
}

impl Hanging {
    pub async fn start() -> Hanging {
        let d = DaemonBuilder::new();
        let rec = d.dir().join("rec");
        let d = d
            .fixture(
                "s",
                &["--tools", "hang,pid", "--record", rec.to_str().unwrap()],
            )
            .start()
            .await;
        d.wait_ready().await;
        let mut agent = d.initialized_agent().await;
        let pid = text(&agent.call("s__pid", json!({})).await).to_owned();
        let log = rec.join(format!("received-{pid}.log"));
        Hanging { d, agent, log }
    }

    /// Starts a call of `s__hang` and waits until the server has it; returns its id.
    pub async fn hang(&mut self) -> Value {
        let id = self.agent.start_call("s__hang", json!({})).await;
        wait_for_line(&self.log, "\"hang\"").await;
        id
    }
}

/// Waits until a line containing `needle` appears in a fixture `--record` file; returns it.
pub async fn wait_for_line(path: &Path, needle: &str) -> String {
    eventually(
        &format!("{needle:?} in {}", path.display()),
        WAIT,
        || async move { read_lines(path).into_iter().find(|l| l.contains(needle)) },
    )
    .await
}

/// Lines of a fixture `--record` file.
pub fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------- helpers for failure tests

/// The error code of a response; None when it is not an error.
pub fn error_code(response: &Value) -> Option<i64> {
    response["error"]["code"].as_i64()
}

/// The error message of a response; empty when it is not an error.
pub fn error_message(response: &Value) -> &str {
    response["error"]["message"].as_str().unwrap_or("")
}

/// The `pid` of a server status row.
pub fn status_pid(row: &Value) -> Option<u32> {
    row["pid"].as_u64().map(|p| p as u32)
}

/// Sends `sig` to a process; false when it does not exist.
pub fn send_signal(pid: u32, sig: nix::sys::signal::Signal) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).is_ok()
}

/// The command name of a process (`/proc/PID/comm`), None when it no longer exists.
pub fn proc_comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim_end().to_owned())
}

/// Resident set size of a process in KiB, from `/proc/PID/status`.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// The pids in the `starts` file of a fixture `--record` directory, in start order: every
/// process mcpd started with that fixture.
pub fn recorded_starts(dir: &Path) -> Vec<u32> {
    read_lines(&dir.join("starts"))
        .iter()
        .map(|l| l.trim().parse().expect("a pid per line in starts"))
        .collect()
}

/// The methods of the requests a recorded process received, in order.
pub fn recorded_methods(dir: &Path, pid: u32) -> Vec<String> {
    recorded_requests(dir, pid)
        .iter()
        .filter_map(|r| r["method"].as_str().map(str::to_owned))
        .collect()
}

/// The grandchild pid a `--spawn-grandchild --record DIR` fixture with `pid` wrote.
pub fn recorded_grandchild(dir: &Path, pid: u32) -> Option<u32> {
    read_lines(&dir.join(format!("grandchild-{pid}.pid")))
        .first()
        .and_then(|l| l.trim().parse().ok())
}

/// The requests (lines with an id and a method) a `--record`ed fixture received.
pub fn recorded_requests(dir: &Path, pid: u32) -> Vec<Value> {
    read_lines(&dir.join(format!("received-{pid}.log")))
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m.get("id").is_some() && m.get("method").is_some())
        .collect()
}

/// Cleanup for processes a failing test may leave behind: on drop, SIGKILLs each listed
/// pid that still runs the named command. Never used to synchronise.
pub struct KillOnDrop(pub Vec<(u32, &'static str)>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for (pid, comm) in &self.0 {
            if alive(*pid) && proc_comm(*pid).as_deref() == Some(*comm) {
                send_signal(*pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }
}

impl Agent {
    /// Sends a tools/call carrying `_meta.progressToken` without waiting; returns its id.
    pub async fn start_call_with_progress(
        &mut self,
        tool: &str,
        args: Value,
        token: Value,
    ) -> Value {
        let id = json!(self.fresh_id());
        self.send(json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": tool, "arguments": args, "_meta": { "progressToken": token } },
        }))
        .await;
        id
    }
}

/// The parent pid of a process, from `/proc/PID/stat`; None when it no longer exists.
pub fn proc_ppid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
        .and_then(|p| p.parse().ok())
}

impl Agent {
    /// Reads until the response with `id`, waiting up to `limit` in all; notifications and
    /// other responses read meanwhile are kept. A long `limit` suits answers that may
    /// legitimately take longer (a huge flood on a loaded machine).
    pub async fn response_within(&mut self, id: &Value, limit: Duration) -> Value {
        if let Some(i) = self.stray.iter().position(|m| &m["id"] == id) {
            return self.stray.remove(i);
        }
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let line = match tokio::time::timeout_at(deadline, self.lines.next_line()).await {
                Ok(line) => line.ok().flatten(),
                Err(_) => panic!("no answer to {id} within {limit:?}"),
            };
            let line =
                line.unwrap_or_else(|| panic!("connection closed before the answer to {id}"));
            let msg: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("mcpd sent non-JSON {line:?}: {e}"));
            if msg.get("method").is_some() {
                self.notifications.push(msg);
            } else if &msg["id"] == id {
                return msg;
            } else {
                self.stray.push(msg);
            }
        }
    }
}

/// Voluntary context switches of each thread of `pid`: each is the thread going to
/// sleep, so between two reads, how often it was woken.
pub fn wakes(pid: u32) -> std::collections::HashMap<String, u64> {
    let mut each = std::collections::HashMap::new();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the daemon's threads");
    for task in tasks.flatten() {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue; // the thread ended between the listing and the read
        };
        let n = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        each.insert(task.file_name().to_string_lossy().into_owned(), n);
    }
    each
}

/// Waits, window by window up to a deadline, for a window of `span` in which the daemon
/// was woken at most `most` times; the counts of every window seen otherwise.
pub async fn settles(pid: u32, span: std::time::Duration, most: u64) -> Result<u64, Vec<u64>> {
    let mut seen = Vec::new();
    for _ in 0..8 {
        let before = wakes(pid);
        tokio::time::sleep(span).await; // the measured window, not a wait for an event
        // A thread that ended in the window is not counted; one that started counts whole.
        let n = wakes(pid)
            .iter()
            .map(|(tid, &after)| after.saturating_sub(before.get(tid).copied().unwrap_or(0)))
            .sum::<u64>();
        if n <= most {
            return Ok(n);
        }
        seen.push(n);
    }
    Err(seen)
}
