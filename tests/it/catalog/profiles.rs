//! What agents see of each server.
//!
//! Per-server tool allow/deny lists and description overrides, and named profiles chosen
//! on the socket or with `mcpd connect --profile`.

use crate::support::*;
use serde_json::{Value, json};
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[tokio::test]
async fn allow_and_deny_lists_and_description_overrides_shape_a_servers_tools() {
    let d = DaemonBuilder::new()
        .fixture_with(
            "a",
            &["--tools", "echo,error,add,sleep"],
            "[servers.a.tools]\nallow = [\"e*\", \"add\"]\ndeny = [\"error\"]\n[servers.a.tools.descriptions]\necho = \"Says it back.\"",
        )
        .start()
        .await;
    d.wait_ready().await;
    let mut agent = d.initialized_agent().await;
    assert_eq!(agent.tool_names().await, ["a__add", "a__echo"]);
    let r = agent.request("tools/list", None).await;
    let echo = r["result"]["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "a__echo"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(echo["description"], "Says it back.", "{echo}");
    let r = agent.call("a__sleep", json!({"ms": 1})).await;
    assert_eq!(
        error_code(&r),
        Some(-32602),
        "a hidden tool is unknown: {r}"
    );
}

fn two_servers() -> DaemonBuilder {
    DaemonBuilder::new()
        .fixture("a", &["--label", "A"])
        .fixture("b", &["--label", "B"])
        .profile(
            "just-a",
            "servers = [\"a\"]\ntools = [\"a__echo\", \"a__add\"]",
        )
}

#[tokio::test]
async fn a_profile_chosen_on_the_socket_shows_only_its_servers_and_tools() {
    let d = two_servers().start().await;
    d.wait_ready().await;
    let mut agent = d.agent().await;
    let r = agent
        .request("mcpd/profile", Some(json!({"name": "nope"})))
        .await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    assert!(error_message(&r).contains("just-a"), "{r}");
    let r = agent
        .request("mcpd/profile", Some(json!({"name": "just-a"})))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    agent.initialize().await;
    assert_eq!(agent.tool_names().await, ["a__add", "a__echo"]);
    let r = agent.call("b__echo", json!({"text": "x"})).await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    let r = agent.request("prompts/list", None).await;
    let names: Vec<&str> = r["result"]["prompts"]
        .as_array()
        .map(|p| p.iter().filter_map(|p| p["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["a__greet", "a__summarize"], "{r}");
    let r = agent
        .request(
            "resources/read",
            Some(json!({"uri": "mcpd:b:fixture://alpha"})),
        )
        .await;
    assert_eq!(error_code(&r), Some(-32002), "{r}");
    // Every other listing and route is filtered the same way (ARCHITECTURE.md's
    // invariant: a profile filters every listing and every routed request).
    for (method, key, field) in [
        ("resources/list", "resources", "uri"),
        (
            "resources/templates/list",
            "resourceTemplates",
            "uriTemplate",
        ),
    ] {
        // A server is ready once its handshake is done; its lists arrive just after.
        eventually(&format!("server a's {key} are listed"), WAIT, || async {
            let mut everyone = d.agent().await;
            let r = everyone.request(method, None).await;
            let of_a = |x: &Value| {
                x[field]
                    .as_str()
                    .is_some_and(|u| !u.contains(":b:") && !u.starts_with('b'))
            };
            r["result"][key].as_array()?.iter().any(of_a).then_some(())
        })
        .await;
        let r = agent.request(method, None).await;
        let listed: Vec<&str> = r["result"][key]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x[field].as_str()).collect())
            .unwrap_or_default();
        assert!(!listed.is_empty(), "{method}: {r}");
        assert!(
            listed
                .iter()
                .all(|u| !u.contains(":b:") && !u.starts_with("b")),
            "{method} lists only server a's: {r}"
        );
    }
    let r = agent
        .request("prompts/get", Some(json!({"name": "b__greet"})))
        .await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    let r = agent
        .request(
            "completion/complete",
            Some(json!({"ref": {"type": "ref/prompt", "name": "b__greet"}, "argument": {"name": "name", "value": "x"}})),
        )
        .await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    let r = agent
        .request(
            "prompts/get",
            Some(json!({"name": "a__greet", "arguments": {"name": "x"}})),
        )
        .await;
    assert!(
        r.get("result").is_some(),
        "the profile's own prompt is served: {r}"
    );

    // initialize's _meta can choose it too; without a profile, everything shows.
    let mut chooser = d.agent().await;
    let r = chooser
        .request(
            "initialize",
            Some(json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}, "_meta": {"mcpd/profile": "just-a"}})),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
    assert_eq!(chooser.tool_names().await, ["a__add", "a__echo"]);
    let mut everything = d.initialized_agent().await;
    assert!(
        everything
            .tool_names()
            .await
            .contains(&"b__echo".to_owned())
    );
    let r = everything.request("resources/list", None).await;
    assert!(
        r["result"]["resources"].as_array().is_some_and(|a| a
            .iter()
            .any(|x| x["uri"].as_str().is_some_and(|u| u.contains(":b:")))),
        "without a profile server b's resources show: {r}"
    );
}

#[tokio::test]
async fn mcpd_connect_with_a_profile_filters_what_a_stdio_client_sees() {
    let d = two_servers().start().await;
    d.wait_ready().await;
    let mut child = tokio::process::Command::new(mcpd_bin())
        .args(["connect", "--profile", "just-a", "--socket"])
        .arg(&d.socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start mcpd connect");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ];
    for r in requests {
        stdin
            .write_all(format!("{r}\n").as_bytes())
            .await
            .expect("write");
    }
    let list = within("the tools/list answer", async {
        loop {
            let line = lines.next_line().await.expect("read").expect("a line");
            let v: Value = serde_json::from_str(&line).expect("json");
            assert_ne!(
                v["id"], "mcpd-connect-profile",
                "the profile answer leaked: {v}"
            );
            if v["id"] == 2 {
                break v;
            }
        }
    })
    .await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["a__add", "a__echo"], "{list}");
    drop(stdin);

    let (code, _, err) = run_mcpd(&["connect", "--profile", "missing"], Some(&d.socket)).await;
    assert_ne!(code, 0);
    assert!(err.contains("no profile named 'missing'"), "{err}");
}

#[tokio::test]
async fn a_profile_naming_an_unknown_server_is_a_config_error() {
    let b = DaemonBuilder::new()
        .fixture("a", &[])
        .profile("p", "servers = [\"zzz\"]");
    let config = b.dir().join("bad.toml");
    std::fs::write(&config, b.config_text()).expect("write");
    let (code, _, err) = run_mcpd(
        &["check-config", "--config", config.to_str().expect("utf-8")],
        None,
    )
    .await;
    assert_eq!(code, 78, "{err}");
    assert!(
        err.contains("profiles.p.servers") && err.contains("zzz"),
        "{err}"
    );
}

#[tokio::test]
async fn a_restarted_daemon_lists_the_cached_catalog_at_once_and_calls_wait_for_the_server() {
    let mut d = DaemonBuilder::new()
        .fixture(
            "slow",
            &["--startup-delay-ms", "1500", "--tools", "echo,add"],
        )
        .start()
        .await;
    d.wait_ready().await;
    d.restart_daemon().await;
    // The server needs 1.5 s to start; the catalog is there before that.
    let mut agent = d.initialized_agent().await;
    assert_eq!(agent.tool_names().await, ["slow__add", "slow__echo"]);
    assert!(
        d.log_text().contains("listed the cached catalog"),
        "the list came from the cache"
    );
    // A call waits for the server rather than failing.
    let r = agent
        .call("slow__echo", json!({"text": "worth the wait"}))
        .await;
    assert_eq!(text(&r), "worth the wait", "{r}");
}

#[tokio::test]
async fn a_lazy_server_learns_its_tools_once_then_starts_on_its_first_call() {
    let b = DaemonBuilder::new();
    let rec = b.dir().join("rec");
    let rec_arg = rec.to_str().expect("utf-8").to_owned();
    let mut d = b
        .fixture_with(
            "lazy",
            &["--tools", "echo", "--record", &rec_arg],
            "start = \"lazy\"",
        )
        .start()
        .await;
    // Started once to fill the catalog cache, then idle.
    d.wait_server("lazy", "the server goes idle", |s| s["state"] == "idle")
        .await;
    assert_eq!(recorded_starts(&rec).len(), 1);
    d.restart_daemon().await;
    d.wait_server("lazy", "idle again after a restart", |s| {
        s["state"] == "idle"
    })
    .await;
    let mut agent = d.initialized_agent().await;
    assert_eq!(agent.tool_names().await, ["lazy__echo"]);
    assert_eq!(recorded_starts(&rec).len(), 1, "not started before a call");
    let r = agent.call("lazy__echo", json!({"text": "wake up"})).await;
    assert_eq!(text(&r), "wake up", "{r}");
    assert_eq!(recorded_starts(&rec).len(), 2);
    assert_eq!(d.server_status("lazy").await["state"], "ready");
}

#[tokio::test]
async fn an_idle_timeout_stops_a_server_and_the_next_call_starts_it_again() {
    let d = DaemonBuilder::new()
        .fixture_with("nap", &["--tools", "echo"], "idle_timeout = \"300ms\"")
        .start()
        .await;
    d.wait_ready().await;
    let mut agent = d.initialized_agent().await;
    let first = d.server_status("nap").await;
    d.wait_server("nap", "the server is stopped while idle", |s| {
        s["state"] == "idle"
    })
    .await;
    let r = agent.call("nap__echo", json!({"text": "again"})).await;
    assert_eq!(text(&r), "again", "{r}");
    let now = d.server_status("nap").await;
    assert_eq!(now["state"], "ready", "{now}");
    assert_ne!(status_pid(&now), status_pid(&first), "a new process");
}

#[tokio::test]
async fn a_server_shared_per_agent_gives_each_agent_its_own_process_and_stops_it_after_disconnect()
{
    let d = DaemonBuilder::new()
        .fixture_with("own", &["--tools", "pid,echo"], "share = \"agent\"")
        .start()
        .await;
    // It is started once to learn its tools, then waits for agents.
    d.wait_server("own", "the server learned its tools", |s| {
        s["state"] == "idle"
    })
    .await;
    let pid_of = |r: &Value| text(r).parse::<u32>().expect("a pid");
    let mut a = d.initialized_agent().await;
    let mut b = d.initialized_agent().await;
    assert_eq!(a.tool_names().await, ["own__echo", "own__pid"]);
    let pa = pid_of(&a.call("own__pid", json!({})).await);
    let pb = pid_of(&b.call("own__pid", json!({})).await);
    assert_ne!(pa, pb, "two agents, two processes");
    assert_eq!(
        pid_of(&a.call("own__pid", json!({})).await),
        pa,
        "the same one again"
    );
    let s = d.server_status("own").await;
    assert_eq!(s["instances"], 2, "{s}");
    drop(a);
    eventually(
        "the first agent's process stops after it leaves",
        WAIT,
        || async { (!alive(pa)).then_some(()) },
    )
    .await;
    assert!(alive(pb), "the other agent's process keeps running");
    d.wait_server("own", "one instance left", |s| s["instances"] == 1)
        .await;
    assert_eq!(pid_of(&b.call("own__pid", json!({})).await), pb);
}

/// A config with these `[servers.NAME]` fixture entries (name, args), in `dir`'s state.
fn fixture_config(dir: &std::path::Path, servers: &[(&str, &[&str])]) -> String {
    // Unpinned, as the daemons of the tests that use it: they change servers' lists.
    let mut t = format!(
        "[daemon]\nstate_dir = {:?}\npin = \"off\"\n",
        dir.join("state").to_string_lossy()
    );
    for (name, args) in servers {
        t.push_str(&format!(
            "[servers.{name}]\ncommand = {:?}\nargs = {}\n",
            fixture_bin(),
            serde_json::to_string(args).expect("args")
        ));
    }
    t
}

#[tokio::test]
async fn reload_applies_added_removed_and_changed_servers_without_touching_the_rest() {
    // Pinning would hold the changed lists (pins.rs); this test is about them reaching agents.
    let d = DaemonBuilder::new()
        .daemon("pin = \"off\"")
        .fixture("keep", &["--tools", "sleep,echo"])
        .fixture("change", &["--tools", "echo"])
        .fixture("gone", &["--tools", "echo"])
        .start()
        .await;
    d.wait_ready().await;
    let keep_pid = status_pid(&d.server_status("keep").await);
    let mut agent = d.initialized_agent().await;
    let call = agent.start_call("keep__sleep", json!({"ms": 1500})).await;
    let text_cfg = fixture_config(
        d.dir(),
        &[
            ("keep", &["--tools", "sleep,echo"]),
            ("change", &["--tools", "echo,add"]),
            ("fresh", &["--tools", "echo"]),
        ],
    );
    std::fs::write(&d.config, text_cfg).expect("write config");
    let (code, out, err) = d.run_cli(&["ctl", "reload"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("added fresh")
            && out.contains("removed gone")
            && out.contains("changed change"),
        "{out}"
    );
    // The call on the unchanged server finishes normally, on the same process.
    let r = agent.response(&call).await;
    assert!(r.get("result").is_some(), "{r}");
    assert_eq!(status_pid(&d.server_status("keep").await), keep_pid);
    eventually("the catalog follows the new config", WAIT, || async {
        let mut a = d.initialized_agent().await;
        let names = a.tool_names().await;
        (names.contains(&"fresh__echo".to_owned())
            && names.contains(&"change__add".to_owned())
            && !names.iter().any(|n| n.starts_with("gone__")))
        .then_some(())
    })
    .await;

    // An invalid config is refused with the check-config error; the old one stays.
    std::fs::write(&d.config, "[servers.bad]\nbogus = 1\n").expect("write config");
    let (code, _, err) = d.run_cli(&["ctl", "reload"]).await;
    assert_eq!(code, 78, "{err}");
    assert!(err.contains("unknown field `bogus`"), "{err}");
    let mut a = d.initialized_agent().await;
    assert_eq!(
        text(&a.call("fresh__echo", json!({"text": "still"})).await),
        "still"
    );

    // SIGHUP reloads too.
    let text_cfg = fixture_config(
        d.dir(),
        &[
            ("keep", &["--tools", "sleep,echo"]),
            ("hup", &["--tools", "echo"]),
        ],
    );
    std::fs::write(&d.config, text_cfg).expect("write config");
    d.signal(nix::sys::signal::Signal::SIGHUP);
    d.wait_status("the SIGHUP added server is ready", |s| {
        s["servers"].as_array().is_some_and(|v| {
            v.iter()
                .any(|r| r["name"] == "hup" && r["state"] == "ready")
        })
    })
    .await;
}
