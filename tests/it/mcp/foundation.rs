//! The foundation: handshake, listing, routing, concurrency, cancellation, errors.
//!
//! Listing is qualified; the tests also cover status, config checks and shutdown.

use crate::support::*;
use serde_json::{Value, json};
use std::time::Duration;

#[tokio::test]
async fn handshake_echoes_a_legacy_version_and_offers_the_newest_otherwise() {
    let d = DaemonBuilder::new().start().await;
    for (asked, answered) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let mut a = d.agent().await;
        let r = a
            .request("initialize", Some(json!({"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})))
            .await;
        assert_eq!(r["result"]["protocolVersion"], answered, "{r}");
        assert_eq!(r["result"]["serverInfo"]["name"], "mcpd");
        assert!(r["result"]["capabilities"]["tools"].is_object());
        let pong = a.request("ping", None).await;
        assert_eq!(pong["result"], json!({}));
    }
}

#[tokio::test]
async fn tools_of_two_servers_are_listed_qualified_sorted_and_mapped() {
    let long = "x".repeat(80);
    let beta_tools = format!("pid,read.file,{long}");
    let d = DaemonBuilder::new()
        .fixture("beta", &["--tools", &beta_tools])
        .fixture("alpha", &["--tools", "echo,add", "--page-size", "1"])
        .fixture("gamma", &["--no-tools-capability"])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let names = a.tool_names().await;
    let long_mapped = names
        .iter()
        .find(|n| n.starts_with("beta__xxx"))
        .expect("long name mapped")
        .clone();
    assert_eq!(
        names,
        vec![
            "alpha__add".to_owned(),
            "alpha__echo".into(),
            "beta__pid".into(),
            "beta__read_file_2d6f0437".into(),
            long_mapped.clone()
        ]
    );
    assert_eq!(long_mapped.len(), 64, "{long_mapped}");
    // Mapped names route back to the server's own name.
    let r = a
        .call(
            "beta__read_file_2d6f0437",
            json!({"text": "via mapped name"}),
        )
        .await;
    assert_eq!(text(&r), "via mapped name");
    let r = a.call(&long_mapped, json!({"text": "long"})).await;
    assert_eq!(text(&r), "long");
    let gamma = d.server_status("gamma").await;
    assert_eq!(
        (gamma["state"].as_str(), gamma["tools"].as_u64()),
        (Some("ready"), Some(0))
    );
}

#[tokio::test]
async fn agent_listing_is_paginated_with_an_opaque_cursor() {
    let d = DaemonBuilder::new()
        .fixture(
            "big",
            &[
                "--tools",
                "echo",
                "--extra-tools",
                "1200",
                "--page-size",
                "300",
            ],
        )
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let first = a.request("tools/list", None).await;
    let cursor = first["result"]["nextCursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    assert!(
        !cursor.contains("big__"),
        "cursor should be opaque: {cursor}"
    );
    let names = a.tool_names().await;
    assert_eq!(names.len(), 1201);
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(names, sorted, "listing is sorted and has no duplicates");
    let bad = a
        .request("tools/list", Some(json!({"cursor": "not-a-cursor"})))
        .await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}

#[tokio::test]
async fn calls_are_routed_to_the_server_that_owns_the_tool() {
    let d = DaemonBuilder::new()
        .fixture("alpha", &["--tools", "pid,add"])
        .fixture("beta", &["--tools", "pid"])
        .start()
        .await;
    let status = d.wait_ready().await;
    let pid_of = |name: &str| {
        status["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()["pid"]
            .as_u64()
            .unwrap()
            .to_string()
    };
    let mut a = d.initialized_agent().await;
    assert_eq!(
        text(&a.call("alpha__pid", json!({})).await),
        pid_of("alpha")
    );
    assert_eq!(text(&a.call("beta__pid", json!({})).await), pid_of("beta"));
    assert_eq!(
        text(&a.call("alpha__add", json!({"a": 2, "b": 40})).await),
        "42"
    );
}

#[tokio::test]
async fn sixteen_agents_with_fifty_interleaved_calls_each_get_exactly_their_own_answers() {
    let d = DaemonBuilder::new()
        .fixture("one", &["--tools", "echo,sleep"])
        .fixture("two", &["--tools", "echo"])
        .start()
        .await;
    d.wait_ready().await;
    let socket = d.socket.clone();
    let mut tasks = Vec::new();
    for agent in 0..16 {
        let socket = socket.clone();
        tasks.push(tokio::spawn(async move {
            let mut a = Agent::connect(&socket).await;
            a.initialize().await;
            // Send all fifty before reading any answer, so they interleave upstream.
            let mut expected = Vec::new();
            for call in 0..50 {
                let tool = if call % 2 == 0 {
                    "one__echo"
                } else {
                    "two__echo"
                };
                let tag = format!("agent {agent} call {call}");
                let id = a.start_call(tool, json!({ "text": tag })).await;
                expected.push((id, tag));
            }
            for (id, tag) in expected {
                let r = a.response(&id).await;
                assert_eq!(
                    text(&r),
                    tag,
                    "agent {agent} got someone else's answer: {r}"
                );
            }
            assert!(a.stray.is_empty(), "unexpected responses {:?}", a.stray);
        }));
    }
    for t in tasks {
        within("an agent's calls", t).await.expect("agent task");
    }
}

#[tokio::test]
async fn an_agent_disconnecting_mid_call_cancels_the_call_upstream() {
    let d = DaemonBuilder::new();
    let record = d.dir().join("rec");
    let rec = record.to_str().unwrap().to_owned();
    let d = d
        .fixture("slow", &["--tools", "hang,pid", "--record", &rec])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let pid = text(&a.call("slow__pid", json!({})).await).to_owned();
    a.start_call("slow__hang", json!({})).await;
    let log = record.join(format!("received-{pid}.log"));
    wait_for_line(&log, "\"hang\"").await;
    drop(a);
    let cancelled = wait_for_line(&log, "notifications/cancelled").await;
    let msg: Value = serde_json::from_str(&cancelled).unwrap();
    let hang: Value = read_lines(&log)
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|m| m["params"]["name"] == "hang")
        .unwrap();
    assert_eq!(
        msg["params"]["requestId"], hang["id"],
        "the cancellation names the upstream id"
    );
    d.wait_server("slow", "no calls in flight", |s| s["in_flight"] == 0)
        .await;
}

#[tokio::test]
async fn an_agent_cancellation_is_forwarded_with_the_upstream_id() {
    let mut h = Hanging::start().await;
    let id = h.hang().await;
    let (a, log) = (&mut h.agent, &h.log);
    a.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "user"}}))
        .await;
    wait_for_line(log, "notifications/cancelled").await;
    // The connection keeps working, and no answer to the cancelled call arrives.
    assert_eq!(a.request("ping", None).await["result"], json!({}));
    assert!(a.stray.is_empty(), "{:?}", a.stray);
}

#[tokio::test]
async fn an_unparseable_line_gets_a_parse_error_and_the_connection_keeps_working() {
    let d = DaemonBuilder::new()
        .fixture("s", &["--tools", "echo"])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    a.send_raw("{this is not json").await;
    let r = a.recv_answer().await;
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(r["id"], Value::Null);
    a.send_raw(r#"{"jsonrpc":"2.0","id":7,"method":5}"#).await;
    let r = a.response(&json!(7)).await;
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(7), json!(-32600)),
        "{r}"
    );
    let r = a.request("no/such/method", None).await;
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert_eq!(
        text(&a.call("s__echo", json!({"text": "still here"})).await),
        "still here"
    );
}

#[tokio::test]
async fn an_oversized_line_gets_an_error_and_the_connection_keeps_working() {
    let d = DaemonBuilder::new()
        .daemon("max_message_bytes = 65536")
        .fixture("s", &["--tools", "echo"])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"s__echo","arguments":{{"text":"{}"}}}}}}"#,
        "y".repeat(200_000)
    );
    a.send_raw(&huge).await;
    let r = a.recv_answer().await;
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("65536"),
        "{r}"
    );
    assert_eq!(text(&a.call("s__echo", json!({"text": "ok"})).await), "ok");
}

#[tokio::test]
async fn an_unknown_tool_is_named_in_an_invalid_params_error() {
    let d = DaemonBuilder::new()
        .fixture("s", &["--tools", "echo"])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    for name in ["s__nope", "nope__echo", "echo", ""] {
        let r = a.call(name, json!({})).await;
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&format!("'{name}'")),
            "{r}"
        );
    }
    let r = a
        .request("tools/call", Some(json!({"arguments": {}})))
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[tokio::test]
async fn a_slow_call_times_out_with_a_clear_error_and_is_cancelled_upstream() {
    let d = DaemonBuilder::new();
    let rec = d.dir().join("rec");
    let d = d
        .fixture_with(
            "s",
            &["--tools", "sleep,pid", "--record", rec.to_str().unwrap()],
            "timeout = \"300ms\"",
        )
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let pid = text(&a.call("s__pid", json!({})).await).to_owned();
    let started = std::time::Instant::now();
    let r = a.call("s__sleep", json!({"ms": 5000})).await;
    assert!(
        started.elapsed() < Duration::from_millis(4000),
        "the timeout did not fire early"
    );
    assert_eq!(r["error"]["code"], -32011, "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("'s'") && msg.contains("300ms") && msg.contains("timeout"),
        "{msg}"
    );
    let log = rec.join(format!("received-{pid}.log"));
    wait_for_line(&log, "notifications/cancelled").await;
}

#[tokio::test]
async fn server_errors_and_tool_errors_pass_through_unchanged() {
    let d = DaemonBuilder::new()
        .fixture("s", &["--tools", "fail,error"])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let r = a.call("s__error", json!({})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32050, "message": "fixture error on purpose", "data": {"detail": "x"}})
    );
    let r = a.call("s__fail", json!({})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(text(&r), "tool failed on purpose");
}

#[tokio::test]
async fn a_new_generation_with_duplicate_names_is_rejected_and_the_last_good_one_stays() {
    // Pinning would hold the changed lists (pins.rs); this test is about them reaching agents.
    let d = DaemonBuilder::new()
        .daemon("pin = \"off\"")
        .fixture("s", &["--tools", "echo,set_tools"])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    assert_eq!(a.tool_names().await, vec!["s__echo", "s__set_tools"]);
    // A good change is taken, and the agent is told.
    let r = a
        .call(
            "s__set_tools",
            json!({"tools": ["echo", "set_tools", "add"]}),
        )
        .await;
    assert_eq!(text(&r), "ok");
    eventually("the new generation is served", WAIT, || {
        let socket = d.socket.clone();
        async move {
            let mut b = Agent::connect(&socket).await;
            (b.tool_names().await.len() == 3).then_some(())
        }
    })
    .await;
    // The change was published before the new list was served, so a ping's answer
    // comes after the notification on this connection.
    a.request("ping", None).await;
    assert!(
        a.notifications
            .iter()
            .any(|n| n["method"] == "notifications/tools/list_changed"),
        "{:?}",
        a.notifications
    );
    // A duplicate is rejected whole.
    a.call("s__set_tools", json!({"tools": ["echo", "echo", "other"]}))
        .await;
    let s = d
        .wait_server("s", "the rejection shows in status", |s| {
            s["catalog_error"].is_string()
        })
        .await;
    let why = s["catalog_error"].as_str().unwrap();
    assert!(
        why.contains("s__echo") && why.contains("previous kept"),
        "{why}"
    );
    assert_eq!(
        a.tool_names().await,
        vec!["s__add", "s__echo", "s__set_tools"]
    );
    // Tools of the kept generation still route (echo exists in both lists).
    assert_eq!(
        text(&a.call("s__echo", json!({"text": "kept"})).await),
        "kept"
    );
}

#[tokio::test]
async fn malformed_lines_from_a_server_are_skipped_and_counted() {
    let d = DaemonBuilder::new()
        .fixture(
            "s",
            &[
                "--tools",
                "echo,garbage",
                "--malformed-lines",
                "4",
                "--stderr-noise",
                "3",
            ],
        )
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    assert_eq!(text(&a.call("s__garbage", json!({})).await), "ok");
    assert_eq!(
        text(&a.call("s__echo", json!({"text": "fine"})).await),
        "fine"
    );
    let s = d.server_status("s").await;
    // Four lines before the handshake answer (one of them a response with an unknown
    // id, which is dropped but is well-formed), and one from `garbage`.
    assert!(s["malformed_lines"].as_u64().unwrap() >= 4, "{s}");
    assert_eq!(s["state"], "ready");
    let tail = s["stderr_tail"].as_array().unwrap();
    assert!(
        tail.iter().any(|l| l.as_str().unwrap().contains("noise")),
        "stderr is captured: {s}"
    );
}

#[tokio::test]
async fn a_paginated_tool_list_that_loops_is_refused_with_a_reason() {
    let d = DaemonBuilder::new()
        .fixture(
            "s",
            &["--tools", "echo,add", "--page-size", "1", "--cursor-loop"],
        )
        .start()
        .await;
    let s = d
        .wait_server("s", "the catalog error shows", |s| {
            s["catalog_error"].is_string()
        })
        .await;
    assert!(
        s["catalog_error"]
            .as_str()
            .unwrap()
            .contains("repeated the cursor"),
        "{s}"
    );
}

#[tokio::test]
async fn ctl_status_json_reports_daemon_and_server_fields() {
    let d = DaemonBuilder::new()
        .fixture("s", &["--tools", "echo,add"])
        .start()
        .await;
    d.wait_ready().await;
    let (code, out, err) = d.run_cli(&["ctl", "status", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("status --json prints JSON");
    assert_eq!(v["daemon"]["pid"], d.pid());
    assert_eq!(v["daemon"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["daemon"]["socket"], d.socket.to_str().unwrap());
    assert!(v["daemon"]["uptime_secs"].as_f64().unwrap() >= 0.0);
    assert_eq!(
        v["daemon"]["agents"], 0,
        "the ctl connection asking is not an agent"
    );
    let s = &v["servers"][0];
    for key in [
        "name",
        "state",
        "transport",
        "protocol_version",
        "pid",
        "tools",
        "in_flight",
        "restarts",
        "uptime_secs",
        "last_error",
    ] {
        assert!(s.get(key).is_some(), "missing {key} in {s}");
    }
    assert_eq!(
        (
            s["name"].as_str(),
            s["state"].as_str(),
            s["transport"].as_str()
        ),
        (Some("s"), Some("ready"), Some("stdio"))
    );
    assert_eq!(s["protocol_version"], "2025-11-25");
    assert_eq!(s["tools"], 2);
    assert!(alive(s["pid"].as_u64().unwrap() as u32));
    let (code, table, _) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0);
    assert!(
        table.contains("SERVER") && table.contains("ready") && table.contains("2025-11-25"),
        "{table}"
    );
}

#[tokio::test]
async fn ctl_and_connect_say_clearly_when_the_daemon_is_not_running() {
    let dir = tempfile::Builder::new()
        .prefix("mcpd-it")
        .tempdir_in("/tmp")
        .unwrap();
    let socket = dir.path().join("none.sock");
    for args in [&["ctl", "status"][..], &["connect"][..]] {
        let (code, _, err) = run_mcpd(args, Some(&socket)).await;
        assert_eq!(code, 69, "{err}");
        assert!(
            err.contains("mcpd is not running") && err.contains("none.sock"),
            "{err}"
        );
    }
}

#[tokio::test]
async fn check_config_names_the_file_and_key_and_exits_78() {
    let dir = tempfile::Builder::new()
        .prefix("mcpd-it")
        .tempdir_in("/tmp")
        .unwrap();
    let cases = [
        ("[servers.fs]\ncommand = \"x\"\nbogus = 1\n", "bogus"),
        (
            "[servers.fs]\ncommand = \"x\"\ntimeout = \"later\"\n",
            "servers.fs.timeout",
        ),
        ("[servers.my_fs]\ncommand = \"x\"\n", "servers.my_fs"),
        ("[servers.fs]\nargs = []\n", "servers.fs.command"),
    ];
    for (text, key) in cases {
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, text).unwrap();
        let (code, _, err) =
            run_mcpd(&["check-config", "--config", path.to_str().unwrap()], None).await;
        assert_eq!(code, 78, "{text}: {err}");
        assert!(
            err.contains("bad.toml") && err.contains(key),
            "{text}: {err}"
        );
        // The daemon refuses the same file with the same words.
        let (code, _, serve_err) = run_mcpd(
            &["serve", "--config", path.to_str().unwrap()],
            Some(&dir.path().join("x.sock")),
        )
        .await;
        assert_eq!(code, 78);
        assert_eq!(serve_err.lines().next(), err.lines().next());
    }
    let good = dir.path().join("good.toml");
    std::fs::write(
        &good,
        "[servers.fs]\ncommand = \"npx\"\nargs = [\"-y\", \"pkg\"]\n",
    )
    .unwrap();
    let (code, out, _) =
        run_mcpd(&["check-config", "--config", good.to_str().unwrap()], None).await;
    assert_eq!(code, 0);
    assert!(out.contains("server fs: npx -y pkg"), "{out}");
    // The shipped example config is valid.
    let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/config/mcpd.toml");
    let (code, _, err) = run_mcpd(&["check-config", "--config", shipped], None).await;
    assert_eq!(code, 0, "{err}");
}

#[tokio::test]
async fn a_second_daemon_on_a_live_socket_exits_with_a_clear_error() {
    let d = DaemonBuilder::new().start().await;
    let (code, _, err) = run_mcpd(
        &["serve", "--config", d.config.to_str().unwrap()],
        Some(&d.socket),
    )
    .await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("already listening"), "{err}");
    // The first daemon still serves.
    assert!(d.status().await["daemon"]["pid"].is_number());
}

#[tokio::test]
async fn a_stale_socket_file_is_replaced() {
    let b = DaemonBuilder::new();
    let socket = b.dir().join("mcpd.sock");
    // A socket file nobody listens on, as a killed daemon leaves behind.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let d = b.start().await;
    assert!(d.status().await["daemon"]["pid"].is_number());
}

#[tokio::test]
async fn sigterm_stops_every_child_removes_the_socket_and_exits_zero() {
    let mut d = DaemonBuilder::new()
        .daemon("shutdown_grace = \"500ms\"")
        .fixture("a", &["--tools", "echo"])
        .fixture_with(
            "b",
            &["--tools", "hang", "--ignore-sigterm"],
            "[servers.b.health]\nstop_grace = \"300ms\"",
        )
        .fixture_with(
            "c",
            &["--tools", "echo"],
            "[servers.c.health]\nstop_grace = \"300ms\"",
        )
        .start()
        .await;
    let status = d.wait_ready().await;
    let pids: Vec<u32> = status["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["pid"].as_u64().unwrap() as u32)
        .collect();
    assert_eq!(pids.len(), 3);
    let mut a = d.initialized_agent().await;
    let hung = a.start_call("b__hang", json!({})).await;
    d.wait_server("b", "the call is in flight", |s| s["in_flight"] == 1)
        .await;
    d.signal(nix::sys::signal::Signal::SIGTERM);
    let r = a.response(&hung).await;
    assert_eq!(
        r["error"]["code"], -32014,
        "in-flight calls fail with a clear error: {r}"
    );
    assert_eq!(d.wait_exit().await, Some(0));
    assert!(!d.socket.exists(), "socket removed");
    for pid in pids {
        assert_eq!(
            proc_state(pid),
            None,
            "server process {pid} is gone and reaped"
        );
    }
}

/// `mcpd connect` to `socket`, with its stdin and stdout piped to the test.
fn mcpd_connect(socket: &std::path::Path, stderr: std::process::Stdio) -> tokio::process::Child {
    tokio::process::Command::new(mcpd_bin())
        .args(["connect", "--socket"])
        .arg(socket)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

#[tokio::test]
async fn mcpd_connect_bridges_stdio_to_the_socket() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let d = DaemonBuilder::new()
        .fixture("s", &["--tools", "echo"])
        .start()
        .await;
    d.wait_ready().await;
    let mut child = mcpd_connect(&d.socket, std::process::Stdio::inherit());
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let msgs = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"s__echo","arguments":{"text":"bridged"}}}),
    ];
    for m in msgs {
        stdin.write_all(format!("{m}\n").as_bytes()).await.unwrap();
    }
    // Responses in order; a list-changed notification may come between them (a server's
    // lists arriving after the agent initialized).
    let mut responses = Vec::new();
    while responses.len() < 2 {
        let line = within("read", lines.next_line()).await.unwrap().unwrap();
        let msg: Value = serde_json::from_str(&line).unwrap();
        if msg.get("id").is_some() {
            responses.push(msg);
        } else {
            assert!(
                msg["method"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("notifications/")),
                "{msg}"
            );
        }
    }
    assert_eq!(responses[0]["id"], 1);
    assert_eq!(text(&responses[1]), "bridged");
    drop(stdin);
    let status = within("connect exits after stdin closes", child.wait())
        .await
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn mcpd_connect_takes_requests_while_a_reply_waits_for_the_client() {
    use std::os::fd::AsRawFd;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let d = DaemonBuilder::new()
        .fixture("s", &["--tools", "big"])
        .start()
        .await;
    d.wait_ready().await;
    let mut child = mcpd_connect(&d.socket, std::process::Stdio::inherit());
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    // First a call whose 1 MiB reply fills the stdout pipe: the client reads nothing yet.
    let init = json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}});
    let big = json!({"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"s__big","arguments":{"bytes":1048576}}});
    let first = format!(
        "{init}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}\n{big}\n"
    );
    stdin.write_all(first.as_bytes()).await.unwrap();
    let unread = || {
        let mut n: nix::libc::c_int = 0;
        // SAFETY: FIONREAD on a pipe we hold writes one int, the bytes waiting in it.
        let r = unsafe { nix::libc::ioctl(stdout.as_raw_fd(), nix::libc::FIONREAD, &mut n) };
        if r == 0 { n } else { 0 }
    };
    eventually(
        "the reply fills the client's stdout pipe",
        Duration::from_secs(20),
        || async { (unread() >= 60 * 1024).then_some(()) },
    )
    .await;
    // Then 300 requests (about 300 KiB: ids padded to 1,000 bytes, far more than stdin's
    // pipe holds) while that reply waits for the client: the bridge must go on taking
    // them, or this write never ends.
    const CALLS: usize = 300;
    let id = |n: usize| format!("{n:0>1000}");
    let mut batch = String::new();
    for n in 0..CALLS {
        let call = json!({"jsonrpc":"2.0","id":id(n),"method":"tools/call","params":{"name":"s__big","arguments":{"bytes":16}}});
        batch.push_str(&format!("{call}\n"));
    }
    within(
        "the requests are written while a reply waits for the client",
        stdin.write_all(batch.as_bytes()),
    )
    .await
    .unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut answered = std::collections::BTreeSet::new();
    while answered.len() < CALLS + 2 {
        let line = within("read", lines.next_line()).await.unwrap().unwrap();
        let msg: Value = serde_json::from_str(&line).unwrap();
        if let Some(id) = msg.get("id").and_then(Value::as_str) {
            assert!(msg.get("result").is_some(), "{msg}");
            assert!(answered.insert(id.to_owned()), "answered twice: {id}");
        }
    }
    assert!(answered.contains(&id(CALLS - 1)) && answered.contains("big"));
    drop(stdin);
    let status = within("connect exits after stdin closes", child.wait())
        .await
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn mcpd_connect_ends_quietly_when_the_client_stops_reading() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let d = DaemonBuilder::new()
        .fixture("s", &["--tools", "echo"])
        .start()
        .await;
    d.wait_ready().await;
    let mut child = mcpd_connect(&d.socket, std::process::Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    drop(child.stdout.take()); // the client left: its end of the pipe is closed
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}});
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    let status = within(
        "connect exits once its answer finds no reader",
        child.wait(),
    )
    .await
    .unwrap();
    let mut err = String::new();
    within("stderr", stderr.read_to_string(&mut err))
        .await
        .unwrap();
    assert!(status.success(), "{status:?}: {err}");
    assert_eq!(err, "", "a broken pipe is not an error");
}

#[tokio::test]
async fn ctl_tools_lists_qualified_names_and_ctl_call_prints_results_with_exit_codes() {
    let d = DaemonBuilder::new()
        .fixture("a", &["--tools", "echo,error"])
        .fixture("b", &["--tools", "add"])
        .start()
        .await;
    d.wait_ready().await;
    let (code, out, err) = d.run_cli(&["ctl", "tools"]).await;
    assert_eq!(code, 0, "{err}");
    let names: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names, ["a__echo", "a__error", "b__add"], "{out}");
    let (code, out, _) = d.run_cli(&["ctl", "tools", "b"]).await;
    assert_eq!(code, 0);
    assert!(out.starts_with("b__add"), "{out}");
    let (code, out, err) = d
        .run_cli(&["ctl", "call", "a__echo", r#"{"text": "from the shell"}"#])
        .await;
    assert_eq!((code, out.trim()), (0, "from the shell"), "{err}");
    let (code, _, err) = d.run_cli(&["ctl", "call", "a__error", "{}"]).await;
    assert_eq!(code, 1, "a tool error exits 1: {err}");
    let (code, _, err) = d.run_cli(&["ctl", "call", "a__echo", "not json"]).await;
    assert_eq!(code, 64, "{err}");
    let (code, _, err) = d.run_cli(&["ctl", "call", "nope__x", "{}"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unknown tool"), "{err}");
}

#[tokio::test]
async fn ctl_logs_shows_a_servers_lifecycle_and_stderr() {
    let d = DaemonBuilder::new()
        .fixture("a", &["--stderr-noise", "3"])
        .start()
        .await;
    d.wait_ready().await;
    let (code, _, err) = d.run_cli(&["ctl", "restart", "a"]).await;
    assert_eq!(code, 0, "{err}");
    d.wait_server("a", "a is ready again", |s| {
        s["state"] == "ready" && s["restarts"] == 1
    })
    .await;
    let (code, out, err) = d.run_cli(&["ctl", "logs", "a", "-n", "50"]).await;
    assert_eq!(code, 0, "{err}");
    let events: Vec<&str> = out.lines().filter(|l| l.starts_with("event |")).collect();
    assert!(
        events.iter().filter(|l| l.contains(" ready (pid ")).count() >= 2,
        "{out}"
    );
    assert!(events.iter().any(|l| l.contains(" ended (")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("stderr|")), "{out}");
    let (code, _, err) = d.run_cli(&["ctl", "logs", "nope"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("no server named 'nope'"), "{err}");
}

#[tokio::test]
async fn ctl_agents_lists_each_connection_with_its_client_era_and_calls() {
    let d = DaemonBuilder::new().fixture("a", &[]).start().await;
    d.wait_ready().await;
    let mut legacy = d.initialized_agent().await;
    let _busy = legacy.start_call("a__sleep", json!({"ms": 3000})).await;
    let mut modern = d.agent().await;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "modern-client", "version": "9"},
    });
    let r = modern
        .request("tools/list", Some(json!({"_meta": meta})))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let listed = eventually("both agents are listed, one with a call", WAIT, || async {
        let (code, out, _) = d.run_cli(&["ctl", "agents", "--json"]).await;
        let v: Value = serde_json::from_str(&out).ok()?;
        let agents = v["agents"].as_array()?.clone();
        let busy = agents
            .iter()
            .any(|a| a["in_flight"] == 1 && a["era"] == "legacy");
        (code == 0 && busy && agents.iter().any(|a| a["client"] == "modern-client"))
            .then_some(agents)
    })
    .await;
    let me = std::process::id() as i64;
    assert!(
        listed.iter().any(|a| a["pid"] == me),
        "peer pids: {listed:?}"
    );
    let modern_row = listed
        .iter()
        .find(|a| a["client"] == "modern-client")
        .cloned()
        .unwrap_or_default();
    assert_eq!(modern_row["era"], "modern", "{modern_row}");
    assert_eq!(modern_row["client_version"], "9", "{modern_row}");
    let (code, table, err) = d.run_cli(&["ctl", "agents"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        table.contains("modern-client 9") && table.contains("EXECUTABLE"),
        "{table}"
    );
}

#[tokio::test]
async fn ctl_metrics_counts_calls_errors_and_bytes_in_prometheus_format() {
    let d = DaemonBuilder::new()
        .fixture("a", &["--tools", "echo,error"])
        .start()
        .await;
    d.wait_ready().await;
    let mut agent = d.initialized_agent().await;
    for _ in 0..3 {
        agent.call("a__echo", json!({"text": "m"})).await;
    }
    let r = agent.call("a__nope", json!({})).await;
    assert_eq!(error_code(&r), Some(-32602));
    drop(agent);
    let text = eventually("the counters include the calls and bytes", WAIT, || async {
        let (code, out, _) = d.run_cli(&["ctl", "metrics"]).await;
        let calls = out.contains("mcpd_calls_total{server=\"a\",method=\"tools/call\"} 3");
        let bytes = out
            .lines()
            .find(|l| l.starts_with("mcpd_agent_bytes_received_total "))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .is_some_and(|n| n > 0);
        (code == 0 && calls && bytes).then_some(out)
    })
    .await;
    assert!(
        text.contains("mcpd_call_duration_seconds_count{server=\"a\",method=\"tools/call\"} 3"),
        "{text}"
    );
    assert!(text.contains("mcpd_server_up{server=\"a\"} 1"), "{text}");
    assert!(
        text.contains("# TYPE mcpd_call_duration_seconds histogram"),
        "{text}"
    );
}

#[tokio::test]
async fn ctl_status_shows_eras_and_transports_without_colour_when_piped() {
    let d = DaemonBuilder::new().fixture("a", &[]).start().await;
    d.wait_ready().await;
    let (code, out, err) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains('\u{1b}'),
        "no escape codes in a pipe: {out:?}"
    );
    let row = out
        .lines()
        .find(|l| l.starts_with("a "))
        .unwrap_or_default();
    assert!(
        row.contains("ready") && row.contains("stdio") && row.contains("legacy"),
        "{out}"
    );
}
