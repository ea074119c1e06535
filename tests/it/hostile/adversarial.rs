//! Hostile agents: the daemon must keep serving everyone else.
//!
//! A seeded storm of garbage from many socket connections, an agent that floods requests
//! and never reads, the same garbage over HTTP.
//!
//! The storm is reproducible: every run prints its seed, and `MCPD_STORM_SEED=N` replays it
//! (`MCPD_STORM_EXAMPLES=1` also prints every answer).

mod hostile;
mod http;

use crate::support::*;
use hostile::{Hostile, seed, storm_messages};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::time::Instant;

/// `daemon.max_message_bytes` in these tests: small, so over-long lines are cheap to send.
const MAX_LINE: usize = 64 * 1024;
/// Socket connections in the storm, and hostile messages each sends.
const AGENTS: usize = 32;
const MESSAGES: usize = 250;
/// The daemon's resident memory after the storm must stay below this.
const RSS_LIMIT_KIB: u64 = 200 * 1024;
const MODERN: &str = "2026-07-28";
const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
const CLIENT_INFO_KEY: &str = "io.modelcontextprotocol/clientInfo";
const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";
/// The fixture's tools the storm may call: each answers at once whatever its arguments.
const FIXTURE_TOOLS: &str = "echo,add,fail,error,structured,bad_result,progress";

// ---------------------------------------------------------------- one storm agent

/// The text of a JSON value as the test reads it back: the key of an owed answer.
fn key(id: &Value) -> String {
    id.to_string()
}

/// What went wrong on one storm connection, with enough to reproduce it.
#[derive(Default)]
struct Storm {
    problems: Vec<String>,
    /// Answers by id, counted by outcome: "result", or the error code.
    outcomes: BTreeMap<String, usize>,
    null_errors: usize,
}

/// Sends `messages` on one connection while reading everything mcpd writes back, until
/// every owed answer came (or the deadline passed).
async fn storm_agent(socket: PathBuf, agent: usize, messages: Vec<Hostile>) -> Storm {
    let mut out = Storm::default();
    let mut owed: HashMap<String, usize> = HashMap::new();
    for m in &messages {
        if let Some(id) = &m.owed {
            *owed.entry(key(id)).or_default() += 1;
        }
    }
    let stream = within("connect", UnixStream::connect(&socket))
        .await
        .expect("connect");
    let (read, mut write) = stream.into_split();
    let writer = tokio::spawn(async move {
        for m in messages {
            let mut bytes = m.line;
            bytes.push(b'\n');
            let at = m.split.unwrap_or(bytes.len());
            write.write_all(&bytes[..at]).await?;
            write.flush().await?;
            write.write_all(&bytes[at..]).await?;
        }
        write.flush().await?;
        Ok::<_, std::io::Error>(write)
    });
    let mut reader = BufReader::new(read);
    let deadline = Instant::now() + WAIT;
    let mut line = Vec::new();
    while owed.values().any(|&n| n > 0) {
        line.clear();
        let read = tokio::time::timeout_at(deadline, reader.read_until(b'\n', &mut line)).await;
        let n = match read {
            Err(_) => {
                let left: Vec<&String> = owed
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(k, _)| k)
                    .collect();
                out.problems.push(format!(
                    "agent {agent}: no answer within {WAIT:?} to {} requests, e.g. {:.200}",
                    left.len(),
                    left.first().map_or("", |s| s.as_str())
                ));
                break;
            }
            Ok(Err(e)) => {
                out.problems
                    .push(format!("agent {agent}: read failed: {e}"));
                break;
            }
            Ok(Ok(n)) => n,
        };
        if n == 0 {
            out.problems.push(format!(
                "agent {agent}: mcpd closed the connection with {} answers owed",
                owed.values().sum::<usize>()
            ));
            break;
        }
        let msg: Value = match serde_json::from_slice(&line) {
            Ok(v) => v,
            Err(e) => {
                out.problems.push(format!(
                    "agent {agent}: mcpd sent non-JSON ({e}): {:.200}",
                    String::from_utf8_lossy(&line)
                ));
                continue;
            }
        };
        // A subscription is answered by its acknowledgement; the request stays open.
        let id = if msg["method"] == "notifications/subscriptions/acknowledged" {
            msg["params"]["_meta"][SUBSCRIPTION_ID_KEY].clone()
        } else if msg.get("method").is_some() {
            continue;
        } else {
            msg["id"].clone()
        };
        if id.is_null() {
            out.null_errors += 1;
            if msg.get("error").is_none() {
                out.problems.push(format!(
                    "agent {agent}: a null-id message that is no error: {msg:.200}"
                ));
            }
            continue;
        }
        match owed.get_mut(&key(&id)) {
            Some(n) if *n > 0 => {
                *n -= 1;
                let outcome = match msg["error"]["code"].as_i64() {
                    Some(code) => code.to_string(),
                    None if msg.get("method").is_some() => "acknowledged".to_owned(),
                    None => "result".to_owned(),
                };
                *out.outcomes.entry(outcome.clone()).or_default() += 1;
                if std::env::var_os("MCPD_STORM_EXAMPLES").is_some() {
                    println!("{outcome}: {:.300}", msg.to_string());
                }
            }
            _ => out.problems.push(format!(
                "agent {agent}: an answer to an id it did not send or already had answered: {:.300}",
                msg.to_string()
            )),
        }
    }
    match within("the storm writer ends", writer).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => out
            .problems
            .push(format!("agent {agent}: write failed: {e}")),
        Err(e) => out
            .problems
            .push(format!("agent {agent}: writer panicked: {e}")),
    }
    out
}

/// A daemon with a small message limit, the quick fixture server `fx` the hostile agents
/// use, and `calm`, which only well-behaved agents call.
async fn storm_daemon(b: DaemonBuilder) -> Daemon {
    let d = b
        .daemon(&format!("max_message_bytes = {MAX_LINE}"))
        .fixture("fx", &["--tools", FIXTURE_TOOLS])
        .fixture("calm", &["--tools", "echo", "--resource-scheme", "calm"])
        .profile("narrow", "servers = [\"fx\"]\ntools = [\"fx__echo\"]")
        .start()
        .await;
    d.wait_ready().await;
    // Resource templates are listed a moment after a server is ready.
    eventually(
        "both servers' resource templates are listed",
        WAIT,
        || async {
            let mut a = d.agent().await;
            let r = a.request("resources/templates/list", None).await;
            let n = r["result"]["resourceTemplates"]
                .as_array()
                .map_or(0, Vec::len);
            (n == 2).then_some(())
        },
    )
    .await;
    d
}

/// What must hold after any hostile traffic: alive, bounded, serving, unharmed upstream.
async fn assert_still_serving(d: &Daemon, what: &str) {
    let pid = d.pid();
    assert!(alive(pid), "the daemon died during {what}");
    let rss = rss_kib(pid).expect("the daemon's VmRSS");
    println!(
        "daemon RSS after {what}: {rss} KiB ({:.1} MiB)",
        rss as f64 / 1024.0
    );
    assert!(rss < RSS_LIMIT_KIB, "daemon RSS {rss} KiB after {what}");
    let mut a = d.initialized_agent().await;
    let tools = a.tool_names().await;
    assert!(tools.iter().any(|t| t == "fx__echo"), "{tools:?}");
    let r = a.call("fx__echo", json!({"text": "still here"})).await;
    assert_eq!(text(&r), "still here", "{r}");
    let (code, out, err) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0, "ctl status after {what}: {out}{err}");
    let row = d.server_status("fx").await;
    assert_eq!(row["state"], "ready", "{row}");
    assert_eq!(
        row["restarts"], 0,
        "hostile agents restarted the server: {row}"
    );
    let log = d.log_text();
    assert!(!log.contains("panicked"), "the daemon log shows a panic");
}

// ---------------------------------------------------------------- the tests

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn garbage_from_many_agents_leaves_the_daemon_serving() {
    let seed = seed();
    println!("storm seed {seed} (replay with MCPD_STORM_SEED={seed})");
    let d = storm_daemon(DaemonBuilder::new()).await;
    let mut bystander = d.initialized_agent().await;
    let plans: Vec<Vec<Hostile>> = (0..AGENTS).map(|n| storm_messages(seed, n)).collect();
    let started = Instant::now();
    // Every eighth agent hangs up without reading: the daemon cancels what it left.
    let agents: Vec<_> = plans
        .into_iter()
        .enumerate()
        .map(|(n, messages)| {
            let socket = d.socket.clone();
            if n % 8 == 7 {
                tokio::spawn(quitter(socket, messages))
            } else {
                tokio::spawn(storm_agent(socket, n, messages))
            }
        })
        .collect();
    // Meanwhile a well-behaved agent's calls to another server are each served (a bound,
    // not a speed).
    let mut calls = 0;
    let mut slowest = Duration::ZERO;
    while agents.iter().any(|a| !a.is_finished()) {
        calls += 1;
        let tag = format!("bystander {calls}");
        let t = Instant::now();
        let id = bystander
            .start_call("calm__echo", json!({"text": tag}))
            .await;
        let r = bystander.response_within(&id, Duration::from_secs(5)).await;
        assert_eq!(text(&r), tag, "seed {seed}: {r}");
        slowest = slowest.max(t.elapsed());
    }
    let mut problems = Vec::new();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut null_errors = 0;
    for a in agents {
        let s = a.await.expect("storm agent");
        for (k, n) in s.outcomes {
            *outcomes.entry(k).or_default() += n;
        }
        null_errors += s.null_errors;
        problems.extend(s.problems);
    }
    println!(
        "storm: {AGENTS} agents x {MESSAGES} messages in {:.1} s; answers by id: {outcomes:?}; {null_errors} errors without an id; the bystander made {calls} calls, the slowest in {slowest:?}",
        started.elapsed().as_secs_f64()
    );
    assert!(
        problems.is_empty(),
        "seed {seed}: {} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert_still_serving(&d, "the storm").await;
    drop(bystander);
    d.wait_status("the storm's connections are gone", |s| {
        s["daemon"]["agents"].as_u64().is_some_and(|n| n <= 1)
    })
    .await;
    d.wait_server(
        "fx",
        "no request of the storm is left pending upstream",
        |s| s["in_flight"] == 0,
    )
    .await;
}

/// Sends its hostile lines and hangs up without reading a reply.
async fn quitter(socket: PathBuf, messages: Vec<Hostile>) -> Storm {
    let mut stream = within("connect", UnixStream::connect(&socket))
        .await
        .expect("connect");
    let _ = tokio::time::timeout(WAIT, async {
        for m in messages {
            let mut bytes = m.line;
            bytes.push(b'\n');
            if stream.write_all(&bytes).await.is_err() {
                break; // cut off: fine, it is going anyway
            }
        }
    })
    .await;
    Storm::default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_flooding_requests_without_reading_is_cut_off_while_others_are_served() {
    let d = storm_daemon(DaemonBuilder::new().daemon("agent_queue = 64")).await;
    let mut other = d.initialized_agent().await;
    // The flooder writes requests as fast as it can and never reads a reply, so its
    // socket fills, then its outbox. It keeps its read half open: only mcpd may end it,
    // and a write fails only once mcpd has closed the socket.
    let stream = within("connect", UnixStream::connect(&d.socket))
        .await
        .expect("connect");
    let (unread, mut write) = stream.into_split();
    let flood_started = Instant::now();
    let flood = tokio::spawn(async move {
        // Each reply carries the request's long id: the socket fills after a few.
        let mut chunk = String::new();
        for i in 0..10 {
            let id = format!("{i}-{}", "f".repeat(30_000));
            chunk.push_str(&format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":\"{id}\",\"method\":\"tools/list\"}}\n"
            ));
        }
        let mut sent = 0usize;
        loop {
            // Once mcpd has cut the agent off, a write fails; while it has not, the
            // writes either go on or block on a full socket.
            match tokio::time::timeout(WAIT, write.write_all(chunk.as_bytes())).await {
                Ok(Ok(())) => sent += 10,
                Ok(Err(e)) => return Ok((sent, e)),
                Err(_) => return Err(sent),
            }
        }
    });
    // Meanwhile another agent's calls are each served (within a bound, not a speed).
    let mut calls = 0;
    let mut slowest = Duration::ZERO;
    while !flood.is_finished() {
        calls += 1;
        let tag = format!("other {calls}");
        let t = Instant::now();
        let id = other.start_call("fx__echo", json!({"text": tag})).await;
        let r = other.response_within(&id, Duration::from_secs(5)).await;
        assert_eq!(text(&r), tag, "{r}");
        slowest = slowest.max(t.elapsed());
    }
    let (sent, error) = match flood.await.expect("flooder") {
        Ok(ended) => ended,
        Err(sent) => panic!(
            "the flooding agent was never cut off: after {sent} requests its writes blocked for {WAIT:?}"
        ),
    };
    println!(
        "flooder cut off after {sent} requests and {:.1} s ({error}); the other agent made {calls} calls meanwhile, the slowest in {slowest:?}",
        flood_started.elapsed().as_secs_f64()
    );
    assert!(d.log_text().contains("not reading"), "the log says why");
    d.wait_status("the flooder is no longer counted", |s| {
        s["daemon"]["agents"].as_u64().is_some_and(|n| n <= 2)
    })
    .await;
    drop(unread);
    let r = other.call("fx__echo", json!({"text": "after"})).await;
    assert_eq!(text(&r), "after");
    assert_still_serving(&d, "the flood").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_that_pipelines_more_requests_than_its_queue_holds_gets_every_answer() {
    // Room for 128 requests in flight: the 60 calls below are never refused as busy.
    let d = storm_daemon(DaemonBuilder::new().daemon("agent_queue = 256")).await;
    // Written in big chunks, so mcpd reads requests far faster than its writer sends the
    // replies: that agent is to be slowed down, not taken for one that does not read.
    let n = 3000;
    let mut burst = String::new();
    for i in 0..n {
        let method = match i % 50 {
            0 => "tools/call",
            n if n % 2 == 0 => "tools/list",
            _ => "ping",
        };
        burst.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"{method}\",\"params\":{{\"name\":\"fx__echo\",\"arguments\":{{\"text\":\"{i}\"}}}}}}\n"
        ));
    }
    let stream = within("connect", UnixStream::connect(&d.socket))
        .await
        .expect("connect");
    let (read, mut write) = stream.into_split();
    let writer =
        tokio::spawn(async move { write.write_all(burst.as_bytes()).await.map(|()| write) });
    let mut lines = BufReader::new(read).lines();
    let mut answered = vec![false; n];
    for _ in 0..n {
        let line = within("the next answer", lines.next_line())
            .await
            .expect("read")
            .unwrap_or_else(|| {
                panic!(
                    "mcpd closed the connection after {} answers",
                    answered.iter().filter(|a| **a).count()
                )
            });
        let r: Value = serde_json::from_str(&line).expect("JSON");
        let i = r["id"].as_u64().expect("an id") as usize;
        assert!(r.get("result").is_some(), "request {i}: {r}");
        assert!(
            !std::mem::replace(&mut answered[i], true),
            "two answers to {i}"
        );
    }
    within("the burst is written", writer)
        .await
        .expect("writer")
        .expect("write");
    assert!(
        !d.log_text().contains("not reading"),
        "the agent was taken for one that does not read"
    );
}

/// The `_meta` of a well-formed 2026-07-28 request.
fn modern_meta() -> Value {
    json!({PROTOCOL_VERSION_KEY: MODERN, CAPABILITIES_KEY: {}})
}

/// A `subscriptions/listen` request watching these resources.
fn listen(id: usize, uris: &[String]) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": true, "resourceSubscriptions": uris},
        "_meta": modern_meta()}})
}

/// Reads until the acknowledgement of subscription `id` or the answer to it.
async fn listen_outcome(a: &mut Agent, id: usize) -> Value {
    within("a subscription's acknowledgement or refusal", async {
        loop {
            let m = a.recv().await.expect("a message");
            let acked = m["method"] == "notifications/subscriptions/acknowledged"
                && m["params"]["_meta"][SUBSCRIPTION_ID_KEY] == json!(id);
            if acked || m["id"] == json!(id) {
                return m;
            }
        }
    })
    .await
}

fn items(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("fixture://items/{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn open_subscriptions_count_as_requests_in_flight() {
    // agent_queue = 64 allows 32 requests in flight.
    let d = storm_daemon(DaemonBuilder::new().daemon("agent_queue = 64")).await;
    let mut a = d.agent().await;
    for id in 0..32 {
        a.send(listen(id, &items(id..id + 1))).await;
        let m = listen_outcome(&mut a, id).await;
        assert!(m.get("method").is_some(), "subscription {id}: {m}");
    }
    a.send(listen(32, &[])).await;
    let m = listen_outcome(&mut a, 32).await;
    assert_eq!(error_code(&m), Some(-32013), "{m}");
    // Ending one makes room for another.
    a.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 0, "_meta": modern_meta()}}),
    )
    .await;
    a.send(listen(33, &[])).await;
    let m = listen_outcome(&mut a, 33).await;
    assert!(m.get("method").is_some(), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_holds_at_most_1024_resource_subscriptions() {
    let d = storm_daemon(DaemonBuilder::new()).await;
    // Legacy: one resources/subscribe each.
    let mut a = d.initialized_agent().await;
    let uris = items(0..1025);
    // In bursts of 256, fewer than the 512 requests a connection may have in flight.
    for burst in (0..1024).collect::<Vec<usize>>().chunks(256) {
        let mut lines = String::new();
        for &i in burst {
            let m = json!({"jsonrpc": "2.0", "id": i, "method": "resources/subscribe",
                           "params": {"uri": uris[i]}});
            lines.push_str(&format!("{m}\n"));
        }
        a.send_raw(lines.trim_end()).await;
        for &i in burst {
            let r = a.response(&json!(i)).await;
            assert!(r.get("result").is_some(), "subscription {i}: {r}");
        }
    }
    let r = a
        .request("resources/subscribe", Some(json!({"uri": uris[1024]})))
        .await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    assert!(error_message(&r).contains("1024"), "{r}");
    // The same resource again is no new subscription; giving one up makes room.
    let r = a
        .request("resources/subscribe", Some(json!({"uri": uris[0]})))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let r = a
        .request("resources/unsubscribe", Some(json!({"uri": uris[0]})))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let r = a
        .request("resources/subscribe", Some(json!({"uri": uris[1024]})))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    // Modern: a subscription that would pass the limit is refused whole.
    let mut b = d.agent().await;
    b.send(listen(1, &items(0..1025))).await;
    let m = listen_outcome(&mut b, 1).await;
    assert_eq!(error_code(&m), Some(-32602), "{m}");
    b.send(listen(2, &items(0..1024))).await;
    let m = listen_outcome(&mut b, 2).await;
    assert!(m.get("method").is_some(), "{m}");
    b.send(listen(3, &items(1024..1025))).await;
    let m = listen_outcome(&mut b, 3).await;
    assert_eq!(error_code(&m), Some(-32602), "{m}");
}
