//! A confined server's own mount and PID namespaces (where user namespaces work).
//!
//! The VCS files of its writable trees read-only, a private `/dev/shm`, and a `/proc`
//! that shows its own processes only; prepared in the daemon, made between fork and exec.
//!
//! In the child, before Landlock and seccomp (Landlock forbids any change of mounts once
//! applied, which is also what keeps the server from undoing these):
//! - a new user namespace with mount, PID (and, with a host list, network) namespaces;
//! - each writable grant's `.git` bound onto itself (a mount point cannot be renamed or
//!   removed: EBUSY, so the server cannot swap in a `.git` of its own), and its
//!   `config` and `hooks` bound read-only;
//! - a small tmpfs on `/dev/shm` ([`SHM_SIZE`]), granted writable in the server's
//!   Landlock ruleset (Landlock rules hold inodes, and this one did not exist when the
//!   ruleset was built: the grant is added through a second descriptor of the ruleset);
//! - then `init.rs` forks the namespace's init, which mounts `/proc` afresh.

use super::SandboxError;
use super::init;
use super::netns::{ChildSide, Maps, check, loopback_up};
use landlock::{ABI, Access, AccessFs, RulesetCreated};
use nix::libc;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The size of a confined server's private `/dev/shm` (and at most this many files in it).
pub const SHM_SIZE: &CStr = c"size=64m,nr_inodes=16384,mode=1777";
/// The size, as docs and status say it.
pub const SHM_SHOWN: &str = "64 MiB";

/// Setting this to `0` in the daemon's environment makes it take user namespaces as
/// unavailable (tests check the fallback with it).
pub const USERNS_OVERRIDE: &str = "MCPD_USERNS";

/// Whether this process may make a user namespace with its own network, mounts and
/// processes and set a server up in it (Ubuntu's AppArmor and some distributions'
/// settings forbid it; a container's masked `/proc` forbids a procfs of its own), tried
/// once in a forked child through the very steps a confined server's child takes. The
/// daemon asks before its supervisor reaps children, so the child's status is this
/// call's to read.
pub fn userns_works() -> bool {
    static SEEN: OnceLock<bool> = OnceLock::new();
    *SEEN.get_or_init(|| {
        if std::env::var(USERNS_OVERRIDE).is_ok_and(|v| v == "0") {
            return false;
        }
        let Ok(probe) = Private::probe() else {
            return false;
        };
        // SAFETY: the child only makes system calls on memory prepared before the fork
        // (those of `Private::enter`, listed there) and `_exit`s; `enter` returns in the
        // server's process only, which `_exit`s at once.
        match unsafe { nix::unistd::fork() } {
            Ok(nix::unistd::ForkResult::Child) => {
                let code = i32::from(probe.enter(None).is_err());
                // SAFETY: ends the child without running anything of the parent's.
                unsafe { libc::_exit(code) }
            }
            Ok(nix::unistd::ForkResult::Parent { child }) => matches!(
                nix::sys::wait::waitpid(child, None),
                Ok(nix::sys::wait::WaitStatus::Exited(_, 0))
            ),
            Err(_) => false,
        }
    })
}

/// What a confined server's child makes of its namespaces, prepared in the daemon.
pub struct Private {
    maps: Maps,
    /// The `.git` directories at the top of its writable grants.
    git: Vec<GitDir>,
    /// A second descriptor of the server's Landlock ruleset, to grant what is mounted
    /// after it was built (None in the probe, which applies no ruleset).
    ruleset: Option<OwnedFd>,
    /// Whether `/dev/shm` exists to be replaced.
    shm: bool,
    /// The daemon's command line in memory, blanked in the init (a copy of the daemon,
    /// whose `/proc/1/cmdline` the server can read).
    argv: Option<(usize, usize)>,
    /// The probe also makes a network namespace, as a host-list server's child does.
    probe_net: bool,
}

/// A `.git` directory: made a mount point, and the paths in it bound read-only.
struct GitDir {
    dir: CString,
    read_only: Vec<CString>,
}

/// Landlock's rule of a path and what is allowed beneath it (`struct
/// landlock_path_beneath_attr`, packed).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const LANDLOCK_RULE_PATH_BENEATH: libc::c_long = 1;

impl Private {
    /// For a server whose writable paths are `write`, confined by `ruleset`.
    pub(super) fn new(
        write: &[PathBuf],
        ruleset: &RulesetCreated,
    ) -> Result<Private, SandboxError> {
        let clone = ruleset
            .try_clone()
            .map_err(|e| SandboxError::Namespace(e.to_string()))?;
        let fd: Option<OwnedFd> = clone.into();
        let mut git = Vec::new();
        for w in write {
            if let Some(g) = git_dir(w)? {
                git.push(g);
            }
        }
        Ok(Private {
            maps: Maps::of_this_process(),
            git,
            ruleset: Some(fd.ok_or_else(|| SandboxError::Namespace("no ruleset".into()))?),
            shm: is_dir(Path::new("/dev/shm")),
            argv: command_line_memory(),
            probe_net: false,
        })
    }

    /// What the probe of `userns_works` makes: every step but the grants.
    pub(super) fn probe() -> io::Result<Private> {
        Ok(Private {
            maps: Maps::of_this_process(),
            git: Vec::new(),
            ruleset: None,
            shm: is_dir(Path::new("/dev/shm")),
            argv: None,
            probe_net: true,
        })
    }

    /// How many repositories' files are kept read-only.
    pub fn repositories(&self) -> usize {
        self.git.len()
    }

    /// Between fork and exec, in the process mcpd started: the namespaces and mounts,
    /// then the split into that process (which waits outside), the namespace's init and
    /// the server. Returns in the server's process only (or with an error in whichever
    /// failed, which then does not exec). Only system calls on memory prepared before
    /// the fork: sigaction, unshare, open/write/close of its /proc maps, (with `net`
    /// those of `ChildSide::hand_over`), mount, mount_setattr, open, landlock_add_rule,
    /// close, and `init::split`'s.
    pub fn enter(&self, net: Option<&ChildSide>) -> io::Result<()> {
        init::quiet_signals();
        let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWPID;
        if net.is_some() || self.probe_net {
            flags |= libc::CLONE_NEWNET;
        }
        self.maps.enter(flags)?;
        match net {
            Some(n) => n.hand_over()?,
            None if self.probe_net => loopback_up()?,
            None => {}
        }
        for g in &self.git {
            bind(&g.dir)?;
            for p in &g.read_only {
                bind(p)?;
                read_only(p)?;
            }
        }
        if self.shm {
            // SAFETY: NUL-terminated strings and flags.
            check(unsafe {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    c"/dev/shm".as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    SHM_SIZE.as_ptr().cast(),
                )
            })?;
            self.grant(c"/dev/shm", write_access())?;
        }
        init::split(self.argv, || self.private_proc())
    }

    /// In the namespace's init: a procfs of its own PID namespace on `/proc`, readable.
    fn private_proc(&self) -> io::Result<()> {
        // SAFETY: NUL-terminated strings and flags.
        check(unsafe {
            libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            )
        })?;
        self.grant(c"/proc", read_access())
    }

    /// Adds a rule granting `access` beneath `path` to the server's ruleset (before it
    /// is applied).
    fn grant(&self, path: &CStr, access: u64) -> io::Result<()> {
        let Some(ruleset) = &self.ruleset else {
            return Ok(());
        };
        // SAFETY: a NUL-terminated path and flags.
        let fd = check(unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY,
            )
        })?;
        let attr = PathBeneathAttr {
            allowed_access: access,
            parent_fd: fd,
        };
        // SAFETY: the attribute lives for the call; the ruleset descriptor is open.
        let r = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset.as_raw_fd(),
                LANDLOCK_RULE_PATH_BENEATH,
                &raw const attr,
                0u32,
            )
        };
        let err = io::Error::last_os_error();
        // SAFETY: closes the descriptor just opened.
        unsafe { libc::close(fd) };
        if r < 0 { Err(err) } else { Ok(()) }
    }
}

/// Everything a writable directory allows (as `prepare` grants its writable paths).
fn write_access() -> u64 {
    AccessFs::from_all(ABI::V6).bits()
}

/// Reading, listing and executing (as `prepare` grants its readable directories).
fn read_access() -> u64 {
    AccessFs::from_read(ABI::V6).bits()
}

/// Binds `path` onto itself: it becomes a mount point.
fn bind(path: &CStr) -> io::Result<()> {
    // SAFETY: NUL-terminated strings and flags.
    check(unsafe {
        libc::mount(
            path.as_ptr(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    })
    .map(drop)
}

/// Makes the mount at `path` read-only, changing nothing else of it (a remount would
/// have to repeat the flags the user namespace may not clear).
fn read_only(path: &CStr) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a NUL-terminated path and an attribute that lives for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            0u32,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn is_dir(p: &Path) -> bool {
    #[allow(clippy::disallowed_methods, reason = "a local lookup before the spawn")]
    let m = std::fs::symlink_metadata(p);
    m.is_ok_and(|m| m.is_dir())
}

/// The `.git` directory at the top of writable `tree`, if there is one (a symlink is not
/// followed), with its `config` and `hooks`. A repository without them gets them, empty,
/// as `git init` makes them, so that there is something to keep read-only: the server
/// could otherwise make them.
fn git_dir(tree: &Path) -> Result<Option<GitDir>, SandboxError> {
    let dir = tree.join(".git");
    if !is_dir(&dir) {
        return Ok(None);
    }
    let fail = |p: &Path, why: String| SandboxError::Path {
        path: p.display().to_string(),
        why,
    };
    let (config, hooks) = (dir.join("config"), dir.join("hooks"));
    #[allow(clippy::disallowed_methods, reason = "before the spawn, as the paths")]
    {
        if std::fs::symlink_metadata(&hooks).is_err() {
            std::fs::create_dir(&hooks).map_err(|e| fail(&hooks, e.to_string()))?;
        }
        if std::fs::symlink_metadata(&config).is_err() {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&config)
                .map_err(|e| fail(&config, e.to_string()))?;
        }
    }
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(|e| fail(p, e.to_string()));
    Ok(Some(GitDir {
        dir: c(&dir)?,
        read_only: vec![c(&config)?, c(&hooks)?],
    }))
}

/// Where this process's command line lies in its memory (`arg_start` and `arg_end` of
/// `/proc/self/stat`), read once.
fn command_line_memory() -> Option<(usize, usize)> {
    static SEEN: std::sync::OnceLock<Option<(usize, usize)>> = std::sync::OnceLock::new();
    *SEEN.get_or_init(|| {
        #[allow(
            clippy::disallowed_methods,
            reason = "a procfs file, which never waits"
        )]
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let after = stat.get(stat.rfind(')')? + 1..)?;
        // Fields 48 and 49; the first after the name is field 3.
        let mut fields = after.split_whitespace().skip(45);
        let start: usize = fields.next()?.parse().ok()?;
        let end: usize = fields.next()?.parse().ok()?;
        (start > 0 && end > start && end - start < (1 << 20)).then_some((start, end - start))
    })
}
