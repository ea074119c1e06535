//! Child processes of stdio upstreams.
//!
//! Spawning them contained, reading their stderr, stopping and reaping them.

use super::sandbox::{Egress, Via};
use crate::config::StdioLaunch;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;

/// The read buffer of a server's stderr.
const STDERR_BUFFER: usize = 1024;
/// Longest stderr line kept; longer ones are cut, so a server cannot grow our memory.
const STDERR_LINE_MAX: usize = 2048;
/// Stderr lines kept per server.
pub const STDERR_TAIL_LINES: usize = 40;

/// Why a server's process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("cannot start '{command}': cwd '{}' is not a directory", cwd.display())]
    NotADirectory {
        command: String,
        cwd: std::path::PathBuf,
    },
    #[error("cannot start '{command}': {source}")]
    Exec {
        command: String,
        source: std::io::Error,
    },
    #[error("the process exited before its pid was read")]
    NoPid,
    #[error("the child's pipes were not set up")]
    NoPipes,
    /// The server cannot be confined as its profile asks: it is not started unconfined.
    #[error("not started: {0}")]
    Sandbox(String),
}

impl SpawnError {
    /// Whether starting again cannot help until the config or the machine changes.
    pub fn fatal(&self) -> bool {
        matches!(self, SpawnError::Sandbox(_))
    }
}

pub struct Spawned {
    /// With a host list: the listener of its proxy and what the proxy lets through.
    pub egress: Option<(std::net::TcpListener, std::sync::Arc<crate::egress::Allow>)>,
    pub child: Child,
    pub pid: u32,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
}

/// Starts the server's process in its own process group, with a parent-death signal so
/// that even a `kill -9` of mcpd takes the child down with it; confined when `sandbox`
/// is given (its environment is then only the one prepared).
pub fn spawn(
    cfg: &StdioLaunch,
    sandbox: Option<super::sandbox::Prepared>,
) -> Result<Spawned, SpawnError> {
    if let Some(cwd) = &cfg.cwd
        && !cwd.is_dir()
    {
        return Err(SpawnError::NotADirectory {
            command: cfg.command.clone(),
            cwd: cwd.clone(),
        });
    }
    let mut cmd = Command::new(&cfg.command);
    cmd.args(&cfg.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        // A backstop only: every path through the connection task stops and reaps the
        // child itself.
        .kill_on_drop(true);
    // mcpd's own variables and systemd's are not the server's; its `env` table, applied
    // after, is passed whole (the user wrote it, `MCPD_*` names included).
    crate::inherit::scrub_env(&mut cmd);
    cmd.envs(&cfg.env);
    if let Some(cwd) = &cfg.cwd {
        cmd.current_dir(cwd);
    }
    let (mut ruleset, seccomp, egress, private) = match sandbox {
        Some(prepared) => {
            cmd.env_clear().envs(prepared.env);
            (
                Some(prepared.ruleset),
                prepared.seccomp,
                prepared.egress,
                prepared.private,
            )
        }
        None => (None, None, None, None),
    };
    // The child's side of a namespace of its own goes into `pre_exec`; mcpd keeps the
    // rest to receive the listener, or the listener it made itself.
    let (namespace, egress) = match egress {
        Some(Egress {
            allow,
            via: Via::Namespace(iso),
        }) => {
            let (child, parent) = iso.split();
            (Some(child), Some((allow, Ok(parent))))
        }
        Some(Egress {
            allow,
            via: Via::Loopback(l),
        }) => (None, Some((allow, Err(l)))),
        None => (None, None),
    };
    let confined = ruleset.is_some();
    let parent = std::process::id();
    let open_files = crate::inherit::OpenFiles::started_with();
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls (setrlimit, prctl, getppid, geteuid, those of the
    // namespaces listed below and in `Private::enter` and `init::split`, which fork by
    // system call and return in the server's process only, landlock_restrict_self, the
    // ruleset's close, seccomp) and possibly _exit; it allocates nothing (`open_files`,
    // the ruleset, the filter and the namespaces' paths were made before the fork).
    unsafe {
        cmd.pre_exec(move || {
            open_files.restore()?;
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            // mcpd died between fork and prctl: the signal will never come, so go now.
            if nix::unistd::getppid().as_raw() as u32 != parent {
                nix::libc::_exit(1);
            }
            // The Landlock ruleset was built in the daemon: only `prctl(NO_NEW_PRIVS)`
            // and `landlock_restrict_self` run here (no allocation, no lock). A ruleset
            // that is not wholly enforced fails the spawn: never run it unconfined.
            // Its own user and network namespaces, and the proxy's listener sent to
            // mcpd: unshare, open/write/close of its /proc maps, socket, ioctl, bind,
            // listen, sendmsg and close, on memory prepared before the fork.
            // With its own mounts and processes (user namespaces work), the same
            // namespaces and more in one step; past it, this is the server's process,
            // PID 2 of its namespace.
            match (&private, &namespace) {
                (Some(private), net) => private.enter(net.as_ref())?,
                (None, Some(namespace)) => namespace.enter()?,
                (None, None) => {}
            }
            if confined && nix::unistd::geteuid().is_root() {
                drop_capabilities();
            }
            if let Some(ruleset) = ruleset.as_mut().and_then(Option::take) {
                let enforced = ruleset
                    .restrict_self()
                    .is_ok_and(|s| s.ruleset == landlock::RulesetStatus::FullyEnforced);
                if !enforced {
                    return Err(std::io::Error::from_raw_os_error(nix::libc::EPERM));
                }
            }
            // The filter was compiled in the daemon; installing it is one prctl and one
            // seccomp call on it as it stands.
            if let Some(filter) = &seccomp
                && seccompiler::apply_filter(filter).is_err()
            {
                return Err(std::io::Error::from_raw_os_error(nix::libc::EPERM));
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|source| match source.raw_os_error() {
        Some(nix::libc::EPERM) if confined => SpawnError::Sandbox(
            "the kernel did not enforce its sandbox; it is not run unconfined".into(),
        ),
        _ if confined && !is_exec_error(&source) => SpawnError::Sandbox(format!(
            "its sandbox could not be set up ({source}); it is not run unconfined"
        )),
        _ => SpawnError::Exec {
            command: cfg.command.clone(),
            source,
        },
    })?;
    let egress = match egress {
        Some((allow, Ok(parent))) => match parent.receive() {
            Ok(listener) => Some((listener, allow)),
            Err(e) => {
                // Dropping the child kills it (kill_on_drop); it never served.
                return Err(SpawnError::Sandbox(format!(
                    "the proxy listener of its own network did not come back ({e}); it is not run unconfined"
                )));
            }
        },
        Some((allow, Err(listener))) => Some((listener, allow)),
        None => None,
    };
    let pid = child.id().ok_or(SpawnError::NoPid)?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(SpawnError::NoPipes);
    };
    widen_pipe(&stdout);
    Ok(Spawned {
        egress,
        child,
        pid,
        stdin,
        stdout,
        stderr,
    })
}

/// Whether a spawn failed at exec (the command is missing or not executable) rather
/// than in the sandbox's steps before it.
fn is_exec_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
    ) || e.raw_os_error() == Some(nix::libc::ENOEXEC)
}

/// Empties the capability bounding set, so a confined server started by a root mcpd
/// holds no capability after exec: Landlock keeps a confined process from `ptrace` and
/// from the `/proc` files it guards, but a process with `CAP_SYS_PTRACE` still reads
/// another's `/proc/PID/environ`. Only `prctl` calls: safe between fork and exec.
fn drop_capabilities() {
    // Capabilities beyond the kernel's last give EINVAL, which is as good as dropped.
    for cap in 0..64 {
        // SAFETY: PR_CAPBSET_DROP takes an integer and touches no memory.
        unsafe {
            nix::libc::prctl(nix::libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
    }
}

/// The capacity asked for the pipe a server's answers come through (the kernel's default
/// is 64 KiB).
const ANSWER_PIPE_BYTES: nix::libc::c_int = 256 * 1024;

/// Widens the pipe mcpd reads a server's answers from to [`ANSWER_PIPE_BYTES`]. mcpd
/// passes an answer on once it has all of it; through a 64 KiB pipe a 1 MiB answer comes
/// in sixteen steps, each waiting for mcpd to read the last, and in the relay benchmark
/// 1 MiB calls ran at 0.47–0.98 (c=1) and 0.72–0.77 (c=8) of the bare hop against
/// 0.92–0.98 and 0.78–1.01 with 256 KiB (three runs each, docs/performance.md). The
/// pages are the kernel's only while an answer is in the pipe, but a user's pipes are
/// limited in total capacity (`/proc/sys/fs/pipe-user-pages-soft`, 64 MiB by default)
/// and the kernel refuses a wider pipe near that limit: the server then keeps the
/// default size, which works as before.
fn widen_pipe(stdout: &ChildStdout) {
    use std::os::fd::AsRawFd;
    if let Err(e) = nix::fcntl::fcntl(
        stdout.as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETPIPE_SZ(ANSWER_PIPE_BYTES),
    ) {
        tracing::debug!("the server's stdout pipe keeps its size ({e})");
    }
}

/// Reads the child's stderr line by line into the log and the connection's tail, with
/// the values of its secrets masked in both.
/// Lines are cut at `STDERR_LINE_MAX`; if the connection is busy the line still reaches
/// the log but may miss the tail.
pub async fn read_stderr(
    server: std::sync::Arc<str>,
    stderr: ChildStderr,
    tx: mpsc::Sender<String>,
    mask: std::sync::Arc<crate::secrets::Mask>,
) {
    // 1 KiB, not the default 8: every server holds this buffer for as long as it runs,
    // and stderr carries short log lines (a longer one takes a few reads).
    let mut reader = tokio::io::BufReader::with_capacity(STDERR_BUFFER, stderr);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match read_line_capped(&mut reader, &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf);
                let line = mask.apply(line.trim_end()).into_owned();
                // Escaped for the daemon's log: a carriage return or an escape sequence
                // there would rewrite the line a person reads (`visible.rs`).
                let shown = mcpd_ctl::visible::Visible(&line);
                tracing::info!(target: "mcpd::stderr", upstream = %server, "{shown}");
                // A full queue means the connection is busy; the log line above suffices.
                let _ = tx.try_send(line);
            }
        }
    }
}

/// Reads one line, keeping at most `STDERR_LINE_MAX` bytes of it and discarding the rest.
async fn read_line_capped<R: AsyncBufReadExt + Unpin>(
    r: &mut R,
    out: &mut Vec<u8>,
) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(total);
        }
        let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = STDERR_LINE_MAX.saturating_sub(out.len());
        out.extend_from_slice(chunk.get(..take.min(room)).unwrap_or_default());
        r.consume(take);
        total += take;
        if done {
            return Ok(total);
        }
    }
}

/// A bounded ring of the last stderr lines.
#[derive(Debug, Default)]
pub struct StderrTail(VecDeque<String>);

impl StderrTail {
    pub fn push(&mut self, line: String) {
        if self.0.len() == STDERR_TAIL_LINES {
            self.0.pop_front();
        }
        self.0.push_back(line);
    }

    pub fn lines(&self) -> Vec<String> {
        self.0.iter().cloned().collect()
    }
}

/// Describes an exit status for people: "exit status 3" or "killed by SIGKILL".
pub fn describe(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => match Signal::try_from(sig) {
            Ok(s) => format!("killed by {s}"),
            Err(_) => format!("killed by signal {sig}"),
        },
        _ => status.to_string(),
    }
}

/// Stops the process group: the caller has already closed stdin; wait `grace`, then
/// SIGTERM the group, wait `grace`, then SIGKILL it. Always reaps the child and kills
/// whatever is left of its group (grandchildren), so nothing outlives the connection.
pub async fn stop(child: &mut Child, pid: u32, grace: Duration) -> String {
    let status = match tokio::time::timeout(grace, child.wait()).await {
        Ok(r) => r,
        Err(_) => {
            signal_group(pid, Signal::SIGTERM);
            match tokio::time::timeout(grace, child.wait()).await {
                Ok(r) => r,
                Err(_) => {
                    signal_group(pid, Signal::SIGKILL);
                    child.wait().await
                }
            }
        }
    };
    reap_group(pid).await;
    match status {
        Ok(s) => describe(&s),
        Err(e) => format!("unknown exit status ({e})"),
    }
}

/// After the leader has exited, kills the rest of its process group and reaps it. mcpd is
/// a child subreaper, so once the leader is gone the rest of its group are mcpd's
/// children: `waitpid(-pgid)` reaps exactly those, never another server's process.
/// Bounded: a member stuck in the kernel is left to the orphan sweep.
pub async fn reap_group(pid: u32) {
    signal_group(pid, Signal::SIGKILL);
    let group = Pid::from_raw(-(pid as i32));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        match waitpid(group, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok(WaitStatus::StillAlive) => return,
            Ok(_) => {}       // reaped one; look for more
            Err(_) => return, // ECHILD: none of the group is left
        }
    }
}

/// Kills a server's whole group at once; a last resort at shutdown.
pub fn kill_group(pid: u32) {
    signal_group(pid, Signal::SIGKILL);
}

fn signal_group(pid: u32, sig: Signal) {
    // ESRCH means the group is already empty, which is the goal.
    let _ = killpg(Pid::from_raw(pid as i32), sig);
}
