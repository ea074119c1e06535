//! The `mcpd` binary: command-line dispatch, logging, the runtime, signals and exit codes.

use clap::Parser;
use mcpd::cli::{Cli, Command, CtlCommand, Paths, SecretCommand};
use mcpd::config::{Config, ConfigError};
use mcpd_ctl::stdout::{Out, OutputError};
use mcpd_ctl::{self as ctl, CtlError};
use std::error::Error;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

/// Exit codes, from sysexits.h; documented in docs/operations.md ("Exit codes").
mod exit {
    pub const RUNTIME: u8 = 1;
    pub const USAGE: u8 = 64;
    pub const UNAVAILABLE: u8 = 69;
    pub const CONFIG: u8 = 78;
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { exit::USAGE } else { 0 };
            let _ = e.print(); // stdout or stderr closed: nothing better to do
            return ExitCode::from(code);
        }
    };
    // No runtime and no logging: the sentinel only reads its pipe, these only print.
    match cli.command {
        Command::Sentinel => return mcpd::sentinel::run(),
        Command::HandoverCheck => {
            return print(format!("{}\n", mcpd::upgrade::check_line()).as_bytes());
        }
        Command::Completions { shell } => return completions(shell),
        Command::Man { dir } => return man(dir.as_deref()),
        // A byte pump on one thread: a runtime would only add its own threads and hand-offs.
        Command::Connect {
            paths,
            profile,
            project,
            no_project,
            no_reconnect,
        } => {
            return connect(
                &paths,
                profile.as_deref(),
                project,
                no_project,
                no_reconnect,
            );
        }
        _ => {}
    }
    // mcpd shares the machine with the servers and agents it connects, and relaying is
    // light work: half the cores (one on a 2-core machine) serve it. Measured on 2 cores,
    // one worker instead of two kept tools/call throughput at 64 in flight (or raised it),
    // and the idle daemon is about 0.7 MiB smaller (one thread and its malloc arena less).
    let workers = std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1));
    mcpd_runtime::trim::one_arena();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(exit::RUNTIME, &e),
    };
    runtime.block_on(dispatch(cli.command))
}

async fn dispatch(command: Command) -> ExitCode {
    match command {
        Command::Serve { paths, log_level } => {
            let tap = mcpd::logging::init(log_level.as_deref(), "info");
            serve(paths, tap).await
        }
        Command::CheckConfig { paths } => check_config(paths).await,
        Command::Sentinel => mcpd::sentinel::run(),
        Command::HandoverCheck => ExitCode::SUCCESS, // answered before the runtime
        Command::Completions { shell } => completions(shell),
        Command::Man { dir } => man(dir.as_deref()),
        Command::Import {
            from,
            config,
            dry_run,
        } => {
            let opts = mcpd::import::Options {
                from,
                config,
                dry_run,
            };
            match mcpd::import::run(&opts).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(mcpd::import::ImportError::Output(e)) => printed(Err(e)),
                Err(e) => fail(e.exit_code(), &e),
            }
        }
        // Handled before the runtime starts (above); here only for completeness.
        Command::Connect {
            paths,
            profile,
            project,
            no_project,
            no_reconnect,
        } => connect(
            &paths,
            profile.as_deref(),
            project,
            no_project,
            no_reconnect,
        ),
        Command::Ctl { paths, command } => {
            // Only the daemon keeps a log book.
            drop(mcpd::logging::init(None, "warn"));
            let socket = match socket(&paths) {
                Ok(s) => s,
                Err(e) => return ctl_result(Err(e)),
            };
            let r = match command {
                CtlCommand::Status { json } => ctl::status(&socket, json).await,
                CtlCommand::Tools {
                    server,
                    search: Some(query),
                    limit,
                } => ctl::search(&socket, &query, server.as_deref(), limit).await,
                CtlCommand::Tools { server, .. } => ctl::tools(&socket, server.as_deref()).await,
                CtlCommand::Reload => ctl::reload(&socket).await,
                CtlCommand::Upgrade => ctl::upgrade::upgrade(&socket).await,
                CtlCommand::Agents { json } => ctl::agents(&socket, json).await,
                CtlCommand::Cancel { agent, id } => ctl::cancel(&socket, agent, &id).await,
                CtlCommand::Metrics => ctl::metrics(&socket).await,
                CtlCommand::HttpToken { url } => ctl::http_token(&socket, url).await,
                CtlCommand::Ui { no_browser } => ctl::ui(&socket, !no_browser).await,
                CtlCommand::Logs {
                    name,
                    lines,
                    follow,
                } => ctl::logs(&socket, &name, lines, follow).await,
                CtlCommand::Call { tool, args } => match serde_json::from_str(&args) {
                    Ok(serde_json::Value::Object(args)) => ctl::call(&socket, &tool, args).await,
                    Ok(_) => {
                        mcpd_ctl::errln!(
                            "error: the arguments must be a JSON object, e.g. '{{\"path\": \"/tmp\"}}'"
                        );
                        return ExitCode::from(exit::USAGE);
                    }
                    Err(e) => {
                        mcpd_ctl::errln!(
                            "error: the arguments are not valid JSON: {e} (line {}, column {}); write a JSON object, e.g. '{{\"path\": \"/tmp\"}}'",
                            e.line(),
                            e.column()
                        );
                        return ExitCode::from(exit::USAGE);
                    }
                },
                CtlCommand::Login {
                    name,
                    no_browser,
                    paste,
                } => ctl::login(&socket, &name, !no_browser, paste).await,
                CtlCommand::Logout { name } => ctl::logout(&socket, &name).await,
                CtlCommand::Diff { name } => ctl::diff(&socket, &name).await,
                CtlCommand::Approve { name, names } => ctl::approve(&socket, &name, &names).await,
                CtlCommand::Forget { name } => ctl::forget(&socket, &name).await,
                CtlCommand::Secret(SecretCommand::Set { name }) => {
                    ctl::secret::set(&socket, &name).await
                }
                CtlCommand::Secret(SecretCommand::List) => ctl::secret::list(&socket).await,
                CtlCommand::Secret(SecretCommand::Rm { name }) => {
                    ctl::secret::remove(&socket, &name).await
                }
                CtlCommand::Restart { name } => ctl::control(&socket, "mcpd/restart", &name).await,
                CtlCommand::Stop { name } => ctl::control(&socket, "mcpd/stop", &name).await,
                CtlCommand::Start { name } => ctl::control(&socket, "mcpd/start", &name).await,
            };
            ctl_result(r)
        }
    }
}

/// Loads the config file. A missing file at the default path means "no servers yet"; a
/// missing file that was asked for by name is an error.
fn load_config(paths: &Paths) -> Result<Config, ConfigError> {
    match mcpd_ctl::paths::config_path(paths.config.clone()) {
        Some((path, explicit)) if explicit || path.exists() => Config::load(&path),
        Some((path, _)) => {
            mcpd_ctl::errln!(
                "mcpd: no config file at {}; starting with no servers. Create it with a [servers.NAME] table (see docs/configuration.md), then run `mcpd ctl reload`.",
                path.display()
            );
            // The daemon reloads from there once the file exists.
            Ok(Config::empty_at(path))
        }
        None => Ok(Config::empty()),
    }
}

/// `mcpd connect`: the stdio bridge to the daemon's socket, without an async runtime.
fn connect(
    paths: &Paths,
    profile: Option<&str>,
    project: Option<std::path::PathBuf>,
    no_project: bool,
    no_reconnect: bool,
) -> ExitCode {
    // Only the daemon keeps a log book.
    drop(mcpd::logging::init(None, "warn"));
    // Most clients start their stdio servers in the project they work in.
    let project = match (project, no_project) {
        (_, true) => None,
        (Some(dir), false) => std::path::absolute(dir).ok(),
        (None, false) => std::env::current_dir().ok(),
    };
    ctl_result(socket(paths).and_then(|socket| {
        ctl::bridge(&ctl::Link {
            socket: &socket,
            profile,
            project: project.as_deref(),
            reconnect: !no_reconnect,
        })
    }))
}

/// The socket for ctl and connect: they read the config only to learn `daemon.socket`,
/// and look in each place the daemon may have chosen (`paths::socket_candidates`).
fn socket(paths: &Paths) -> Result<std::path::PathBuf, CtlError> {
    let from_config = if paths.socket.is_none() {
        let file = mcpd_ctl::paths::config_path(paths.config.clone()).filter(|(p, _)| p.exists());
        file.and_then(|(p, _)| match mcpd::config::socket_setting(&p) {
            Ok(socket) => socket,
            Err(e) => {
                mcpd_ctl::errln!("warning: {e}; looking for the socket in the default places");
                None
            }
        })
    } else {
        None
    };
    ctl::locate(&mcpd_ctl::paths::socket_candidates(
        paths.socket.clone(),
        from_config,
    ))
}

async fn serve(paths: Paths, tap: mcpd::logging::LogTap) -> ExitCode {
    // The daemon holds every server's secrets and tokens: not dumpable, so a process of
    // the same user (an unconfined server among them) cannot read its memory or its
    // environment through /proc or ptrace. Its servers are dumpable again once they exec.
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        mcpd_ctl::errln!("error: cannot make the daemon non-dumpable (prctl PR_SET_DUMPABLE): {e}");
        return ExitCode::from(exit::RUNTIME);
    }
    let config = match load_config(&paths) {
        Ok(c) => c,
        Err(e) => return fail(exit::CONFIG, &e),
    };
    let socket = mcpd_ctl::paths::socket_path(paths.socket.clone(), config.daemon.socket.clone());
    let shutdown = CancellationToken::new();
    let (reload_tx, reload_rx) = tokio::sync::mpsc::channel(1);
    let (upgrader, upgrade_asks) = mcpd::upgrade::Upgrader::new();
    // The signal handlers run beside the daemon, not as tasks of their own: they must
    // outlive its drain (a second signal exits at once) and end with it.
    let served = tokio::select! {
        r = mcpd::daemon::serve(
            config,
            socket,
            shutdown.clone(),
            reload_rx,
            (upgrader.clone(), upgrade_asks),
            tap,
        ) => r,
        never = signals(shutdown) => match never {},
        never = hangups(reload_tx) => match never {},
        never = upgrade_signals(upgrader) => match never {},
    };
    match served {
        Ok(mcpd::daemon::Served::Stopped) => ExitCode::SUCCESS,
        Ok(mcpd::daemon::Served::Upgrade(itself, handover)) => {
            // Returns only when neither the new binary nor the old one could be executed.
            let e = itself.exec(&handover);
            let e = std::io::Error::other(format!(
                "the upgrade failed and the daemon cannot come back: {e}"
            ));
            fail(exit::RUNTIME, &e)
        }
        Err(e) => fail(exit::RUNTIME, &e),
    }
}

/// SIGUSR2 asks for an upgrade in place, as `mcpd ctl upgrade` does (for a package's
/// post-install step); the outcome is logged.
async fn upgrade_signals(upgrader: mcpd::upgrade::Upgrader) -> std::convert::Infallible {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::user_defined2()) {
        Ok(mut usr2) => loop {
            if usr2.recv().await.is_some() {
                tracing::info!("SIGUSR2: upgrading in place");
                if let Err(why) = upgrader.upgrade().await {
                    tracing::error!("SIGUSR2: the upgrade was refused: {why}");
                }
            }
        },
        Err(_) => tracing::error!("cannot install the SIGUSR2 handler; use `mcpd ctl upgrade`"),
    }
    std::future::pending().await
}

/// SIGHUP asks for a reload of the config file. A reload already queued absorbs more.
async fn hangups(reload: tokio::sync::mpsc::Sender<()>) -> std::convert::Infallible {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::hangup()) {
        Ok(mut hup) => {
            while hup.recv().await.is_some() {
                tracing::info!("SIGHUP: reloading the configuration");
                let _ = reload.try_send(()); // full: a reload is already on its way
            }
        }
        Err(_) => tracing::error!("cannot install the SIGHUP handler; use `mcpd ctl reload`"),
    }
    std::future::pending().await
}

/// Only `main` listens to signals. SIGTERM or SIGINT starts a graceful shutdown; a second
/// one exits at once.
async fn signals(shutdown: CancellationToken) -> std::convert::Infallible {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers; stop mcpd with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {},
        _ = int.recv() => {},
    }
    shutdown.cancel();
    tokio::select! {
        _ = term.recv() => {},
        _ = int.recv() => {},
    }
    mcpd_ctl::errln!("mcpd: second signal, exiting now");
    std::process::exit(exit::RUNTIME.into());
}

async fn check_config(paths: Paths) -> ExitCode {
    let config = match load_config(&paths) {
        Ok(c) => c,
        Err(e) => return fail(exit::CONFIG, &e),
    };
    let exists = config.source.as_ref().is_some_and(|p| p.exists());
    let socket = mcpd_ctl::paths::socket_path(paths.socket, config.daemon.socket.clone());
    let secrets = mcpd::check_config::find_secrets(&config).await;
    printed(mcpd::check_config::report(
        &config, &socket, exists, &secrets,
    ))
}

fn completions(shell: clap_complete::Shell) -> ExitCode {
    print(&mcpd::cli::completions(shell))
}

fn man(dir: Option<&std::path::Path>) -> ExitCode {
    let Some(dir) = dir else {
        return match mcpd::cli::man_page() {
            Ok(page) => print(&page),
            Err(e) => fail(exit::RUNTIME, &e),
        };
    };
    match mcpd::cli::man_pages(dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            mcpd_ctl::errln!(
                "error: cannot write the man pages into {}: {e}",
                dir.display()
            );
            ExitCode::from(exit::RUNTIME)
        }
    }
}

fn print(bytes: &[u8]) -> ExitCode {
    let mut out = Out::lock();
    printed(out.write_all(bytes).and_then(|()| out.flush()))
}

/// The one place a failed write to stdout becomes an exit code. A reader that closed the
/// pipe early (`mcpd ctl status | head -1`) had all it wanted: exit 0, saying nothing.
fn printed(r: Result<(), OutputError>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.reader_left() => ExitCode::SUCCESS,
        Err(e) => fail(exit::RUNTIME, &e),
    }
}

fn ctl_result(r: Result<(), CtlError>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(CtlError::Output(e)) => printed(Err(e)),
        Err(e @ CtlError::NotRunning { .. }) => fail(exit::UNAVAILABLE, &e),
        Err(e @ CtlError::Rejected(_)) => fail(exit::CONFIG, &e),
        Err(e) => fail(exit::RUNTIME, &e),
    }
}

/// Prints `error: …` and each `caused by: …`, and returns the exit code. A cause whose
/// text the message already includes (`… failed: {source}`) is not printed again.
fn fail(code: u8, e: &dyn Error) -> ExitCode {
    let mut told = e.to_string();
    mcpd_ctl::errln!("error: {told}");
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !told.contains(&text) {
            mcpd_ctl::errln!("caused by: {text}");
            told.push('\n');
            told.push_str(&text);
        }
        source = s.source();
    }
    ExitCode::from(code)
}
