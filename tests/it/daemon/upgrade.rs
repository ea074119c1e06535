//! `mcpd ctl upgrade`: the daemon executes the binary now at its path in place (same pid), and a bad binary leaves it serving.

use crate::support::*;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// A copy of this build's mcpd in `dir/bin`, for the daemon to run from and a test to
/// replace as a package manager would.
fn installed(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    let path = bin.join("mcpd");
    std::fs::copy(mcpd_bin(), &path).expect("copy mcpd");
    path
}

/// Puts `content` at `path` as a package manager does: a new file, renamed over the old.
fn replace(path: &Path, content: &[u8], mode: u32) {
    let new = path.with_extension("new");
    std::fs::write(&new, content).expect("write the new binary");
    std::fs::set_permissions(&new, std::fs::Permissions::from_mode(mode)).expect("chmod");
    std::fs::rename(&new, path).expect("rename over the old");
}

async fn daemon() -> (Daemon, PathBuf) {
    let b = DaemonBuilder::new()
        .daemon("pin = \"off\"")
        .fixture("s", &[]);
    let bin = installed(b.dir());
    let d = b.binary(bin.clone()).start().await;
    d.wait_ready().await;
    (d, bin)
}

fn upgrades(status: &Value) -> u64 {
    status["daemon"]["upgrades"]
        .as_u64()
        .expect("upgrades in status")
}

#[tokio::test]
async fn an_upgrade_keeps_the_pid_and_a_bridged_agent_calling_in_a_loop_sees_no_error() {
    let (d, bin) = daemon().await;
    let before = d.status().await;
    assert_eq!(upgrades(&before), 0);
    // An agent through `mcpd connect` calling in a loop, one call at a time.
    let mut bridge = tokio::process::Command::new(mcpd_bin())
        .args(["connect", "--no-project", "--socket"])
        .arg(&d.socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("mcpd connect");
    let mut stdin = bridge.stdin.take().expect("stdin");
    let mut lines = BufReader::new(bridge.stdout.take().expect("stdout")).lines();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "upgrade", "version": "1"}}});
    stdin
        .write_all(
            format!(
                "{init}\n{}\n",
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
            )
            .as_bytes(),
        )
        .await
        .expect("write");
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    let caller = tokio::spawn(async move {
        let (mut ok, mut failed) = (0u64, Vec::new());
        for id in 1u64.. {
            if stop_rx.try_recv().is_ok() {
                break;
            }
            let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "s__echo", "arguments": {"text": "loop"}}});
            stdin
                .write_all(format!("{call}\n").as_bytes())
                .await
                .expect("write");
            loop {
                let line = lines
                    .next_line()
                    .await
                    .expect("read")
                    .expect("the bridge stays");
                let m: Value = serde_json::from_str(&line).expect("json");
                if m["id"] == json!(id) {
                    if m["result"]["content"][0]["text"] == "loop" {
                        ok += 1;
                    } else {
                        failed.push(m);
                    }
                    break;
                }
            }
        }
        (ok, failed)
    });
    // A new binary, put in place as a package manager does.
    replace(&bin, &std::fs::read(mcpd_bin()).expect("read mcpd"), 0o755);
    let (code, out, err) = d.run_cli(&["ctl", "upgrade"]).await;
    assert_eq!(code, 0, "ctl upgrade: {out}{err}");
    assert!(out.contains("upgraded: mcpd"), "{out}");
    let after = d.status().await;
    assert_eq!(
        after["daemon"]["pid"], before["daemon"]["pid"],
        "same process"
    );
    assert_eq!(upgrades(&after), 1);
    d.wait_ready().await;
    stop_tx.send(()).expect("the caller runs");
    let (ok, failed) = within("the calling loop ends", caller)
        .await
        .expect("caller");
    assert!(
        failed.is_empty(),
        "failed calls across the upgrade: {failed:?}"
    );
    assert!(ok > 0);
    let log = d.log_text();
    assert!(log.contains("upgraded in place"), "{log}");
}

#[tokio::test]
async fn a_bad_binary_is_refused_and_the_daemon_goes_on_serving() {
    let (d, bin) = daemon().await;
    let pid = d.pid();
    /// What is put at the binary's path (nothing: removed), and what the refusal says.
    type Case<'a> = (&'a str, Option<(&'a [u8], u32)>, &'a str);
    let cases: [Case<'_>; 4] = [
        ("missing", None, "no binary at"),
        (
            "not executable",
            Some((b"#!/bin/sh\nexit 0\n", 0o644)),
            "not an executable file",
        ),
        (
            "another program",
            Some((b"#!/bin/sh\necho hello\n", 0o755)),
            "is not mcpd",
        ),
        (
            "another handover format",
            Some((b"#!/bin/sh\necho mcpd-handover 999 9.9.9\n", 0o755)),
            "handover format 999",
        ),
    ];
    for (what, content, said) in cases {
        match content {
            None => std::fs::remove_file(&bin).expect("remove"),
            Some((bytes, mode)) => replace(&bin, bytes, mode),
        }
        let (code, out, err) = d.run_cli(&["ctl", "upgrade"]).await;
        assert_ne!(code, 0, "{what}: {out}");
        assert!(err.contains(said), "{what}: {err}");
        let status = d.status().await;
        assert_eq!(status["daemon"]["pid"], json!(pid), "{what}");
        assert_eq!(upgrades(&status), 0, "{what}");
        let mut a = d.initialized_agent().await;
        let r = a.call("s__echo", json!({"text": "still"})).await;
        assert_eq!(text(&r), "still", "{what}: the daemon serves: {r}");
    }
}
