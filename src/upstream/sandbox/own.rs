//! A confined server's own directories besides its `TMPDIR`.
//!
//! Its private package cache, `$XDG_CACHE_HOME/mcpd/servers/NAME` (writable, kept between
//! starts), and its settings, the sanitized npm and git configs mcpd writes at each start
//! beside its `TMPDIR` (readable, never writable, by it).
//!
//! The caches of `npx`, `uvx` and `pip` hold code that runs later. Shared, one server
//! could rewrite a package that the user's next `npx` or another server then runs; so each
//! server has its own, and the user's (`~/.npm`, `~/.cache/uv`, …) are not granted. The
//! instances of one server (per project, per agent) share its cache: they run the same
//! code, and a cold cache per project would download every package again. That sharing
//! is the one way left for code to persist between them: an instance subverted by one
//! project's files can change what the instances in other projects run.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A server's own directories, as the profile grants them.
#[derive(Debug, Clone)]
pub struct Own {
    /// Its `TMPDIR`: writable.
    pub tmp: PathBuf,
    /// Its private package cache: writable (None without `HOME` or `XDG_CACHE_HOME`).
    pub cache: Option<PathBuf>,
    /// The settings mcpd writes for it: readable.
    pub settings: PathBuf,
}

impl Own {
    /// Where they are (or will be, in a process that is no daemon) for the server whose
    /// process is named `instance` (`git@/src/app`), an instance of `server` (`git`).
    pub fn planned(instance: &str, server: &str) -> Own {
        let tmp = super::tmp::temp_path(instance);
        Own {
            settings: settings_path(&tmp),
            cache: cache_path(server),
            tmp,
        }
    }
}

/// The variables pointing a server's tools at its private cache: each with the directory
/// under it. uv's tools and interpreters are an install directory, not a cache, but they
/// are code the server downloads and later runs, so they are the server's own too.
const CACHE_ENV: &[(&str, &str)] = &[
    ("npm_config_cache", "npm"),
    ("UV_CACHE_DIR", "uv"),
    ("UV_TOOL_DIR", "uv-tools"),
    ("UV_TOOL_BIN_DIR", "bin"),
    ("UV_PYTHON_INSTALL_DIR", "uv-python"),
    ("UV_PYTHON_BIN_DIR", "bin"),
    ("PIP_CACHE_DIR", "pip"),
    ("BUN_INSTALL_CACHE_DIR", "bun"),
    // Everything else that caches under `~/.cache`: node-gyp's headers for packages with
    // native code (npm 11 warns of its `devdir` variable), pnpm, Hugging Face, Playwright.
    ("XDG_CACHE_HOME", "xdg"),
];

/// The settings files, and the variables that name them.
pub const NPMRC: &str = "npmrc";
pub const GITCONFIG: &str = "gitconfig";

/// Where the private caches of every server are: `$XDG_CACHE_HOME/mcpd/servers`, else
/// `~/.cache/mcpd/servers`.
pub fn caches_root() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("mcpd").join("servers"))
}

/// The private cache of `server` (the server's name, the same for all its instances).
pub fn cache_path(server: &str) -> Option<PathBuf> {
    caches_root().map(|r| r.join(super::tmp::file_name(server)))
}

/// Where mcpd writes the settings of the server whose `TMPDIR` is `tmp`: beside it, in
/// the daemon's directory (a server name has no `.`, so no server's `TMPDIR` is named so).
pub fn settings_path(tmp: &Path) -> PathBuf {
    let mut name = tmp.file_name().unwrap_or_default().to_owned();
    name.push(".settings");
    tmp.with_file_name(name)
}

/// The variables of a server whose cache is `cache` and whose settings are in `settings`.
pub fn environment(cache: Option<&Path>, settings: &Path) -> Vec<(String, PathBuf)> {
    let mut env: Vec<(String, PathBuf)> = vec![
        ("NPM_CONFIG_USERCONFIG".into(), settings.join(NPMRC)),
        ("GIT_CONFIG_GLOBAL".into(), settings.join(GITCONFIG)),
    ];
    if let Some(cache) = cache {
        env.extend(CACHE_ENV.iter().map(|(k, d)| ((*k).into(), cache.join(d))));
    }
    env
}

/// Makes `server`'s private cache (0700, and 0700 the directories above it that are
/// made) and returns it. Only the directory itself is made: what the server made inside
/// it (a symlink, say) is never followed by mcpd; the tools make their own directories.
#[allow(
    clippy::disallowed_methods,
    reason = "a few local calls before the spawn"
)]
pub fn make_cache(server: &str) -> std::io::Result<PathBuf> {
    let dir = cache_path(server)
        .ok_or_else(|| std::io::Error::other("neither XDG_CACHE_HOME nor HOME is set"))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    only_mine(&dir)?;
    Ok(dir)
}

/// Writes the sanitized settings into `dir` (made 0700; each file 0600, written anew at
/// every start, so an edit of `~/.npmrc` reaches the server's next start).
#[allow(
    clippy::disallowed_methods,
    reason = "a few small local files before the spawn"
)]
pub fn write_settings(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    only_mine(dir)?;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let read = |rel: &str| {
        home.as_ref()
            .map(|h| read_small(&h.join(rel)))
            .unwrap_or_default()
    };
    let npmrc = super::settings::npmrc(&read(".npmrc"));
    // git reads its XDG file first, then `~/.gitconfig`; the later one wins.
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(|x| PathBuf::from(x).join("git/config"))
        .map(|p| read_small(&p))
        .unwrap_or_else(|| read(".config/git/config"));
    let git = super::settings::gitconfig(&xdg) + &super::settings::gitconfig(&read(".gitconfig"));
    for (name, text) in [(NPMRC, npmrc), (GITCONFIG, git)] {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(dir.join(name))?;
        std::io::Write::write_all(&mut f, text.as_bytes())?;
    }
    Ok(())
}

/// Settings files larger than this are taken as empty: real ones are a few KiB.
const SETTINGS_MAX: u64 = 1 << 20;

/// A settings file's text: empty when it is missing, not a regular file (a FIFO would
/// block the start), larger than `SETTINGS_MAX` or not UTF-8.
#[allow(
    clippy::disallowed_methods,
    reason = "a small local file before the spawn"
)]
fn read_small(path: &Path) -> String {
    use std::io::Read;
    let Ok(meta) = std::fs::metadata(path) else {
        return String::new();
    };
    if !meta.is_file() || meta.len() > SETTINGS_MAX {
        return String::new();
    }
    let mut text = String::new();
    let read =
        std::fs::File::open(path).and_then(|f| f.take(SETTINGS_MAX).read_to_string(&mut text));
    if read.is_err() {
        text.clear();
    }
    text
}

/// Refuses a directory that is a symlink or another user's.
#[allow(clippy::disallowed_methods, reason = "one local call before the spawn")]
fn only_mine(dir: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() || meta.uid() != nix::unistd::getuid().as_raw() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{} is not a directory of this user's", dir.display()),
        ));
    }
    Ok(())
}
