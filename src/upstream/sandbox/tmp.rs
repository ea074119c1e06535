//! The private temporary directories of confined servers.
//!
//! They live at `$TMPDIR/mcpd-UID/sandbox/daemon.PID/NAME`: one directory per running
//! daemon, held by a lock while it runs, removed at its exit, and removed at another
//! daemon's start once nobody holds its lock.
//!
//! Every daemon of a user shares `$TMPDIR/mcpd-UID`, and two of them may run servers of
//! the same name: keyed by server alone, their servers shared one directory, and so read
//! each other's files. A daemon's directory is named by its pid (unique among running
//! processes) and claimed with an `flock` on `daemon.PID.lock` beside it. A pid can be
//! used again, a lock cannot outlive its process: a lock nobody holds marks a directory
//! whose daemon is gone (killed before it could remove it), which the next daemon to
//! start removes. Nothing else there is touched (the directories of earlier versions,
//! `sandbox/NAME`, have no lock).

use super::SandboxError;
use nix::fcntl::{Flock, FlockArg};
use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// This daemon's directory, set once by [`claim`].
static OWN: OnceLock<PathBuf> = OnceLock::new();

/// The start of every daemon directory's name (no server name has a `.`).
const PREFIX: &str = "daemon.";
const LOCK: &str = ".lock";

/// Where every daemon of this user keeps its servers' temporary directories.
fn base() -> PathBuf {
    let uid = nix::unistd::getuid().as_raw();
    std::env::temp_dir()
        .join(format!("mcpd-{uid}"))
        .join("sandbox")
}

/// A server's name as a file name.
pub(super) fn file_name(server: &str) -> String {
    server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Where the server's private temporary directory is: in this daemon's directory, or,
/// in a process that is no daemon (`check-config`), where a daemon would put it, with
/// `PID` standing for the daemon's pid.
pub fn temp_path(server: &str) -> PathBuf {
    let own = OWN
        .get()
        .cloned()
        .unwrap_or_else(|| base().join(format!("{PREFIX}PID")));
    own.join(file_name(server))
}

/// The server's private temporary directory (made 0700 if missing). In a daemon that
/// could not claim its directory (it said why), one named by its pid all the same, which
/// no one sweeps or removes.
pub fn temp_dir(server: &str) -> Result<PathBuf, SandboxError> {
    let own = OWN
        .get()
        .cloned()
        .unwrap_or_else(|| base().join(format!("{PREFIX}{}", std::process::id())));
    let dir = own.join(file_name(server));
    make_private(&dir).map_err(|source| SandboxError::Temp {
        dir: dir.clone(),
        source,
    })?;
    Ok(dir)
}

/// A directory only this user can use: made 0700 (with its parents) if missing, and
/// refused when it, or `$TMPDIR/mcpd-UID` above it, is a symlink or another user's.
#[allow(
    clippy::disallowed_methods,
    reason = "a few local calls at the daemon's start and before a spawn"
)]
fn make_private(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let uid = nix::unistd::getuid().as_raw();
    let top = base();
    for d in [top.parent().unwrap_or(&top), dir] {
        let meta = std::fs::symlink_metadata(d)?;
        if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "{} is not a directory only this user may write",
                    d.display()
                ),
            ));
        }
    }
    Ok(())
}

/// This daemon's hold on its directory, until [`Claim::release`] (or its exit).
pub struct Claim {
    dir: PathBuf,
    lock: PathBuf,
    /// The `flock`, held as long as this is.
    _held: Flock<File>,
}

/// Claims this daemon's directory: `daemon.PID` (`daemon.PID-N` when a daemon of the
/// same pid in another pid namespace holds that), what a killed daemon of the same pid
/// left there removed. Servers' directories are made in it from then on.
#[allow(
    clippy::disallowed_methods,
    reason = "a few local calls at the daemon's start"
)]
pub fn claim() -> std::io::Result<Claim> {
    let base = base();
    make_private(&base)?;
    let pid = std::process::id();
    for n in 0..8 {
        let name = match n {
            0 => format!("{PREFIX}{pid}"),
            n => format!("{PREFIX}{pid}-{n}"),
        };
        let lock = base.join(format!("{name}{LOCK}"));
        let Some(held) = lock_if_free(&lock)? else {
            continue;
        };
        let dir = base.join(&name);
        // Unlocked: whatever is there was left by a daemon that is gone.
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        make_private(&dir)?;
        let _ = OWN.set(dir.clone()); // set once: a daemon claims once
        return Ok(Claim {
            dir,
            lock,
            _held: held,
        });
    }
    Err(std::io::Error::other(
        "every directory name for this pid is held by a running daemon",
    ))
}

impl Claim {
    /// Removes the directory and its lock: at exit, once every server has stopped.
    #[allow(clippy::disallowed_methods, reason = "the last steps of shutdown")]
    pub fn release(self) {
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            tracing::warn!(dir = %self.dir.display(), "could not remove the servers' temporary directories: {e}");
        }
        // Unlinked while held, so no one else can take this lock meanwhile; the next
        // daemon of this pid makes a new one.
        let _ = std::fs::remove_file(&self.lock); // gone already: nothing to remove
    }
}

/// The lock at `path` (made if missing) when no one holds it; None when a running
/// daemon does.
#[allow(
    clippy::disallowed_methods,
    reason = "local calls at the daemon's start"
)]
fn lock_if_free(path: &Path) -> std::io::Result<Option<Flock<File>>> {
    // A daemon sweeping may unlink a free lock between our open and our flock: then we
    // hold a lock on a file no longer there, and open it again.
    for _ in 0..4 {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(path)?;
        let held = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(held) => held,
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => return Ok(None),
            Err((_, e)) => return Err(e.into()),
        };
        let same = match (held.metadata(), std::fs::symlink_metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
        if same {
            return Ok(Some(held));
        }
    }
    Err(std::io::Error::other(format!(
        "{} keeps changing",
        path.display()
    )))
}

/// Removes the directories of daemons that are gone: each `daemon.*.lock` nobody holds,
/// with its directory. Blocking: it may remove many files, so it runs on a blocking
/// thread at the daemon's start. Returns how many it removed.
#[allow(clippy::disallowed_methods, reason = "runs on a blocking thread")]
pub fn sweep() -> usize {
    let base = base();
    let Ok(entries) = std::fs::read_dir(&base) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(stem) = name
            .to_str()
            .filter(|n| n.starts_with(PREFIX))
            .and_then(|n| n.strip_suffix(LOCK))
        else {
            continue;
        };
        let lock = entry.path();
        if OWN
            .get()
            .is_some_and(|own| own.file_name() == Some(stem.as_ref()))
        {
            continue;
        }
        // Held: its daemon runs. Unreadable or changing: not ours to judge.
        let Ok(Some(_held)) = lock_if_free(&lock) else {
            continue;
        };
        let dir = base.join(stem);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::debug!(dir = %dir.display(), "could not remove a gone daemon's temporary directories: {e}");
                continue;
            }
        }
        let _ = std::fs::remove_file(&lock); // removed meanwhile by another daemon's sweep
    }
    removed
}
