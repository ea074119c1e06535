//! Confining a local server with Landlock: its profile resolved into paths, the ruleset built in the daemon (only `restrict_self` runs between fork and exec), the clean environment, and what status shows as enforced.
//!
//! Every confined server is restricted in the filesystem (only the profile's paths), in
//! signals and abstract Unix sockets (Landlock scoping: nothing outside its own domain),
//! and, with `network = "none"`, in TCP. Ptrace and the `/proc` files it guards
//! (another process's environment and memory) are out of reach of any Landlock domain.
//! The ruleset is made with hard requirements: a kernel that cannot enforce all of it
//! refuses it, and the server does not start (fail closed). Nothing here widens a
//! profile to make a server work.

use crate::config::{Network, SandboxProfile, StdioLaunch};
use crate::control_api::SandboxView;
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The Landlock ABI mcpd needs: the filesystem with truncation (3), TCP ports (4) and the
/// scoping of signals and abstract Unix sockets (6).
const NEEDED: ABI = ABI::V6;
const NEEDED_N: i32 = 6;

/// Setting this in the daemon's environment makes it take the kernel's Landlock ABI as
/// at most N (tests check the refusal on a kernel without scoping with it).
pub const ABI_OVERRIDE: &str = "MCPD_LANDLOCK_ABI";

/// Readable system paths of the default profile (those that exist).
const SYSTEM: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/proc",
    "/sys",
    "/dev",
    "/nix",
    "/snap",
    "/run/systemd/resolve",
    "/run/resolvconf",
];
/// Writable devices of the default profile.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/pts",
    "/dev/shm",
];
/// The package caches of `npx`, `uvx` and `pip`, writable under home: they must persist
/// what they download, and so they are also a place where code persists.
const CACHES: &[&str] = &[
    ".npm",
    ".cache/uv",
    ".cache/pip",
    ".cache/node-gyp",
    ".local/share/uv",
];
/// Settings under home that those tools, and git (which refuses to run when it cannot
/// read them), read: readable, never writable.
const TOOL_SETTINGS: &[&str] = &[".npmrc", ".gitconfig", ".config/git"];
/// Variables passed to every confined server (besides `TMPDIR`, set to its own).
const KEPT_ENV: &[&str] = &["PATH", "HOME", "USER", "LOGNAME", "LANG", "TERM", "TZ"];

/// Why a server cannot be confined as its profile asks (it is then not started).
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "the sandbox needs Landlock ABI {NEEDED_N} (filesystem, TCP and scoping of signals and abstract sockets); this kernel offers {0}: upgrade the kernel (6.12 or later) or set `sandbox = false` for this server"
    )]
    Kernel(i32),
    #[error("the sandbox path {path:?} cannot be resolved: {why}")]
    Path { path: String, why: String },
    #[error("the sandbox ruleset could not be built: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    #[error("the sandbox's network filter could not be built: {0}")]
    Seccomp(String),
    #[error("the sandbox's private temporary directory {}: {source}", dir.display())]
    Temp {
        dir: PathBuf,
        source: std::io::Error,
    },
}

/// A server's confinement, ready to apply in its child.
pub struct Prepared {
    /// Taken and applied once, between fork and exec.
    pub ruleset: Option<RulesetCreated>,
    /// With `network = "none"`: the seccomp filter that refuses every IP socket.
    pub seccomp: Option<seccompiler::BpfProgram>,
    /// The whole environment the server gets (the process starts with none).
    pub env: Vec<(OsString, OsString)>,
    pub view: SandboxView,
}

/// The kernel's Landlock ABI (0 without Landlock), probed once; at most
/// `MCPD_LANDLOCK_ABI` when that is set.
pub fn kernel_abi() -> i32 {
    static ABI_SEEN: OnceLock<i32> = OnceLock::new();
    *ABI_SEEN.get_or_init(|| {
        // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the version
        // flag only returns the ABI version (or an error); it touches no memory.
        let v = unsafe {
            nix::libc::syscall(
                nix::libc::SYS_landlock_create_ruleset,
                std::ptr::null::<u8>(),
                0usize,
                1u32, // LANDLOCK_CREATE_RULESET_VERSION
            )
        };
        let v = i32::try_from(v).unwrap_or(0).max(0);
        let cap = std::env::var(ABI_OVERRIDE)
            .ok()
            .and_then(|s| s.parse::<i32>().ok());
        cap.map_or(v, |c| v.min(c.max(0)))
    })
}

/// The resolved paths of a profile, for `check-config` and the ruleset.
#[derive(Debug, Default, PartialEq)]
pub struct Paths {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    /// Listed paths that do not exist (granted nothing).
    pub missing: Vec<PathBuf>,
}

/// The paths `profile` grants a server launched as `launch`, in `project` if it runs for
/// one, with the private temporary directory `tmp`.
pub fn paths(
    profile: &SandboxProfile,
    launch: &StdioLaunch,
    project: Option<&Path>,
    tmp: &Path,
) -> Result<Paths, SandboxError> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    // The default profile: what exists of it is granted.
    let mut read: Vec<PathBuf> = SYSTEM.iter().map(PathBuf::from).collect();
    read.extend(command_dirs(&launch.command));
    read.extend(launch.cwd.iter().cloned());
    let mut write: Vec<PathBuf> = DEVICES.iter().map(PathBuf::from).collect();
    if let Some(home) = &home {
        write.extend(CACHES.iter().map(|c| home.join(c)));
        read.extend(TOOL_SETTINGS.iter().map(|c| home.join(c)));
    }
    let mut out = Paths::default();
    for (list, into) in [(read, &mut out.read), (write, &mut out.write)] {
        for p in list.into_iter().filter(|p| exists(p)) {
            if !into.contains(&p) {
                into.push(p);
            }
        }
    }
    // Its own: always granted (the temporary directory is made before the rules).
    out.write.push(tmp.to_owned());
    out.write.extend(project.map(Path::to_owned));
    // The config's: a path that does not exist is said to grant nothing.
    for (list, writable) in [(&profile.read, false), (&profile.write, true)] {
        for p in list {
            let p = expand(p, home.as_deref(), project)?;
            let into = if writable {
                &mut out.write
            } else {
                &mut out.read
            };
            if !exists(&p) {
                out.missing.push(p);
            } else if !into.contains(&p) {
                into.push(p);
            }
        }
    }
    Ok(out)
}

/// Whether a path exists (a symlink counts; Landlock follows it). Blocking, on the
/// supervisor's worker like the fork and exec it precedes: local lookups of a few paths.
fn exists(p: &Path) -> bool {
    #[allow(clippy::disallowed_methods, reason = "see above")]
    let found = std::fs::symlink_metadata(p).is_ok();
    found
}

/// A profile path with `~`, `${PROJECT}` and `${VAR}` resolved.
fn expand(p: &str, home: Option<&Path>, project: Option<&Path>) -> Result<PathBuf, SandboxError> {
    let fail = |why: &str| SandboxError::Path {
        path: p.to_owned(),
        why: why.to_owned(),
    };
    if p == "~" || p.starts_with("~/") {
        let home = home.ok_or_else(|| fail("HOME is not set"))?;
        return Ok(home.join(p.trim_start_matches('~').trim_start_matches('/')));
    }
    if let Some(rest) = p.strip_prefix("${") {
        let (name, tail) = rest.split_once('}').ok_or_else(|| fail("an unclosed ${"))?;
        let base = if name == "PROJECT" {
            project
                .map(Path::to_owned)
                .ok_or_else(|| fail("it names ${PROJECT}, and this server runs for no project"))?
        } else {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .ok_or_else(|| fail(&format!("${{{name}}} is not set in mcpd's environment")))?
        };
        return Ok(base.join(tail.trim_start_matches('/')));
    }
    Ok(PathBuf::from(p))
}

/// Where the command lives, and what it runs: for the command and (following `#!` lines,
/// `env` included, a few levels deep) its interpreter, each as found and after symlinks,
/// the directory, the installation it belongs to (the parent of a `bin`), and the
/// outermost `node_modules` it sits in (a package's dependencies are its siblings).
fn command_dirs(command: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut next = find(command);
    for _ in 0..4 {
        let Some(exe) = next.take() else {
            break;
        };
        #[allow(clippy::disallowed_methods, reason = "a local lookup before the spawn")]
        let real = std::fs::canonicalize(&exe).ok();
        for path in std::iter::once(&exe).chain(real.as_ref()) {
            install_dirs(path, &mut out);
        }
        next = interpreter(real.as_deref().unwrap_or(&exe));
    }
    out
}

/// A program as `exec` finds it: a path, or the first match on `PATH`.
fn find(command: &str) -> Option<PathBuf> {
    if command.contains('/') {
        return Some(PathBuf::from(command));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(command))
        .find(|c| c.is_file())
}

/// The directories of `path` a confined server needs to run it.
fn install_dirs(path: &Path, out: &mut Vec<PathBuf>) {
    let Some(dir) = path.parent() else {
        return;
    };
    out.push(dir.to_owned());
    if dir.file_name().is_some_and(|n| n == "bin")
        && let Some(root) = dir.parent()
        && root.parent().is_some()
    {
        out.push(root.to_owned());
    }
    if let Some(modules) = path
        .ancestors()
        .filter(|a| a.ends_with("node_modules"))
        .last()
    {
        out.push(modules.to_owned());
    }
}

/// The interpreter a script names on its `#!` line (through `env`), if it is one.
fn interpreter(script: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    #[allow(clippy::disallowed_methods, reason = "a local read before the spawn")]
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head.get(..n)?.strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let first = words.next()?;
    if Path::new(first).file_name().is_some_and(|n| n == "env") {
        return words.find(|w| !w.starts_with('-')).and_then(find);
    }
    Some(PathBuf::from(first))
}

/// Where the server's private temporary directory is.
pub fn temp_path(server: &str) -> PathBuf {
    let uid = nix::unistd::getuid().as_raw();
    let name: String = server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    std::env::temp_dir()
        .join(format!("mcpd-{uid}"))
        .join("sandbox")
        .join(name)
}

/// The server's private temporary directory (made 0700 if missing).
pub fn temp_dir(server: &str) -> Result<PathBuf, SandboxError> {
    let dir = temp_path(server);
    #[allow(clippy::disallowed_methods, reason = "before the spawn, as the paths")]
    let made = {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
    };
    made.map_err(|source| SandboxError::Temp {
        dir: dir.clone(),
        source,
    })?;
    Ok(dir)
}

/// Makes the default profile's package caches that do not exist yet, so that a first
/// `npx` or `uvx` under the sandbox can fill them.
fn make_caches() {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return;
    };
    for c in CACHES {
        #[allow(clippy::disallowed_methods, reason = "before the spawn, as the paths")]
        let _ = std::fs::create_dir_all(home.join(c)); // one that cannot be made stays closed
    }
}

/// Everything needed to start `launch` confined by `profile`.
pub fn prepare(
    server: &str,
    profile: &SandboxProfile,
    launch: &StdioLaunch,
    project: Option<&Path>,
) -> Result<Prepared, SandboxError> {
    let abi = kernel_abi();
    if abi < NEEDED_N {
        return Err(SandboxError::Kernel(abi));
    }
    make_caches();
    let tmp = temp_dir(server)?;
    let paths = paths(profile, launch, project, &tmp)?;
    for m in &paths.missing {
        tracing::debug!(upstream = %server, path = %m.display(), "a sandbox path does not exist; it grants nothing");
    }
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(NEEDED))?
        .scope(Scope::from_all(NEEDED))?;
    if profile.network == Network::None {
        // Handled with no rule: no TCP port may be bound or connected to.
        ruleset = ruleset.handle_access(AccessNet::from_all(NEEDED))?;
    }
    let mut created = ruleset.create()?;
    for (list, access) in [
        (&paths.read, AccessFs::from_read(NEEDED)),
        (&paths.write, AccessFs::from_all(NEEDED)),
    ] {
        for p in list {
            let fd = PathFd::new(p).map_err(|e| SandboxError::Path {
                path: p.display().to_string(),
                why: e.to_string(),
            })?;
            // A file takes only the rights that apply to files.
            let access = if p.is_dir() {
                access
            } else {
                access & AccessFs::from_file(NEEDED)
            };
            created = created.add_rule(PathBeneath::new(fd, access))?;
        }
    }
    let env = environment(profile, launch, &tmp);
    let view = SandboxView {
        mechanism: "landlock".into(),
        abi: abi as u32,
        read: paths.read.len(),
        write: paths.write.len(),
        network: profile.network.as_str().into(),
        note: (profile.network == Network::None)
            .then(|| "no IP sockets: TCP refused by Landlock, IP sockets by seccomp".into()),
    };
    let seccomp = match profile.network {
        Network::None => Some(no_ip_sockets()?),
        Network::All => None,
    };
    Ok(Prepared {
        ruleset: Some(created),
        seccomp,
        env,
        view,
    })
}

/// A confined server's whole environment: the few variables every program expects, its
/// own private `TMPDIR`, the profile's `env` names, then its config's `env` table.
fn environment(
    profile: &SandboxProfile,
    launch: &StdioLaunch,
    tmp: &Path,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| {
            let k = k.to_string_lossy();
            KEPT_ENV.contains(&k.as_ref())
                || k.starts_with("LC_")
                || profile.env.iter().any(|n| *n == k)
        })
        .collect();
    env.push(("TMPDIR".into(), tmp.as_os_str().to_owned()));
    env.extend(
        launch
            .env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    env
}

/// The seccomp filter of `network = "none"`: `socket` of an IPv4 or IPv6 family, and
/// `io_uring_setup` (whose operations could open sockets without `socket`), fail with
/// EPERM; everything else is allowed.
fn no_ip_sockets() -> Result<seccompiler::BpfProgram, SandboxError> {
    use seccompiler::{SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition};
    use seccompiler::{SeccompFilter, SeccompRule};
    let fail = |e: &dyn std::fmt::Display| SandboxError::Seccomp(e.to_string());
    let family = |f: i32| -> Result<SeccompRule, SandboxError> {
        let c = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, f as u64)
            .map_err(|e| fail(&e))?;
        SeccompRule::new(vec![c]).map_err(|e| fail(&e))
    };
    let rules = [
        (
            nix::libc::SYS_socket,
            vec![family(nix::libc::AF_INET)?, family(nix::libc::AF_INET6)?],
        ),
        (nix::libc::SYS_io_uring_setup, vec![]),
    ]
    .into_iter()
    .collect();
    let arch = std::env::consts::ARCH.try_into().map_err(|e| fail(&e))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(nix::libc::EPERM as u32),
        arch,
    )
    .map_err(|e| fail(&e))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| fail(&e))
}
