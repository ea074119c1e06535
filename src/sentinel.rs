//! The sentinel: a tiny helper process that kills every server's process group if mcpd dies.
//!
//! It acts when mcpd itself dies without cleaning up.
//!
//! Each server's process gets a parent-death signal, but its own children (an `npx`
//! that starts `node`, a helper a server spawns) do not inherit it. So mcpd starts one
//! `mcpd __sentinel` process, outside every server group, and tells it over a pipe each
//! process group it creates (`+PGID`) and retires (`-PGID`). When that pipe reaches EOF
//! without a final `clean` line — mcpd was killed, even with SIGKILL — the sentinel
//! SIGKILLs every group still listed and exits.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::collections::BTreeSet;
use std::io::BufRead;
use std::process::Stdio;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

/// Lines queued for the sentinel; it reads continuously, so this never fills in practice.
const QUEUE: usize = 1024;

/// The daemon's side: a cloneable sender of group changes.
#[derive(Debug, Clone)]
pub struct SentinelHandle {
    tx: mpsc::Sender<String>,
    pid: Option<u32>,
}

impl SentinelHandle {
    /// Starts the sentinel. Without one (it failed to start), servers' grandchildren may
    /// outlive a mcpd that is killed with SIGKILL; everything else still works.
    pub fn start() -> (SentinelHandle, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<String>(QUEUE);
        let child = std::env::current_exe().and_then(|exe| {
            let mut cmd = tokio::process::Command::new(exe);
            cmd.arg("__sentinel")
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                // Its own group: a Ctrl-C in the terminal must not end it before mcpd
                // has cleaned up.
                .process_group(0);
            // It reads only its pipe: nothing of mcpd's own or systemd's variables.
            crate::inherit::scrub_env(&mut cmd);
            cmd.spawn()
        });
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(
                    "cannot start the sentinel process ({e}); grandchildren of servers may outlive a killed mcpd"
                );
                let task =
                    mcpd_runtime::tracker::spawn(async move { while rx.recv().await.is_some() {} });
                return (SentinelHandle { tx, pid: None }, task);
            }
        };
        let pid = child.id();
        let mut stdin = child.stdin.take();
        // The IO task owns the pipe; it ends after the daemon says `clean` and drops
        // every handle, then reaps the sentinel.
        let task = mcpd_runtime::tracker::spawn(async move {
            while let Some(line) = rx.recv().await {
                if let Some(pipe) = stdin.as_mut()
                    && pipe.write_all(line.as_bytes()).await.is_err()
                {
                    tracing::warn!("the sentinel process is gone");
                    stdin = None;
                }
            }
            drop(stdin);
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), child.wait()).await;
        });
        (SentinelHandle { tx, pid }, task)
    }

    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    pub fn watch(&self, pgid: u32) {
        self.send(format!("+{pgid}\n"));
    }

    pub fn forget(&self, pgid: u32) {
        self.send(format!("-{pgid}\n"));
    }

    /// Says every group was stopped by mcpd itself: nothing to kill at EOF.
    pub fn clean(&self) {
        self.send("clean\n".into());
    }

    fn send(&self, line: String) {
        if self.tx.try_send(line).is_err() {
            tracing::warn!("the sentinel queue is full or closed; a group change was not recorded");
        }
    }
}

/// `mcpd __sentinel`: the helper's whole program.
pub fn run() -> std::process::ExitCode {
    // Signals aimed at the terminal's foreground group or at a service's main process
    // must not end the sentinel before mcpd is gone.
    use nix::sys::signal::{SigHandler, signal};
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: setting a signal to SIG_IGN installs no handler code.
        let _ = unsafe { signal(sig, SigHandler::SigIgn) };
    }
    let mut groups = BTreeSet::new();
    let mut clean = false;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        clean = false;
        if line == "clean" {
            clean = true;
        } else if let Some(pgid) = line.strip_prefix('+').and_then(|p| p.parse::<i32>().ok()) {
            groups.insert(pgid);
        } else if let Some(pgid) = line.strip_prefix('-').and_then(|p| p.parse::<i32>().ok()) {
            groups.remove(&pgid);
        }
    }
    if !clean {
        for pgid in groups {
            // ESRCH: that group is already gone.
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
    std::process::ExitCode::SUCCESS
}
