//! What mcpd's child processes inherit from it, and what they must not.
//!
//! Its own and systemd's environment variables, the open-files limit it raised for
//! itself, the descriptors it inherited.
//!
//! Servers run as mcpd's user but are other people's programs: what mcpd was given for
//! itself (by systemd, by the shell that started it) is not theirs. Every child goes
//! through here: servers and era probes (`upstream/process.rs`), and the sentinel.

use nix::sys::resource::{Resource, getrlimit, rlim_t, setrlimit};
use std::ffi::OsStr;
use std::sync::OnceLock;

/// The prefix of mcpd's own variables (`MCPD_SOCKET`, `MCPD_CONFIG`, …): they name this
/// daemon's socket and config, which a server has no business finding through them.
const OWN_PREFIX: &[u8] = b"MCPD_";

/// Whether `name` is one of mcpd's own variables or one systemd set for mcpd.
fn is_private(name: &OsStr) -> bool {
    name.as_encoded_bytes().starts_with(OWN_PREFIX)
        || crate::systemd::PRIVATE_ENV
            .iter()
            .any(|p| OsStr::new(p) == name)
}

/// Takes mcpd's own (`MCPD_*`) and systemd's ([`crate::systemd::PRIVATE_ENV`])
/// variables out of what `cmd`'s child inherits; the rest of mcpd's environment passes.
/// Call it before setting the child's own variables: a variable set afterwards (a
/// server's `env` table) is passed, whatever its name.
pub fn scrub_env(cmd: &mut tokio::process::Command) {
    for name in crate::systemd::PRIVATE_ENV {
        cmd.env_remove(name);
    }
    for (name, _) in std::env::vars_os() {
        if is_private(&name) {
            cmd.env_remove(name);
        }
    }
}

/// The open-files limit (soft, hard) mcpd started with, set once it raised its own.
static STARTED_WITH: OnceLock<(rlim_t, rlim_t)> = OnceLock::new();

/// Raises the soft limit on open files to the hard one, and remembers the limit mcpd
/// started with for its children ([`OpenFiles`]), as systemd advises: a program that
/// uses `select` breaks on descriptors above 1,024. Each agent on the socket holds a
/// descriptor, each server three pipes (and an HTTP server its connections), so 512
/// agents (`max_agents`' default) with a few dozen servers come near the usual soft limit
/// of 1,024 (systemd's default too). The daemon polls with epoll, never `select`, so
/// descriptors above 1,024 are fine for it.
pub fn raise_open_files() {
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => {
                // Raised once per process: a second call finds soft = hard and comes not here.
                let _ = STARTED_WITH.set((soft, hard));
                tracing::debug!(from = soft, to = hard, "raised the open files limit");
            }
            Err(e) => tracing::warn!(limit = soft, "could not raise the open files limit: {e}"),
        },
        Ok(_) => {}
        Err(e) => tracing::warn!("could not read the open files limit: {e}"),
    }
}

/// The open-files limit a child gets back: the one mcpd started with, if mcpd raised its
/// own. Read in the parent; [`OpenFiles::restore`] runs in the forked child.
#[derive(Debug, Clone, Copy)]
pub struct OpenFiles(Option<(rlim_t, rlim_t)>);

impl OpenFiles {
    pub fn started_with() -> OpenFiles {
        OpenFiles(STARTED_WITH.get().copied())
    }

    /// Sets the limit mcpd started with. Made to run between fork and exec: one
    /// `setrlimit`, which is async-signal-safe, and no allocation (an errno becomes an
    /// `io::Error` without one). Lowering a soft limit cannot fail but for a bad
    /// argument; if it does, the child does not start.
    pub fn restore(self) -> std::io::Result<()> {
        match self.0 {
            Some((soft, hard)) => {
                setrlimit(Resource::RLIMIT_NOFILE, soft, hard).map_err(std::io::Error::from)
            }
            None => Ok(()),
        }
    }
}

/// Marks every descriptor from 3 up close-on-exec, so none that mcpd inherited without
/// the flag (from a shell, a supervisor, a careless parent) reaches a child. mcpd's own
/// descriptors have it already (std, tokio and `sd_notify::listen_fds` open everything
/// close-on-exec); the sockets systemd passes (3 and up) keep working in mcpd, which uses
/// them in-process. Call it once, before the first child is started.
pub fn close_inherited_on_exec() {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC closes nothing and touches no memory
    // of ours: it sets a flag on each open descriptor in the range. The raw system call,
    // not libc's wrapper, which older C libraries lack.
    let done = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_close_range,
            3 as nix::libc::c_uint,
            nix::libc::c_uint::MAX,
            nix::libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if done != 0 {
        // Kernels before 5.11 lack the flag (before 5.9, the call): one by one instead.
        mark_each_listed();
    }
}

/// Sets close-on-exec on each descriptor from 3 up that `/proc/self/fd` lists.
#[allow(
    clippy::disallowed_methods,
    reason = "one procfs listing, once at start, before any agent is served"
)]
fn mark_each_listed() {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    let Ok(listing) = std::fs::read_dir("/proc/self/fd") else {
        tracing::debug!("cannot list /proc/self/fd; inherited descriptors keep their flags");
        return;
    };
    // Collected first: the listing holds a descriptor of its own while it is read.
    let fds: Vec<i32> = listing
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd >= 3)
        .collect();
    for fd in fds {
        if let Ok(bits) = fcntl(fd, FcntlArg::F_GETFD) {
            let flags = FdFlag::from_bits_truncate(bits) | FdFlag::FD_CLOEXEC;
            // EBADF: it was the listing's own, closed since.
            let _ = fcntl(fd, FcntlArg::F_SETFD(flags));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcpds_and_systemds_variables_are_private_and_the_users_are_not() {
        let check = |name: &str, private: bool| {
            assert_eq!(is_private(OsStr::new(name)), private, "{name}");
        };
        check("MCPD_SOCKET", true);
        check("MCPD_CONFIG", true);
        check("MCPD_", true);
        check("NOTIFY_SOCKET", true);
        check("LISTEN_FDS", true);
        check("CREDENTIALS_DIRECTORY", true);
        check("JOURNAL_STREAM", true);
        check("mcpd_socket", false);
        check("XMCPD_SOCKET", false);
        check("NOTIFY_SOCKETS", false);
        check("PATH", false);
        check("HOME", false);
        check("XDG_RUNTIME_DIR", false);
    }

    #[test]
    fn a_scrubbed_command_removes_the_private_names_and_keeps_what_is_set_after() {
        let mut cmd = tokio::process::Command::new("true");
        scrub_env(&mut cmd);
        cmd.env("MCPD_SOCKET", "/elsewhere.sock");
        let envs: Vec<_> = cmd.as_std().get_envs().collect();
        assert!(
            envs.contains(&(OsStr::new("NOTIFY_SOCKET"), None)),
            "{envs:?}"
        );
        assert!(
            envs.contains(&(
                OsStr::new("MCPD_SOCKET"),
                Some(OsStr::new("/elsewhere.sock"))
            )),
            "{envs:?}"
        );
    }
}
