//! `mcpd import`: other clients' MCP server definitions appended to mcpd's config.
//!
//! It reads the MCP server definitions of other clients (Claude Desktop, Claude Code,
//! Cursor, VS Code, Gemini CLI, Codex) and appends them to mcpd's config as
//! `[servers.NAME]` tables.
//!
//! The data path reads top to bottom: [`sources`] finds the files and hands each to its
//! format's reader ([`json`] or [`codex`]), which yields [`Entry`]s; [`convert`] turns an
//! entry into the body of a `[servers.NAME]` table (with [`oauth`], and [`gemini`]'s or
//! [`codex`]'s own keys); [`render`] writes the appended text. [`notes`] collects what the
//! user is told, ending with the variables each server still needs.
//!
//! Literal secrets in a client's `env` and `headers` ([`secret_like`] tells which) are
//! moved, not copied: [`store`] puts each into mcpd's secret store under a name made from
//! the server and key, and the config gets `${secret:NAME}`. No value is ever printed.
//!
//! The existing config file is only ever appended to, so its comments and formatting stay;
//! a server whose name is already configured is never overwritten. The merged text is
//! validated with [`Config::parse`] before anything is stored or written, and the secrets
//! are stored before the config is written, so a failure leaves the config as it was.

#![allow(
    clippy::disallowed_methods,
    reason = "a command of its own, not the daemon: nothing else runs on its runtime"
)]

mod codex;
mod convert;
mod gemini;
mod json;
mod names;
mod notes;
mod oauth;
mod policy;
mod render;
mod secret_like;
mod sources;
mod store;
mod values;

pub use names::sanitize_name;
pub use sources::{CLIENTS, client_paths};

use crate::config::Config;
use mcpd_ctl::stdout::{Out, OutputError};
use notes::Notes;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Why an import failed; each maps to an exit code (see [`ImportError::exit_code`]).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A bad `--from` value (exit 64).
    #[error("{0}")]
    Usage(String),
    /// A source file that cannot be read or parsed, or a merged config that would be invalid
    /// (exit 78).
    #[error("{0}")]
    Invalid(String),
    /// Anything else, e.g. the config file cannot be written (exit 1).
    #[error("{0}")]
    Runtime(String),
    /// A secret store could not be searched or written (exit 1): the message names the
    /// secret and the setting it is for, never its value; nothing was written.
    #[error("{message}")]
    Secret {
        message: String,
        #[source]
        source: crate::secrets::SecretError,
    },
    /// Standard output could not be written. When its reader left (`mcpd import --dry-run |
    /// head`), what was printed was all it wanted: exit 0, saying nothing.
    #[error(transparent)]
    Output(#[from] OutputError),
}

impl ImportError {
    pub fn exit_code(&self) -> u8 {
        match self {
            ImportError::Usage(_) => 64,
            ImportError::Invalid(_) => 78,
            ImportError::Runtime(_) | ImportError::Secret { .. } => 1,
            ImportError::Output(e) if e.reader_left() => 0,
            ImportError::Output(_) => 1,
        }
    }
}

/// What `mcpd import` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Client names or file paths; empty means every known client's files that exist.
    pub from: Vec<String>,
    /// mcpd's config file (`--config` or `$MCPD_CONFIG`).
    pub config: Option<PathBuf>,
    pub dry_run: bool,
}

/// How a client writes its values: which text refers to an environment variable, and so
/// which of its keys mean what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    /// Claude Desktop, Claude Code, Cursor and VS Code: `${VAR}` (and `${env:VAR}`).
    Json,
    /// Gemini CLI's settings.json: `$VAR` and `${VAR}` in any value.
    Gemini,
    /// Codex's config.toml: every value is literal; variables are named by keys of their
    /// own (`env_vars`, `bearer_token_env_var`, `env_http_headers`).
    Codex,
}

/// One server definition read from a client file.
struct Entry {
    /// Where it came from, for the `# imported from` comment and messages.
    source: String,
    /// Its name in the client.
    original: String,
    dialect: Dialect,
    /// The definition as the client wrote it (Codex's TOML as JSON values).
    def: serde_json::Map<String, Value>,
}

/// A converted server, ready to append.
struct Converted {
    source: String,
    original: String,
    name: String,
    /// The client's description of the server, written as a comment.
    description: Option<String>,
    table: toml::Table,
    /// Its literal secrets, moving into the secret store; `table` refers to them.
    moves: Vec<store::Move>,
}

/// Runs the import, printing progress and notes to stderr and the appended text (with
/// `--dry-run`) to stdout; the last lines name the variables imported servers still need.
pub async fn run(opts: &Options) -> Result<(), ImportError> {
    let files = sources::source_files(&opts.from)?;
    if files.is_empty() {
        mcpd_ctl::errln!(
            "mcpd import: found no client config files (looked for {}); name one with --from FILE",
            CLIENTS.join(", ")
        );
        return Ok(());
    }
    let mut entries = Vec::new();
    for source in &files {
        entries.extend(sources::read_source(source)?);
    }

    let (config_path, _) = mcpd_ctl::paths::config_path(opts.config.clone()).ok_or_else(|| {
        ImportError::Runtime(
            "cannot find mcpd's config file: set --config, $MCPD_CONFIG or $HOME".into(),
        )
    })?;
    let (existing, existing_servers) = read_config(&config_path)?;
    let (mut accepted, notes) = accept(entries, &existing_servers, &config_path);
    notes.print();
    if accepted.is_empty() {
        mcpd_ctl::errln!("mcpd import: nothing new to import");
        return Ok(());
    }
    // Checked before any store is searched; its `[daemon]` says which stores to use.
    let config = validated(&existing, &accepted, &config_path)?;
    let target = store::Target::new(config.daemon.state_dir.clone(), config.daemon.secrets);
    store::plan(&target, &mut accepted).await?;
    let appended = render::render(&accepted);
    let merged = merge(&existing, &appended);
    // The picked names may have a `-N` suffix: the text that is written is checked too.
    let config = validated(&existing, &accepted, &config_path)?;
    let mut out = Out::lock();
    if opts.dry_run {
        write!(out, "{appended}")?;
        out.flush()?;
        for line in store::would(&target, &accepted).await {
            mcpd_ctl::errln!("{line}");
        }
        mcpd_ctl::errln!(
            "mcpd import: --dry-run: would append {} server(s) to {}; nothing stored or written",
            accepted.len(),
            config_path.display()
        );
    } else {
        // Secrets first: a config that names a secret no store has would lose its value.
        let moved = store::store(&target, &accepted).await?;
        write_config(&config_path, &merged)?;
        let names: Vec<&str> = accepted.iter().map(|c| c.name.as_str()).collect();
        writeln!(
            out,
            "imported {} server(s) into {}: {}",
            accepted.len(),
            config_path.display(),
            names.join(", ")
        )?;
        if !moved.is_empty() {
            writeln!(
                out,
                "moved {} literal secret(s) from the client configs into mcpd's secret store:",
                moved.len()
            )?;
            for line in &moved {
                writeln!(out, "  {line}")?;
            }
        }
        writeln!(
            out,
            "run `mcpd check-config` to review, then `mcpd ctl reload` if the daemon is running"
        )?;
        out.flush()?;
    }
    sandbox_warnings(&config, &accepted);
    notes.print_needs();
    Ok(())
}

/// What `mcpd check-config` will warn about the imported servers that the daemon's
/// `sandbox = true` confines: paths their `args` and `env` name outside their profile,
/// which would fail with EACCES.
fn sandbox_warnings(config: &Config, accepted: &[Converted]) {
    for server in accepted.iter().filter_map(|c| config.servers.get(&c.name)) {
        for w in crate::check_config::sandbox_warnings(server) {
            mcpd_ctl::errln!("[servers.{}]: warning: {w}", server.name);
        }
    }
}

/// The existing config with `accepted` appended, parsed as `mcpd check-config` would: a
/// variable not set yet only keeps its server from starting (the daemon says so), and the
/// user is told to set it at the end.
fn validated(
    existing: &str,
    accepted: &[Converted],
    config_path: &Path,
) -> Result<Config, ImportError> {
    let merged = merge(existing, &render::render(accepted));
    Config::parse(&merged, config_path).map_err(|e| {
        ImportError::Invalid(format!(
            "the merged config would be invalid, so nothing was written and no secret stored: {e}"
        ))
    })
}

/// The config file's text and its `[servers]` table; a missing file is empty.
fn read_config(path: &Path) -> Result<(String, toml::Table), ImportError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(ImportError::Invalid(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let servers = toml::from_str::<toml::Table>(&text)
        .map_err(|e| {
            ImportError::Invalid(format!(
                "{} is not valid TOML: {}",
                path.display(),
                e.to_string().trim_end()
            ))
        })?
        .get("servers")
        .and_then(|s| s.as_table())
        .cloned()
        .unwrap_or_default();
    Ok((text, servers))
}

/// Converts every entry and picks the ones to append: not configured already, not a copy
/// of one picked before, under a free name.
fn accept(
    entries: Vec<Entry>,
    existing: &toml::Table,
    config_path: &Path,
) -> (Vec<Converted>, Notes) {
    let mut notes = Notes::default();
    let mut accepted: Vec<Converted> = Vec::new();
    let mut taken: BTreeSet<String> = existing.keys().cloned().collect();
    for entry in entries {
        let base = sanitize_name(&entry.original);
        let mut scratch = Notes::default();
        let Some(table) = convert::convert(&entry, &base, &mut scratch) else {
            notes.absorb_warnings(scratch);
            continue;
        };
        let what = format!("{}: server {:?}", entry.source, entry.original);
        if let Some(old) = existing.get(&base) {
            if old.as_table() == Some(&table) {
                mcpd_ctl::errln!("{what} is already present as [servers.{base}]");
            } else {
                mcpd_ctl::errln!(
                    "{}: skipped server {:?}: [servers.{base}] already exists in {} with a different definition; \
                     rename the existing table (or the server in the client) and run mcpd import again",
                    entry.source,
                    entry.original,
                    config_path.display()
                );
            }
            continue;
        }
        let moves = std::mem::take(&mut scratch.moves);
        if accepted
            .iter()
            .any(|c| c.table == table && same_moves(&c.moves, &moves))
        {
            mcpd_ctl::errln!("{what} is the same as one imported already; skipped");
            continue;
        }
        let Some(name) = names::unique_name(&base, &taken) else {
            mcpd_ctl::errln!(
                "{}: skipped server {:?}: no free name like [servers.{base}-N] is left",
                entry.source,
                entry.original
            );
            continue;
        };
        taken.insert(name.clone());
        let (table, moves) = if name == base {
            notes.absorb(scratch);
            (table, moves)
        } else {
            // Secret names and IMPORTED_ variables carry the server's name: convert again
            // under the final one.
            let mut renamed = Notes::default();
            let again = convert::convert(&entry, &name, &mut renamed);
            let moves = std::mem::take(&mut renamed.moves);
            notes.absorb(renamed);
            match again {
                Some(t) => (t, moves),
                None => (table, moves),
            }
        };
        if name != entry.original {
            mcpd_ctl::errln!("{what} becomes [servers.{name}]");
        }
        let description = entry
            .def
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned);
        accepted.push(Converted {
            source: entry.source,
            original: entry.original,
            name,
            description,
            table,
            moves,
        });
    }
    (accepted, notes)
}

/// Whether two entries' literal secrets are the same, setting by setting.
fn same_moves(a: &[store::Move], b: &[store::Move]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y))
}

/// The existing text with the appended text after a blank line.
fn merge(existing: &str, appended: &str) -> String {
    let mut merged = existing.to_owned();
    if !merged.is_empty() {
        if !merged.ends_with('\n') {
            merged.push('\n');
        }
        merged.push('\n');
    }
    merged.push_str(appended);
    merged
}

/// Creates the config's directory if needed and replaces the file.
fn write_config(path: &Path, text: &str) -> Result<(), ImportError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| ImportError::Runtime(format!("cannot create {}: {e}", dir.display())))?;
    }
    write_atomically(path, text)
        .map_err(|e| ImportError::Runtime(format!("cannot write {}: {e}", path.display())))
}

/// Writes through a temporary file in the same directory, keeping the file's mode.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("toml.import-tmp");
    std::fs::write(&tmp, text)?;
    use std::os::unix::fs::PermissionsExt;
    // A new file may hold env values copied from a client: readable by its owner only.
    let permissions = std::fs::metadata(path)
        .map(|m| m.permissions())
        .unwrap_or_else(|_| std::fs::Permissions::from_mode(0o600));
    std::fs::set_permissions(&tmp, permissions)?;
    std::fs::rename(&tmp, path)
}
