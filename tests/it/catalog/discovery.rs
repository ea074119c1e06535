//! Discovery mode: agents see pinned tools and three meta-tools.
//!
//! They find tools by what they want to do, describe (and so activate) them, and call any
//! tool through mcpd__call_tool exactly as directly; a profile's hidden tools are never
//! found, described or called.

use crate::support::*;
use serde_json::{Value, json};

fn names(r: &Value) -> Vec<String> {
    r["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool list: {r}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

fn found(r: &Value) -> Vec<String> {
    r["result"]["structuredContent"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("find results: {r}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

const META: [&str; 3] = [
    "mcpd__find_tools",
    "mcpd__describe_tools",
    "mcpd__call_tool",
];

#[tokio::test]
async fn an_agent_in_discover_mode_finds_describes_activates_and_calls_tools() {
    let d = DaemonBuilder::new()
        .daemon("tools = \"discover\"\npinned = [\"a__echo\"]")
        .fixture("a", &["--tools", "echo,add"])
        .fixture("b", &["--tools", "echo,sleep,progress"])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let listed = names(&a.request("tools/list", None).await);
    assert_eq!(listed, ["a__echo", META[0], META[1], META[2]]);
    let list = a.request("tools/list", None).await;
    let find_def = list["result"]["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == META[0]))
        .cloned()
        .expect("find_tools listed");
    assert!(find_def["outputSchema"].is_object(), "{find_def}");

    // find: ranked, with server, summary and score, as text and structured content.
    let r = a
        .call(META[0], json!({"query": "add two numbers together"}))
        .await;
    assert_eq!(found(&r).first().map(String::as_str), Some("a__add"), "{r}");
    let first = &r["result"]["structuredContent"]["tools"][0];
    assert_eq!(first["server"], "a", "{r}");
    assert_eq!(first["description"], "Adds two numbers.", "{r}");
    assert!(first["score"].as_f64().is_some_and(|s| s > 0.0), "{r}");
    assert!(text(&r).contains("a__add"), "{r}");
    let r = a
        .call(META[0], json!({"query": "echo", "server": "b"}))
        .await;
    assert_eq!(found(&r), ["b__echo"], "{r}");
    let r = a.call(META[0], json!({"query": "*", "limit": 50})).await;
    assert_eq!(
        found(&r),
        ["a__add", "a__echo", "b__echo", "b__progress", "b__sleep"],
        "an empty or * query lists by server: {r}"
    );
    let r = a.call(META[0], json!({"query": "x", "limit": 0})).await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");

    // describe: full definitions; the tool joins the list and the agent is told.
    let r = a
        .call(META[1], json!({"names": ["b__sleep", "b__nosuch"]}))
        .await;
    let defs = r["result"]["structuredContent"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(defs.len(), 1, "{r}");
    assert_eq!(defs[0]["name"], "b__sleep");
    assert!(defs[0]["inputSchema"].is_object(), "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["unknown"][0]["name"], "b__nosuch",
        "{r}"
    );
    // It may have come before the describe's answer; it is sent before the next reply.
    let r = a.request("ping", None).await;
    assert!(r.get("result").is_some(), "{r}");
    assert!(
        a.notifications
            .iter()
            .any(|m| m["method"] == "notifications/tools/list_changed"),
        "the agent is told its list changed: {:?}",
        a.notifications
    );
    let listed = names(&a.request("tools/list", None).await);
    assert_eq!(listed, ["a__echo", "b__sleep", META[0], META[1], META[2]]);
    // The activated tool is callable directly, and any tool through call_tool.
    let r = a.call("b__sleep", json!({"ms": 1})).await;
    assert!(r.get("result").is_some(), "{r}");
    let via = a
        .call(
            META[2],
            json!({"name": "b__echo", "arguments": {"text": "hi"}}),
        )
        .await;
    let direct = a.call("b__echo", json!({"text": "hi"})).await;
    assert_eq!(
        via["result"], direct["result"],
        "the same result as a direct call"
    );
    // Progress flows as for a direct call.
    let id = json!(a.fresh_id());
    a.send(
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": META[2], "arguments": {"name": "b__progress", "arguments": {"steps": 2}},
        "_meta": {"progressToken": "p1"}}}),
    )
    .await;
    let r = a.response(&id).await;
    assert!(r.get("result").is_some(), "{r}");
    assert!(
        a.notifications.iter().any(
            |n| n["method"] == "notifications/progress" && n["params"]["progressToken"] == "p1"
        ),
        "progress reached the agent under its own token: {:?}",
        a.notifications
    );
    // An unknown name: the direct call's error, with the nearest names.
    let r = a
        .call(META[2], json!({"name": "b__slep", "arguments": {}}))
        .await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    assert!(
        r["error"]["data"]["nearest"]
            .as_array()
            .is_some_and(|n| n.iter().any(|x| x == "b__sleep")),
        "{r}"
    );
    let direct = a.call("b__slep", json!({})).await;
    assert_eq!(direct["error"]["message"], r["error"]["message"], "{r}");

    // `mcpd ctl tools` still lists every tool; `--search` ranks like find_tools.
    let (code, out, err) = d.run_cli(&["ctl", "tools"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("b__progress") && out.contains("a__add"),
        "{out}"
    );
    let (code, out, err) = d
        .run_cli(&["ctl", "tools", "--search", "add two numbers"])
        .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines().next().is_some_and(|l| l.starts_with("a__add")),
        "{out}"
    );
}

#[tokio::test]
async fn a_profiles_hidden_tools_are_never_found_described_or_called() {
    let d = DaemonBuilder::new()
        .profile("narrow", "servers = [\"a\"]\ntools = \"discover\"")
        .fixture("a", &["--tools", "echo"])
        .fixture("b", &["--tools", "echo,add"])
        .start()
        .await;
    d.wait_ready().await;
    // Without a profile: every tool, as before.
    let mut all = d.initialized_agent().await;
    assert_eq!(all.tool_names().await.len(), 3);
    let mut a = d.agent().await;
    let r = a
        .request("mcpd/profile", Some(json!({"name": "narrow"})))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    a.initialize().await;
    let listed = names(&a.request("tools/list", None).await);
    assert_eq!(listed, META);
    let r = a.call(META[0], json!({"query": "add numbers"})).await;
    assert!(found(&r).iter().all(|n| n.starts_with("a__")), "{r}");
    let r = a.call(META[0], json!({"query": "*"})).await;
    assert_eq!(found(&r), ["a__echo"], "{r}");
    let r = a.call(META[1], json!({"names": ["b__add"]})).await;
    assert_eq!(r["result"]["structuredContent"]["tools"], json!([]), "{r}");
    let r = a
        .call(
            META[2],
            json!({"name": "b__add", "arguments": {"a": 1, "b": 2}}),
        )
        .await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    assert!(
        !r.to_string().contains("b__add\"]")
            && r["error"]["data"]["nearest"].as_array().is_some_and(|n| n
                .iter()
                .all(|x| x.as_str().is_some_and(|x| x.starts_with("a__")))),
        "nearest names are the profile's own: {r}"
    );
}

#[tokio::test]
async fn discover_above_switches_to_discovery_when_a_reload_grows_the_list() {
    let d = DaemonBuilder::new()
        .daemon("tools = \"discover\"\ndiscover_above = 2")
        .fixture("a", &["--tools", "echo,add"])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    assert_eq!(
        names(&a.request("tools/list", None).await),
        ["a__add", "a__echo"],
        "at most 2 tools: all of them"
    );
    let mut cfg = std::fs::read_to_string(&d.config).expect("config");
    cfg.push_str(&format!(
        "[servers.b]\ncommand = {:?}\nargs = [\"--tools\", \"echo\"]\n",
        fixture_bin()
    ));
    std::fs::write(&d.config, cfg).expect("write config");
    let (code, _, err) = d.run_cli(&["ctl", "reload"]).await;
    assert_eq!(code, 0, "{err}");
    let start = std::time::Instant::now();
    while !a
        .notifications
        .iter()
        .any(|m| m["method"] == "notifications/tools/list_changed")
    {
        assert!(
            start.elapsed() < WAIT,
            "the agent is never told its list changed"
        );
        let r = a.request("ping", None).await;
        assert!(r.get("result").is_some(), "{r}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The change came with the new catalog: the list is the discovery list now.
    assert_eq!(names(&a.request("tools/list", None).await), META);
}

#[tokio::test]
async fn mcpd_and_bad_tool_modes_are_refused_in_the_config() {
    let dir = tempfile::Builder::new()
        .prefix("mcpd-it")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let cases = [
        ("[servers.mcpd]\ncommand = \"x\"\n", "reserved"),
        (
            "[servers.fs]\ncommand = \"x\"\nprefix = \"mcpd\"\n",
            "reserved",
        ),
        ("[daemon]\ntools = \"some\"\n", "daemon.tools"),
        ("[profiles.p]\ntools = \"every\"\n", "profiles.p.tools"),
    ];
    for (text, want) in cases {
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, text).expect("write");
        let (code, _, err) = run_mcpd(
            &["check-config", "--config", path.to_str().expect("utf-8")],
            None,
        )
        .await;
        assert_eq!(code, 78, "{text}: {err}");
        assert!(err.contains(want), "{text}: {err}");
    }
}

#[tokio::test]
async fn call_tool_refuses_what_is_not_a_call_and_fills_in_missing_arguments() {
    let d = DaemonBuilder::new()
        .daemon("tools = \"discover\"")
        .fixture("a", &["--tools", "echo"])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    for (args, why) in [
        (
            json!({"name": 7, "arguments": {}}),
            "qualified name of a tool",
        ),
        (
            json!({"arguments": {"text": "x"}}),
            "qualified name of a tool",
        ),
        (
            json!({"name": "a__echo", "arguments": [1]}),
            "must be an object",
        ),
        (
            json!({"name": "a__echo", "arguments": "x"}),
            "must be an object",
        ),
        (json!({"name": "mcpd__find_tools"}), "own tools directly"),
    ] {
        let r = a.call(META[2], args.clone()).await;
        assert_eq!(error_code(&r), Some(-32602), "{args}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(why)),
            "{args}: {r}"
        );
    }
    // Arguments absent or null: the tool is called with an empty object.
    for args in [
        json!({"name": "a__echo"}),
        json!({"name": "a__echo", "arguments": null}),
    ] {
        let via = a.call(META[2], args.clone()).await;
        let direct = a.call("a__echo", json!({})).await;
        assert_eq!(via["result"], direct["result"], "{args}: {via}");
    }
    // The daemon is still there for the next call.
    let r = a
        .call(
            META[2],
            json!({"name": "a__echo", "arguments": {"text": "ok"}}),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
}
