//! Failure semantics: crashes, kills, crash loops, backoff, spawn and handshake failures,
//! liveness, control commands, process hygiene, timeouts, slow agents, floods, limits, soak.

use crate::support::*;
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A `--record` directory inside the daemon's temp dir, and its path as an argument.
fn record_dir(b: &DaemonBuilder) -> (PathBuf, String) {
    let dir = b.dir().join("rec");
    let arg = dir.to_str().expect("utf-8 temp path").to_owned();
    (dir, arg)
}

fn last_error(row: &Value) -> &str {
    row["last_error"].as_str().unwrap_or("")
}

fn last_exit(row: &Value) -> &str {
    row["last_exit"].as_str().unwrap_or("")
}

/// Asserts `r` is an mcpd error with `code` whose message contains every one of `parts`.
fn assert_error(r: &Value, code: i64, parts: &[&str]) {
    assert_eq!(error_code(r), Some(code), "expected error {code}, got {r}");
    let msg = error_message(r);
    for p in parts {
        assert!(msg.contains(p), "error message lacks {p:?}: {r}");
    }
}

/// Ready with a pid other than every one in `old`.
fn ready_with_new_pid(row: &Value, old: &[u32]) -> bool {
    row["state"] == "ready" && status_pid(row).is_some_and(|p| !old.contains(&p))
}

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

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
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

// ---------------------------------------------------------------- spawn and handshake failures

#[tokio::test]
async fn a_command_that_does_not_exist_is_reported_by_name_and_other_servers_keep_serving() {
    let d = DaemonBuilder::new()
        .server(
            "nobin",
            "/nonexistent/binary",
            &[],
            "[servers.nobin.restart]\nbackoff_initial = \"50ms\"\nbackoff_max = \"100ms\"\nmax_restarts = 2",
        )
        .fixture("good", &["--tools", "echo"])
        .start()
        .await;
    let row = d
        .wait_server("nobin", "the spawn failure is reported", |s| {
            last_error(s).contains("/nonexistent/binary")
        })
        .await;
    assert!(last_error(&row).contains("No such file"), "{row}");
    assert!(
        ["backoff", "failed", "starting"].contains(&row["state"].as_str().unwrap_or("")),
        "{row}"
    );
    let row = d
        .wait_server("nobin", "nobin is failed", |s| s["state"] == "failed")
        .await;
    assert!(
        last_error(&row).contains("/nonexistent/binary")
            && last_error(&row).contains("No such file"),
        "{row}"
    );
    assert_eq!(row["pid"], Value::Null);
    let good = d
        .wait_server("good", "good is ready", |s| s["state"] == "ready")
        .await;
    assert_eq!(good["restarts"], 0);
    let mut a = d.initialized_agent().await;
    assert_eq!(
        text(&a.call("good__echo", json!({"text": "up"})).await),
        "up"
    );
}

#[tokio::test]
async fn a_missing_working_directory_is_reported_as_the_cwd() {
    let d = DaemonBuilder::new()
        .fixture_with(
            "nocwd",
            &["--tools", "echo"],
            "cwd = \"/nonexistent\"\n[servers.nocwd.restart]\nbackoff_initial = \"50ms\"\nbackoff_max = \"100ms\"\nmax_restarts = 2",
        )
        .fixture("good", &["--tools", "echo"])
        .start()
        .await;
    d.wait_server("good", "good is ready", |s| s["state"] == "ready")
        .await;
    let row = d
        .wait_server("nocwd", "the cwd failure is reported", |s| {
            last_error(s).contains("/nonexistent")
        })
        .await;
    assert!(last_error(&row).contains("cwd"), "{row}");
    assert_ne!(row["state"], "ready", "{row}");
    let mut a = d.initialized_agent().await;
    assert_eq!(
        text(&a.call("good__echo", json!({"text": "up"})).await),
        "up"
    );
}

#[tokio::test]
async fn garbage_or_silent_handshakes_are_never_ready_and_are_retried() {
    let policy = |name: &str| {
        format!(
            "[servers.{name}.health]\nstartup_timeout = \"500ms\"\n[servers.{name}.restart]\nbackoff_initial = \"50ms\"\nbackoff_max = \"100ms\"\nmax_restarts = 20"
        )
    };
    let d = DaemonBuilder::new()
        .fixture_with("garbage", &["--garbage-handshake"], &policy("garbage"))
        .fixture_with("silent", &["--silent-handshake"], &policy("silent"))
        .start()
        .await;
    let d = &d;
    let status = eventually(
        "both servers failed their handshake at least twice",
        WAIT,
        || async move {
            let s = d.status().await;
            let rows = s["servers"].as_array().expect("servers").clone();
            for row in &rows {
                assert_ne!(row["state"], "ready", "a broken handshake made {row}");
            }
            rows.iter()
                .all(|r| r["restarts"].as_u64().unwrap_or(0) >= 2 && !last_error(r).is_empty())
                .then_some(rows)
        },
    )
    .await;
    for row in &status {
        let why = last_error(row);
        println!("{}: {why}", row["name"]);
        assert!(why.contains("initialize"), "{row}");
        if row["name"] == "silent" {
            assert!(
                why.contains("did not complete") && why.contains("500ms"),
                "{row}"
            );
        }
    }
}

// ---------------------------------------------------------------- liveness

#[tokio::test]
async fn a_server_that_stops_answering_pings_is_restarted() {
    let d = DaemonBuilder::new()
        .fixture_with(
            "x",
            &["--tools", "echo", "--hang-after", "3"],
            "[servers.x.health]\nping_interval = \"200ms\"\nping_timeout = \"300ms\"",
        )
        .start()
        .await;
    let first = d
        .wait_server("x", "x is ready", |s| s["state"] == "ready")
        .await;
    let old = status_pid(&first).unwrap();
    let row = d
        .wait_server("x", "x is restarted after a failed ping", |s| {
            s["restarts"].as_u64().unwrap_or(0) >= 1 && last_error(s).contains("ping")
        })
        .await;
    println!("liveness failure: {}", last_error(&row));
    d.wait_server("x", "x runs a new process", |s| {
        ready_with_new_pid(s, &[old])
    })
    .await;
    assert_eq!(
        proc_state(old),
        None,
        "the hung process was stopped and reaped"
    );
}

#[tokio::test]
async fn a_server_found_hung_is_not_reported_ready_while_it_is_being_stopped() {
    let b = DaemonBuilder::new();
    let (rec, rec_arg) = record_dir(&b);
    // It ignores SIGTERM and stdin EOF, so stopping it takes 2 x stop_grace = 20 s: a
    // window in which mcpd knows it is hung.
    let d = b
        .fixture_with(
            "x",
            &[
                "--tools",
                "echo",
                "--hang-after",
                "3",
                "--ignore-sigterm",
                "--record",
                &rec_arg,
            ],
            "[servers.x.health]\nping_interval = \"200ms\"\nping_timeout = \"300ms\"\nstop_grace = \"10s\"",
        )
        .start()
        .await;
    let first = d
        .wait_server("x", "x is ready", |s| s["state"] == "ready")
        .await;
    let pid = status_pid(&first).unwrap();
    let _cleanup = KillOnDrop(vec![(pid, "mcpd-fixture")]);
    // initialize, tools/list, ping: answered; the fourth request is never answered.
    eventually("the server received its unanswered request", WAIT, || {
        let rec = rec.clone();
        async move { (recorded_requests(&rec, pid).len() >= 4).then_some(()) }
    })
    .await;
    let hung = Instant::now();
    // The 300 ms ping timeout plus a generous margin, well inside the 20 s stop. A poll
    // with a deadline, like `eventually`, but failing with what mcpd says meanwhile.
    let deadline = hung + Duration::from_secs(5);
    let row = loop {
        let row = d.server_status("x").await;
        if row["state"] != "ready" || status_pid(&row) != Some(pid) {
            break row;
        }
        if Instant::now() > deadline {
            let mut a = d.initialized_agent().await;
            let r = a.call("x__echo", json!({"text": "probe"})).await;
            panic!(
                "{:.0} ms after the hang began (ping_timeout 300ms), status still reports the hung process as ready: {row}\na call now gets: {r}",
                ms(hung.elapsed())
            );
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    println!(
        "hung server no longer reported ready {:.0} ms after the hang began: {row}",
        ms(hung.elapsed())
    );
}

// ---------------------------------------------------------------- control

#[tokio::test]
async fn ctl_restart_stop_and_start_act_on_the_named_server_only() {
    let d = DaemonBuilder::new()
        .fixture("a", &["--tools", "echo"])
        .fixture("b", &["--tools", "echo"])
        .start()
        .await;
    d.wait_ready().await;
    let a0 = status_pid(&d.server_status("a").await).unwrap();
    let b0 = status_pid(&d.server_status("b").await).unwrap();

    let (code, _, err) = d.run_cli(&["ctl", "restart", "a"]).await;
    assert_eq!(code, 0, "{err}");
    let a1 = d
        .wait_server("a", "a restarted", |s| ready_with_new_pid(s, &[a0]))
        .await;
    assert_eq!(a1["restarts"], 1, "{a1}");
    assert_eq!(proc_state(a0), None, "the old a was stopped and reaped");
    let b = d.server_status("b").await;
    assert_eq!(status_pid(&b), Some(b0), "b untouched: {b}");
    assert_eq!(
        (b["state"].as_str(), b["restarts"].as_u64()),
        (Some("ready"), Some(0))
    );

    let a1_pid = status_pid(&a1).unwrap();
    let (code, _, err) = d.run_cli(&["ctl", "stop", "a"]).await;
    assert_eq!(code, 0, "{err}");
    let stopped = d
        .wait_server("a", "a stopped", |s| s["state"] == "stopped")
        .await;
    assert_eq!(stopped["pid"], Value::Null, "{stopped}");
    assert_eq!(proc_state(a1_pid), None);
    let mut ag = d.initialized_agent().await;
    let r = ag.call("a__echo", json!({"text": "x"})).await;
    assert_error(&r, -32010, &["'a'", "stopped"]);
    assert_eq!(text(&ag.call("b__echo", json!({"text": "b"})).await), "b");

    let (code, _, err) = d.run_cli(&["ctl", "start", "a"]).await;
    assert_eq!(code, 0, "{err}");
    d.wait_server("a", "a started", |s| ready_with_new_pid(s, &[a0, a1_pid]))
        .await;
    assert_eq!(
        text(&ag.call("a__echo", json!({"text": "back"})).await),
        "back"
    );
    assert_eq!(status_pid(&d.server_status("b").await), Some(b0));
}

// ---------------------------------------------------------------- process hygiene

/// Polls every millisecond how many recorded fixture processes run at once; returns the
/// largest such set seen.
fn overlap_monitor(dir: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<u32>> {
    std::thread::spawn(move || {
        let mut worst = Vec::new();
        let start = Instant::now();
        while !stop.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(120) {
            let running: Vec<u32> = recorded_starts(&dir)
                .into_iter()
                .filter(|p| alive(*p))
                .collect();
            if running.len() > worst.len() {
                worst = running;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        worst
    })
}

#[tokio::test]
async fn a_server_killed_five_times_never_has_two_processes_alive_at_once() {
    let b = DaemonBuilder::new();
    let (rec, rec_arg) = record_dir(&b);
    let d = b
        .fixture_with(
            "x",
            &["--tools", "echo", "--record", &rec_arg],
            "[servers.x.restart]\nbackoff_initial = \"50ms\"\nbackoff_max = \"100ms\"\nmax_restarts = 20",
        )
        .start()
        .await;
    d.wait_ready().await;
    let stop = Arc::new(AtomicBool::new(false));
    let monitor = overlap_monitor(rec.clone(), stop.clone());
    let mut pids = vec![status_pid(&d.server_status("x").await).unwrap()];
    for kill in 1..=5 {
        let victim = *pids.last().unwrap();
        assert!(send_signal(victim, Signal::SIGKILL));
        let row = d
            .wait_server("x", &format!("x is back after kill {kill}"), |s| {
                ready_with_new_pid(s, &pids)
            })
            .await;
        assert_eq!(proc_state(victim), None, "kill {kill}: {victim} was reaped");
        let running: Vec<u32> = recorded_starts(&rec)
            .into_iter()
            .filter(|p| alive(*p))
            .collect();
        assert!(running.len() <= 1, "after kill {kill}: {running:?} alive");
        pids.push(status_pid(&row).unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    let worst = monitor.join().expect("monitor");
    assert!(
        worst.len() <= 1,
        "processes of one server alive at once: {worst:?}"
    );
    let starts = recorded_starts(&rec);
    assert_eq!(starts, pids, "six starts, one per process");
    assert_eq!(starts.iter().collect::<HashSet<_>>().len(), 6);
    assert_eq!(d.server_status("x").await["restarts"], 5);
}

#[tokio::test]
async fn stopping_a_server_that_ignores_sigterm_escalates_to_sigkill_after_the_grace() {
    let d = DaemonBuilder::new()
        .fixture_with(
            "x",
            &["--tools", "echo", "--ignore-sigterm"],
            "[servers.x.health]\nstop_grace = \"200ms\"",
        )
        .start()
        .await;
    d.wait_ready().await;
    let pid = status_pid(&d.server_status("x").await).unwrap();
    let _cleanup = KillOnDrop(vec![(pid, "mcpd-fixture")]);
    let started = Instant::now();
    let (code, _, err) = d.run_cli(&["ctl", "stop", "x"]).await;
    assert_eq!(code, 0, "{err}");
    let row = d
        .wait_server("x", "x is stopped", |s| s["state"] == "stopped")
        .await;
    let took = started.elapsed();
    println!(
        "stop with escalation took {:.0} ms (2 x 200 ms grace)",
        ms(took)
    );
    assert!(took < Duration::from_secs(5), "stopping took {took:?}");
    assert_eq!(proc_state(pid), None, "gone and reaped, not a zombie");
    assert!(last_exit(&row).contains("killed by SIGKILL"), "{row}");
    assert_eq!(row["pid"], Value::Null);
}

/// A daemon with one `--spawn-grandchild` server; returns it with the server's pid and its
/// grandchild's pid (and cleanup for both).
async fn daemon_with_grandchild() -> (Daemon, u32, u32, KillOnDrop) {
    let b = DaemonBuilder::new();
    let (rec, rec_arg) = record_dir(&b);
    let d = b
        .fixture(
            "x",
            &[
                "--tools",
                "crash,echo",
                "--spawn-grandchild",
                "--record",
                &rec_arg,
            ],
        )
        .start()
        .await;
    d.wait_ready().await;
    let pid = status_pid(&d.server_status("x").await).unwrap();
    let gc = eventually("the grandchild pid is recorded", WAIT, || {
        let rec = rec.clone();
        async move { recorded_grandchild(&rec, pid) }
    })
    .await;
    assert!(alive(gc), "the grandchild {gc} runs");
    let cleanup = KillOnDrop(vec![(gc, "sleep"), (pid, "mcpd-fixture")]);
    (d, pid, gc, cleanup)
}

/// Waits until a server's grandchild is gone and reaped, and checks that mcpd reaped it:
/// an orphan left to PID 1 (which reaps only lazily here, about every 2 s) shows up as
/// a child of PID 1 before it disappears.
async fn wait_reaped_by_mcpd(gc: u32) {
    let outcome = eventually(
        &format!("grandchild {gc} is gone and reaped"),
        WAIT,
        || async move {
            match (proc_state(gc), proc_ppid(gc)) {
                (None, _) => Some(Ok(())),
                (Some(state), Some(1)) => Some(Err(state)),
                _ => None,
            }
        },
    )
    .await;
    if let Err(state) = outcome {
        panic!("grandchild {gc} was left to PID 1 (state {state}) instead of being reaped by mcpd");
    }
}

#[tokio::test]
async fn ctl_stop_leaves_no_grandchild_behind_not_even_a_zombie() {
    let (d, pid, gc, _cleanup) = daemon_with_grandchild().await;
    let (code, _, err) = d.run_cli(&["ctl", "stop", "x"]).await;
    assert_eq!(code, 0, "{err}");
    d.wait_server("x", "x is stopped", |s| s["state"] == "stopped")
        .await;
    assert_eq!(proc_state(pid), None);
    wait_reaped_by_mcpd(gc).await;
}

#[tokio::test]
async fn a_crashed_server_leaves_no_grandchild_behind_not_even_a_zombie() {
    let (d, pid, gc, _cleanup) = daemon_with_grandchild().await;
    let mut a = d.initialized_agent().await;
    let r = a.call("x__crash", json!({})).await;
    assert_error(&r, -32012, &["exit status 3"]);
    d.wait_server("x", "x is back", |s| ready_with_new_pid(s, &[pid]))
        .await;
    assert_eq!(proc_state(pid), None);
    wait_reaped_by_mcpd(gc).await;
}

#[tokio::test]
async fn sigterm_to_the_daemon_leaves_no_grandchild_behind_not_even_a_zombie() {
    let (mut d, pid, gc, _cleanup) = daemon_with_grandchild().await;
    d.signal(Signal::SIGTERM);
    assert_eq!(d.wait_exit().await, Some(0));
    assert_eq!(proc_state(pid), None);
    wait_reaped_by_mcpd(gc).await;
}

#[tokio::test]
async fn kill_9_of_the_daemon_takes_servers_and_their_grandchildren_down() {
    let (mut d, pid, gc, _cleanup) = daemon_with_grandchild().await;
    d.signal(Signal::SIGKILL);
    d.wait_exit().await;
    // With mcpd gone nobody can reap them: PID 1 of this machine does not reap orphans,
    // so a zombie under PID 1 is accepted here; a running process is not.
    eventually(
        "the server and its grandchild are no longer running",
        WAIT,
        || async move { (!alive(pid) && !alive(gc)).then_some(()) },
    )
    .await;
}

// ---------------------------------------------------------------- timeouts and routing

#[tokio::test]
async fn a_late_answer_to_a_timed_out_call_never_reaches_the_agent() {
    let d = DaemonBuilder::new()
        .fixture_with("s", &["--tools", "sleep,echo"], "timeout = \"200ms\"")
        .fixture_with("t", &["--tools", "sleep"], "timeout = \"10s\"")
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let id = a.start_call("s__sleep", json!({"ms": 600})).await;
    let r = a.response(&id).await;
    assert_error(&r, -32011, &["'s'", "200ms"]);
    // The agent may reuse the id now; it must get the new answer, not the late one.
    a.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "s__echo", "arguments": {"text": "second use of the id"}}}))
        .await;
    assert_eq!(text(&a.response(&id).await), "second use of the id");

    // Calls whose answers straddle the timeout: some answers are on their way when the
    // timeout fires. Each call gets exactly one response.
    let mut calls = Vec::new();
    for i in 0..40u64 {
        let ms = 150 + i * 5 / 2;
        calls.push((a.start_call("s__sleep", json!({"ms": ms})).await, ms));
    }
    let (mut ok, mut timed_out) = (0, 0);
    for (id, ms) in &calls {
        let r = a.response(id).await;
        if error_code(&r) == Some(-32011) {
            timed_out += 1;
        } else {
            assert_eq!(text(&r), format!("slept {ms}"), "{r}");
            ok += 1;
        }
    }
    println!("straddling calls: {ok} answered, {timed_out} timed out");
    // Outlast every late answer (the longest sleep was 600 ms) with a call on another server.
    assert_eq!(
        text(&a.call("t__sleep", json!({"ms": 700})).await),
        "slept 700"
    );
    assert_eq!(a.request("ping", None).await["result"], json!({}));
    assert!(
        a.stray.is_empty(),
        "late or duplicate answers: {:?}",
        a.stray
    );
    assert!(
        a.notifications.iter().all(|n| n.get("id").is_none()),
        "{:?}",
        a.notifications
    );
}

#[tokio::test]
async fn two_agents_using_the_same_progress_token_each_get_only_their_own_progress() {
    let d = DaemonBuilder::new()
        .fixture("s", &["--tools", "progress"])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.agent().await;
    let mut b = d.agent().await;
    a.initialize().await;
    b.initialize().await;
    let args = json!({"steps": 3, "ms": 50});
    let ida = a
        .start_call_with_progress("s__progress", args.clone(), json!("tok"))
        .await;
    let idb = b
        .start_call_with_progress("s__progress", args, json!("tok"))
        .await;
    for (agent, id, name) in [(&mut a, &ida, "a"), (&mut b, &idb, "b")] {
        let r = agent.response(id).await;
        assert_eq!(text(&r), "done 3", "{name}: {r}");
        agent.request("ping", None).await;
        let progress: Vec<&Value> = agent
            .notifications
            .iter()
            .filter(|n| n["method"] == "notifications/progress")
            .collect();
        assert_eq!(progress.len(), 3, "agent {name} got {progress:?}");
        for (i, n) in progress.iter().enumerate() {
            assert_eq!(n["params"]["progressToken"], "tok", "{n}");
            assert_eq!(n["params"]["progress"], i as u64 + 1, "{n}");
        }
        assert!(agent.stray.is_empty(), "{:?}", agent.stray);
    }
}

// ---------------------------------------------------------------- slow agents, floods, limits

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_stops_reading_is_disconnected_without_slowing_anyone_else() {
    let d = DaemonBuilder::new()
        .daemon("agent_queue = 16")
        .fixture("s", &["--tools", "progress,echo"])
        .start()
        .await;
    d.wait_ready().await;
    let mut slow = d.initialized_agent().await;
    slow.start_call_with_progress(
        "s__progress",
        json!({"steps": 100000, "ms": 0}),
        json!("flood"),
    )
    .await;
    let mut fast = d.initialized_agent().await;
    let mut latencies = Vec::new();
    let started = Instant::now();
    let mut i = 0;
    while !d.log_text().contains("not reading") {
        assert!(
            started.elapsed() < WAIT,
            "the slow agent was not disconnected within {WAIT:?}"
        );
        i += 1;
        let tag = format!("fast {i}");
        let t = Instant::now();
        assert_eq!(text(&fast.call("s__echo", json!({"text": tag})).await), tag);
        latencies.push(t.elapsed());
    }
    println!(
        "slow agent disconnected after {:.0} ms",
        ms(started.elapsed())
    );
    // Its socket ends once what was already buffered has been read.
    let mut read = 0usize;
    let mut answered = false;
    within("the slow agent's socket reaches EOF", async {
        while let Some(m) = slow.recv().await {
            read += 1;
            answered |= m.get("id").is_some();
        }
    })
    .await;
    assert!(
        read < 100000,
        "the slow agent was cut off (read {read} lines)"
    );
    assert!(!answered, "a disconnected agent gets no answer");
    // The other agent keeps working, and the cancelled call leaves the server idle.
    for _ in 0..5 {
        let t = Instant::now();
        assert_eq!(
            text(&fast.call("s__echo", json!({"text": "after"})).await),
            "after"
        );
        latencies.push(t.elapsed());
    }
    latencies.sort();
    let worst = *latencies.last().unwrap();
    println!(
        "other agent: {} calls, median {:.1} ms, worst {:.1} ms; slow agent read {read} lines after being cut",
        latencies.len(),
        ms(latencies[latencies.len() / 2]),
        ms(worst)
    );
    assert!(worst < Duration::from_secs(2), "worst latency {worst:?}");
    d.wait_status("the slow agent is no longer counted", |s| {
        s["daemon"]["agents"].as_u64().is_some_and(|n| n <= 2)
    })
    .await;
    d.wait_server("s", "the flood call was cancelled upstream", |s| {
        s["in_flight"] == 0 && s["state"] == "ready"
    })
    .await;
}

/// Samples a process's RSS every 50 ms until stopped; returns the largest, in KiB.
fn rss_monitor(pid: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut max = 0;
        let start = Instant::now();
        while !stop.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(120) {
            max = max.max(rss_kib(pid).unwrap_or(0));
            std::thread::sleep(Duration::from_millis(50));
        }
        max.max(rss_kib(pid).unwrap_or(0))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_flooding_notifications_neither_starves_other_servers_nor_grows_memory() {
    let d = DaemonBuilder::new()
        .fixture_with("a", &["--tools", "flood"], "timeout = \"120s\"")
        .fixture("b", &["--tools", "echo"])
        .start()
        .await;
    d.wait_ready().await;
    let before = rss_kib(d.pid()).unwrap_or(0);
    let stop = Arc::new(AtomicBool::new(false));
    let monitor = rss_monitor(d.pid(), stop.clone());
    let socket = d.socket.clone();
    let flooder = tokio::spawn(async move {
        let mut a = Agent::connect(&socket).await;
        a.initialize().await;
        let started = Instant::now();
        let id = a.start_call("a__flood", json!({"count": 200000})).await;
        // Its own bound: 200000 lines take a debug build seconds, more under load.
        let r = a.response_within(&id, Duration::from_secs(150)).await;
        (r, started.elapsed())
    });
    let mut b = d.initialized_agent().await;
    let mut latencies = Vec::new();
    while !flooder.is_finished() {
        let tag = format!("b {}", latencies.len());
        let t = Instant::now();
        assert_eq!(text(&b.call("b__echo", json!({"text": tag})).await), tag);
        latencies.push(t.elapsed());
    }
    let (r, flood_took) = flooder.await.expect("flooder");
    stop.store(true, Ordering::Relaxed);
    let max = monitor.join().expect("monitor");
    assert_eq!(text(&r), "flooded 200000", "{r}");
    latencies.sort();
    println!(
        "flood of 200000 took {:.0} ms; b: {} calls, median {:.1} ms, worst {:.1} ms; daemon RSS {} KiB before, max {} KiB ({:.1} MB)",
        ms(flood_took),
        latencies.len(),
        ms(latencies[latencies.len() / 2]),
        ms(*latencies.last().unwrap()),
        before,
        max,
        max as f64 / 1024.0
    );
    assert!(!latencies.is_empty());
    assert!(max < 200 * 1024, "daemon RSS reached {max} KiB");
}

#[tokio::test]
async fn an_oversized_line_from_a_server_is_dropped_counted_and_the_server_keeps_working() {
    let d = DaemonBuilder::new()
        .daemon("max_message_bytes = 65536")
        .fixture("s", &["--tools", "echo", "--oversized-line", "200000"])
        .start()
        .await;
    d.wait_ready().await;
    let row = d
        .wait_server("s", "the oversized line is counted", |s| {
            s["oversized_lines"].as_u64().unwrap_or(0) >= 1
        })
        .await;
    assert_eq!(row["state"], "ready", "{row}");
    assert_eq!(row["restarts"], 0, "{row}");
    let mut a = d.initialized_agent().await;
    assert_eq!(
        text(&a.call("s__echo", json!({"text": "fine"})).await),
        "fine"
    );
}

/// Connects until the daemon accepts the connection (a ping is answered); earlier
/// connections may still hold their slot for a moment after closing.
async fn accepted_agent(socket: &Path) -> Agent {
    eventually("an agent connection is accepted", WAIT, || async move {
        let mut a = Agent::connect(socket).await;
        a.send(json!({"jsonrpc": "2.0", "id": "probe", "method": "ping"}))
            .await;
        let r = a.recv().await?;
        (r["id"] == "probe" && r["result"].is_object()).then_some(a)
    })
    .await
}

#[tokio::test]
async fn a_connection_beyond_max_agents_is_refused_with_a_clear_error_until_one_closes() {
    let d = DaemonBuilder::new().daemon("max_agents = 2").start().await;
    let mut first = accepted_agent(&d.socket).await;
    let mut second = accepted_agent(&d.socket).await;
    let mut third = d.agent().await;
    let refusal = third
        .recv()
        .await
        .expect("an error line for the third agent");
    assert_error(&refusal, -32016, &["max_agents"]);
    assert_eq!(refusal["id"], Value::Null, "{refusal}");
    assert!(
        third.recv().await.is_none(),
        "the refused connection is closed"
    );
    assert_eq!(first.request("ping", None).await["result"], json!({}));
    drop(first);
    let mut fourth = accepted_agent(&d.socket).await;
    assert_eq!(fourth.request("ping", None).await["result"], json!({}));
    assert_eq!(second.request("ping", None).await["result"], json!({}));
}

// ---------------------------------------------------------------- soak

#[derive(Default, Debug)]
struct SoakStats {
    ok: u64,
    failed: BTreeMap<i64, u64>,
    reconnects: u64,
    problems: Vec<String>,
}

/// One soak agent: batches of four calls to both servers, collected by id; every fourth
/// agent drops its connection with calls in flight every fifth batch and reconnects.
async fn soak_agent(n: usize, socket: PathBuf, until: Instant, stats: Arc<Mutex<SoakStats>>) {
    let mut batch = 0usize;
    'connection: while Instant::now() < until {
        let mut a = Agent::connect(&socket).await;
        a.initialize().await;
        loop {
            if Instant::now() >= until {
                break 'connection;
            }
            batch += 1;
            let mut expected = Vec::new();
            for k in 0..4 {
                let server = if (n + k + batch).is_multiple_of(2) {
                    "a"
                } else {
                    "b"
                };
                let (tool, args, want) = if k == 3 {
                    let ms = 10 + (n + batch) % 40;
                    ("sleep", json!({"ms": ms}), format!("slept {ms}"))
                } else {
                    let tag = format!("agent {n} batch {batch} call {k}");
                    ("echo", json!({"text": tag}), tag)
                };
                let id = a.start_call(&format!("{server}__{tool}"), args).await;
                expected.push((id, server, want, std::time::SystemTime::now()));
            }
            if n.is_multiple_of(4) && batch.is_multiple_of(5) {
                drop(a);
                stats.lock().unwrap().reconnects += 1;
                continue 'connection;
            }
            // The servers' timeout is 3 s: no answer 10 s after the batch was sent is a hang.
            let batch_deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            for (id, server, want, sent) in expected {
                let r = match tokio::time::timeout_at(batch_deadline, a.response(&id)).await {
                    Ok(r) => r,
                    Err(_) => {
                        let at = sent
                            .duration_since(std::time::UNIX_EPOCH)
                            .unwrap_or_default()
                            .as_secs_f64();
                        stats.lock().unwrap().problems.push(format!(
                            "agent {n}: call {id} to {server} ({want:?}) sent at unix time {at:.3} got no answer within 10 s"
                        ));
                        continue;
                    }
                };
                let mut s = stats.lock().unwrap();
                match error_code(&r) {
                    None if r["result"]["content"][0]["text"] == want.as_str() => s.ok += 1,
                    None => s
                        .problems
                        .push(format!("agent {n}: crossed answer, wanted {want:?}: {r}")),
                    // -32012 server exited, -32011 timeout, -32010 unavailable.
                    Some(code @ -32012..=-32010) => {
                        *s.failed.entry(code).or_default() += 1;
                        // Only a is killed: b may at most time out on a starved machine.
                        let isolated = server == "a" || code == -32011;
                        if !isolated || !error_message(&r).contains(&format!("'{server}'")) {
                            s.problems
                                .push(format!("agent {n}: error for {server} call: {r}"));
                        }
                    }
                    Some(_) => s.problems.push(format!("agent {n}: unexpected {r}")),
                }
            }
            if !a.stray.is_empty() {
                stats
                    .lock()
                    .unwrap()
                    .problems
                    .push(format!("agent {n}: stray responses {:?}", a.stray));
                a.stray.clear();
            }
            // Pacing, so 32 agents leave the daemon some of a 2-core machine.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_32_agents_through_repeated_server_kills_get_their_own_answers_or_clear_errors() {
    const SOAK: Duration = Duration::from_secs(20);
    let b = DaemonBuilder::new();
    let (rec, rec_arg) = record_dir(&b);
    let mut d = b
        .fixture_with(
            "a",
            &["--tools", "echo,sleep", "--record", &rec_arg],
            "timeout = \"3s\"\n[servers.a.restart]\nbackoff_initial = \"50ms\"\nbackoff_max = \"200ms\"\nmax_restarts = 1000\nwindow = \"60s\"",
        )
        .fixture_with(
            "b",
            &["--tools", "echo,sleep", "--record", &rec_arg],
            "timeout = \"3s\"",
        )
        .daemon("max_agents = 64")
        .start()
        .await;
    d.wait_ready().await;
    let stop = Arc::new(AtomicBool::new(false));
    let monitor = rss_monitor(d.pid(), stop.clone());
    let stats = Arc::new(Mutex::new(SoakStats::default()));
    let started = Instant::now();
    let until = started + SOAK;
    let mut agents = Vec::new();
    for n in 0..32 {
        agents.push(tokio::spawn(soak_agent(
            n,
            d.socket.clone(),
            until,
            stats.clone(),
        )));
    }
    let mut kills = 0u64;
    while Instant::now() < until {
        let row = d.server_status("a").await;
        if row["state"] == "ready"
            && let Some(pid) = status_pid(&row)
            && send_signal(pid, Signal::SIGKILL)
        {
            kills += 1;
        }
        // The kill cadence, not a synchronisation.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // An agent may wait 10 s for an answer that never comes; that is reported below.
    for t in agents {
        tokio::time::timeout(Duration::from_secs(40), t)
            .await
            .expect("a soak agent finishes")
            .expect("soak agent");
    }
    stop.store(true, Ordering::Relaxed);
    let rss = monitor.join().expect("monitor");
    let stats = std::mem::take(&mut *stats.lock().unwrap());
    println!(
        "soak {:.1} s: {} calls ok, failed by code {:?}, {} kills, {} reconnects, max daemon RSS {} KiB ({:.1} MB)",
        started.elapsed().as_secs_f64(),
        stats.ok,
        stats.failed,
        kills,
        stats.reconnects,
        rss,
        rss as f64 / 1024.0
    );
    assert!(
        stats.problems.is_empty(),
        "{} problems, first ones: {:#?}",
        stats.problems.len(),
        &stats.problems[..stats.problems.len().min(10)]
    );
    assert!(stats.ok > 1000, "too few calls completed: {}", stats.ok);
    assert!(kills >= 5, "only {kills} kills");
    assert!(stats.reconnects > 0);
    assert!(rss < 200 * 1024, "daemon RSS reached {rss} KiB");

    // The daemon still serves, and a clean shutdown leaves no process behind.
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    assert_eq!(
        text(&a.call("a__echo", json!({"text": "end"})).await),
        "end"
    );
    drop(a);
    d.signal(Signal::SIGTERM);
    assert_eq!(d.wait_exit().await, Some(0));
    let starts = recorded_starts(&rec);
    assert!(starts.len() as u64 >= kills + 2, "{} starts", starts.len());
    let left: Vec<(u32, Option<char>)> = starts
        .iter()
        .map(|p| (*p, proc_state(*p)))
        .filter(|(_, s)| s.is_some())
        .collect();
    assert!(left.is_empty(), "server processes left behind: {left:?}");
}
