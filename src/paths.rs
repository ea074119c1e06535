//! Where the socket and the config file live when the command line does not say.

use std::path::PathBuf;

/// The agent socket: the explicit choice (flag or `$MCPD_SOCKET`, resolved by the CLI),
/// else the config's `daemon.socket`, else `$XDG_RUNTIME_DIR/mcpd/mcpd.sock`, else
/// `/tmp/mcpd-$UID/mcpd.sock`.
pub fn socket_path(explicit: Option<PathBuf>, from_config: Option<PathBuf>) -> PathBuf {
    if let Some(p) = explicit.or(from_config) {
        return p;
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("mcpd").join("mcpd.sock"),
        None => PathBuf::from(format!("/tmp/mcpd-{}", nix::unistd::getuid())).join("mcpd.sock"),
    }
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
