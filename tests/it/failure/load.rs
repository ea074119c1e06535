//! Load and limits: slow agents, notification floods, oversized lines, max_agents, and a
//! soak of 32 agents through repeated server kills.

use crate::failure::support::*;
use crate::support::*;
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
        // A connection refused while an earlier one still holds its slot may be closed
        // before this is written: then try again.
        let ping = json!({"jsonrpc": "2.0", "id": "probe", "method": "ping"});
        a.try_send_raw(&ping.to_string()).await.ok()?;
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
