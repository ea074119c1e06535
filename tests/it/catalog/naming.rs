//! Naming control: per-server prefixes, tool and prompt renames, and names shared by two servers.
//!
//! The prefixes are custom and empty; the tests also cover config errors, and naming
//! changes on reload and across daemon restarts.

use crate::support::*;
use serde_json::{Value, json};

fn names_of(list: &Value, field: &str) -> Vec<String> {
    list["result"][field]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

async fn prompt_names(agent: &mut Agent) -> Vec<String> {
    names_of(&agent.request("prompts/list", None).await, "prompts")
}

fn pid_of(r: &Value) -> u32 {
    text(r).parse().unwrap_or_else(|_| panic!("a pid: {r}"))
}

/// A config of fixture servers, each with its own args and extra TOML lines.
fn config(dir: &std::path::Path, servers: &[(&str, &[&str], &str)]) -> String {
    let mut t = format!(
        "[daemon]\nstate_dir = {:?}\n",
        dir.join("state").to_string_lossy()
    );
    for (name, args, extra) in servers {
        t.push_str(&format!(
            "[servers.{name}]\ncommand = {:?}\nargs = {}\n{extra}\n",
            fixture_bin(),
            serde_json::to_string(args).expect("args")
        ));
    }
    t
}

#[tokio::test]
async fn a_custom_prefix_and_renames_name_tools_and_prompts_and_calls_reach_the_original() {
    let record = tempfile::Builder::new()
        .prefix("mcpd-rec")
        .tempdir_in("/tmp")
        .expect("record dir");
    let rec = record.path().to_str().expect("utf-8");
    let d = DaemonBuilder::new()
        .fixture_with(
            "github",
            &["--tools", "echo,add,sleep", "--label", "G", "--record", rec],
            "prefix = \"gh\"\n\
             [servers.github.tools]\n\
             allow = [\"echo\", \"add\"]\n\
             descriptions = { echo = \"Says it back.\" }\n\
             rename = { echo = \"say\" }\n\
             [servers.github.prompts]\n\
             rename = { greet = \"hello\" }",
        )
        .profile("talk", "tools = [\"gh__say\"]")
        .start()
        .await;
    d.wait_ready().await;
    let mut agent = d.initialized_agent().await;
    // allow/deny and descriptions name the server's own tools; agents see the new names.
    assert_eq!(agent.tool_names().await, ["gh__add", "gh__say"]);
    let list = agent.request("tools/list", None).await;
    let say = list["result"]["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "gh__say"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(say["description"], "Says it back.", "{say}");
    let r = agent.call("gh__say", json!({"text": "hi"})).await;
    assert_eq!(text(&r), "hi", "{r}");
    let r = agent.call("gh__echo", json!({"text": "hi"})).await;
    assert_eq!(
        error_code(&r),
        Some(-32602),
        "the upstream name is not exposed: {r}"
    );
    let r = agent.call("github__add", json!({"a": 1, "b": 2})).await;
    assert_eq!(
        error_code(&r),
        Some(-32602),
        "the server name is not the prefix: {r}"
    );
    let pid = status_pid(&d.server_status("github").await).expect("a pid");
    let calls: Vec<Value> = recorded_requests(record.path(), pid)
        .into_iter()
        .filter(|m| m["method"] == "tools/call")
        .collect();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["params"]["name"], "echo");

    assert_eq!(
        prompt_names(&mut agent).await,
        ["gh__hello", "gh__summarize"]
    );
    let r = agent
        .request(
            "prompts/get",
            Some(json!({"name": "gh__hello", "arguments": {"name": "Ada"}})),
        )
        .await;
    let greeting = r["result"]["messages"][0]["content"]["text"].as_str();
    assert_eq!(greeting, Some("Hello, Ada! (from G)"), "{r}");
    let r = agent
        .request(
            "completion/complete",
            Some(json!({"ref": {"type": "ref/prompt", "name": "gh__hello"}, "argument": {"name": "name", "value": "A"}})),
        )
        .await;
    assert_eq!(
        r["result"]["completion"]["values"],
        json!(["Ada", "Alan"]),
        "{r}"
    );

    // Profiles match the names agents see.
    let mut talker = d.agent().await;
    let r = talker
        .request("mcpd/profile", Some(json!({"name": "talk"})))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    talker.initialize().await;
    assert_eq!(talker.tool_names().await, ["gh__say"]);
}

#[tokio::test]
async fn an_empty_prefix_shows_names_as_they_are_and_a_shared_name_stays_with_the_first_server() {
    let d = DaemonBuilder::new()
        .fixture_with(
            "a",
            &["--tools", "pid,echo,set_tools", "--label", "A"],
            "prefix = \"\"",
        )
        .start()
        .await;
    d.wait_ready().await;
    let pid_a = status_pid(&d.server_status("a").await).expect("a's pid");
    let mut agent = d.initialized_agent().await;
    assert_eq!(agent.tool_names().await, ["echo", "pid", "set_tools"]);
    assert_eq!(prompt_names(&mut agent).await, ["greet", "summarize"]);

    // b arrives later with the same empty prefix: its `pid`, `greet` and `summarize`
    // are rejected, its `add` is listed.
    let both = config(
        d.dir(),
        &[
            (
                "a",
                &["--tools", "pid,echo,set_tools", "--label", "A"],
                "prefix = \"\"",
            ),
            (
                "b",
                &["--tools", "pid,add", "--label", "B"],
                "prefix = \"\"",
            ),
        ],
    );
    std::fs::write(&d.config, both).expect("write config");
    let (code, out, err) = d.run_cli(&["ctl", "reload"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("added b"), "{out}");
    let b = d
        .wait_server("b", "b lists its tools with a name conflict", |s| {
            s["state"] == "ready" && s["name_conflicts"].as_array().is_some_and(|c| c.len() == 3)
        })
        .await;
    assert_eq!(
        b["name_conflicts"],
        json!([
            {"kind": "tool", "name": "pid", "held_by": "a"},
            {"kind": "prompt", "name": "greet", "held_by": "a"},
            {"kind": "prompt", "name": "summarize", "held_by": "a"},
        ]),
        "{b}"
    );
    assert_eq!(b["tools"], 1, "only b's `add` is listed: {b}");
    assert_eq!(d.server_status("a").await["name_conflicts"], json!([]));
    let pid_b = status_pid(&b).expect("b's pid");
    let mut agent = d.initialized_agent().await;
    assert_eq!(
        agent.tool_names().await,
        ["add", "echo", "pid", "set_tools"]
    );
    assert_eq!(pid_of(&agent.call("pid", json!({})).await), pid_a);
    let r = agent
        .request(
            "prompts/get",
            Some(json!({"name": "greet", "arguments": {"name": "Ada"}})),
        )
        .await;
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"].as_str(),
        Some("Hello, Ada! (from A)"),
        "{r}"
    );
    let (code, out, err) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("name conflict: tool pid is held by 'a'"),
        "{out}"
    );
    let log = d.log_text();
    assert!(
        log.lines().any(|l| l.contains("WARN")
            && l.contains("'b' also presents the tool name \"pid\", which 'a' had first")),
        "{log}"
    );

    // a drops `pid`: the next rebuild gives the name to b.
    let r = agent
        .call("set_tools", json!({"tools": ["echo", "set_tools"]}))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    d.wait_server("b", "b holds `pid` now", |s| {
        s["name_conflicts"]
            .as_array()
            .is_some_and(|c| c.iter().all(|c| c["name"] != "pid"))
    })
    .await;
    let mut agent = d.initialized_agent().await;
    assert_eq!(pid_of(&agent.call("pid", json!({})).await), pid_b);
}

#[tokio::test]
async fn a_prefix_changed_by_reload_renames_in_place_and_a_restarted_daemon_lists_the_cache_under_the_new_names()
 {
    let mut d = DaemonBuilder::new()
        .fixture("srv", &["--tools", "echo,add"])
        .start()
        .await;
    d.wait_ready().await;
    let pid = status_pid(&d.server_status("srv").await).expect("a pid");
    let mut agent = d.initialized_agent().await;
    assert_eq!(agent.tool_names().await, ["srv__add", "srv__echo"]);
    assert_eq!(
        prompt_names(&mut agent).await,
        ["srv__greet", "srv__summarize"]
    );

    let renamed = config(
        d.dir(),
        &[(
            "srv",
            &["--tools", "echo,add"],
            "prefix = \"p\"\n[servers.srv.prompts]\nrename = { greet = \"hi\" }",
        )],
    );
    std::fs::write(&d.config, renamed).expect("write config");
    let (code, out, err) = d.run_cli(&["ctl", "reload"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("renamed srv") && out.contains("changed none"),
        "{out}"
    );
    // The connected agent is told its lists changed.
    within("the agent hears that the tools changed", async {
        while let Some(m) = agent.recv().await {
            if m["method"] == "notifications/tools/list_changed" {
                return;
            }
        }
        panic!("the connection ended first");
    })
    .await;
    assert_eq!(agent.tool_names().await, ["p__add", "p__echo"]);
    assert_eq!(prompt_names(&mut agent).await, ["p__hi", "p__summarize"]);
    let r = agent.call("p__echo", json!({"text": "same process"})).await;
    assert_eq!(text(&r), "same process", "{r}");
    let r = agent.call("srv__echo", json!({"text": "x"})).await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    let s = d.server_status("srv").await;
    assert_eq!(
        status_pid(&s),
        Some(pid),
        "a naming change keeps the process: {s}"
    );

    // The catalog cache holds the server's own names: a daemon started with another
    // prefix lists the cached tools (the lazy server is not started) under that prefix.
    let lazy = config(
        d.dir(),
        &[(
            "srv",
            &["--tools", "echo,add"],
            "prefix = \"q\"\nstart = \"lazy\"",
        )],
    );
    std::fs::write(&d.config, lazy).expect("write config");
    d.restart_daemon().await;
    let s = d.server_status("srv").await;
    assert_eq!(s["state"], "idle", "{s}");
    let mut agent = d.initialized_agent().await;
    assert_eq!(agent.tool_names().await, ["q__add", "q__echo"]);
    assert_eq!(prompt_names(&mut agent).await, ["q__greet", "q__summarize"]);
    let r = agent.call("q__add", json!({"a": 2, "b": 3})).await;
    assert_eq!(text(&r), "5", "{r}");
}

#[tokio::test]
async fn bad_prefixes_and_renames_are_config_errors_naming_the_key() {
    let dir = tempfile::Builder::new()
        .prefix("mcpd-it")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let base = "[servers.gh]\ncommand = \"x\"\n";
    let long = "n".repeat(61);
    let cases = [
        (format!("{base}prefix = \"g h\"\n"), "servers.gh.prefix"),
        (format!("{base}prefix = \"{long}\"\n"), "servers.gh.prefix"),
        (
            format!("{base}[servers.gh.tools]\nrename = {{ search = \"a.b\" }}\n"),
            "servers.gh.tools.rename.search",
        ),
        (
            format!("{base}[servers.gh.tools]\nrename = {{ search = \"{long}\" }}\n"),
            "servers.gh.tools.rename.search",
        ),
        (
            format!("{base}[servers.gh.prompts]\nrename = {{ a = \"x\", b = \"x\" }}\n"),
            "servers.gh.prompts.rename.b",
        ),
    ];
    for (text, key) in cases {
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, &text).expect("write config");
        let (code, _, err) = run_mcpd(
            &["check-config", "--config", path.to_str().expect("utf-8")],
            None,
        )
        .await;
        assert_eq!(code, 78, "{text}: {err}");
        assert!(
            err.contains("bad.toml") && err.contains(key),
            "{text}: {err}"
        );
    }
    let good = dir.path().join("good.toml");
    std::fs::write(
        &good,
        format!("{base}prefix = \"\"\n[servers.gh.tools]\nrename = {{ search_repositories = \"search\" }}\n"),
    )
    .expect("write config");
    let (code, out, err) = run_mcpd(
        &["check-config", "--config", good.to_str().expect("utf-8")],
        None,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("names: prefix \"\", 1 tool and 0 prompt renames"),
        "{out}"
    );
}

#[tokio::test]
async fn a_call_under_a_custom_prefix_to_a_stopped_server_says_the_server_is_stopped() {
    let d = DaemonBuilder::new()
        .fixture_with("github", &[], "prefix = \"gh\"")
        .start()
        .await;
    d.wait_ready().await;
    let (code, _, err) = d.run_cli(&["ctl", "stop", "github"]).await;
    assert_eq!(code, 0, "{err}");
    d.wait_server("github", "stopped", |s| s["state"] == "stopped")
        .await;
    let mut a = d.initialized_agent().await;
    let r = a.call("gh__echo", json!({"text": "x"})).await;
    assert_eq!(error_code(&r), Some(-32010), "{r}");
    let msg = error_message(&r);
    assert!(msg.contains("'github'") && msg.contains("stopped"), "{msg}");
}
