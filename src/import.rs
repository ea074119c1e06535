//! `mcpd import`: reads the MCP server definitions of other clients (Claude Desktop, Claude
//! Code, Cursor, VS Code) and appends them to mcpd's config as `[servers.NAME]` tables,
//! with a remote server's OAuth client settings as `[servers.NAME.oauth]`.
//!
//! The existing config file is only ever appended to, so its comments and formatting stay;
//! a server whose name is already configured is never overwritten. The merged text is
//! validated with [`Config::parse_with_env`] before anything is written.

#![allow(
    clippy::disallowed_methods,
    reason = "a command of its own, not the daemon: nothing else runs on its runtime"
)]

use crate::config::{Config, valid_server_name};
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Write as _;
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
}

impl ImportError {
    pub fn exit_code(&self) -> u8 {
        match self {
            ImportError::Usage(_) => 64,
            ImportError::Invalid(_) => 78,
            ImportError::Runtime(_) => 1,
        }
    }
}

/// The clients whose config files mcpd knows.
pub const CLIENTS: [&str; 4] = ["claude-desktop", "claude-code", "cursor", "vscode"];

/// The config files of a client that exist on this machine, in the order they are read.
/// Relative paths are project files in the current directory.
pub fn client_paths(client: &str) -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let config_home = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
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
        _ => {}
    }
    out
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

/// One server definition read from a client file.
struct Entry {
    /// Where it came from, for the `# imported from` comment and messages.
    source: String,
    /// Its name in the client.
    original: String,
    def: serde_json::Map<String, Value>,
}

/// A converted server, ready to append.
struct Converted {
    source: String,
    original: String,
    name: String,
    table: toml::Table,
}

/// Runs the import, printing progress and notes to stderr and the appended text (with
/// `--dry-run`) to stdout.
pub fn run(opts: &Options) -> Result<(), ImportError> {
    let files = source_files(&opts.from)?;
    if files.is_empty() {
        eprintln!(
            "mcpd import: found no client config files (looked for {}); name one with --from FILE",
            CLIENTS.join(", ")
        );
        return Ok(());
    }
    let mut entries = Vec::new();
    for (file, label) in &files {
        entries.extend(read_source(file, label)?);
    }

    let (config_path, _) = crate::paths::config_path(opts.config.clone()).ok_or_else(|| {
        ImportError::Runtime(
            "cannot find mcpd's config file: set --config, $MCPD_CONFIG or $HOME".into(),
        )
    })?;
    let existing = match std::fs::read_to_string(&config_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(ImportError::Invalid(format!(
                "cannot read {}: {e}",
                config_path.display()
            )));
        }
    };
    let existing_servers: toml::Table = toml::from_str::<toml::Table>(&existing)
        .map_err(|e| {
            ImportError::Invalid(format!(
                "{} is not valid TOML: {}",
                config_path.display(),
                e.to_string().trim_end()
            ))
        })?
        .get("servers")
        .and_then(|s| s.as_table())
        .cloned()
        .unwrap_or_default();

    let mut notes = Notes::default();
    let mut accepted: Vec<Converted> = Vec::new();
    let mut taken: BTreeSet<String> = existing_servers.keys().cloned().collect();
    for entry in entries {
        let base = sanitize_name(&entry.original);
        let mut scratch = Notes::default();
        let Some(table) = convert(&entry, &base, &mut scratch) else {
            notes.absorb(scratch);
            continue;
        };
        if let Some(old) = existing_servers.get(&base) {
            if old.as_table() == Some(&table) {
                eprintln!(
                    "{}: server {:?} is already present as [servers.{base}]",
                    entry.source, entry.original
                );
            } else {
                eprintln!(
                    "{}: skipped server {:?}: [servers.{base}] already exists in {} with a different definition; \
                     rename the existing table (or the server in the client) and run mcpd import again",
                    entry.source,
                    entry.original,
                    config_path.display()
                );
            }
            continue;
        }
        if accepted.iter().any(|c| c.table == table) {
            eprintln!(
                "{}: server {:?} is the same as one imported already; skipped",
                entry.source, entry.original
            );
            continue;
        }
        let Some(name) = unique_name(&base, &taken) else {
            eprintln!(
                "{}: skipped server {:?}: no free name like [servers.{base}-N] is left",
                entry.source, entry.original
            );
            continue;
        };
        taken.insert(name.clone());
        let table = if name == base {
            notes.absorb(scratch);
            table
        } else {
            // The IMPORTED_ variables carry the name: convert again under the final one.
            let mut renamed = Notes::default();
            let t = convert(&entry, &name, &mut renamed).unwrap_or(table);
            notes.absorb(renamed);
            t
        };
        if name != entry.original {
            eprintln!(
                "{}: server {:?} becomes [servers.{name}]",
                entry.source, entry.original
            );
        }
        accepted.push(Converted {
            source: entry.source,
            original: entry.original,
            name,
            table,
        });
    }
    notes.print();

    if accepted.is_empty() {
        eprintln!("mcpd import: nothing new to import");
        return Ok(());
    }
    let appended = render(&accepted);
    let mut merged = existing.clone();
    if !merged.is_empty() {
        if !merged.ends_with('\n') {
            merged.push('\n');
        }
        merged.push('\n');
    }
    merged.push_str(&appended);
    // Variables the user still has to set must not fail validation here.
    if let Err(e) = Config::parse_with_env(&merged, &config_path, &|var| {
        Some(std::env::var(var).unwrap_or_else(|_| "imported".into()))
    }) {
        return Err(ImportError::Invalid(format!(
            "the merged config would be invalid, so nothing was written: {e}"
        )));
    }
    if opts.dry_run {
        print!("{appended}");
        eprintln!(
            "mcpd import: --dry-run: would append {} server(s) to {}; nothing written",
            accepted.len(),
            config_path.display()
        );
        return Ok(());
    }
    if let Some(dir) = config_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| ImportError::Runtime(format!("cannot create {}: {e}", dir.display())))?;
    }
    write_atomically(&config_path, &merged).map_err(|e| {
        ImportError::Runtime(format!("cannot write {}: {e}", config_path.display()))
    })?;
    println!(
        "imported {} server(s) into {}: {}",
        accepted.len(),
        config_path.display(),
        accepted
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("run `mcpd check-config` to review, then `mcpd ctl reload` if the daemon is running");
    Ok(())
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

/// Resolves `--from` values to (file, label) pairs.
fn source_files(from: &[String]) -> Result<Vec<(PathBuf, String)>, ImportError> {
    let mut out = Vec::new();
    if from.is_empty() {
        for client in CLIENTS {
            for p in client_paths(client).into_iter().filter(|p| p.is_file()) {
                out.push((p.clone(), format!("{} ({client})", p.display())));
            }
        }
        return Ok(out);
    }
    for value in from {
        if CLIENTS.contains(&value.as_str()) {
            let found: Vec<PathBuf> = client_paths(value)
                .into_iter()
                .filter(|p| p.is_file())
                .collect();
            if found.is_empty() {
                eprintln!(
                    "mcpd import: no {value} config found (looked at {})",
                    client_paths(value)
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            for p in found {
                out.push((p.clone(), format!("{} ({value})", p.display())));
            }
        } else if value.contains('/') || value.contains('.') || Path::new(value).exists() {
            out.push((PathBuf::from(value), value.clone()));
        } else {
            return Err(ImportError::Usage(format!(
                "--from {value:?} is neither a file nor one of {}",
                CLIENTS.join(", ")
            )));
        }
    }
    Ok(out)
}

/// Reads one client file, detecting its format by its top-level keys: `mcpServers`
/// (Claude Desktop, Claude Code, Cursor), `servers` (VS Code) and `projects` (Claude
/// Code's `~/.claude.json`).
fn read_source(file: &Path, label: &str) -> Result<Vec<Entry>, ImportError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| ImportError::Invalid(format!("cannot read {}: {e}", file.display())))?;
    let json: Value = serde_json::from_str(&text)
        .map_err(|e| ImportError::Invalid(format!("{} is not valid JSON: {e}", file.display())))?;
    let Some(top) = json.as_object() else {
        return Err(ImportError::Invalid(format!(
            "{} is not a JSON object",
            file.display()
        )));
    };
    let known = ["mcpServers", "servers", "projects"];
    if !known.iter().any(|k| top.contains_key(*k)) {
        return Err(ImportError::Invalid(format!(
            "{} has none of the keys \"mcpServers\", \"servers\" or \"projects\": not an MCP client config",
            file.display()
        )));
    }
    let mut out = Vec::new();
    let mut take = |servers: Option<&Value>, source: String| -> Result<(), ImportError> {
        let Some(servers) = servers else {
            return Ok(());
        };
        let Some(map) = servers.as_object() else {
            return Err(ImportError::Invalid(format!(
                "{source}: the server list is not a JSON object"
            )));
        };
        for (name, def) in map {
            match def.as_object() {
                Some(def) => out.push(Entry {
                    source: source.clone(),
                    original: name.clone(),
                    def: def.clone(),
                }),
                None => eprintln!("{source}: skipped {name:?}: not a JSON object"),
            }
        }
        Ok(())
    };
    take(top.get("mcpServers"), label.to_owned())?;
    take(top.get("servers"), label.to_owned())?;
    if let Some(projects) = top.get("projects").and_then(Value::as_object) {
        for (project, p) in projects {
            take(p.get("mcpServers"), format!("{label} (project {project})"))?;
        }
    }
    Ok(out)
}

/// Makes a client's server name valid for mcpd: lowercase, other characters to `-`, runs
/// of `-` collapsed, trimmed, at most 32 characters.
pub fn sanitize_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() {
            c.to_ascii_lowercase()
        } else {
            '-'
        };
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    out.truncate(32);
    let out = out.trim_matches('-').to_owned();
    if out.is_empty() {
        "server".to_owned()
    } else {
        out
    }
}

/// `base`, or `base-2`, `base-3`… (shortened to fit 32 characters) when it is taken;
/// None when no such name is free (a config with thousands of copies of one name).
fn unique_name(base: &str, taken: &BTreeSet<String>) -> Option<String> {
    if !taken.contains(base) {
        return Some(base.to_owned());
    }
    (2..100_000)
        .map(|n| {
            let suffix = format!("-{n}");
            let mut b = base.to_owned();
            b.truncate(32usize.saturating_sub(suffix.len()));
            format!("{}{suffix}", b.trim_end_matches('-'))
        })
        .find(|n| !taken.contains(n) && valid_server_name(n))
}

/// Messages collected while converting, printed once at the end.
#[derive(Default)]
struct Notes {
    /// Variables the user must set in mcpd's environment: (variable, what it replaces).
    vars: Vec<(String, String)>,
    /// Servers whose literal env values were copied.
    literal_env: Vec<String>,
    /// Servers given an OAuth `client_id`, whose app must allow mcpd's redirect.
    oauth_clients: Vec<String>,
    /// Of those, the ones without a client secret in the client's config.
    oauth_without_secret: Vec<String>,
    /// Per-entry warnings, printed as they come.
    warnings: Vec<String>,
}

impl Notes {
    fn warn(&mut self, message: String) {
        self.warnings.push(message);
    }

    /// Moves another entry's notes into these, printing its warnings.
    fn absorb(&mut self, other: Notes) {
        for w in &other.warnings {
            eprintln!("{w}");
        }
        self.vars.extend(other.vars);
        self.literal_env.extend(other.literal_env);
        self.oauth_clients.extend(other.oauth_clients);
        self.oauth_without_secret.extend(other.oauth_without_secret);
    }

    fn print(&self) {
        if !self.literal_env.is_empty() {
            eprintln!(
                "note: env values of {} were copied as they are (mcpd does not expand ${{VAR}} in a local server's env; \
                 they were already stored in plain text in the client's config). Keep mcpd.toml private (chmod 600).",
                self.literal_env.join(", ")
            );
        }
        if !self.oauth_clients.is_empty() {
            eprintln!(
                "note: an OAuth client_id was copied for {}: mcpd logs in with the redirect \
                 http://127.0.0.1:PORT/callback (PORT is redirect_port, else a random one), which the OAuth app \
                 must allow (Claude Code registers http://localhost:PORT/callback, Cursor and VS Code their own redirects)",
                self.oauth_clients.join(", ")
            );
        }
        if !self.oauth_without_secret.is_empty() {
            eprintln!(
                "note: no OAuth client secret was copied for {} (Claude Code and VS Code keep it in the keychain \
                 or their secret storage, not in the config): if the app has one, set client_secret_env in \
                 [servers.NAME.oauth] to a variable of mcpd's environment that holds it",
                self.oauth_without_secret.join(", ")
            );
        }
        if !self.vars.is_empty() {
            eprintln!(
                "note: literal header values and OAuth client secrets were not copied; set these variables in \
                 mcpd's environment (e.g. a systemd drop-in with Environment= or EnvironmentFile=):"
            );
            for (var, what) in &self.vars {
                eprintln!("  {var}  ({what})");
            }
        }
    }
}

/// Whether a client's command runs mcpd: named `mcpd`, or the very binary running now.
/// Importing it would make the daemon its own server.
fn is_mcpd(command: &str) -> bool {
    let path = Path::new(command);
    if path.file_name().is_some_and(|n| n == "mcpd") {
        return true;
    }
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    let this = std::env::current_exe().ok().and_then(|p| canonical(&p));
    this.is_some() && canonical(path) == this
}

/// Converts one client entry into the body of `[servers.NAME]`; None (with a message) when
/// it cannot be imported.
fn convert(entry: &Entry, name: &str, notes: &mut Notes) -> Option<toml::Table> {
    let def = &entry.def;
    let what = format!("{}: server {:?}", entry.source, entry.original);
    let kind = def.get("type").and_then(Value::as_str);
    let mut t = toml::Table::new();
    if let Some(url) = def.get("url").and_then(Value::as_str) {
        t.insert("url".into(), url.into());
        if kind == Some("sse") {
            t.insert("transport".into(), "sse".into());
        }
        let mut headers = toml::Table::new();
        for (key, value) in strings(def.get("headers"), &what, "headers", notes) {
            let var = imported_var(name, &key);
            match reference(&value) {
                Ref::Literal => {
                    notes
                        .vars
                        .push((var.clone(), format!("header {key} of {name}")));
                    headers.insert(key, format!("${{{var}}}").into());
                }
                Ref::Vars(v) => {
                    headers.insert(key, v.into());
                }
                Ref::Unresolvable(why) => {
                    notes.warn(format!("{what}: header {key} skipped: {why}; add it to [servers.{name}] headers by hand"));
                }
            }
        }
        let auth_header = headers
            .keys()
            .any(|k| k.eq_ignore_ascii_case("authorization"));
        if !headers.is_empty() {
            t.insert("headers".into(), headers.into());
        }
        if auth_header && OAUTH_FIELDS.iter().any(|f| def.contains_key(*f)) {
            notes.warn(format!(
                "{what}: its OAuth settings were not copied: it also sends an Authorization header, and a static \
                 Authorization header turns mcpd's OAuth login off; to log in with OAuth instead, remove \
                 headers.Authorization from [servers.{name}] and add a [servers.{name}.oauth] table"
            ));
        } else if let Some(oauth) = oauth_table(def, name, &what, notes) {
            t.insert("oauth".into(), oauth.into());
        }
    } else if let Some(command) = def.get("command").and_then(Value::as_str) {
        if is_mcpd(command) {
            notes.warn(format!(
                "{what}: skipped: it runs mcpd itself (the entry that points this client at mcpd); mcpd does not import itself"
            ));
            return None;
        }
        if kind.is_some_and(|k| k != "stdio") {
            notes.warn(format!("{what}: skipped: type {kind:?} without a url"));
            return None;
        }
        for field in OAUTH_FIELDS.iter().filter(|f| def.contains_key(**f)) {
            notes.warn(format!(
                "{what}: \"{field}\" ignored: OAuth settings apply to remote servers (with a \"url\") only"
            ));
        }
        t.insert("command".into(), command.into());
        let args: Vec<String> = match def.get("args") {
            None => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect(),
            Some(_) => {
                notes.warn(format!("{what}: skipped: \"args\" is not an array"));
                return None;
            }
        };
        if args.iter().any(|a| a.contains("${")) {
            notes.warn(format!(
                "{what}: its args contain ${{…}} placeholders, which mcpd passes on as they are; edit [servers.{name}] args"
            ));
        }
        if !args.is_empty() {
            t.insert("args".into(), args.into());
        }
        let mut env = toml::Table::new();
        for (key, value) in strings(def.get("env"), &what, "env", notes) {
            if value.contains("${") {
                notes.warn(format!(
                    "{what}: env {key} skipped: {value:?} is a placeholder and mcpd does not expand ${{…}} in a local \
                     server's env; local servers inherit mcpd's environment, so set {key} there instead"
                ));
                continue;
            }
            env.insert(key, value.into());
        }
        if !env.is_empty() {
            notes.literal_env.push(name.to_owned());
            t.insert("env".into(), env.into());
        }
        if let Some(cwd) = def.get("cwd").and_then(Value::as_str) {
            if cwd.contains("${") {
                notes.warn(format!("{what}: cwd {cwd:?} is a placeholder; not copied"));
            } else {
                t.insert("cwd".into(), cwd.into());
            }
        }
    } else {
        notes.warn(format!(
            "{what}: skipped: it has neither \"command\" nor \"url\""
        ));
        return None;
    }
    if def.get("disabled").and_then(Value::as_bool) == Some(true) {
        t.insert("enabled".into(), false.into());
    }
    Some(t)
}

/// The fields of a client's server entry that hold OAuth client settings: Claude Code's and
/// VS Code's `"oauth"`, Cursor's `"auth"`.
const OAUTH_FIELDS: [&str; 2] = ["oauth", "auth"];

/// The body of `[servers.NAME.oauth]` from a remote entry's OAuth settings; None when
/// nothing mcpd can use is left. Read, case- and `_`-insensitively:
///
/// - Claude Code (`~/.claude.json`, `.mcp.json`): `"oauth": {"clientId", "callbackPort",
///   "scopes" (one space-separated string), "authServerMetadataUrl", "xaa"}`; its client
///   secret is kept in the keychain, not in the config;
/// - VS Code (`mcp.json`): `"oauth": {"clientId"}`;
/// - Cursor (`mcp.json`): `"auth": {"CLIENT_ID", "CLIENT_SECRET", "scopes" (a list)}`.
///
/// A client secret becomes `client_secret_env`, following the headers' convention: a
/// `${VAR}` (or `${env:VAR}`) names the variable, a literal is replaced by an
/// `IMPORTED_…` variable the user is told to set. Everything left out gets a note.
fn oauth_table(
    def: &serde_json::Map<String, Value>,
    name: &str,
    what: &str,
    notes: &mut Notes,
) -> Option<toml::Table> {
    let mut client_id: Option<String> = None;
    // The variable, and whether it replaces a literal the user must now set.
    let mut secret: Option<(String, bool)> = None;
    let mut scopes: Vec<String> = Vec::new();
    let mut port: Option<u16> = None;
    for field in OAUTH_FIELDS {
        let Some(value) = def.get(field) else {
            continue;
        };
        let Some(map) = value.as_object() else {
            notes.warn(format!(
                "{what}: \"{field}\" is not an object; no OAuth settings copied from it"
            ));
            continue;
        };
        for (key, value) in map {
            let k = format!("{field}.{key}");
            match key.to_ascii_lowercase().replace('_', "").as_str() {
                "clientid" => match value.as_str() {
                    Some(id) if id.contains("${") => notes.warn(format!(
                        "{what}: {k} {id:?} is a placeholder, and mcpd does not expand ${{…}} in client_id; \
                         write the client id into [servers.{name}.oauth] client_id by hand"
                    )),
                    Some(id) if !id.trim().is_empty() => client_id = Some(id.to_owned()),
                    _ => notes.warn(format!(
                        "{what}: {k} is not a client id (a non-empty string); ignored"
                    )),
                },
                "clientsecret" => match value.as_str().map(reference) {
                    Some(Ref::Literal) if value.as_str() == Some("") => {
                        notes.warn(format!("{what}: {k} is empty; ignored"));
                    }
                    Some(Ref::Literal) => {
                        secret = Some((imported_var(name, "OAUTH_CLIENT_SECRET"), true));
                    }
                    Some(Ref::Vars(v)) => match whole_var(&v) {
                        Some(var) => secret = Some((var.to_owned(), false)),
                        None => notes.warn(format!(
                            "{what}: {k} skipped: client_secret_env names one variable that holds the whole \
                             secret, not text around ${{VAR}}; set it in [servers.{name}.oauth] by hand"
                        )),
                    },
                    Some(Ref::Unresolvable(why)) => notes.warn(format!(
                        "{what}: {k} skipped: {why}; set client_secret_env in [servers.{name}.oauth] by hand"
                    )),
                    None => notes.warn(format!("{what}: {k} is not a string; ignored")),
                },
                "callbackport" => match port_of(value) {
                    Some(p) => port = Some(p),
                    None => notes.warn(format!(
                        "{what}: {k} {value} is not a port (1-65535); ignored, so mcpd redirects to a random port"
                    )),
                },
                "scopes" | "scope" => scopes.extend(scope_list(value, &k, what, notes)),
                "authservermetadataurl" => notes.warn(format!(
                    "{what}: {k} not copied: mcpd has no such setting and finds the authorization server \
                     itself (protected resource metadata, then authorization server metadata)"
                )),
                "xaa" if value == &Value::Bool(false) => {}
                "xaa" => notes.warn(format!(
                    "{what}: {k} not copied: mcpd has no cross-app access; it logs in with mcpd ctl login"
                )),
                _ => notes.warn(format!(
                    "{what}: {k} is not an OAuth setting mcpd import knows; ignored"
                )),
            }
        }
    }
    if secret.is_some() && client_id.is_none() {
        notes.warn(format!(
            "{what}: its OAuth client secret was not copied: mcpd uses a client secret only with its client_id"
        ));
        secret = None;
    }
    let mut t = toml::Table::new();
    if let Some(id) = client_id {
        t.insert("client_id".into(), id.into());
        notes.oauth_clients.push(name.to_owned());
        if secret.is_none() {
            notes.oauth_without_secret.push(name.to_owned());
        }
    }
    if let Some((var, literal)) = secret {
        if literal {
            notes
                .vars
                .push((var.clone(), format!("OAuth client secret of {name}")));
        }
        t.insert("client_secret_env".into(), var.into());
    }
    let mut seen = BTreeSet::new();
    scopes.retain(|s| seen.insert(s.clone()));
    if !scopes.is_empty() {
        t.insert("scopes".into(), scopes.into());
    }
    if let Some(p) = port {
        t.insert("redirect_port".into(), i64::from(p).into());
    }
    (!t.is_empty()).then_some(t)
}

/// The variable of a value that is exactly one `${VAR}` reference, as [`reference`]
/// rewrites it.
fn whole_var(value: &str) -> Option<&str> {
    let var = value.strip_prefix("${")?.strip_suffix('}')?;
    (!var.contains(['$', '{', '}'])).then_some(var)
}

/// A callback port: an integer (or a string of digits) from 1 to 65535.
fn port_of(value: &Value) -> Option<u16> {
    let n = match value {
        Value::Number(n) => n.as_u64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    u16::try_from(n).ok().filter(|p| *p != 0)
}

/// Scopes from one space-separated string (Claude Code) or a list of strings (Cursor);
/// values mcpd's config would refuse are reported and left out.
fn scope_list(value: &Value, key: &str, what: &str, notes: &mut Notes) -> Vec<String> {
    let mut words = Vec::new();
    match value {
        Value::String(s) => words.extend(s.split_whitespace().map(str::to_owned)),
        Value::Array(items) => {
            for item in items {
                match item.as_str() {
                    Some(s) => words.extend(s.split_whitespace().map(str::to_owned)),
                    None => notes.warn(format!(
                        "{what}: {key} has {item}, which is not a scope (a string); ignored"
                    )),
                }
            }
        }
        _ => {
            notes.warn(format!(
                "{what}: {key} is neither a string nor a list of strings; ignored"
            ));
        }
    }
    let mut out = Vec::new();
    for w in words {
        if w.contains(['"', '\\']) || w.contains("${") {
            notes.warn(format!(
                "{what}: {key}: {w:?} is not a scope mcpd accepts; ignored"
            ));
        } else {
            out.push(w);
        }
    }
    out
}

/// The string values of a JSON object field; other values are reported and left out.
fn strings(v: Option<&Value>, what: &str, field: &str, notes: &mut Notes) -> Vec<(String, String)> {
    let Some(v) = v else {
        return Vec::new();
    };
    let Some(map) = v.as_object() else {
        notes.warn(format!("{what}: \"{field}\" is not an object; ignored"));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (k, v) in map {
        match v {
            Value::String(s) => out.push((k.clone(), s.clone())),
            Value::Number(_) | Value::Bool(_) => out.push((k.clone(), v.to_string())),
            _ => notes.warn(format!("{what}: {field} {k} is not a string; ignored")),
        }
    }
    out
}

/// How a header value refers to secrets.
enum Ref {
    /// No `${…}` at all: a literal, possibly a secret.
    Literal,
    /// Only `${VAR}` references mcpd understands (VS Code's `${env:VAR}` rewritten).
    Vars(String),
    /// A `${…}` mcpd cannot resolve, e.g. VS Code's `${input:…}`.
    Unresolvable(String),
}

fn reference(value: &str) -> Ref {
    if !value.contains("${") {
        return Ref::Literal;
    }
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Ref::Unresolvable("an unterminated ${".into());
        };
        let inner = &after[..end];
        let var = inner.strip_prefix("env:").unwrap_or(inner);
        let valid = !var.is_empty()
            && !var.starts_with(|c: char| c.is_ascii_digit())
            && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Ref::Unresolvable(format!("${{{inner}}} cannot be resolved by mcpd"));
        }
        let _ = write!(out, "${{{var}}}");
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ref::Vars(out)
}

/// `IMPORTED_<NAME>_<KEY>`, uppercase, other characters to `_`.
fn imported_var(name: &str, key: &str) -> String {
    let clean = |s: &str| {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect::<String>()
    };
    format!("IMPORTED_{}_{}", clean(name), clean(key))
}

/// The text appended to the config: a `# imported from` comment per source, then tables.
fn render(servers: &[Converted]) -> String {
    let mut out = String::new();
    let mut last_source: Option<&str> = None;
    for c in servers {
        if last_source != Some(c.source.as_str()) {
            if last_source.is_some() {
                out.push('\n');
            }
            let _ = writeln!(out, "# imported from {}", c.source.replace('\n', " "));
            last_source = Some(&c.source);
        } else {
            out.push('\n');
        }
        if c.name != c.original {
            let _ = writeln!(out, "# (named {:?} there)", c.original.replace('\n', " "));
        }
        let _ = writeln!(out, "[servers.{}]", c.name);
        for key in [
            "command",
            "args",
            "env",
            "cwd",
            "url",
            "transport",
            "headers",
            "enabled",
        ] {
            if let Some(v) = c.table.get(key) {
                let _ = writeln!(out, "{key} = {}", value_text(v));
            }
        }
        if let Some(toml::Value::Table(oauth)) = c.table.get("oauth") {
            let _ = writeln!(out, "[servers.{}.oauth]", c.name);
            for key in ["client_id", "client_secret_env", "scopes", "redirect_port"] {
                if let Some(v) = oauth.get(key) {
                    let _ = writeln!(out, "{key} = {}", value_text(v));
                }
            }
        }
    }
    out
}

/// A TOML value on one line (tables inline).
fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(t) => {
            let items: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{} = {}", key_text(k), value_text(v)))
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
        toml::Value::Array(a) => {
            let items: Vec<String> = a.iter().map(value_text).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

fn key_text(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_owned()
    } else {
        toml::Value::String(k.to_owned()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitized() {
        assert_eq!(sanitize_name("My Server!"), "my-server");
        assert_eq!(sanitize_name("github_tools"), "github-tools");
        assert_eq!(sanitize_name("__x__"), "x");
        assert_eq!(sanitize_name("!!!"), "server");
        let long = sanitize_name(&"a".repeat(40));
        assert_eq!(long.len(), 32);
        assert!(valid_server_name(&long));
        let taken: BTreeSet<String> = [long.clone()].into();
        let next = unique_name(&long, &taken).unwrap();
        assert_eq!(next.len(), 32);
        assert!(next.ends_with("-2"));
    }

    #[test]
    fn references_are_recognised() {
        assert!(matches!(reference("abc"), Ref::Literal));
        assert!(matches!(reference("Bearer ${env:TOK}"), Ref::Vars(v) if v == "Bearer ${TOK}"));
        assert!(matches!(reference("${input:key}"), Ref::Unresolvable(_)));
    }
}
