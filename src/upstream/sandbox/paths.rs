//! The paths a confined server's profile grants.
//!
//! The default profile (system, the command's installation, caches, devices), the
//! config's own paths resolved, and its private temporary directory.

use super::SandboxError;
use crate::config::{SandboxProfile, StdioLaunch};
use std::path::{Path, PathBuf};

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
/// Writable devices of the default profile. Not `/dev/shm`, which every process of the
/// user shares: a confined server gets a private one where user namespaces work
/// (`private.rs`), none elsewhere.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/pts",
];
/// Files under home that git reads at every command and that hold no credentials: its
/// default ignore and attributes files. Readable, never writable. Its config and
/// `~/.npmrc` are not granted (they may hold tokens): the server reads sanitized copies
/// (`settings.rs`), and `~/.config/git/credentials` and `~/.git-credentials` nothing.
const TOOL_SETTINGS: &[&str] = &[".config/git/ignore", ".config/git/attributes"];
/// The resolved paths of a profile, for `check-config` and the ruleset.
#[derive(Debug, Default, PartialEq)]
pub struct Paths {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    /// Listed paths that do not exist (granted nothing).
    pub missing: Vec<PathBuf>,
}

/// The paths `profile` grants a server launched as `launch`, in `project` if it runs for
/// one, with its own directories `own` (temporary, cache, settings).
pub fn paths(
    profile: &SandboxProfile,
    launch: &StdioLaunch,
    project: Option<&Path>,
    own: &super::Own,
) -> Result<Paths, SandboxError> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    // The default profile: what exists of it is granted.
    let mut read: Vec<PathBuf> = SYSTEM.iter().map(PathBuf::from).collect();
    read.extend(command_dirs(&launch.command));
    read.extend(script_dirs(launch, home.as_deref()));
    read.extend(
        super::CA_ENV
            .iter()
            .filter_map(std::env::var_os)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute()),
    );
    // Its working directory, unless that is home or above it: `cwd = "~"` must not open
    // every file of home. The server starts there all the same, granted nothing of it.
    read.extend(
        launch
            .cwd
            .iter()
            .filter(|c| !too_wide(&canonical(c), home.as_deref()))
            .cloned(),
    );
    let write: Vec<PathBuf> = DEVICES.iter().map(PathBuf::from).collect();
    if let Some(home) = &home {
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
    // Its own: always granted (made before the rules).
    out.write.push(own.tmp.clone());
    out.write.extend(own.cache.clone());
    out.read.push(own.settings.clone());
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

/// Interpreters whose first argument that is not an option is the script they run.
const INTERPRETERS: &[&str] = &["node", "nodejs", "python", "deno", "bun", "ruby", "perl"];

/// For an interpreter given a script (`node …/dist/index.js`, `python3 server.py`): the
/// package the script belongs to (the nearest of its first ancestors with a
/// `package.json` or `pyproject.toml`), else its directory; never home or one of its
/// ancestors (`node ~/x.js` grants that file alone); and the outermost `node_modules` it
/// sits in.
fn script_dirs(launch: &StdioLaunch, home: Option<&Path>) -> Vec<PathBuf> {
    let Some(name) = Path::new(&launch.command)
        .file_name()
        .and_then(|n| n.to_str())
    else {
        return Vec::new();
    };
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    if !INTERPRETERS.contains(&base) {
        return Vec::new();
    }
    let Some(arg) = launch.args.iter().find(|a| !a.starts_with('-')) else {
        return Vec::new();
    };
    let given = match &launch.cwd {
        Some(cwd) => cwd.join(arg),
        None => PathBuf::from(arg),
    };
    #[allow(clippy::disallowed_methods, reason = "a local lookup before the spawn")]
    let Ok(script) = std::fs::canonicalize(&given) else {
        return Vec::new();
    };
    if !script.is_file() {
        return Vec::new();
    }
    let too_wide = |dir: &Path| too_wide(dir, home);
    let package = script.ancestors().skip(1).take(4).find(|d| {
        !too_wide(d) && (d.join("package.json").is_file() || d.join("pyproject.toml").is_file())
    });
    let mut out = Vec::new();
    match package.or(script.parent()).filter(|d| !too_wide(d)) {
        Some(dir) => out.push(dir.to_owned()),
        None => out.push(script.clone()),
    }
    if let Some(modules) = script
        .ancestors()
        .filter(|a| a.ends_with("node_modules"))
        .last()
    {
        out.push(modules.to_owned());
    }
    out
}

/// Whether granting `dir` would grant too much: the root, or home or a directory above it.
fn too_wide(dir: &Path, home: Option<&Path>) -> bool {
    dir == Path::new("/") || home.is_some_and(|h| canonical(h).starts_with(dir))
}

/// `path` with its symlinks resolved, or as given when it cannot be.
fn canonical(path: &Path) -> PathBuf {
    #[allow(clippy::disallowed_methods, reason = "a local lookup before the spawn")]
    let resolved = std::fs::canonicalize(path);
    resolved.unwrap_or_else(|_| path.to_owned())
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
