//! Servers that never become healthy or stop being so: a missing command or working
//! directory, garbage or silent handshakes, and servers that stop answering pings.

use crate::failure::support::*;
use crate::support::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

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
