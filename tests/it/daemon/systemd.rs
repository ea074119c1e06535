//! systemd integration: readiness, stopping, socket activation and the shipped units.
//!
//! Readiness and stopping are on a NOTIFY_SOCKET the test binds, socket activation with a
//! listening socket passed as fd 3, and the shipped units are verified by
//! systemd-analyze.

use crate::support::*;
use serde_json::json;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// Reads notifications until one contains `what`, within a deadline.
fn wait_notification(sock: &UnixDatagram, what: &str) -> String {
    let deadline = std::time::Instant::now() + WAIT;
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 4096];
    while std::time::Instant::now() < deadline {
        if let Ok(n) = sock.recv(&mut buf) {
            let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
            if msg.contains(what) {
                return msg;
            }
            seen.push(msg);
        }
    }
    panic!("no {what} notification within {WAIT:?}; saw {seen:?}");
}

/// Starts `mcpd serve` with extra environment and an optional fd 3, outside the harness
/// (the harness binds its own socket).
fn spawn_mcpd(
    config: &Path,
    socket: &Path,
    env: &[(&str, String)],
    fd3: Option<i32>,
    log: &Path,
) -> tokio::process::Child {
    let log = std::fs::File::create(log).expect("log");
    let mut cmd = tokio::process::Command::new("sh");
    // `exec` keeps the shell's pid, so LISTEN_PID=$$ names mcpd itself.
    let script = format!(
        "LISTEN_PID=$$ exec {} serve --config {} --socket {}",
        mcpd_bin(),
        config.display(),
        socket.display()
    );
    cmd.arg("-c").arg(script);
    if fd3.is_none() {
        cmd.env("LISTEN_FDS", "0");
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Some(fd) = fd3 {
        // SAFETY: dup2 is async-signal-safe; it runs in the child before exec.
        unsafe {
            cmd.pre_exec(move || {
                if nix::libc::dup2(fd, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd.env("RUST_LOG", "mcpd=debug")
        .env_remove("MCPD_SOCKET")
        .env_remove("MCPD_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("start mcpd")
}

/// A daemon with one fixture server, started with a `NOTIFY_SOCKET` the test binds: the
/// builder (which holds the directory), that socket, the agent socket's path and mcpd.
fn start_notified() -> (
    DaemonBuilder,
    UnixDatagram,
    std::path::PathBuf,
    tokio::process::Child,
) {
    let b = DaemonBuilder::new().fixture("x", &[]);
    let dir = b.dir().to_owned();
    let config = dir.join("mcpd.toml");
    std::fs::write(&config, b.config_text()).expect("config");
    let notify_path = dir.join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).expect("bind the notify socket");
    notify
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let socket = dir.join("mcpd.sock");
    let env = [("NOTIFY_SOCKET", notify_path.display().to_string())];
    let child = spawn_mcpd(&config, &socket, &env, None, &dir.join("log"));
    (b, notify, socket, child)
}

#[tokio::test(flavor = "multi_thread")]
async fn mcpd_tells_systemd_it_is_ready_with_a_status_line_and_that_it_is_stopping() {
    let (_b, notify, socket, mut child) = start_notified();
    let ready = tokio::task::block_in_place(|| wait_notification(&notify, "READY=1"));
    assert!(ready.contains("STATUS="), "{ready}");
    assert!(ready.contains("servers ready"), "{ready}");
    // The socket accepts connections by then.
    let mut agent = Agent::connect(&socket).await;
    agent.initialize().await;
    // Under systemd the status line follows the agents, as they come and go.
    let status = tokio::task::block_in_place(|| wait_notification(&notify, ", 1 agents"));
    assert!(status.contains("STATUS="), "{status}");
    drop(agent);
    let status = tokio::task::block_in_place(|| wait_notification(&notify, ", 0 agents"));
    assert!(status.contains("STATUS="), "{status}");
    // A reload is bracketed by RELOADING=1 and READY=1.
    let (code, _, err) = run_mcpd(&["ctl", "reload"], Some(&socket)).await;
    assert_eq!(code, 0, "{err}");
    let reloading = tokio::task::block_in_place(|| wait_notification(&notify, "RELOADING=1"));
    assert!(reloading.contains("MONOTONIC_USEC="), "{reloading}");
    tokio::task::block_in_place(|| wait_notification(&notify, "READY=1"));
    let pid = child.id().expect("pid");
    send_signal(pid, nix::sys::signal::Signal::SIGTERM);
    tokio::task::block_in_place(|| wait_notification(&notify, "STOPPING=1"));
    let status = within("mcpd exits", child.wait()).await.expect("wait");
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn under_systemd_an_idle_daemon_is_not_woken_by_its_status_line() {
    // The status line is told when something changes, not on a timer.
    let (_b, notify, _socket, mut child) = start_notified();
    tokio::task::block_in_place(|| wait_notification(&notify, "READY=1"));
    let pid = child.id().expect("pid");
    // Windows longer than the 5 s refresh this replaced, which woke the daemon in each.
    let quiet = settles(pid, Duration::from_secs(6), 1).await;
    assert!(quiet.is_ok(), "woken per 6 s window while idle: {quiet:?}");
    send_signal(pid, nix::sys::signal::Signal::SIGTERM);
    let status = within("mcpd exits", child.wait()).await.expect("wait");
    assert_eq!(status.code(), Some(0));
}

/// A config with one fixture server and a listening socket made before mcpd starts, as
/// with systemd's mcpd.socket: the builder (which holds the directory), the directory,
/// the config, the socket's path and the listener.
fn activation() -> (
    DaemonBuilder,
    std::path::PathBuf,
    std::path::PathBuf,
    std::path::PathBuf,
    UnixListener,
) {
    let b = DaemonBuilder::new().fixture("x", &[]);
    let dir = b.dir().to_owned();
    let config = dir.join("mcpd.toml");
    std::fs::write(&config, b.config_text()).expect("config");
    let socket = dir.join("activated.sock");
    let listener = UnixListener::bind(&socket).expect("bind");
    (b, dir, config, socket, listener)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_socket_passed_by_systemd_is_served_and_left_in_place_at_exit() {
    let (_b, dir, config, socket, listener) = activation();
    let fd = listener.as_raw_fd();
    let env = [("LISTEN_FDS", "1".to_owned())];
    let log = dir.join("log");
    let mut child = spawn_mcpd(&config, &socket, &env, Some(fd), &log);
    // An agent may connect before mcpd runs: the kernel queues it on the socket.
    let mut agent = Agent::connect(&socket).await;
    agent.initialize().await;
    let agent = std::sync::Arc::new(tokio::sync::Mutex::new(agent));
    eventually("the server's tools are listed", WAIT, || {
        let agent = agent.clone();
        async move {
            let names = agent.lock().await.tool_names().await;
            names.contains(&"x__echo".to_owned()).then_some(())
        }
    })
    .await;
    let r = agent
        .lock()
        .await
        .call("x__echo", json!({"text": "activated"}))
        .await;
    assert_eq!(text(&r), "activated", "{r}");
    let text_log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(text_log.contains("activated=true"), "{text_log}");
    send_signal(child.id().expect("pid"), nix::sys::signal::Signal::SIGTERM);
    let status = within("mcpd exits", child.wait()).await.expect("wait");
    assert_eq!(status.code(), Some(0));
    assert!(
        socket.exists(),
        "systemd owns the socket file; mcpd leaves it"
    );
    drop(listener);
}

#[tokio::test]
async fn the_shipped_units_pass_systemd_analyze_verify() {
    let Ok(which) = std::process::Command::new("sh")
        .args(["-c", "command -v systemd-analyze"])
        .output()
    else {
        eprintln!("skipped: cannot run sh");
        return;
    };
    if !which.status.success() {
        eprintln!("skipped: systemd-analyze is not installed on this machine");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd");
    for unit in ["mcpd.service", "mcpd.socket"] {
        let text = std::fs::read_to_string(repo.join(unit)).expect("unit");
        // The unit names the installed binary; verify against the one just built.
        let text = text.replace("%h/.cargo/bin/mcpd", mcpd_bin());
        std::fs::write(dir.path().join(unit), text).expect("write");
    }
    let out = tokio::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(dir.path().join("mcpd.service"))
        .arg(dir.path().join("mcpd.socket"))
        .output();
    let out = within("systemd-analyze", out)
        .await
        .expect("run systemd-analyze");
    assert!(
        out.status.success(),
        "systemd-analyze verify failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `mcpd ARGS` as another user against `socket`; returns (code, stderr).
async fn run_as(uid: u32, args: &[&str], socket: &Path) -> (i32, String) {
    let out = tokio::process::Command::new(mcpd_bin())
        .args(args)
        .arg("--socket")
        .arg(socket)
        .uid(uid)
        .gid(uid)
        .env_remove("MCPD_SOCKET")
        .env_remove("MCPD_CONFIG")
        .stdin(Stdio::null())
        .output();
    let out = within("mcpd as another user", out).await.expect("run mcpd");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn other_users_are_refused_unless_allowed_and_never_control_the_daemon() {
    if !nix::unistd::getuid().is_root() {
        eprintln!("skipped: switching users needs root (CI runs as root)");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let nobody: u32 = 65534;
    for allowed in [false, true] {
        let mut b = DaemonBuilder::new().fixture("x", &[]);
        if allowed {
            b = b.daemon(&format!("allow_uids = [{nobody}]"));
        }
        let d = b.start().await;
        d.wait_ready().await;
        // Loosen the permissions so the check that remains is mcpd's own.
        std::fs::set_permissions(d.dir(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        if allowed {
            let (code, err) = run_as(nobody, &["ctl", "tools"], &d.socket).await;
            assert_eq!(code, 0, "an allowed user may use it: {err}");
            for args in [&["ctl", "status"][..], &["ctl", "restart", "x"]] {
                let (code, err) = run_as(nobody, args, &d.socket).await;
                assert_ne!(code, 0, "{args:?}");
                assert!(err.contains("is another user's"), "{args:?}: {err}");
            }
        } else {
            let (code, err) = run_as(nobody, &["ctl", "status"], &d.socket).await;
            assert_ne!(code, 0);
            assert!(err.contains("uid 65534 may not use this mcpd"), "{err}");
            assert!(d.log_text().contains("refused an agent from a user"));
        }
        // The daemon's own user controls it as before.
        let (code, _, err) = d.run_cli(&["ctl", "restart", "x"]).await;
        assert_eq!(code, 0, "{err}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upgrade_under_systemd_is_a_reload_of_the_same_process_keeping_systemds_socket() {
    let (_b, dir, config, socket, listener) = activation();
    let notify_path = dir.join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).expect("bind the notify socket");
    notify
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let env = [
        ("LISTEN_FDS", "1".to_owned()),
        ("NOTIFY_SOCKET", notify_path.display().to_string()),
    ];
    let log = dir.join("log");
    let mut child = spawn_mcpd(&config, &socket, &env, Some(listener.as_raw_fd()), &log);
    tokio::task::block_in_place(|| wait_notification(&notify, "READY=1"));
    let (code, out, err) = run_mcpd(&["ctl", "upgrade"], Some(&socket)).await;
    assert_eq!(code, 0, "{out}{err}");
    let reloading = tokio::task::block_in_place(|| wait_notification(&notify, "RELOADING=1"));
    assert!(reloading.contains("MONOTONIC_USEC="), "{reloading}");
    tokio::task::block_in_place(|| wait_notification(&notify, "READY=1"));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the same process runs on"
    );
    let mut agent = Agent::connect(&socket).await;
    agent.initialize().await;
    let status = agent.request("mcpd/status", None).await;
    assert_eq!(status["result"]["daemon"]["upgrades"], 1, "{status}");
    assert_eq!(
        status["result"]["daemon"]["pid"],
        json!(child.id().expect("pid")),
        "{status}"
    );
    drop(agent);
    send_signal(child.id().expect("pid"), nix::sys::signal::Signal::SIGTERM);
    let status = within("mcpd exits", child.wait()).await.expect("wait");
    assert_eq!(status.code(), Some(0));
    assert!(
        socket.exists(),
        "systemd owns the socket file; mcpd leaves it"
    );
    drop(listener);
}
