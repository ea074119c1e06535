//! systemd integration: socket activation and notifications to systemd.
//!
//! It takes the socket passed by socket activation, and sends readiness, status, stopping
//! and watchdog notifications.
//!
//! All of it is a no-op outside systemd: with no `LISTEN_FDS` mcpd binds its own socket,
//! and with no `NOTIFY_SOCKET` notifications go nowhere.

use std::os::fd::FromRawFd;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Environment variables the service manager sets for mcpd itself (systemd.exec(5),
/// "Environment Variables in Spawned Processes"), which no child of mcpd may see: with
/// them a server could talk to systemd in mcpd's name (`NOTIFY_SOCKET`, the watchdog),
/// claim mcpd's sockets, credentials and directories, or log as mcpd (`JOURNAL_STREAM`
/// names mcpd's stderr; a server's is a pipe to mcpd). The user's own variables
/// (`HOME`, `PATH`, `XDG_RUNTIME_DIR`, `LANG`, `TERM`) are not systemd's and stay.
pub const PRIVATE_ENV: [&str; 29] = [
    // Readiness, status and the watchdog (sd_notify).
    "NOTIFY_SOCKET",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    // Socket activation and the descriptor store.
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
    "FDSTORE",
    // mcpd's own upgrade handover (a descriptor only mcpd's next image may take).
    "MCPD_HANDOVER",
    // Who mcpd is to systemd.
    "INVOCATION_ID",
    "MAINPID",
    "MANAGERPID",
    "SYSTEMD_EXEC_PID",
    "PIDFILE",
    // mcpd's logging and the memory pressure of its cgroup.
    "JOURNAL_STREAM",
    "LOG_NAMESPACE",
    "MEMORY_PRESSURE_WATCH",
    "MEMORY_PRESSURE_WRITE",
    // mcpd's credentials and directories (LoadCredential=, RuntimeDirectory=, …).
    "CREDENTIALS_DIRECTORY",
    "RUNTIME_DIRECTORY",
    "STATE_DIRECTORY",
    "CACHE_DIRECTORY",
    "LOGS_DIRECTORY",
    "CONFIGURATION_DIRECTORY",
    // What started mcpd: a path, timer or other unit.
    "TRIGGER_UNIT",
    "TRIGGER_PATH",
    "TRIGGER_TIMER_REALTIME_USEC",
    "TRIGGER_TIMER_MONOTONIC_USEC",
    // A socket unit with Accept=yes: the peer of the connection mcpd was started for.
    "REMOTE_ADDR",
    "REMOTE_PORT",
];

/// The listening socket systemd passed (socket activation), if any.
pub fn activated_listener() -> Result<Option<std::os::unix::net::UnixListener>, String> {
    let mut fds = sd_notify::listen_fds()
        .map_err(|e| format!("cannot read the sockets systemd passed (LISTEN_FDS): {e}"))?;
    let Some(fd) = fds.next() else {
        return Ok(None);
    };
    if fds.len() > 0 {
        tracing::warn!("systemd passed several sockets; mcpd uses the first");
    }
    // SAFETY: systemd hands this descriptor to this process (LISTEN_PID is ours) for it
    // to own; nothing else in mcpd uses it.
    let listener = unsafe { std::os::unix::net::UnixListener::from_raw_fd(fd) };
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("cannot use the socket systemd passed: {e}"))?;
    Ok(Some(listener))
}

/// Tells systemd something; failures only matter to systemd, so they are logged.
fn notify(states: &[sd_notify::NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::debug!("sd_notify failed: {e}");
    }
}

/// Whether systemd listens for notifications (`NOTIFY_SOCKET`); without it, work done
/// only to notify (the status line's refresh) is not started.
pub fn notifying() -> bool {
    std::env::var_os("NOTIFY_SOCKET").is_some()
}

pub fn ready(status: &str) {
    notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status(status),
    ]);
}

pub fn status(status: &str) {
    notify(&[sd_notify::NotifyState::Status(status)]);
}

/// Around a reload: `RELOADING=1` with the monotonic time (systemd 253 wants it), then
/// `READY=1` when done.
pub fn reloading() {
    match sd_notify::NotifyState::monotonic_usec_now() {
        Ok(now) => notify(&[sd_notify::NotifyState::Reloading, now]),
        Err(_) => notify(&[sd_notify::NotifyState::Reloading]),
    }
}

pub fn reloaded() {
    notify(&[sd_notify::NotifyState::Ready]);
}

pub fn stopping() {
    notify(&[sd_notify::NotifyState::Stopping]);
}

/// Pings systemd's watchdog at half its interval until `cancel` fires, when
/// `WATCHDOG_USEC` asks for it. The pings come from the runtime, so a wedged runtime
/// stops them and systemd restarts mcpd.
pub fn watchdog(cancel: CancellationToken) {
    let Some(interval) = sd_notify::watchdog_enabled() else {
        return;
    };
    let every = (interval / 2).max(Duration::from_millis(100));
    mcpd_runtime::tracker::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = tick.tick() => notify(&[sd_notify::NotifyState::Watchdog]),
                () = cancel.cancelled() => break,
            }
        }
    });
}
