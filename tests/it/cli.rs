//! The command line as users meet it: `ctl` output read by a reader that stops early.

use crate::support::*;
use std::process::Stdio;

/// Runs `mcpd ARGS` with its stdout a pipe whose reading end is closed before mcpd writes:
/// what `| head -1` does once it has its line. Returns the exit code and stderr.
async fn run_with_closed_stdout(args: &[&str]) -> (i32, String) {
    let mut child = tokio::process::Command::new(mcpd_bin())
        .args(args)
        .env_remove("MCPD_SOCKET")
        .env_remove("MCPD_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mcpd");
    drop(child.stdout.take());
    let out = within("mcpd with a closed stdout", child.wait_with_output())
        .await
        .expect("mcpd ran");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn printing_commands_exit_quietly_when_their_reader_has_gone() {
    let d = DaemonBuilder::new()
        .fixture("fx", &["--tools", "echo"])
        .start()
        .await;
    d.wait_ready().await;
    let socket = d.socket.to_str().unwrap();
    let commands: [&[&str]; 7] = [
        &["status"],
        &["status", "--json"],
        &["tools"],
        &["agents"],
        &["metrics"],
        &["logs", "fx"],
        &["call", "fx__echo", r#"{"text": "unread"}"#],
    ];
    for command in commands {
        let args = [&["ctl"][..], command, &["--socket", socket][..]].concat();
        let (code, err) = run_with_closed_stdout(&args).await;
        assert_eq!((code, err.as_str()), (0, ""), "mcpd {args:?}");
    }
    // Failures that are not the reader leaving still say so.
    let (code, err) = run_with_closed_stdout(&["ctl", "tools", "--socket", "/nonexistent"]).await;
    assert_eq!(code, 69, "{err}");
    assert!(err.contains("mcpd is not running"), "{err}");
}
