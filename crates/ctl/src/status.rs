//! `mcpd ctl status`: the daemon and every server at a glance.
//!
//! Each server that is not ready is shown with what explains it.

use super::{CtlError, Out, at, print_json, request};
use crate::control_api::{AuthState, AuthView, ServerState, ServerStatus};
use crate::stdout::OutputError;
use std::path::Path;

pub async fn status(socket: &Path, as_json: bool) -> Result<(), CtlError> {
    let result = request(socket, mcpd_wire::protocol::method::MCPD_STATUS, None).await?;
    let mut out = Out::lock();
    if as_json {
        return print_json(&mut out, &result);
    }
    let mut servers: Vec<ServerStatus> = serde_json::from_value(at(&result, "servers").clone())
        .map_err(|e| CtlError::Unexpected(format!("status servers: {e}")))?;
    // Each server's instances under it (`SERVER@AGENT`, `SERVER@/project`; server names
    // have no `@`).
    servers.sort_by(|a, b| group_key(&a.name).cmp(&group_key(&b.name)));
    print_daemon(&mut out, at(&result, "daemon"))?;
    if servers.is_empty() {
        writeln!(
            out,
            "no servers configured; add a [servers.NAME] table to the config file (see docs/configuration.md)"
        )?;
        return Ok(());
    }
    print_table(&mut out, &servers)?;
    print_projects(&mut out, &servers)?;
    for s in &servers {
        print_notes(&mut out, s)?;
    }
    Ok(())
}

/// The daemon's own lines: version, pid, uptime, socket, and what else it serves.
fn print_daemon(out: &mut Out, d: &serde_json::Value) -> Result<(), OutputError> {
    writeln!(
        out,
        "mcpd {} pid {} up {} socket {} agents {}",
        at(d, "version").as_str().unwrap_or("?"),
        at(d, "pid"),
        human_secs(at(d, "uptime_secs").as_f64()),
        at(d, "socket").as_str().unwrap_or("?"),
        at(d, "agents"),
    )?;
    if let Some(url) = at(d, "http").as_str() {
        writeln!(out, "serving HTTP at {url}")?;
    }
    if let Some(url) = at(d, "ui").as_str() {
        writeln!(out, "dashboard at {url} (log in with mcpd ctl ui)")?;
    }
    if let Some(store) = at(d, "secrets").as_str() {
        writeln!(out, "new secrets go to {store}")?;
    }
    Ok(())
}

/// One row a server (its instances indented under it), under a heading.
fn print_table(out: &mut Out, servers: &[ServerStatus]) -> Result<(), OutputError> {
    // Names are up to 32 characters (an agent's instance adds `@N`): the column is as
    // wide as the longest.
    let w = servers
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(20);
    writeln!(
        out,
        "\n{:<w$} {:<11} {:<15} {:<7} {:<11} {:>8} {:>6} {:>9} {:>8} {:>8}",
        "SERVER",
        "STATE",
        "TRANSPORT",
        "ERA",
        "PROTOCOL",
        "PID",
        "TOOLS",
        "IN-FLIGHT",
        "RESTARTS",
        "UPTIME"
    )?;
    // Colour only for a person at a terminal; pipes and files get plain text.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stdout());
    for s in servers {
        let state = if s.probing {
            "probing"
        } else {
            s.state.as_str()
        };
        let name = match s.name.split_once('@') {
            Some((_, instance)) => format!("  @{instance}"),
            None => s.name.clone(),
        };
        write!(out, "{name:<w$} ")?;
        paint(out, state, s.state, colour)?;
        writeln!(
            out,
            " {:<15} {:<7} {:<11} {:>8} {:>6} {:>9} {:>8} {:>8}",
            s.transport,
            s.era.as_deref().unwrap_or("-"),
            s.protocol_version.as_deref().unwrap_or("-"),
            s.pid.map_or("-".into(), |p| p.to_string()),
            s.tools,
            s.in_flight,
            s.restarts,
            human_secs(s.uptime_secs),
        )?;
    }
    Ok(())
}

/// The per-project instances: how many agents work in each, and how long it has idled.
fn print_projects(out: &mut Out, servers: &[ServerStatus]) -> Result<(), OutputError> {
    let projects: Vec<&ServerStatus> = servers.iter().filter(|s| s.project.is_some()).collect();
    if !projects.is_empty() {
        writeln!(out, "\nprojects:")?;
        for s in projects {
            writeln!(
                out,
                "  {}: {} agent{} working in it, idle {}",
                s.name,
                s.agents,
                if s.agents == 1 { "" } else { "s" },
                human_secs(s.idle_secs.map(|i| i as f64)),
            )?;
        }
    }
    Ok(())
}

/// A server's notes (and, when it is not ready, its last stderr lines), if it has any.
fn print_notes(out: &mut Out, s: &ServerStatus) -> Result<(), OutputError> {
    let notes = notes(s);
    if !notes.is_empty() {
        writeln!(out, "\n{}:", s.name)?;
        for n in notes {
            writeln!(out, "  {n}")?;
        }
        if s.state != ServerState::Ready {
            for line in s.stderr_tail.iter().rev().take(5).rev() {
                writeln!(out, "  stderr| {line}")?;
            }
        }
    }
    Ok(())
}

/// What explains a server's state: retries, login, sandbox, pins, errors, conflicts.
fn notes(s: &ServerStatus) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(t) = s.next_retry_secs {
        notes.push(format!("next retry in {}", human_secs(Some(t))));
    }
    if let Some(a) = &s.auth {
        notes.extend(auth_note(&s.name, a));
    }
    if let Some(b) = &s.sandbox {
        let paths = if b.per_instance() {
            " in each instance".to_owned()
        } else {
            format!(", {} read and {} write paths", b.read, b.write)
        };
        notes.push(format!(
            "sandbox: {} ABI {}{paths}, network {}{}",
            b.mechanism,
            b.abi,
            b.network,
            b.note
                .as_ref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        ));
    }
    if let Some(p) = &s.pins {
        if let Some(why) = &p.broken {
            notes.push(format!("pins: {why}"));
        } else if p.held > 0 {
            notes.push(format!(
                "pins: {} held for approval (`mcpd ctl diff {}`, then `mcpd ctl approve {}`)",
                p.held, s.name, s.name
            ));
        }
    }
    if let Some(e) = &s.last_error {
        notes.push(format!("last error: {e}"));
    }
    if let Some(e) = &s.last_exit {
        notes.push(format!("last exit: {e}"));
    }
    if let Some(e) = &s.catalog_error {
        notes.push(format!("catalog: {e}"));
    }
    for c in &s.name_conflicts {
        notes.push(format!(
            "name conflict: {} {} is held by '{}'; this server's is not listed",
            c.kind, c.name, c.held_by
        ));
    }
    if let Some(r) = &s.era_reason
        && s.state != ServerState::Ready
    {
        notes.push(format!("protocol: {r}"));
    }
    notes
}

/// Where a row sorts: its server's name, then the server before its instances.
fn group_key(name: &str) -> (&str, bool, &str) {
    match name.split_once('@') {
        Some((server, instance)) => (server, true, instance),
        None => (name, false, ""),
    }
}

/// The auth lines of a server's status: its login, never a token.
fn auth_note(name: &str, a: &AuthView) -> Vec<String> {
    let mut notes = Vec::new();
    let mut about = Vec::new();
    if let Some(i) = &a.issuer {
        about.push(format!("issuer {i}"));
    }
    if let Some(s) = a.scopes.as_deref().filter(|s| !s.is_empty()) {
        about.push(format!("scopes {s}"));
    }
    let about = if about.is_empty() {
        String::new()
    } else {
        format!("; {}", about.join(", "))
    };
    match &a.state {
        AuthState::None => {}
        AuthState::LoggedIn { expires_at } => {
            let left = expires_at.map(|t| {
                // `expires_at` is seconds since the Unix epoch.
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                t.saturating_sub(now)
            });
            let renewed = if a.grant.is_some() {
                "renewed"
            } else {
                "refreshed"
            };
            let when = match left {
                None => "no expiry given".to_owned(),
                Some(0) => format!("expired; {renewed} on next use"),
                Some(s) => format!("expires in {}", human_secs(Some(s as f64))),
            };
            let dpop = if a.dpop { ", DPoP" } else { "" };
            notes.push(match &a.grant {
                Some(g) => format!("auth: {}, token {when}{dpop}{about}", g.replace('_', " ")),
                None => format!("auth: logged in ({when}){dpop}{about}"),
            });
        }
        AuthState::NeedsLogin(why) => {
            notes.push(match &a.grant {
                // The reason says what to run already (a sign-in at an identity provider).
                Some(g) if why.contains("mcpd ctl login") => {
                    format!("auth: no token ({} grant): {why}", g.replace('_', " "))
                }
                Some(g) => format!(
                    "auth: no token ({} grant: {why}): fix [servers.{name}.oauth], then run `mcpd ctl login {name}` to try again",
                    g.replace('_', " ")
                ),
                None => format!("auth: needs-login ({why}): run `mcpd ctl login {name}`"),
            });
        }
    }
    if a.pending {
        notes.push("auth: login pending (waiting for the browser's redirect)".into());
    }
    if !a.more_scope.is_empty() {
        notes.push(format!(
            "auth: the server asked for more scope ({}): run `mcpd ctl login {name}`",
            a.more_scope.join(" ")
        ));
    }
    notes
}

fn human_secs(secs: Option<f64>) -> String {
    match secs {
        None => "-".into(),
        Some(s) if s < 60.0 => format!("{s:.0}s"),
        Some(s) if s < 3600.0 => format!("{}m{}s", (s / 60.0) as u64, (s % 60.0) as u64),
        Some(s) => format!("{}h{}m", (s / 3600.0) as u64, ((s % 3600.0) / 60.0) as u64),
    }
}

/// The state column, padded to 11 columns, coloured when `colour` is on.
fn paint(out: &mut Out, text: &str, state: ServerState, colour: bool) -> Result<(), OutputError> {
    use ServerState as S;
    let padded = format!("{text:<11}");
    if !colour {
        return write!(out, "{padded}");
    }
    let code = match state {
        S::Ready => "32",
        S::Starting | S::Idle => "36",
        S::Backoff => "33",
        S::Failed => "31",
        S::Stopped | S::Disabled => "2",
        S::NeedsLogin => "35",
    };
    out.paint(code, &padded)
}
