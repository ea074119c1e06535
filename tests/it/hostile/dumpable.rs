//! The daemon is not dumpable.
//!
//! A process of the same user reads neither its environment nor its memory through /proc,
//! while the same read of a dumpable process of that user (one of its servers) works.
//!
//! Everything runs without capabilities (`setpriv`), as a user that is not root does:
//! root's CAP_SYS_PTRACE would read any process, and a process without capabilities may
//! not read one that has some, dumpable or not.

use crate::support::*;
use serde_json::Value;
use std::process::Stdio;

/// `setpriv` arguments that drop every capability before running the rest.
const NO_CAPS: [&str; 3] = ["--inh-caps=-all", "--bounding-set=-all", "--"];

/// Reads `/proc/PID/environ` without capabilities: `Ok(bytes read)` or the error.
async fn read_environ(pid: u32) -> Result<usize, String> {
    let out = tokio::process::Command::new("setpriv")
        .args(NO_CAPS)
        .arg("cat")
        .arg(format!("/proc/{pid}/environ"))
        .output();
    let out = within("setpriv cat", out).await.expect("run setpriv");
    if out.status.success() {
        Ok(out.stdout.len())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[tokio::test]
async fn the_daemons_environment_is_unreadable_to_its_user_while_a_servers_is_readable() {
    let b = DaemonBuilder::new().fixture("fx", &[]);
    let dir = b.dir().to_owned();
    let config = dir.join("mcpd.toml");
    std::fs::write(&config, b.config_text()).expect("config");
    let socket = dir.join("mcpd.sock");
    let log = std::fs::File::create(dir.join("daemon.log")).expect("log");
    let mut daemon = tokio::process::Command::new("setpriv")
        .args(NO_CAPS)
        .arg(mcpd_bin())
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .arg("--socket")
        .arg(&socket)
        .env_remove("MCPD_CONFIG")
        .env_remove("MCPD_SOCKET")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("start mcpd");
    let daemon_pid = daemon.id().expect("pid");
    let server = eventually("fx is ready", WAIT, || async {
        let (_, out, _) = run_mcpd(
            &["ctl", "status", "--json", "--socket", socket.to_str()?],
            None,
        )
        .await;
        let v: Value = serde_json::from_str(&out).ok()?;
        let row = v["servers"]
            .as_array()?
            .iter()
            .find(|r| r["name"] == "fx")?
            .clone();
        (row["state"] == "ready")
            .then(|| status_pid(&row))
            .flatten()
    })
    .await;
    // The read works on a dumpable process of the same user: the attack is real.
    let read = read_environ(server).await;
    assert!(
        read.as_ref().is_ok_and(|n| *n > 0),
        "a server's environment: {read:?}"
    );
    // Not on the daemon.
    let read = read_environ(daemon_pid).await;
    assert!(
        read.as_ref()
            .is_err_and(|e| e.contains("Permission denied")),
        "the daemon's environment: {read:?}"
    );
    let _ = daemon.kill().await; // it may have gone already
}
