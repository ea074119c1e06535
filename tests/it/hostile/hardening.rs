//! Inputs that once stalled, exhausted or fooled the shared daemon.
//!
//! Each is a regression test against the real binary.

use crate::support::*;
use serde_json::json;

#[tokio::test]
async fn a_huge_resource_uri_is_refused_at_once_and_every_agent_is_still_served() {
    let d = DaemonBuilder::new().fixture("a", &[]).start().await;
    d.wait_ready().await;
    let mut agent = d.initialized_agent().await;
    let mut other = d.initialized_agent().await;
    // Matching this against `fixture://items/{id}` once tried every split point of the
    // URI, and a million characters kept the runtime busy for minutes.
    let huge = format!("fixture://items/{}", "a".repeat(1_000_000));
    let id = agent.fresh_id();
    agent
        .send(json!({"jsonrpc": "2.0", "id": id, "method": "resources/read", "params": {"uri": huge}}))
        .await;
    let ping = other.request("ping", None).await;
    assert!(ping["result"].is_object(), "{ping}");
    let r = agent.response(&json!(id)).await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    assert!(error_message(&r).contains("at most 8192 bytes"), "{r}");
    assert!(
        r.to_string().len() < 1_000,
        "the refusal does not echo the URI"
    );
    // A long URI under the cap is matched and routed as usual.
    let long = format!("fixture://items/{}", "b".repeat(8_000));
    let r = agent
        .request("resources/read", Some(json!({"uri": long})))
        .await;
    let text = r["result"]["contents"][0]["text"].as_str().unwrap_or("");
    assert!(text.starts_with("item bbbb"), "{r}");
    // The same cap guards subscriptions.
    let huge = format!("fixture://items/{}", "c".repeat(20_000));
    let r = agent
        .request("resources/subscribe", Some(json!({"uri": huge})))
        .await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    let status = d.status().await;
    assert_eq!(status["servers"][0]["state"], "ready", "{status}");
}

fn modern_meta() -> serde_json::Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "hardening-test", "version": "1" },
    })
}

/// The four legacy methods 2026-07-28 removed, with legacy params.
fn removed_methods() -> [(&'static str, serde_json::Value); 4] {
    [
        ("ping", json!({})),
        ("logging/setLevel", json!({"level": "debug"})),
        ("resources/subscribe", json!({"uri": "fixture://items/1"})),
        ("resources/unsubscribe", json!({"uri": "fixture://items/1"})),
    ]
}

#[tokio::test]
async fn methods_2026_07_28_removed_are_refused_on_the_socket_as_over_http() {
    let d = DaemonBuilder::new().fixture("a", &[]).start().await;
    d.wait_ready().await;
    let mut agent = d.agent().await;
    for (method, params) in removed_methods() {
        let mut params = params;
        params["_meta"] = modern_meta();
        let r = agent.request(method, Some(params)).await;
        assert_eq!(error_code(&r), Some(-32601), "{method}: {r}");
        assert!(error_message(&r).contains("2026-07-28"), "{method}: {r}");
    }
    // So is initialize when it declares 2026-07-28, as over HTTP.
    let r = agent
        .request(
            "initialize",
            Some(json!({"protocolVersion": "2026-07-28", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}, "_meta": modern_meta()})),
        )
        .await;
    assert_eq!(error_code(&r), Some(-32601), "initialize: {r}");
    // The connection is still served in its era.
    let r = agent
        .request("tools/list", Some(json!({"_meta": modern_meta()})))
        .await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    // A legacy connection keeps all four, and answers them with {}.
    let mut legacy = d.initialized_agent().await;
    for (method, params) in removed_methods() {
        let r = legacy.request(method, Some(params)).await;
        assert_eq!(r["result"], json!({}), "{method}: {r}");
    }
    // On that connection too, a request that declares 2026-07-28 gets the modern answer:
    // the era is the request's, not the connection's.
    let mut params = json!({});
    params["_meta"] = modern_meta();
    let r = legacy.request("ping", Some(params)).await;
    assert_eq!(error_code(&r), Some(-32601), "{r}");
}

#[tokio::test]
async fn ctl_call_works_against_servers_of_every_era() {
    let d = DaemonBuilder::new()
        .fixture("legacy", &["--era", "legacy"])
        .fixture_with("modern", &["--era", "modern"], "protocol = \"modern\"")
        .fixture("dual", &["--era", "dual"])
        .start()
        .await;
    d.wait_ready().await;
    for server in ["legacy", "modern", "dual"] {
        let tool = format!("{server}__echo");
        let (code, out, err) = d
            .run_cli(&["ctl", "call", &tool, r#"{"text": "from the shell"}"#])
            .await;
        assert_eq!(code, 0, "{server}: {out} {err}");
        assert!(out.contains("from the shell"), "{server}: {out}");
    }
}

#[tokio::test]
async fn control_methods_are_refused_to_connections_with_a_profile() {
    let d = DaemonBuilder::new()
        .fixture("a", &[])
        .fixture("secret", &[])
        .profile("just-a", "servers = [\"a\"]")
        .start()
        .await;
    d.wait_ready().await;
    let mut agent = d.initialized_agent().await;
    let r = agent
        .request("mcpd/profile", Some(json!({"name": "just-a"})))
        .await;
    assert!(r["result"].is_object(), "{r}");
    for method in [
        "mcpd/status",
        "mcpd/agents",
        "mcpd/metrics",
        "mcpd/reload",
        "mcpd/http-token",
    ] {
        let r = agent.request(method, None).await;
        assert_eq!(error_code(&r), Some(-32018), "{method}: {r}");
        assert!(error_message(&r).contains("chose a profile"), "{r}");
        assert!(!r.to_string().contains("secret"), "{method} leaked: {r}");
    }
    let r = agent
        .request("mcpd/restart", Some(json!({"name": "secret"})))
        .await;
    assert_eq!(error_code(&r), Some(-32018), "{r}");
    // A connection without a profile, of the daemon's own user, still controls it.
    let mut own = d.agent().await;
    let r = own.request("mcpd/status", None).await;
    assert_eq!(
        r["result"]["servers"].as_array().map(Vec::len),
        Some(2),
        "{r}"
    );
}

#[tokio::test]
async fn a_server_entry_that_leads_back_to_the_daemon_itself_fails_with_a_clear_error() {
    let b = DaemonBuilder::new().fixture("a", &[]);
    let socket = b.dir().join("mcpd.sock");
    let socket = socket.to_str().expect("UTF-8 path").to_owned();
    let d = b
        .server("back", mcpd_bin(), &["connect", "--socket", &socket], "")
        .start()
        .await;
    assert_eq!(
        d.socket.to_str(),
        Some(socket.as_str()),
        "the harness's socket path"
    );
    let row = d
        .wait_server("back", "the loop is detected", |s| s["state"] == "failed")
        .await;
    let error = row["last_error"].as_str().unwrap_or("");
    assert!(error.contains("this mcpd daemon itself"), "{row}");
    let mut agent = d.initialized_agent().await;
    let names = agent.tool_names().await;
    assert!(!names.is_empty(), "the other server is served");
    assert!(names.iter().all(|n| !n.starts_with("back__")), "{names:?}");
    // Failed for good: it is not restarted in a loop.
    let restarts = row["restarts"].as_u64();
    let again = d.server_status("back").await;
    assert_eq!(again["restarts"].as_u64(), restarts, "{again}");
}

#[tokio::test]
async fn two_daemons_configured_as_each_others_server_refuse_the_loop() {
    // A has B's socket as its server `b`; B has A's as its server `a`. Whichever
    // connection comes second sees its own daemon among the ones the other reaches.
    let a = DaemonBuilder::new().fixture("fa", &["--tools", "echo"]);
    let b = DaemonBuilder::new().fixture("fb", &["--tools", "echo"]);
    // The harness puts each daemon's socket in its own directory.
    let a_socket = a.dir().join("mcpd.sock");
    let b_socket = b.dir().join("mcpd.sock");
    // B starts after A, and until B's socket exists A's `b` ends at once: those ends must
    // not use up the crash budget (a loop is refused at once, not by the budget).
    let quick = |name: &str| {
        format!(
            "[servers.{name}.restart]\nbackoff_initial = \"100ms\"\nbackoff_max = \"200ms\"\nmax_restarts = 1000"
        )
    };
    let to = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let a = a
        .server(
            "b",
            mcpd_bin(),
            &["connect", "--socket", &to(&b_socket)],
            &quick("b"),
        )
        .start()
        .await;
    let b = b
        .server(
            "a",
            mcpd_bin(),
            &["connect", "--socket", &to(&a_socket)],
            &quick("a"),
        )
        .start()
        .await;
    let looped = |row: &serde_json::Value| {
        row["state"] == "failed"
            && row["last_error"]
                .as_str()
                .unwrap_or_default()
                .contains("a loop")
    };
    let (refused, kept) = eventually("one of the two connections is refused", WAIT, || async {
        let ab = a.server_status("b").await;
        let ba = b.server_status("a").await;
        match (looped(&ab), looped(&ba)) {
            (true, false) => Some((ab, (&b, "a"))),
            (false, true) => Some((ba, (&a, "b"))),
            _ => None,
        }
    })
    .await;
    assert!(
        refused["last_error"]
            .as_str()
            .unwrap()
            .contains("remove one of the two entries"),
        "{refused}"
    );
    // The other keeps serving: its daemon's agents see the far daemon's own tools once.
    // When the two handshakes crossed, both connections were made, then cut and made
    // again; a list fetched in between may still name a tool that went round once, until
    // the refused server's lists are forgotten and the far daemon's list changes again.
    let (d, server) = kept;
    d.wait_server(server, "the other connection is ready", |s| {
        s["state"] == "ready"
    })
    .await;
    eventually("no name goes round the loop", WAIT, || async {
        let mut agent = d.initialized_agent().await;
        let names = agent.tool_names().await;
        names
            .iter()
            .all(|n| n.matches("__").count() <= 2)
            .then_some(())
    })
    .await;
    // Refused for good: not restarted (which would also make the loop again).
    let again = match refused["name"].as_str() {
        Some("b") => a.server_status("b").await,
        _ => b.server_status("a").await,
    };
    assert_eq!(again["state"], "failed", "{again}");
    assert_eq!(again["restarts"], refused["restarts"], "{again}");
}

#[tokio::test]
async fn an_agent_that_is_a_daemon_this_one_reaches_is_disconnected() {
    // Two daemons whose handshakes crossed both passed `refuse_self`; the daemon that
    // then reaches the other ends that one's connection to it (made again, it is
    // refused). Here the loop is made by hand: an agent of D that says it is E, which D
    // reaches through its server `e`.
    let e = DaemonBuilder::new()
        .fixture("fe", &["--tools", "echo"])
        .start()
        .await;
    let e_socket = e.socket.to_str().expect("UTF-8 path").to_owned();
    let d = DaemonBuilder::new()
        .fixture("fd", &["--tools", "echo"])
        .server("e", mcpd_bin(), &["connect", "--socket", &e_socket], "")
        .start()
        .await;
    d.wait_ready().await;
    let mut asker = e.agent().await;
    let answer = asker.initialize().await;
    let e_id = answer["result"]["_meta"]["mcpd/instance"]
        .as_str()
        .unwrap_or_else(|| panic!("no instance id in {answer}"))
        .to_owned();
    let mut plain = d.initialized_agent().await;
    let mut looped = d.agent().await;
    let answer = looped
        .request(
            "initialize",
            Some(json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": { "name": "mcpd", "version": "1" },
                "_meta": { "mcpd/instance": e_id },
            })),
        )
        .await;
    // A real daemon E would refuse itself on this answer; this agent goes on.
    let behind = &answer["result"]["_meta"]["mcpd/behind"];
    assert!(
        behind
            .as_array()
            .is_some_and(|b| b.iter().any(|i| i == &json!(e_id))),
        "{answer}"
    );
    // The next change of D's catalog ends the connection (one may come by itself).
    let (code, _, err) = d.run_cli(&["ctl", "restart", "fd"]).await;
    assert_eq!(code, 0, "{err}");
    while looped.recv().await.is_some() {}
    eventually("the loop is logged", WAIT, || async {
        d.log_text()
            .contains("(a loop); disconnecting it")
            .then_some(())
    })
    .await;
    // Every other agent stays.
    assert!(!plain.tool_names().await.is_empty());
}

#[tokio::test]
async fn an_agent_is_disconnected_once_its_unread_replies_exceed_the_byte_budget() {
    // 40 replies of 60 KB fit the default count (1,024 messages) many times over; the
    // byte budget (128 KiB) is what must cut this agent off.
    let d = DaemonBuilder::new()
        .daemon("max_message_bytes = 65536\nqueue_bytes = 131072")
        .fixture("s", &["--tools", "big,echo"])
        .start()
        .await;
    d.wait_ready().await;
    let mut hoarder = d.initialized_agent().await;
    for _ in 0..40 {
        let id = hoarder.fresh_id();
        hoarder
            .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "s__big", "arguments": {"bytes": 60_000}}}))
            .await;
    }
    eventually("the hoarding agent is disconnected", WAIT, || async {
        d.log_text().contains("not reading").then_some(())
    })
    .await;
    let mut other = d.initialized_agent().await;
    assert_eq!(
        text(&other.call("s__echo", json!({"text": "hi"})).await),
        "hi"
    );
}

#[tokio::test]
async fn absurd_config_values_are_refused_at_load_with_the_key_named() {
    for (line, key) in [
        (
            "request_timeout = \"100000000years\"",
            "daemon.request_timeout",
        ),
        ("max_agents = 100000000", "daemon.max_agents"),
        ("agent_queue = 100000000000", "daemon.agent_queue"),
        (
            "max_message_bytes = 100000000000",
            "daemon.max_message_bytes",
        ),
        ("queue_bytes = 1000", "daemon.queue_bytes"),
        ("shutdown_grace = \"400days\"", "daemon.shutdown_grace"),
    ] {
        let b = DaemonBuilder::new().daemon(line).fixture("a", &[]);
        let path = b.dir().join("check.toml");
        std::fs::write(&path, b.config_text()).expect("write config");
        let path = path.to_str().expect("UTF-8 path").to_owned();
        let (code, _, err) = run_mcpd(&["check-config", "--config", &path], None).await;
        assert_eq!(code, 78, "{line}: {err}");
        assert!(err.contains(key), "{line}: {err}");
    }
}

#[tokio::test]
async fn subscriptions_per_connection_are_capped_with_a_clear_error() {
    let d = DaemonBuilder::new().fixture("a", &[]).start().await;
    d.wait_ready().await;
    let mut agent = d.agent().await;
    let listen = |id: u64, uris: Vec<String>| {
        json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {
            "notifications": {"toolsListChanged": true, "resourceSubscriptions": uris},
            "_meta": modern_meta()}})
    };
    let too_many: Vec<String> = (0..1025).map(|i| format!("fixture://items/{i}")).collect();
    agent.send(listen(1000, too_many)).await;
    let r = agent.response(&json!(1000)).await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    assert!(error_message(&r).contains("at most 1024"), "{r}");
    // Each open listen is acknowledged; the 33rd is refused.
    for id in 0..32u64 {
        agent.send(listen(id, vec![])).await;
        within("an acknowledgement", async {
            loop {
                let m = agent.recv().await.expect("connection open");
                if m["method"] == "notifications/subscriptions/acknowledged" {
                    break;
                }
            }
        })
        .await;
    }
    agent.send(listen(99, vec![])).await;
    let r = agent.response(&json!(99)).await;
    assert_eq!(error_code(&r), Some(-32013), "{r}");
    assert!(error_message(&r).contains("cancel one first"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_flooding_notifications_still_answers_its_other_callers() {
    let d = DaemonBuilder::new()
        .fixture("s", &["--tools", "flood,echo"])
        .start()
        .await;
    d.wait_ready().await;
    let mut flooder = d.initialized_agent().await;
    // Minutes of output that never pauses; the test ends long before it would.
    flooder
        .start_call("s__flood", json!({"count": 50_000_000}))
        .await;
    let mut caller = d.initialized_agent().await;
    // Each call goes to the same server while its output is one long burst of
    // notifications (minutes of it): it must be sent and answered meanwhile, not after
    // the flood. Its answer comes after what the server queued before it (its own output
    // queue and the pipe: a few thousand lines), so it is not instant; how long depends
    // on the machine's load, so the bound here is only that it is not held back.
    let mut took = Vec::new();
    for i in 0..10 {
        let tag = format!("call {i}");
        let started = std::time::Instant::now();
        let id = caller.start_call("s__echo", json!({"text": tag})).await;
        let r = caller
            .response_within(&id, std::time::Duration::from_secs(15))
            .await;
        assert_eq!(text(&r), tag, "{r}");
        took.push(started.elapsed());
    }
    took.sort();
    println!("echo latencies during the flood: {took:?}");
}

#[tokio::test]
async fn the_catalog_cache_is_one_private_file_per_server_and_forgets_removed_servers() {
    use std::os::unix::fs::PermissionsExt;
    let b = DaemonBuilder::new().fixture("a", &[]);
    let state = b.dir().join("state");
    // A single-file cache of an earlier version, readable by anyone.
    std::fs::create_dir_all(&state).expect("state dir");
    std::fs::write(state.join("catalog.json"), "{}").expect("old cache");
    let only_a = b.config_text();
    let d = b.fixture("b", &[]).start().await;
    d.wait_ready().await;
    let file = |name: &str| state.join("catalog").join(format!("{name}.json"));
    for name in ["a", "b"] {
        let path = file(name);
        // Written as each list arrives: the tools may come after the prompts.
        eventually(&format!("{name}'s tools are saved"), WAIT, || async {
            let text = std::fs::read_to_string(&path).ok()?;
            text.contains("\"echo\"").then_some(())
        })
        .await;
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", path.display());
    }
    let dir_mode = std::fs::metadata(state.join("catalog"))
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700);
    assert!(!state.join("catalog.json").exists(), "the old file is gone");
    std::fs::write(&d.config, only_a).expect("write config");
    let (code, out, err) = d.run_cli(&["ctl", "reload"]).await;
    assert_eq!(code, 0, "{out} {err}");
    let gone = file("b");
    eventually("b's cached catalog is removed", WAIT, || async {
        (!gone.exists()).then_some(())
    })
    .await;
    assert!(file("a").exists());
}

#[tokio::test]
async fn ctl_finds_the_configured_socket_without_the_daemons_secrets() {
    let b = DaemonBuilder::new()
        .fixture("a", &[])
        .env("MCPD_TEST_SECRET", "s3cret")
        .remote(
            "far",
            "http://127.0.0.1:9/mcp",
            "headers = { \"X-Api-Key\" = \"${MCPD_TEST_SECRET}\" }",
        );
    let socket = b.dir().join("mcpd.sock");
    let b = b.daemon(&format!(
        "socket = {:?}",
        socket.to_str().expect("UTF-8 path")
    ));
    let d = b.start().await;
    d.wait_server("a", "a is ready", |s| s["state"] == "ready")
        .await;
    let config = d.config.to_str().expect("UTF-8 path").to_owned();
    // This shell lacks the daemon's variable; only `daemon.socket` is read from the file.
    let (code, out, err) = run_mcpd(&["ctl", "status", "--config", &config], None).await;
    assert_eq!(code, 0, "{out} {err}");
    assert!(out.contains("far"), "{out}");
    assert!(!out.contains("s3cret") && !err.contains("s3cret"));
}

#[tokio::test]
async fn the_daemon_raises_its_open_files_limit_so_agents_are_served_past_the_soft_one() {
    // Each agent holds one of the daemon's descriptors: 300 agents need more than the
    // soft limit of 256 that the daemon starts with.
    let d = DaemonBuilder::new()
        .fixture("a", &[])
        .open_files(256)
        .start()
        .await;
    d.wait_ready().await;
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", d.pid())).expect("limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("an open files line");
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields.get(3), fields.get(4), "soft = hard: {line}");
    assert_ne!(fields.get(3), Some(&"256"), "raised: {line}");
    let mut agents = Vec::new();
    for _ in 0..300 {
        agents.push(d.initialized_agent().await);
    }
    for agent in &mut agents {
        let r = agent.call("a__echo", json!({"message": "hi"})).await;
        assert_eq!(text(&r), r#"{"message":"hi"}"#, "{r}");
    }
}

#[tokio::test]
async fn an_idle_daemon_is_not_woken_by_its_own_timers() {
    // A daemon with nothing to do should let the machine sleep: no ticker of its own
    // (the heap trimmer, the status line outside systemd) may wake it every second. The
    // fixture's ping is far off; so is its idle timeout (none).
    let d = DaemonBuilder::new().fixture("a", &[]).start().await;
    d.wait_ready().await;
    let span = std::time::Duration::from_secs(3);
    let quiet = settles(d.pid(), span, 2).await;
    assert!(quiet.is_ok(), "woken per 3 s window while idle: {quiet:?}");
    // A large result sets the heap trimmer going; once it has trimmed, it sleeps again.
    let mut agent = d.initialized_agent().await;
    let r = agent.call("a__big", json!({"bytes": 1_048_576})).await;
    assert_eq!(text(&r).len(), 1_048_576, "the large result came whole");
    let quiet = settles(d.pid(), span, 2).await;
    assert!(
        quiet.is_ok(),
        "woken per 3 s window after a large result: {quiet:?}"
    );
}
