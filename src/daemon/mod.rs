//! `mcpd serve`: binds the socket, starts the supervisor and listener, runs the shutdown sequence.

use crate::agent::{AgentContext, DaemonInfo, listener};
use crate::config::Config;
use crate::sentinel::SentinelHandle;
use crate::supervisor::SupervisorHandle;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod stop;
use stop::Running;

/// How serving ended.
pub enum Served {
    Stopped,
    /// Drained for an upgrade: execute the new binary with this handover (`Itself::exec`).
    Upgrade(crate::upgrade::Itself, crate::upgrade::handover::Outgoing),
}

/// Runs the daemon until `shutdown` fires or an upgrade is asked for, then stops in
/// order: stop accepting, let calls in flight finish within the grace, stop every
/// server, remove the socket (kept open for the next image on an upgrade). Every wait
/// has a deadline.
pub async fn serve(
    config: Config,
    socket: PathBuf,
    shutdown: CancellationToken,
    reloads: tokio::sync::mpsc::Receiver<()>,
    (upgrader, mut upgrade_asks): (
        crate::upgrade::Upgrader,
        tokio::sync::mpsc::Receiver<crate::upgrade::Ask>,
    ),
    tap: crate::logging::LogTap,
) -> Result<Served, StartError> {
    // Before the socket and before any id is sealed: what an upgraded-from image left.
    let handed = crate::upgrade::handover::take()
        .inspect_err(|e| tracing::error!("starting cold: {e}"))
        .ok()
        .flatten();
    if let Some(h) = &handed {
        crate::agent::adopt_sealing_key(h.key);
        tracing::info!(from = %h.from_version, upgrades = h.upgrades, "upgraded in place: took over the socket");
    }
    let itself = crate::upgrade::Itself::at_start(handed.as_ref().map_or(0, |h| h.upgrades));
    // Before any child is started: none may inherit what mcpd inherited, and each gets
    // back the open-files limit mcpd started with.
    crate::inherit::close_inherited_on_exec();
    crate::inherit::raise_open_files();
    let (listener, owns_socket) = match handed {
        Some(h) => (
            tokio::net::UnixListener::from_std(h.socket).map_err(|source| {
                listener::BindError::Bind {
                    path: socket.clone(),
                    source,
                }
            })?,
            h.owns_socket,
        ),
        None => bind_socket(&socket).await?,
    };
    // A second descriptor of the socket, for the next image if an upgrade is asked for.
    let keep_socket = std::os::fd::AsFd::as_fd(&listener)
        .try_clone_to_owned()
        .map_err(|source| listener::BindError::Bind {
            path: socket.clone(),
            source,
        })?;
    // Clients started without XDG_RUNTIME_DIR look in the fallback place last.
    let pointer = match owns_socket {
        true => crate::socket_pointer::leave(&socket).await,
        false => None,
    };
    tracing::info!(socket = %socket.display(), activated = !owns_socket, servers = config.servers.len(), "mcpd listening");
    warn_if_no_servers(&config);
    let (ui, ui_on_http) = bind_dashboard(&config).await?;
    // Upstreams have their own token: they stop only after the agents have drained.
    let upstreams = CancellationToken::new();
    crate::reaper::become_subreaper();
    // Tried in a child of its own before the supervisor reaps children (it answers once,
    // also for servers a reload adds later).
    crate::upstream::sandbox::userns_works();
    let temp_dirs = confined_temp_dirs();
    let (sentinel, sentinel_task) = SentinelHandle::start();
    // Servers' task statuses go from their connections to the task book, which knows
    // whose task each is.
    let (task_status, task_statuses) = crate::upstream::task_status_channel();
    // Where `${secret:NAME}` is looked up at each server's start, and `ctl secret` reads
    // and writes. `[daemon] secrets` and the state directory take effect at a restart.
    let secrets = crate::secrets::Secrets::new(
        mcpd_ctl::paths::state_dir(config.daemon.state_dir.clone()).as_deref(),
        config.daemon.secrets,
    );
    let (supervisor, catalog, supervisor_task) = SupervisorHandle::spawn(
        &config,
        upstreams.clone(),
        sentinel,
        task_status,
        secrets.clone(),
    );
    let http = bind_http(&config, &socket).await?;
    // Started once nothing can fail any more; what was logged before waits in the tap.
    // It stops with the shutdown token, which closes any page still following it.
    let logs = crate::logging::LogBook::spawn(tap, shutdown.clone());
    let ui = match &http {
        Some(bound) if ui_on_http => Some(crate::dashboard::Place::Http(bound.addr)),
        _ => ui,
    };
    let (ui, ui_pending) = match ui.map(crate::dashboard::prepare) {
        None => (None, None),
        Some((handle, pending)) => (
            Some(Arc::new(handle) as Arc<dyn crate::agent::UiLink>),
            Some(pending),
        ),
    };
    let daemon = daemon_info(
        &config,
        &socket,
        (secrets, upgrader, itself.upgrades),
        http.as_ref(),
        ui,
    );
    let reloader = spawn_reloader(&config, supervisor.clone(), reloads, shutdown.clone());
    let ctx = AgentContext::new(
        &config,
        catalog,
        supervisor,
        reloader,
        daemon,
        task_statuses,
    );
    let ui = ui_pending.map(|ui| ui.start(ctx.clone(), logs, shutdown.clone()));
    let (ui_tasks, ui_routes) = match ui {
        Some(started) => (started.tasks, started.routes),
        None => (Vec::new(), None),
    };
    let agents = TaskTracker::new();
    let status = (ctx.catalog.clone(), ctx.daemon.clone());
    let http_task = http.map(|bound| {
        mcpd_runtime::tracker::spawn(crate::agent::http::run(
            bound.tcp,
            bound.cfg,
            bound.token,
            (ctx.clone(), ui_routes),
            agents.clone(),
            shutdown.clone(),
        ))
    });
    let listen = mcpd_runtime::tracker::spawn(listener::run(
        listener,
        ctx,
        config.daemon.max_agents,
        agents.clone(),
        shutdown.clone(),
    ));

    // Ready: the socket listens and the (cached) catalog is published.
    crate::systemd::ready(&summary(&status.0.borrow(), &status.1));
    crate::systemd::watchdog(shutdown.clone());
    if crate::systemd::notifying() {
        mcpd_runtime::tracker::spawn(report_status(status.0, status.1, shutdown.clone()));
    }
    mcpd_runtime::tracker::spawn(mcpd_runtime::trim::run(shutdown.clone()));

    let upgrade = tokio::select! {
        () = shutdown.cancelled() => false,
        _ = crate::upgrade::wait_for_good_ask(&mut upgrade_asks, &itself) => true,
    };
    shutdown.cancel();
    Running {
        listen,
        http_task,
        ui_tasks,
        agents,
        upstreams,
        supervisor_task,
        sentinel_task,
        temp_dirs,
        pointer,
        owns_socket,
    }
    .stop(&config, &socket, upgrade)
    .await;
    Ok(match upgrade {
        false => Served::Stopped,
        true => {
            let out = crate::upgrade::handover::Outgoing {
                socket: keep_socket,
                owns_socket,
                upgrades: itself.upgrades + 1,
                key: crate::agent::sealing_key(),
            };
            Served::Upgrade(itself, out)
        }
    })
}

/// The socket agents connect to, and whether mcpd owns its file: under socket activation
/// systemd owns it; otherwise mcpd binds it.
async fn bind_socket(socket: &Path) -> Result<(tokio::net::UnixListener, bool), StartError> {
    let activated =
        crate::systemd::activated_listener().map_err(listener::BindError::Activation)?;
    let owns_socket = activated.is_none();
    let listener = match activated {
        Some(std_listener) => {
            tokio::net::UnixListener::from_std(std_listener).map_err(|source| {
                listener::BindError::Bind {
                    path: socket.to_owned(),
                    source,
                }
            })?
        }
        None => {
            crate::socket_pointer::clear_for(socket).await;
            listener::bind(socket).await?
        }
    };
    Ok((listener, owns_socket))
}

/// An empty config is allowed (servers come with a reload), but worth a line saying how.
fn warn_if_no_servers(config: &Config) {
    if config.servers.is_empty() {
        tracing::warn!(
            "no servers configured; add a [servers.NAME] table with a `command` to {}, then run `mcpd ctl reload`",
            config
                .source
                .as_ref()
                .map_or_else(|| "the config file".into(), |p| p.display().to_string())
        );
    }
}

/// The dashboard's own port, and whether it shares the HTTP listener's instead.
///
/// The dashboard's own port too is taken before anything starts: a taken port is a
/// startup error that names daemon.ui_listen. Without a `ui_listen` of its own, it
/// shares the HTTP listener's port when that listens on loopback.
async fn bind_dashboard(
    config: &Config,
) -> Result<(Option<crate::dashboard::Place>, bool), StartError> {
    let ui_on_http = config.daemon.ui.as_ref().is_some_and(|u| !u.explicit)
        && config
            .daemon
            .http
            .as_ref()
            .is_some_and(|h| h.addr.ip().is_loopback());
    // Without a port in `ui_listen`, the one of the last run is kept in the state
    // directory, so the page's address survives a restart.
    let ui = match &config.daemon.ui {
        Some(cfg) if !ui_on_http => {
            let state = mcpd_ctl::paths::state_dir(config.daemon.state_dir.clone());
            Some(crate::dashboard::bind(cfg, state.as_deref()).await?)
        }
        _ => None,
    };
    Ok((ui, ui_on_http))
}

/// The HTTP listener, bound, with its settings, its bearer token and its address.
struct HttpBound {
    tcp: tokio::net::TcpListener,
    cfg: crate::config::HttpListen,
    token: Option<crate::config::Secret>,
    addr: std::net::SocketAddr,
}

/// Binds the HTTP listener before anything is reported ready, so a taken port is a
/// startup error, not a surprise later.
async fn bind_http(config: &Config, socket: &Path) -> Result<Option<HttpBound>, StartError> {
    let Some(cfg) = &config.daemon.http else {
        return Ok(None);
    };
    let tcp = crate::agent::http::bind(cfg).await?;
    let token = match &cfg.auth {
        crate::config::HttpAuth::None => {
            tracing::warn!(addr = %cfg.addr, "the HTTP listener requires no token (daemon.http_auth = \"none\"); any local process can use it");
            None
        }
        crate::config::HttpAuth::Token(Some(t)) => Some(t.clone()),
        crate::config::HttpAuth::Token(None) => Some(crate::agent::http::token::load_or_create(
            &crate::agent::http::token::path(socket),
        )?),
    };
    if !cfg.addr.ip().is_loopback() {
        tracing::warn!(addr = %cfg.addr, "the HTTP listener serves other hosts WITHOUT encryption (daemon.http_allow_remote); the bearer token and all traffic cross the network in clear text; put a TLS proxy in front or use an SSH tunnel");
    }
    let addr = tcp.local_addr().unwrap_or(cfg.addr);
    tracing::info!(url = %format!("http://{addr}{}", crate::agent::http::PATH), "serving HTTP");
    Ok(Some(HttpBound {
        tcp,
        cfg: cfg.clone(),
        token,
        addr,
    }))
}

/// What `mcpd ctl status` and the dashboard tell of the daemon itself.
fn daemon_info(
    config: &Config,
    socket: &Path,
    (secrets, upgrader, upgrades): (crate::secrets::Secrets, crate::upgrade::Upgrader, u32),
    http: Option<&HttpBound>,
    ui: Option<Arc<dyn crate::agent::UiLink>>,
) -> Arc<DaemonInfo> {
    Arc::new(DaemonInfo {
        started: Instant::now(),
        socket: socket.to_owned(),
        config: config.source.clone(),
        agents: Default::default(),
        agents_changed: tokio::sync::Notify::new(),
        next_agent: Default::default(),
        max_agents: config.daemon.max_agents,
        secrets,
        upgrader,
        upgrades,
        http: http.map(|bound| crate::agent::HttpInfo {
            url: format!("http://{}{}", bound.addr, crate::agent::http::PATH),
            token: bound.token.clone(),
        }),
        ui,
    })
}

/// The reloader, and the task that hands it each SIGHUP `main` forwards.
fn spawn_reloader(
    config: &Config,
    supervisor: SupervisorHandle,
    mut reloads: tokio::sync::mpsc::Receiver<()>,
    stopping: CancellationToken,
) -> crate::supervisor::Reloader {
    let reloader =
        crate::supervisor::Reloader::spawn(config.source.clone(), config.clone(), supervisor);
    let hup = reloader.clone();
    mcpd_runtime::tracker::spawn(async move {
        // Ends with the daemon: its handle is one of those the reloader waits to see go.
        while let Some(()) = tokio::select! {
            r = reloads.recv() => r,
            () = stopping.cancelled() => None,
        } {
            // The outcome is logged by the reloader.
            let _ = hup.reload().await;
        }
    });
    reloader
}

/// Claims this daemon's directory for its confined servers' temporary directories, and
/// removes those of daemons that are gone, off the runtime. Without the claim, servers
/// get directories named by the daemon's pid all the same, left behind at exit; where
/// `$TMPDIR` cannot be written, a confined server fails its start saying so.
fn confined_temp_dirs() -> Option<crate::upstream::sandbox::Claim> {
    let claim = crate::upstream::sandbox::claim()
        .inspect_err(|e| {
            tracing::warn!(
                "cannot claim a directory for confined servers' temporary directories: {e}"
            )
        })
        .ok();
    mcpd_runtime::tracker::spawn_blocking(|| match crate::upstream::sandbox::sweep() {
        0 => {}
        n => tracing::info!("removed the temporary directories of {n} daemons no longer running"),
    });
    claim
}

/// Why the daemon could not start serving.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Listen(#[from] listener::BindError),
    #[error(transparent)]
    Http(#[from] crate::agent::http::HttpError),
    #[error(transparent)]
    Dashboard(#[from] crate::dashboard::DashboardError),
}

/// The one-line summary systemd shows (`STATUS=`).
fn summary(catalog: &crate::registry::Catalog, daemon: &DaemonInfo) -> String {
    let total = catalog.server_count();
    // A server run per agent or per project is as ready as its instances can be made.
    let ready = catalog
        .servers()
        .map(|(_, a)| a)
        .filter(|a| {
            use crate::registry::Availability as A;
            matches!(a, A::Ready(_) | A::PerAgent { .. } | A::PerProject { .. })
        })
        .count();
    let agents = daemon.agents.load(std::sync::atomic::Ordering::Relaxed);
    let line = match catalog.instance_count() {
        0 => format!("{ready}/{total} servers ready, {agents} agents"),
        n => format!("{ready}/{total} servers ready, {n} instances, {agents} agents"),
    };
    let held = &catalog.held();
    match held.tools.len() + held.prompts.len() + held.resources.len() {
        0 => line,
        n => format!("{line}, {n} definitions held for approval (mcpd ctl diff)"),
    }
}

/// Keeps systemd's status line current: on every catalog change and every change of the
/// agent count, at most once a second (a burst of agents connecting is one update). With
/// nothing changing it sleeps: no timer wakes an idle daemon for it.
async fn report_status(
    mut catalog: tokio::sync::watch::Receiver<Arc<crate::registry::Catalog>>,
    daemon: Arc<DaemonInfo>,
    shutdown: CancellationToken,
) {
    const AT_MOST_EVERY: Duration = Duration::from_secs(1);
    let mut last = String::new();
    loop {
        tokio::select! {
            r = catalog.changed() => if r.is_err() { break },
            () = daemon.agents_changed.notified() => {}
            () = shutdown.cancelled() => break,
        }
        let now = summary(&catalog.borrow_and_update(), &daemon);
        if now != last {
            crate::systemd::status(&now);
            last = now;
            // Changes meanwhile are kept (the watch's flag, the Notify's permit) and told
            // after the pause.
            tokio::select! {
                () = tokio::time::sleep(AT_MOST_EVERY) => {}
                () = shutdown.cancelled() => break,
            }
        }
    }
}
