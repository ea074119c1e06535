//! Where the socket, the config file and the state directory live by default.
//!
//! Those are the places used when the command line or the config does not say, and where
//! `connect` and `ctl` look for a running daemon.

use std::path::PathBuf;

/// The agent socket the daemon binds: the explicit choice (flag or `$MCPD_SOCKET`,
/// resolved by the CLI), else the config's `daemon.socket`, else
/// `$XDG_RUNTIME_DIR/mcpd/mcpd.sock`, else `/tmp/mcpd-$UID/mcpd.sock`.
pub fn socket_path(explicit: Option<PathBuf>, from_config: Option<PathBuf>) -> PathBuf {
    if let Some(p) = explicit.or(from_config) {
        return p;
    }
    match runtime_dir() {
        Some(dir) => dir.join("mcpd").join("mcpd.sock"),
        None => fallback_socket(),
    }
}

fn runtime_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Where the daemon listens without `XDG_RUNTIME_DIR`, and where clients look last.
pub fn fallback_socket() -> PathBuf {
    PathBuf::from(format!("/tmp/mcpd-{}", nix::unistd::getuid())).join("mcpd.sock")
}

/// `/run/user/$UID/mcpd/mcpd.sock`, where clients look without `XDG_RUNTIME_DIR`.
fn systemd_socket() -> PathBuf {
    PathBuf::from(format!("/run/user/{}", nix::unistd::getuid()))
        .join("mcpd")
        .join("mcpd.sock")
}

/// Where a daemon listening on `socket` leaves a pointer to it (`socket_pointer.rs`):
/// the fallback place, when `socket` is the default choice under an `XDG_RUNTIME_DIR`
/// that clients without the variable never look in. None for a socket named by flag,
/// variable or config (clients are given the same), or where those clients look anyway.
pub fn pointer_place(socket: &std::path::Path) -> Option<PathBuf> {
    let fallback = fallback_socket();
    (socket == socket_path(None, None) && socket != fallback && socket != systemd_socket())
        .then_some(fallback)
}

/// Where a client of the daemon (`mcpd connect`, `mcpd ctl`) looks for its socket, in
/// order. An explicit choice or the config's `daemon.socket` is the only place. Otherwise
/// the daemon may have chosen its socket with an environment the client does not have:
/// MCP clients start servers with a short environment (the official SDKs pass only
/// `HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM` and `USER`), without `XDG_RUNTIME_DIR`. So
/// the client tries `$XDG_RUNTIME_DIR/mcpd/mcpd.sock` when it has the variable, then
/// `/run/user/$UID/mcpd/mcpd.sock` (where systemd puts every user's runtime directory,
/// so where a desktop session's or a user service's daemon is), then the daemon's own
/// fallback `/tmp/mcpd-$UID/mcpd.sock`, where a daemon under another `XDG_RUNTIME_DIR`
/// leaves a pointer to its socket. docs/clients.md says the same.
pub fn socket_candidates(explicit: Option<PathBuf>, from_config: Option<PathBuf>) -> Vec<PathBuf> {
    if let Some(p) = explicit.or(from_config) {
        return vec![p];
    }
    let mut out: Vec<PathBuf> = Vec::with_capacity(3);
    for p in runtime_dir()
        .map(|dir| dir.join("mcpd").join("mcpd.sock"))
        .into_iter()
        .chain([systemd_socket()])
    {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out.push(fallback_socket());
    out
}

/// Why a place where the daemon's socket could be has none.
#[derive(Debug)]
pub struct Tried {
    pub path: PathBuf,
    pub why: String,
}

/// The first of `candidates` where a socket file exists, or what each one holds instead.
/// Only the file is looked at: a probing connection would show up in the daemon's log
/// as an agent.
pub fn find_socket(candidates: &[PathBuf]) -> Result<PathBuf, Vec<Tried>> {
    use std::os::unix::fs::FileTypeExt;
    let mut tried = Vec::new();
    for path in candidates {
        // A stat of at most three paths before anything else runs.
        #[allow(
            clippy::disallowed_methods,
            reason = "a stat of a few paths before the command starts its work"
        )]
        let found = std::fs::metadata(path);
        let why = match found {
            Ok(m) if m.file_type().is_socket() => return Ok(path.clone()),
            Ok(_) => "not a socket".to_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "no such file".to_owned(),
            Err(e) => e.to_string(),
        };
        tried.push(Tried {
            path: path.clone(),
            why,
        });
    }
    Err(tried)
}

/// `PATH (why); PATH (why)` for an error message.
pub fn describe_tried(tried: &[Tried]) -> String {
    let parts: Vec<String> = tried
        .iter()
        .map(|t| format!("{} ({})", t.path.display(), t.why))
        .collect();
    parts.join(", ")
}

/// The config file: the explicit choice (flag or `$MCPD_CONFIG`), else
/// `$XDG_CONFIG_HOME/mcpd/mcpd.toml`, else `~/.config/mcpd/mcpd.toml`. The bool says
/// whether it was chosen explicitly: a missing explicit file is an error, a missing
/// default one means "no servers yet".
pub fn config_path(explicit: Option<PathBuf>) -> Option<(PathBuf, bool)> {
    if let Some(p) = explicit {
        return Some((p, true));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some((base.join("mcpd").join("mcpd.toml"), false))
}

/// The state directory: the config's `daemon.state_dir`, else `$XDG_STATE_HOME/mcpd`,
/// else `~/.local/state/mcpd`; None without any of them. The daemon's, and that of the
/// commands that find its files without it (`mcpd import` and `check-config`, for the
/// secrets' file store).
pub fn state_dir(configured: Option<PathBuf>) -> Option<PathBuf> {
    if configured.is_some() {
        return configured;
    }
    std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .map(|d| d.join("mcpd"))
}
