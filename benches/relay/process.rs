//! `Proc`: a child process that is always stopped and reaped, also on panic.

use crate::fixture_bin;
use std::os::fd::OwnedFd;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tokio::net::unix::pipe;

/// A child process that is always stopped and reaped: on `finish` or on drop (also while
/// unwinding). With a grace it gets SIGTERM first, then SIGKILL when the grace runs out.
pub struct Proc {
    child: Option<Child>,
    what: &'static str,
    grace: Duration,
}

impl Proc {
    pub fn spawn(cmd: &mut Command, what: &'static str, grace: Duration) -> Result<Proc, String> {
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
    pub fn fixture(args: &[String]) -> Result<Proc, String> {
        let mut cmd = Command::new(fixture_bin());
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        Proc::spawn(&mut cmd, "mcpd-fixture", Duration::ZERO)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The child's stdin and stdout as async pipes; needs a tokio runtime.
    pub fn take_pipes(&mut self) -> Result<(pipe::Sender, pipe::Receiver), String> {
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
    pub fn finish(&mut self) -> Option<ExitStatus> {
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
