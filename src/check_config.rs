//! `mcpd check-config`: what the daemon would run with this config.
//!
//! It also gives the warnings a person can act on before starting it (a command not on
//! `PATH`, a variable not set, a path a confined server names outside its sandbox).

use crate::config::{Config, Launch, ServerConfig, StdioLaunch};
use mcpd_ctl::stdout::{Out, OutputError};
use std::path::{Path, PathBuf};

/// Prints the report. `exists`: the config file is there (else the daemon would start
/// with no servers and read it on `mcpd ctl reload`).
pub fn report(
    config: &Config,
    socket: &Path,
    exists: bool,
    secrets: &Found,
) -> Result<(), OutputError> {
    let mut out = Out::lock();
    match (&config.source, exists) {
        (Some(p), true) => writeln!(out, "{}: OK", p.display())?,
        (Some(p), false) => writeln!(
            out,
            "no config file at {}: the daemon would start with no servers",
            p.display()
        )?,
        (None, _) => writeln!(
            out,
            "no config file: the daemon would start with no servers"
        )?,
    }
    writeln!(out, "socket: {}", socket.display())?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    for s in config.servers.values() {
        let state = if s.enabled { "" } else { " (disabled)" };
        writeln!(out, "server {}{state}: {}", s.name, describe(s).trim_end())?;
        let n = &s.naming;
        if n.prefix != s.name || !n.tools.is_empty() || !n.prompts.is_empty() {
            writeln!(
                out,
                "  names: prefix {:?}, {} tool and {} prompt renames",
                n.prefix,
                n.tools.len(),
                n.prompts.len()
            )?;
        }
        match s.share {
            crate::config::Share::Shared => {}
            crate::config::Share::Agent => writeln!(out, "  shared: one instance per agent")?,
            crate::config::Share::Project { max_projects } => writeln!(
                out,
                "  shared: one instance per project (at most {max_projects} at once), ${{PROJECT}} filled in for each"
            )?,
        }
        if let (Some(profile), Launch::Stdio(l)) = (&s.sandbox, &s.launch) {
            sandbox_lines(&mut out, &s.name, profile, l, s.share)?;
        }
        match s.pin {
            crate::config::PinMode::TrustFirst => writeln!(
                out,
                "  pin: trust-first (its first definitions are approved; changes wait for `mcpd ctl approve`)"
            )?,
            crate::config::PinMode::Approve => writeln!(
                out,
                "  pin: approve (every definition waits for `mcpd ctl approve`, the first ones too)"
            )?,
            crate::config::PinMode::Off => writeln!(
                out,
                "  pin: off (changed definitions reach agents unchecked)"
            )?,
        }
        if let Some(why) = &s.unresolved {
            writeln!(out, "  warning: will not start: {why}")?;
        }
        // A disabled server is not started: its secrets are not looked for.
        for name in s.secrets.iter().filter(|_| s.enabled) {
            match secrets.get(name) {
                Some(Ok(store)) => writeln!(out, "  secret {name}: in {}", store.describe())?,
                Some(Err(why)) => writeln!(out, "  warning: will not start: {why}")?,
                None => {}
            }
        }
        if let Launch::Stdio(l) = &s.launch
            && let Some(warning) = command_warning(l, &path)
        {
            writeln!(out, "  warning: {warning}")?;
        }
    }
    out.flush()
}

/// Where each secret the servers refer to is, or why it cannot be found: by name, never
/// a value.
pub type Found = std::collections::BTreeMap<String, Result<crate::secrets::Store, String>>;

/// Looks up every secret the config's servers refer to, as mcpd would at their start,
/// from this process's view of the stores (its `$CREDENTIALS_DIRECTORY` and session bus,
/// which a service's may differ from); those of disabled servers are not looked for.
pub async fn find_secrets(config: &Config) -> Found {
    let mut names: Vec<&String> = config
        .servers
        .values()
        .filter(|s| s.enabled)
        .flat_map(|s| &s.secrets)
        .collect();
    names.sort();
    names.dedup();
    let mut found = Found::new();
    if names.is_empty() {
        return found;
    }
    let stores = crate::secrets::Secrets::new(
        mcpd_ctl::paths::state_dir(config.daemon.state_dir.clone()).as_deref(),
        config.daemon.secrets,
    );
    for name in names {
        let at = stores.lookup(name).await.map(|(_, store)| store);
        found.insert(name.clone(), at.map_err(|e| e.to_string()));
    }
    found
}

/// How the server is reached, on one line.
fn describe(s: &ServerConfig) -> String {
    match &s.launch {
        Launch::Stdio(l) => format!("{} {}", l.command, l.args.join(" ")),
        Launch::Http(h) => {
            let auth = match (&h.oauth, &h.bearer) {
                (Some(o), _) if o.grant.is_machine() => {
                    let with = match (&o.identity_provider, &o.assertion_file) {
                        (Some(idp), _) => format!(", ID-JAG from {}", idp.issuer),
                        (None, Some(f)) => format!(", assertion from {}", f.display()),
                        _ => String::new(),
                    };
                    format!(
                        "OAuth {} grant, client {}{with}",
                        o.grant.as_str(),
                        o.client_id.as_deref().unwrap_or("(none)")
                    )
                }
                (Some(o), _) => match (&o.client_id, o.redirect_port) {
                    (Some(id), Some(p)) => format!("OAuth login, client {id}, redirect port {p}"),
                    (Some(id), None) => format!("OAuth login, client {id}"),
                    (None, _) => "OAuth login when asked".to_owned(),
                },
                (None, Some(_)) => "bearer token".to_owned(),
                (None, None) => "OAuth off".to_owned(),
            };
            format!(
                "{} (transport {}, {auth})",
                h.display_url(),
                h.transport.as_str()
            )
        }
    }
}

/// A warning when the command cannot be found as the daemon would look for it: a path
/// (relative to the server's `cwd`) that is no executable file, or a name on no
/// directory of `PATH` (the server's own `env.PATH` if it sets one). Only a warning: the
/// daemon's `PATH` may differ from this shell's (a systemd user service gets a short one).
fn command_warning(l: &StdioLaunch, shell_path: &std::ffi::OsStr) -> Option<String> {
    if l.command.contains('/') {
        let p = match &l.cwd {
            Some(cwd) if !l.command.starts_with('/') => cwd.join(&l.command),
            _ => PathBuf::from(&l.command),
        };
        return (!is_executable(&p))
            .then(|| format!("command {} is not an executable file here", p.display()));
    }
    let (path, whose) = match l.env.get("PATH") {
        Some(p) => (std::ffi::OsString::from(p), "the server's env.PATH"),
        None => (shell_path.to_owned(), "PATH"),
    };
    let found = std::env::split_paths(&path).any(|dir| is_executable(&dir.join(&l.command)));
    (!found).then(|| {
        format!(
            "command {:?} is not found on {whose} ({}); the daemon searches its own PATH, which may differ from this shell's (a systemd user service gets a short one): write the full path to be sure",
            l.command,
            path.to_string_lossy()
        )
    })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    #[allow(
        clippy::disallowed_methods,
        reason = "check-config is a command of its own, not the daemon"
    )]
    let meta = std::fs::metadata(p);
    meta.is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A confined server's profile as it resolves now (a project server's `${PROJECT}` left
/// as written).
fn sandbox_lines(
    out: &mut Out,
    name: &str,
    profile: &crate::config::SandboxProfile,
    launch: &crate::config::StdioLaunch,
    share: crate::config::Share,
) -> Result<(), OutputError> {
    use crate::upstream::sandbox;
    let abi = sandbox::kernel_abi();
    writeln!(
        out,
        "  sandbox: landlock (kernel ABI {abi}), network {}{}{}",
        profile.network,
        if profile.env.is_empty() {
            String::new()
        } else {
            format!(", env passed: {}", profile.env.join(" "))
        },
        if profile.unix_sockets {
            ", Unix sockets allowed"
        } else {
            ""
        }
    )?;
    writeln!(
        out,
        "  sandbox: {}",
        if sandbox::userns_works() {
            "own mounts and processes: .git/config and .git/hooks of its writable trees read-only, a private /dev/shm, /proc shows its own processes only"
        } else {
            sandbox::NO_USERNS
        }
    )?;
    if matches!(profile.network, crate::config::Network::Hosts(_)) {
        writeln!(
            out,
            "  sandbox: hosts enforced by {}",
            if sandbox::userns_works() {
                "mcpd's proxy in a network namespace of the server's own"
            } else {
                "mcpd's proxy, ports only (no user namespaces here: Landlock limits ports, not hosts)"
            }
        )?;
    }
    match granted(name, profile, launch, share) {
        Ok(p) => {
            let show = |l: &[std::path::PathBuf]| {
                l.iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            writeln!(out, "  sandbox: read {}", show(&p.read))?;
            writeln!(out, "  sandbox: write {}", show(&p.write))?;
            if !p.missing.is_empty() {
                writeln!(
                    out,
                    "  sandbox: missing (granted nothing) {}",
                    show(&p.missing)
                )?;
            }
            for o in sandbox::outside(launch, &p) {
                writeln!(out, "  warning: {}", o.warning(name))?;
            }
        }
        Err(e) => writeln!(out, "  warning: will not start: {e}")?,
    }
    if abi < 6 {
        writeln!(
            out,
            "  warning: will not start: the sandbox needs Landlock ABI 6; this kernel offers {abi}"
        )?;
    }
    Ok(())
}

/// What a confined server's profile grants as it resolves now (a project server's
/// `${PROJECT}` left as written).
fn granted(
    name: &str,
    profile: &crate::config::SandboxProfile,
    launch: &StdioLaunch,
    share: crate::config::Share,
) -> Result<crate::upstream::sandbox::Paths, crate::upstream::sandbox::SandboxError> {
    use crate::upstream::sandbox;
    let project = matches!(share, crate::config::Share::Project { .. })
        .then(|| Path::new(crate::config::PROJECT));
    sandbox::paths(profile, launch, project, &sandbox::Own::planned(name, name))
}

/// The warnings about paths a confined server's launch names that its profile does not
/// grant as they need (none for a server that is not confined, or whose profile does not
/// resolve: `report` says why), as `report` prints them.
pub fn sandbox_warnings(s: &ServerConfig) -> Vec<String> {
    let (Some(profile), Launch::Stdio(launch)) = (&s.sandbox, &s.launch) else {
        return Vec::new();
    };
    let Ok(granted) = granted(&s.name, profile, launch, s.share) else {
        return Vec::new();
    };
    crate::upstream::sandbox::outside(launch, &granted)
        .iter()
        .map(|o| o.warning(&s.name))
        .collect()
}
