//! The command line as users meet it.
//!
//! Completion scripts, man pages, `ctl` output read by a reader that stops early, what
//! `ctl status` counts as agents, and what `ctl call` prints.

use crate::support::*;
use serde_json::{Value, json};
use std::process::Stdio;

#[tokio::test]
async fn completions_for_bash_offer_the_commands_but_not_the_hidden_sentinel() {
    let (code, script, err) = run_mcpd(&["completions", "bash"], None).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        script.contains("_mcpd()"),
        "a bash completion function:\n{script}"
    );
    for word in ["ctl", "login", "check-config", "--follow"] {
        assert!(script.contains(word), "the script offers {word}");
    }
    assert!(!script.contains("sentinel"), "__sentinel is internal");
    for shell in ["zsh", "fish"] {
        let (code, script, err) = run_mcpd(&["completions", shell], None).await;
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(script.contains("login"), "{shell}:\n{script}");
    }
    let (code, _, err) = run_mcpd(&["completions", "tcsh"], None).await;
    assert_eq!(code, 64, "an unknown shell is a usage error: {err}");
}

#[tokio::test]
async fn the_man_page_is_roff_and_a_directory_gets_a_page_per_command() {
    let (code, page, err) = run_mcpd(&["man"], None).await;
    assert_eq!(code, 0, "{err}");
    assert!(page.contains(".TH mcpd 1"), "{page}");
    assert!(
        page.contains("mcpd\\-ctl(1)"),
        "it refers to the ctl page:\n{page}"
    );
    assert!(!page.contains("sentinel"), "{page}");

    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run_mcpd(&["man", "--dir", dir.path().to_str().unwrap()], None).await;
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    for name in [
        "mcpd.1",
        "mcpd-ctl.1",
        "mcpd-ctl-status.1",
        "mcpd-ctl-login.1",
    ] {
        let page = std::fs::read_to_string(dir.path().join(name)).expect(name);
        assert!(page.contains(".TH"), "{name}: {page}");
    }
    let missing = dir.path().join("no/such/dir");
    let (code, _, err) = run_mcpd(&["man", "--dir", missing.to_str().unwrap()], None).await;
    assert_eq!(code, 1);
    assert!(err.contains("cannot write the man pages"), "{err}");
}

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
    let (code, err) = run_with_closed_stdout(&["completions", "bash"]).await;
    assert_eq!((code, err.as_str()), (0, ""), "mcpd completions bash");
    // Failures that are not the reader leaving still say so.
    let (code, err) = run_with_closed_stdout(&["ctl", "tools", "--socket", "/nonexistent"]).await;
    assert_eq!(code, 69, "{err}");
    assert!(err.contains("mcpd is not running"), "{err}");
}

async fn status_agents(d: &Daemon) -> Value {
    let (code, out, err) = d.run_cli(&["ctl", "status", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("status --json prints JSON");
    v["daemon"]["agents"].clone()
}

#[tokio::test]
async fn ctl_status_counts_the_connected_agents_but_not_the_ctl_connection_asking() {
    let d = DaemonBuilder::new()
        .fixture("fx", &["--tools", "echo"])
        .start()
        .await;
    d.wait_ready().await;
    assert_eq!(status_agents(&d).await, 0, "no agent is connected");

    let mut agent = d.initialized_agent().await;
    assert_eq!(status_agents(&d).await, 1, "one agent");
    // A connection that only asks for the daemon's status is no agent either.
    assert_eq!(d.status().await["daemon"]["agents"], 1);

    let r = agent.call("fx__echo", json!({"text": "still here"})).await;
    assert_eq!(text(&r), "still here");
    let _second = d.initialized_agent().await;
    assert_eq!(status_agents(&d).await, 2, "two agents");

    drop(agent);
    d.wait_status("the agent that left is no longer counted", |s| {
        s["daemon"]["agents"] == 1
    })
    .await;
    let (code, metrics, err) = d.run_cli(&["ctl", "metrics"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(metrics.contains("\nmcpd_agents 1\n"), "{metrics}");
}

#[tokio::test]
async fn ctl_agents_lists_a_call_in_flight_and_ctl_cancel_cancels_it_upstream_and_tells_the_agent()
{
    let mut h = Hanging::start().await;
    let id = h.hang().await;
    let (d, a, log) = (&h.d, &mut h.agent, &h.log);
    let (code, out, err) = d.run_cli(&["ctl", "agents", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let agents: Value = serde_json::from_str(&out).unwrap();
    let agent = &agents["agents"][0];
    let call = &agent["calls"][0];
    assert_eq!(call["method"], "tools/call", "{agents}");
    assert_eq!(call["tool"], "s__hang", "{agents}");
    assert_eq!(call["id"], id.to_string(), "{agents}");
    let number = agent["agent"].as_u64().unwrap().to_string();
    let (code, table, err) = d.run_cli(&["ctl", "agents"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(table.contains("tools/call s__hang"), "{table}");
    // An unknown id is a clear error, and nothing is cancelled.
    let (code, _, err) = d.run_cli(&["ctl", "cancel", &number, "999"]).await;
    assert_ne!(code, 0);
    assert!(err.contains("no request 999 in flight"), "{err}");
    let (code, out, err) = d
        .run_cli(&["ctl", "cancel", &number, &id.to_string()])
        .await;
    assert_eq!(code, 0, "{out}{err}");
    wait_for_line(log, "notifications/cancelled").await;
    let answer = a.response(&id).await;
    assert_eq!(error_code(&answer), Some(-32026), "{answer}");
    assert!(error_message(&answer).contains("cancelled"), "{answer}");
    // The connection keeps working.
    assert_eq!(a.request("ping", None).await["result"], json!({}));
}

#[tokio::test]
async fn ctl_call_prints_structured_content_once_when_a_text_block_repeats_it() {
    let d = DaemonBuilder::new()
        .fixture("fx", &["--tools", "structured,raw"])
        .start()
        .await;
    d.wait_ready().await;
    // The fixture repeats its structured content as a JSON text block, as servers are
    // asked to: one copy is printed.
    let (code, out, err) = d
        .run_cli(&[
            "ctl",
            "call",
            "fx__structured",
            r#"{"value": {"count": 3}}"#,
        ])
        .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("count").count(), 1, "printed once:\n{out}");
    // A text block that says something else: both are printed.
    let result = json!({
        "content": [{"type": "text", "text": "three of them"}],
        "structuredContent": {"count": 3},
    });
    let args = json!({ "result": result }).to_string();
    let (code, out, err) = d.run_cli(&["ctl", "call", "fx__raw", &args]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("three of them"), "{out}");
    assert!(out.contains(r#"{"count":3}"#), "{out}");
}
