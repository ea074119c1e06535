//! A real `mcpd serve` on a generated config in a temp dir, stopped and reaped by a guard.

use crate::client::{Client, clip};
use crate::machine::{Rss, children_of, comm_and_ppid, rss_of, status_kib};
use crate::process::Proc;
use crate::{DAEMON_GRACE, IDLE_BUF, READY_WAIT, WAIT, fixture_bin, mcpd_bin};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio::net::UnixStream;

pub fn temp_dir() -> Result<tempfile::TempDir, String> {
    // Short paths: a Unix socket path must fit in about 108 bytes.
    tempfile::Builder::new()
        .prefix("mcpd-bench")
        .tempdir_in("/tmp")
        .map_err(|e| format!("temp dir: {e}"))
}

pub struct ServerDef {
    pub name: String,
    /// What runs it: the fixture unless told otherwise.
    pub command: String,
    pub args: Vec<String>,
    /// More keys of the server's table, as TOML lines (`share = "project"`, `cwd = …`).
    pub lines: Vec<String>,
}

impl ServerDef {
    /// A fixture server shared by every agent (the config's default).
    pub fn shared(name: impl Into<String>, args: Vec<String>) -> ServerDef {
        ServerDef::command(name, fixture_bin(), args)
    }

    /// A shared server run by `command`.
    pub fn command(name: impl Into<String>, command: &str, args: Vec<String>) -> ServerDef {
        ServerDef {
            name: name.into(),
            command: command.to_owned(),
            args,
            lines: Vec::new(),
        }
    }

    /// Run per project: one instance per project, started in that project's directory.
    pub fn per_project(name: impl Into<String>, args: Vec<String>) -> ServerDef {
        ServerDef {
            name: name.into(),
            command: fixture_bin().to_owned(),
            args,
            lines: vec![
                "share = \"project\"".into(),
                format!("cwd = {}", toml_str("${PROJECT}")),
            ],
        }
    }

    fn instanced(&self) -> bool {
        self.lines
            .iter()
            .any(|l| l.starts_with("share = ") && !l.contains("shared"))
    }
}

pub fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// A running `mcpd serve` on a generated config in a temp dir. Dropping it (also while
/// unwinding) sends SIGTERM, then SIGKILL after `DAEMON_GRACE`, and reaps it.
pub struct Daemon {
    log: PathBuf,
    pub socket: PathBuf,
    /// The servers that run themselves (not per project or per agent): what `wait_ready`
    /// waits for.
    servers: usize,
    proc: Proc,
    _dir: tempfile::TempDir,
}

impl Daemon {
    pub fn start(servers: &[ServerDef], daemon_lines: &[String]) -> Result<Daemon, String> {
        Daemon::start_with_env(servers, daemon_lines, None)
    }

    /// As `start`, with only the variables `env` in mcpd's environment when given.
    pub fn start_with_env(
        servers: &[ServerDef],
        daemon_lines: &[String],
        env: Option<&[(String, String)]>,
    ) -> Result<Daemon, String> {
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
                toml_str(&s.command),
                serde_json::to_string(&s.args).expect("args serialize"),
            ));
            for l in &s.lines {
                config.push_str(l);
                config.push('\n');
            }
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
        if let Some(env) = env {
            cmd.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
        }
        let proc = Proc::spawn(&mut cmd, "mcpd", DAEMON_GRACE)?;
        Ok(Daemon {
            log,
            socket,
            servers: servers.iter().filter(|s| !s.instanced()).count(),
            proc,
            _dir: dir,
        })
    }

    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    pub fn rss(&self) -> Option<Rss> {
        rss_of(self.pid())
    }

    pub fn hwm_kib(&self) -> Option<u64> {
        status_kib(self.pid(), "VmHWM")
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Connects, retrying until the socket accepts or `WAIT` passes.
    pub async fn connect(&self, buf: usize) -> Result<Client, String> {
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

    pub async fn status(&self) -> Result<Value, String> {
        let mut c = self.connect(IDLE_BUF).await?;
        c.request("mcpd/status", None).await
    }

    /// Polls `mcpd/status` until every configured server that runs itself is `ready`
    /// (a server run per project or per agent only runs as instances).
    pub async fn wait_ready(&self) -> Result<Duration, String> {
        let start = Instant::now();
        loop {
            let status = self.status().await?;
            let servers: Vec<&Value> = status["servers"]
                .as_array()
                .map_or(&[][..], Vec::as_slice)
                .iter()
                .filter(|s| s["share"].as_str().is_none_or(|m| m == "shared"))
                .collect();
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
    pub fn shutdown(mut self) -> Result<(), String> {
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
