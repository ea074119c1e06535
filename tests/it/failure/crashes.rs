//! Servers that crash or are killed: the calls in flight fail with the exit status and are
//! not resent, crash loops end in `failed` until `ctl restart`, and a server in backoff fails
//! fast while the others keep working.

use crate::failure::support::*;
use crate::support::*;
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// Watches a process from a thread and returns when it stopped running (exited, even if
/// not yet reaped), polling every millisecond, bounded by `WAIT`.
fn watch_exit(pid: u32) -> std::thread::JoinHandle<Option<Instant>> {
    std::thread::spawn(move || {
        let start = Instant::now();
        while start.elapsed() < WAIT {
            if !alive(pid) {
                return Some(Instant::now());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        None
    })
}

/// The names of the tools/call requests a recorded fixture received.
fn called_tools(dir: &Path, pid: u32) -> Vec<String> {
    recorded_requests(dir, pid)
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .map(|m| m["params"]["name"].as_str().unwrap_or("").to_owned())
        .collect()
}

// ---------------------------------------------------------------- crashes and kills

#[tokio::test]
async fn a_crash_mid_call_fails_that_call_with_the_exit_status_and_does_not_resend_it() {
    let b = DaemonBuilder::new();
    let (rec, rec_arg) = record_dir(&b);
    let d = b
        .fixture("x", &["--tools", "crash,pid", "--record", &rec_arg])
        .start()
        .await;
    d.wait_ready().await;
    let old = status_pid(&d.server_status("x").await).expect("pid");
    let mut a = d.initialized_agent().await;

    let exit = watch_exit(old);
    let sent = Instant::now();
    let r = a.call("x__crash", json!({})).await;
    let answered = Instant::now();
    let exited = exit
        .join()
        .expect("watcher")
        .expect("the server process exited");
    let after_exit = answered.saturating_duration_since(exited);
    println!(
        "crash -> error: {:.1} ms after the process exited ({:.1} ms after the call was sent)",
        ms(after_exit),
        ms(answered - sent)
    );
    assert_error(&r, -32012, &["'x'", "exit status 3"]);
    assert_eq!(r["error"]["data"]["server"], "x", "{r}");
    assert!(
        after_exit < Duration::from_secs(2),
        "the error came {after_exit:?} after the exit (target: under 100 ms)"
    );

    let row = d
        .wait_server("x", "x is ready again with a new pid", |s| {
            ready_with_new_pid(s, &[old])
        })
        .await;
    assert_eq!(row["restarts"], 1, "{row}");
    assert!(last_exit(&row).contains("exit status 3"), "{row}");
    assert_eq!(proc_state(old), None, "the crashed process was reaped");

    // The crashed call is not re-sent: the new process's first call is the one below.
    let new = status_pid(&row).unwrap();
    assert_eq!(text(&a.call("x__pid", json!({})).await), new.to_string());
    assert_eq!(called_tools(&rec, new), vec!["pid"], "the new process got");
    assert_eq!(
        called_tools(&rec, old),
        vec!["crash"],
        "the old process got"
    );
    assert_eq!(recorded_starts(&rec), vec![old, new]);
}

#[tokio::test]
async fn every_call_in_flight_when_the_server_is_killed_fails_promptly_naming_sigkill() {
    let d = DaemonBuilder::new()
        .fixture("x", &["--tools", "sleep,echo"])
        .start()
        .await;
    d.wait_ready().await;
    let mut a1 = d.agent().await;
    let mut a2 = d.agent().await;
    a1.initialize().await;
    a2.initialize().await;
    let mut ids1 = Vec::new();
    for _ in 0..3 {
        ids1.push(a1.start_call("x__sleep", json!({"ms": 10000})).await);
    }
    let mut ids2 = Vec::new();
    for _ in 0..2 {
        ids2.push(a2.start_call("x__sleep", json!({"ms": 10000})).await);
    }
    let row = d
        .wait_server("x", "five calls in flight", |s| s["in_flight"] == 5)
        .await;
    let pid = status_pid(&row).unwrap();
    assert!(send_signal(pid, Signal::SIGKILL));
    let killed = Instant::now();
    let mut worst = Duration::ZERO;
    for (a, ids) in [(&mut a1, &ids1), (&mut a2, &ids2)] {
        for id in ids {
            let r = a.response(id).await;
            worst = worst.max(killed.elapsed());
            assert_error(&r, -32012, &["'x'", "killed by SIGKILL"]);
        }
        assert!(a.stray.is_empty(), "{:?}", a.stray);
    }
    println!(
        "SIGKILL -> all five errors: {:.1} ms after the kill",
        ms(worst)
    );
    assert!(
        worst < Duration::from_secs(2),
        "the calls were failed only {worst:?} after the kill"
    );
    let row = d
        .wait_server("x", "x is back with a new pid", |s| {
            ready_with_new_pid(s, &[pid])
        })
        .await;
    assert!(last_exit(&row).contains("killed by SIGKILL"), "{row}");
    assert_eq!(
        text(&a1.call("x__echo", json!({"text": "again"})).await),
        "again"
    );
}

// ---------------------------------------------------------------- crash loops and backoff

#[tokio::test]
async fn a_crash_loop_marks_the_server_failed_until_ctl_restart() {
    let b = DaemonBuilder::new();
    let (rec, rec_arg) = record_dir(&b);
    let d = b
        .fixture_with(
            "x",
            &["--tools", "echo", "--crash-after", "1", "--record", &rec_arg],
            "[servers.x.restart]\nbackoff_initial = \"50ms\"\nbackoff_max = \"200ms\"\nmax_restarts = 2\nwindow = \"60s\"",
        )
        .start()
        .await;
    let mut a = d.initialized_agent().await;
    let mut pids = Vec::new();
    for round in 1..=3 {
        let row = d
            .wait_server("x", &format!("process {round} is ready"), |s| {
                ready_with_new_pid(s, &pids)
            })
            .await;
        pids.push(status_pid(&row).unwrap());
        let tag = format!("round {round}");
        assert_eq!(text(&a.call("x__echo", json!({"text": tag})).await), tag);
        // --crash-after 1: the second call of each process makes it exit with code 3.
        let r = a.call("x__echo", json!({"text": "boom"})).await;
        assert_error(&r, -32012, &["'x'", "exit status 3"]);
    }
    let row = d
        .wait_server("x", "x is failed", |s| s["state"] == "failed")
        .await;
    assert_eq!(recorded_starts(&rec), pids, "three starts, no more");
    let why = last_error(&row);
    assert!(
        why.contains("crashed") && why.contains("mcpd ctl restart"),
        "{row}"
    );
    assert_eq!(row["restarts"], 2, "{row}");
    assert_eq!(row["pid"], Value::Null, "{row}");
    assert!(
        !row["stderr_tail"]
            .as_array()
            .expect("stderr_tail")
            .is_empty(),
        "{row}"
    );
    assert!(last_exit(&row).contains("exit status 3"), "{row}");

    // Failed stays failed: calls are refused at once and nothing is started.
    let r = a.call("x__echo", json!({"text": "no"})).await;
    assert_error(&r, -32010, &["'x'", "failed"]);
    d.status().await;
    let row = d.server_status("x").await;
    assert_eq!(row["state"], "failed", "{row}");
    assert_eq!(recorded_starts(&rec), pids, "still three starts");

    let (code, _, err) = d.run_cli(&["ctl", "restart", "x"]).await;
    assert_eq!(code, 0, "{err}");
    let row = d
        .wait_server("x", "x is ready after ctl restart", |s| {
            ready_with_new_pid(s, &pids)
        })
        .await;
    assert_eq!(
        text(&a.call("x__echo", json!({"text": "revived"})).await),
        "revived"
    );
    assert_eq!(recorded_starts(&rec).len(), 4);
    assert_eq!(row["state"], "ready");
}

#[tokio::test]
async fn a_server_that_exits_during_every_handshake_is_marked_failed_after_its_budget() {
    let b = DaemonBuilder::new();
    let (rec, rec_arg) = record_dir(&b);
    let d = b
        .fixture_with(
            "x",
            &["--exit-during-handshake", "--record", &rec_arg],
            "[servers.x.restart]\nbackoff_initial = \"50ms\"\nbackoff_max = \"200ms\"\nmax_restarts = 2\nwindow = \"60s\"",
        )
        .fixture("y", &["--tools", "echo"])
        .start()
        .await;
    let row = d
        .wait_server("x", "x is failed", |s| s["state"] == "failed")
        .await;
    assert_eq!(recorded_starts(&rec).len(), 3, "{row}");
    let why = last_error(&row);
    assert!(
        why.contains("crashed") && why.contains("mcpd ctl restart"),
        "{row}"
    );
    assert!(last_exit(&row).contains("exit status 4"), "{row}");
    assert!(
        !row["stderr_tail"]
            .as_array()
            .expect("stderr_tail")
            .is_empty(),
        "{row}"
    );
    // Two more status round trips: still failed, still three starts.
    d.status().await;
    d.status().await;
    assert_eq!(d.server_status("x").await["state"], "failed");
    assert_eq!(recorded_starts(&rec).len(), 3);
    // The other server is unaffected.
    let mut a = d.initialized_agent().await;
    assert_eq!(
        text(&a.call("y__echo", json!({"text": "fine"})).await),
        "fine"
    );
}

#[tokio::test]
async fn a_call_to_a_server_in_backoff_fails_fast_while_other_servers_keep_working() {
    let d = DaemonBuilder::new()
        .fixture_with(
            "x",
            &["--tools", "crash,echo"],
            "[servers.x.restart]\nbackoff_initial = \"10s\"\nbackoff_max = \"10s\"",
        )
        .fixture("y", &["--tools", "echo"])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let r = a.call("x__crash", json!({})).await;
    assert_error(&r, -32012, &["'x'"]);
    let row = d
        .wait_server("x", "x is in backoff", |s| s["state"] == "backoff")
        .await;
    assert!(
        row["next_retry_secs"].as_f64().unwrap_or(0.0) > 0.0,
        "{row}"
    );

    let started = Instant::now();
    let r = a.call("x__echo", json!({"text": "hello"})).await;
    let took = started.elapsed();
    println!("call to a server in backoff answered in {:.1} ms", ms(took));
    assert_error(
        &r,
        -32010,
        &["server 'x' is restarting (attempt 1, next try in "],
    );
    assert!(took < Duration::from_secs(1), "took {took:?}");

    let names = a.tool_names().await;
    assert!(
        names.contains(&"x__echo".to_owned()) && names.contains(&"x__crash".to_owned()),
        "x's tools stay listed during backoff: {names:?}"
    );
    let started = Instant::now();
    assert_eq!(
        text(&a.call("y__echo", json!({"text": "iso"})).await),
        "iso"
    );
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "y took {took:?}");
    assert_eq!(d.server_status("y").await["state"], "ready");
}
