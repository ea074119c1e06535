//! Process control and hygiene: `ctl restart`/`stop`/`start` act on one server, one process
//! per server at a time, SIGTERM escalates to SIGKILL, and no grandchild is left behind.

use crate::failure::support::*;
use crate::support::*;
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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

// ---------------------------------------------------------------- pipes

#[tokio::test]
async fn a_servers_answers_come_through_a_widened_pipe() {
    let d = DaemonBuilder::new()
        .fixture("fx", &["--tools", "big"])
        .start()
        .await;
    d.wait_ready().await;
    let pid = status_pid(&d.server_status("fx").await).unwrap();
    // The server's stdout, opened again through /proc: the same pipe, whose capacity
    // mcpd set when it started the server.
    let pipe = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(format!("/proc/{pid}/fd/1"))
        .unwrap();
    let size = nix::fcntl::fcntl(pipe.as_raw_fd(), nix::fcntl::FcntlArg::F_GETPIPE_SZ).unwrap();
    assert_eq!(size, 256 * 1024, "the kernel's default is 64 KiB");
    // A result larger than the pipe still comes through whole.
    let mut agent = d.initialized_agent().await;
    let r = agent
        .request(
            "tools/call",
            Some(json!({"name": "fx__big", "arguments": {"bytes": 600_000}})),
        )
        .await;
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(text.len(), 600_000, "{}", error_message(&r));
    assert!(text.bytes().all(|b| b == b'x'));
}
