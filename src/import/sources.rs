//! Which files each client keeps its servers in.
//!
//! Also how `--from` values resolve to files, and which format's reader each file goes
//! to.

use super::{Dialect, Entry, ImportError, codex, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The clients whose config files mcpd knows.
pub const CLIENTS: [&str; 6] = [
    "claude-desktop",
    "claude-code",
    "cursor",
    "vscode",
    "gemini",
    "codex",
];

/// A file to read, and what is known of it before reading.
pub(super) struct Source {
    pub(super) path: PathBuf,
    /// How it is named in messages and the `# imported from` comment.
    pub(super) label: String,
    /// The client it belongs to, when it was found as one of a client's files.
    pub(super) client: Option<&'static str>,
}

/// A non-empty variable of the environment, as a path.
fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The config files of a client that may exist on this machine, in the order they are
/// read. Relative paths are project files in the current directory.
pub fn client_paths(client: &str) -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let config_home =
        env_path("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config")));
    let mac = home
        .as_ref()
        .map(|h| h.join("Library").join("Application Support"));
    let mut out = Vec::new();
    let mut push = |p: Option<PathBuf>| out.extend(p);
    match client {
        "claude-desktop" => {
            push(config_home.map(|c| c.join("Claude/claude_desktop_config.json")));
            push(mac.map(|m| m.join("Claude/claude_desktop_config.json")));
        }
        "claude-code" => {
            push(home.map(|h| h.join(".claude.json")));
            push(Some(PathBuf::from(".mcp.json")));
        }
        "cursor" => {
            push(home.map(|h| h.join(".cursor/mcp.json")));
            push(Some(PathBuf::from(".cursor/mcp.json")));
        }
        "vscode" => {
            push(config_home.map(|c| c.join("Code/User/mcp.json")));
            push(mac.map(|m| m.join("Code/User/mcp.json")));
            push(Some(PathBuf::from(".vscode/mcp.json")));
        }
        "gemini" => {
            // Gemini CLI puts its .gemini folder in $GEMINI_CLI_HOME instead of $HOME when set.
            let gemini_home = env_path("GEMINI_CLI_HOME").or(home);
            push(gemini_home.map(|h| h.join(".gemini/settings.json")));
            push(Some(PathBuf::from(".gemini/settings.json")));
        }
        "codex" => {
            let codex_home = env_path("CODEX_HOME").or_else(|| home.map(|h| h.join(".codex")));
            push(codex_home.map(|c| c.join("config.toml")));
            push(Some(PathBuf::from(".codex/config.toml")));
        }
        _ => {}
    }
    out
}

/// Resolves `--from` values to the files to read. A file reached twice (a project file
/// in the home directory is also the user's file) is read once.
pub(super) fn source_files(from: &[String]) -> Result<Vec<Source>, ImportError> {
    let mut out = Vec::new();
    let found = |client: &'static str| -> Vec<Source> {
        client_paths(client)
            .into_iter()
            .filter(|p| p.is_file())
            .map(|p| Source {
                label: format!("{} ({client})", p.display()),
                path: p,
                client: Some(client),
            })
            .collect()
    };
    if from.is_empty() {
        for client in CLIENTS {
            out.extend(found(client));
        }
        return Ok(once_each(out));
    }
    for value in from {
        if let Some(client) = CLIENTS.iter().find(|c| **c == value.as_str()) {
            let files = found(client);
            if files.is_empty() {
                mcpd_ctl::errln!(
                    "mcpd import: no {value} config found (looked at {})",
                    client_paths(value)
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            out.extend(files);
        } else if value.contains('/') || value.contains('.') || Path::new(value).exists() {
            out.push(Source {
                path: PathBuf::from(value),
                label: value.clone(),
                client: None,
            });
        } else {
            return Err(ImportError::Usage(format!(
                "--from {value:?} is neither a file nor one of {}",
                CLIENTS.join(", ")
            )));
        }
    }
    Ok(once_each(out))
}

/// Drops files already listed (compared by their canonical path).
fn once_each(sources: Vec<Source>) -> Vec<Source> {
    let mut seen = BTreeSet::new();
    sources
        .into_iter()
        .filter(|s| seen.insert(std::fs::canonicalize(&s.path).unwrap_or_else(|_| s.path.clone())))
        .collect()
}

/// Reads one client file with its format's reader. Codex's is TOML: a file found as
/// Codex's, named `*.toml`, or (not being JSON) a TOML file with an `mcp_servers` table.
/// Everything else is JSON, Gemini CLI's when it was found as Gemini's, sits in a
/// `.gemini` folder, or uses keys only Gemini has. A client's own file without servers
/// (Gemini CLI's settings.json before any `gemini mcp add`) yields none; a file named
/// with `--from` must have them.
pub(super) fn read_source(source: &Source) -> Result<Vec<Entry>, ImportError> {
    let file = &source.path;
    let text = std::fs::read_to_string(file)
        .map_err(|e| ImportError::Invalid(format!("cannot read {}: {e}", file.display())))?;
    let toml_named = file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
    let found = source.client.is_some();
    if source.client == Some("codex") || (!found && toml_named) {
        return codex::read(file, &text, &source.label, found);
    }
    let dialect = match source.client {
        Some("gemini") => Some(Dialect::Gemini),
        Some(_) => Some(Dialect::Json),
        None if file.parent().and_then(Path::file_name) == Some(".gemini".as_ref()) => {
            Some(Dialect::Gemini)
        }
        // Decided by the entries' keys.
        None => None,
    };
    match json::read(file, &text, &source.label, dialect, found) {
        // Not JSON, but a Codex file under another name.
        Err(_) if !found && codex::looks_like_codex(&text) => {
            codex::read(file, &text, &source.label, found)
        }
        other => other,
    }
}
