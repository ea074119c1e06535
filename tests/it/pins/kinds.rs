//! Every kind is pinned once a server has pins (issue #54).
//!
//! A server whose first listing had only tools, and which declares prompts and resources
//! after a restart in the same daemon run (as after an `npx` update), has them held; so
//! has one whose first `prompts/list` failed. With `pin = "off"` the same lists reach
//! agents (so each test can fail).

use crate::support::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// `fx` (pinned, trust-first) and `open` (`pin = "off"`): the same fixture, each reading
/// its own overrides file at every start, with its own resource scheme.
fn pair(b: DaemonBuilder, tools: &str, first: &Value) -> (DaemonBuilder, PathBuf, PathBuf) {
    let fx = b.dir().join("fx-overrides.json");
    let open = b.dir().join("open-overrides.json");
    for file in [&fx, &open] {
        std::fs::write(file, first.to_string()).expect("overrides");
    }
    let args = |file: &Path, scheme: &'static str| {
        let file = file.to_str().expect("utf-8").to_owned();
        vec![
            "--tools".to_owned(),
            tools.to_owned(),
            "--resource-scheme".to_owned(),
            scheme.to_owned(),
            "--overrides".to_owned(),
            file,
        ]
    };
    let b = twins(b, &args(&fx, "fx"), &args(&open, "open"));
    (b, fx, open)
}

/// `b` with the fixture `fx` run with `fa`, pinned, and its twin `open` run with `oa`
/// and `pin = "off"`, which shows what agents get without pins.
pub(crate) fn twins(b: DaemonBuilder, fa: &[String], oa: &[String]) -> DaemonBuilder {
    let fa: Vec<&str> = fa.iter().map(String::as_str).collect();
    let oa: Vec<&str> = oa.iter().map(String::as_str).collect();
    b.fixture("fx", &fa)
        .fixture_with("open", &oa, "pin = \"off\"")
}

async fn names(a: &mut Agent, method: &str, field: &str, key: &str) -> Vec<String> {
    let r = a.request(method, Some(json!({}))).await;
    r["result"][field]
        .as_array()
        .unwrap_or_else(|| panic!("{method}: {r}"))
        .iter()
        .filter_map(|i| i[key].as_str().map(str::to_owned))
        .collect()
}

/// Kills the server's process (a crash: the supervisor starts it again at once) and
/// waits for the new one to be ready.
async fn crash_and_wait(d: &Daemon, server: &str) {
    let old = status_pid(&d.server_status(server).await).expect("a pid");
    assert!(send_signal(old, nix::sys::signal::Signal::SIGKILL));
    d.wait_server(server, "started again", |s| {
        s["state"] == "ready" && status_pid(s).is_some_and(|p| p != old)
    })
    .await;
}

fn held_count(row: &Value) -> u64 {
    row["pins"]["held"].as_u64().unwrap_or(0)
}

/// Asserts `r` is the held error (-32024) naming `name`.
fn held(r: &Value, name: &str) {
    assert_eq!(error_code(r), Some(-32024), "a held definition's code: {r}");
    assert!(r.to_string().contains(name), "{r}");
}

#[tokio::test]
async fn prompts_and_resources_a_server_declares_after_a_tools_only_first_listing_are_held() {
    // The first start declares tools only.
    let only_tools = json!({"no_prompts": true, "no_resources": true});
    let (b, fx, open) = pair(DaemonBuilder::new(), "echo", &only_tools);
    let d = b.start().await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    eventually("both servers' tools", WAIT, || async {
        let tools = d.initialized_agent().await.tool_names().await;
        (tools.contains(&"fx__echo".to_owned()) && tools.contains(&"open__echo".to_owned()))
            .then_some(())
    })
    .await;
    assert_eq!(held_count(&d.server_status("fx").await), 0);
    // The new version declares prompts, resources and a template: the process crashes
    // and is started again by the same daemon.
    for file in [&fx, &open] {
        std::fs::write(file, "{}").expect("overrides");
    }
    crash_and_wait(&d, "open").await;
    crash_and_wait(&d, "fx").await;
    // Without pinning they reach agents: the attack works.
    eventually("open's prompts and resources listed", WAIT, || async {
        let mut a = d.initialized_agent().await;
        let prompts = names(&mut a, "prompts/list", "prompts", "name").await;
        let resources = names(&mut a, "resources/list", "resources", "uri").await;
        (prompts.contains(&"open__greet".to_owned())
            && resources.contains(&"open://alpha".to_owned()))
        .then_some(())
    })
    .await;
    // Pinned: greet, summarize, alpha, beta and the template wait for a person.
    let row = d
        .wait_server("fx", "fx's new kinds held", |r| held_count(r) == 5)
        .await;
    assert_eq!(row["pins"]["mode"], "trust-first", "{row}");
    let prompts = names(&mut a, "prompts/list", "prompts", "name").await;
    assert!(
        !prompts.iter().any(|p| p.starts_with("fx__")),
        "no prompt of fx is listed: {prompts:?}"
    );
    let resources = names(&mut a, "resources/list", "resources", "uri").await;
    assert!(
        !resources.iter().any(|r| r.starts_with("fx://")),
        "no resource of fx is listed: {resources:?}"
    );
    let templates = a
        .request("resources/templates/list", Some(json!({})))
        .await
        .to_string();
    assert!(
        !templates.contains("fx://items"),
        "nor its template: {templates}"
    );
    let r = a
        .request(
            "prompts/get",
            Some(json!({"name": "fx__greet", "arguments": {"name": "x"}})),
        )
        .await;
    held(&r, "fx__greet");
    let (code, out, err) = d.run_cli(&["ctl", "diff", "fx"]).await;
    assert_eq!(code, 0, "{err}");
    for want in [
        "5 held",
        "new prompt \"greet\"",
        "new resource \"fx://alpha\"",
        "new resource template \"fx://items/{id}\"",
    ] {
        assert!(out.contains(want), "ctl diff shows {want}:\n{out}");
    }
    // The tools approved at first are served as before.
    let r = a.call("fx__echo", json!({"text": "still"})).await;
    assert_eq!(text(&r), "still", "{r}");
    let (code, _, err) = d.run_cli(&["ctl", "approve", "fx"]).await;
    assert_eq!(code, 0, "{err}");
    eventually("fx's prompts approved", WAIT, || async {
        let mut a = d.initialized_agent().await;
        let prompts = names(&mut a, "prompts/list", "prompts", "name").await;
        prompts.contains(&"fx__greet".to_owned()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_first_listing_with_nothing_in_it_is_pinned_and_stays_so_across_a_daemon_restart() {
    // The first start lists no tools and declares nothing else: an empty first listing,
    // approved, is written to the pin file, so after the daemon restarts (and the server
    // comes back with prompts and resources) the server still has pins.
    let nothing = json!({"no_prompts": true, "no_resources": true});
    let (b, fx, open) = pair(DaemonBuilder::new(), "", &nothing);
    let mut d = b.start().await;
    d.wait_ready().await;
    for file in [&fx, &open] {
        std::fs::write(file, "{}").expect("overrides");
    }
    d.restart_daemon().await;
    d.wait_ready().await;
    eventually("open's prompts listed", WAIT, || async {
        let mut a = d.initialized_agent().await;
        let prompts = names(&mut a, "prompts/list", "prompts", "name").await;
        prompts.contains(&"open__greet".to_owned()).then_some(())
    })
    .await;
    d.wait_server("fx", "fx's new kinds held", |r| held_count(r) == 5)
        .await;
    let mut a = d.initialized_agent().await;
    let prompts = names(&mut a, "prompts/list", "prompts", "name").await;
    assert!(
        !prompts.iter().any(|p| p.starts_with("fx__")),
        "{prompts:?}"
    );
    let pins = d.dir().join("state/pins/fx.json");
    let text = std::fs::read_to_string(&pins).expect("the pin file of an empty first listing");
    let file: Value = serde_json::from_str(&text).expect("pin file JSON");
    assert_eq!(file["version"], 1, "the format is unchanged: {text}");
    assert_eq!(file["approved"], json!([]), "{text}");
}

#[tokio::test]
async fn a_failed_first_prompts_list_is_an_empty_approved_list_and_a_later_one_is_held() {
    let (b, _fx, _open) = pair(
        DaemonBuilder::new(),
        "echo,add_prompt",
        &json!({"fail_prompts_list": 1}),
    );
    let d = b.start().await;
    d.wait_ready().await;
    eventually("both servers' first prompts/list failed", WAIT, || async {
        let log = d.log_text();
        let failed = |s: &str| {
            log.lines()
                .any(|l| l.contains(s) && l.contains("could not fetch prompts/list"))
        };
        (failed("upstream=fx") && failed("upstream=open")).then_some(())
    })
    .await;
    let mut a = d.initialized_agent().await;
    assert_eq!(held_count(&d.server_status("fx").await), 0);
    // A new prompt, announced: mcpd fetches the prompt list again, and now it comes.
    for server in ["fx", "open"] {
        let r = a
            .call(&format!("{server}__add_prompt"), json!({"name": "sneaky"}))
            .await;
        assert_eq!(text(&r), "ok", "{r}");
    }
    // Without pinning the list reaches agents: the attack works.
    eventually("open's prompts listed", WAIT, || async {
        let mut a = d.initialized_agent().await;
        let prompts = names(&mut a, "prompts/list", "prompts", "name").await;
        prompts.contains(&"open__sneaky".to_owned()).then_some(())
    })
    .await;
    d.wait_server("fx", "fx's prompts held", |r| held_count(r) == 3)
        .await;
    let prompts = names(&mut a, "prompts/list", "prompts", "name").await;
    assert!(
        !prompts.iter().any(|p| p.starts_with("fx__")),
        "no prompt of fx is listed: {prompts:?}"
    );
    let r = a
        .request("prompts/get", Some(json!({"name": "fx__sneaky"})))
        .await;
    held(&r, "fx__sneaky");
    let (_, out, _) = d.run_cli(&["ctl", "diff", "fx"]).await;
    for want in ["new prompt \"greet\"", "new prompt \"sneaky\""] {
        assert!(out.contains(want), "ctl diff shows {want}:\n{out}");
    }
}
