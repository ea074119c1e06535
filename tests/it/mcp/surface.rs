//! The rest of MCP through mcpd.
//!
//! Prompts, resources (with colliding URIs), completion, subscriptions, logging, list
//! changes, and tool results checked on the way.

use crate::support::*;
use serde_json::{Value, json};

async fn list(a: &mut Agent, method: &str, field: &str) -> Vec<Value> {
    let r = a.request(method, Some(json!({}))).await;
    r["result"][field]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("{method}: {r}"))
}

fn strings(items: &[Value], key: &str) -> Vec<String> {
    items
        .iter()
        .filter_map(|i| i[key].as_str().map(str::to_owned))
        .collect()
}

/// Waits until the daemon lists `want` resources: a server is ready once its handshake is
/// done, and its lists arrive just after.
async fn wait_resources(d: &Daemon, want: usize) {
    eventually("the servers' resources are listed", WAIT, || async {
        let mut a = d.agent().await;
        let r = a.request("resources/list", Some(json!({}))).await;
        let n = r["result"]["resources"].as_array().map_or(0, Vec::len);
        (n == want).then_some(())
    })
    .await;
}

/// Waits for a notification with this method, skipping others.
async fn notification(a: &mut Agent, method: &str) -> Value {
    within(&format!("a {method} notification"), async {
        loop {
            let m = a.recv().await.expect("connection open");
            if m["method"] == method {
                break m;
            }
        }
    })
    .await
}

#[tokio::test]
async fn prompts_are_qualified_got_and_completed_through_their_server() {
    let d = DaemonBuilder::new()
        .fixture("a", &["--label", "A"])
        .fixture("b", &["--label", "B", "--no-prompts"])
        .start()
        .await;
    d.wait_ready().await;
    let mut agent = d.initialized_agent().await;
    let caps = &agent.initialize().await["result"]["capabilities"];
    assert!(
        caps["prompts"].is_object() && caps["resources"].is_object(),
        "{caps}"
    );
    let prompts = list(&mut agent, "prompts/list", "prompts").await;
    assert_eq!(strings(&prompts, "name"), ["a__greet", "a__summarize"]);
    let r = agent
        .request(
            "prompts/get",
            Some(json!({"name": "a__greet", "arguments": {"name": "Ada"}})),
        )
        .await;
    let text = r["result"]["messages"][0]["content"]["text"].as_str();
    assert_eq!(text, Some("Hello, Ada! (from A)"), "{r}");
    let r = agent
        .request("prompts/get", Some(json!({"name": "a__nope"})))
        .await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    let r = agent
        .request(
            "completion/complete",
            Some(json!({"ref": {"type": "ref/prompt", "name": "a__greet"}, "argument": {"name": "name", "value": "A"}})),
        )
        .await;
    assert_eq!(
        r["result"]["completion"]["values"],
        json!(["Ada", "Alan"]),
        "{r}"
    );
}

#[tokio::test]
async fn colliding_resource_uris_are_qualified_and_each_read_reaches_its_own_server() {
    let d = DaemonBuilder::new()
        .fixture("a", &["--label", "A", "--resources", "shared,only-a"])
        .fixture("b", &["--label", "B", "--resources", "shared"])
        .start()
        .await;
    d.wait_ready().await;
    wait_resources(&d, 3).await;
    let mut agent = d.initialized_agent().await;
    let uris = strings(
        &list(&mut agent, "resources/list", "resources").await,
        "uri",
    );
    assert_eq!(
        uris,
        [
            "fixture://only-a",
            "mcpd:a:fixture://shared",
            "mcpd:b:fixture://shared"
        ]
    );
    // (the URI asked for, the text, the URI the contents carry back)
    for (uri, want, shown) in [
        ("fixture://only-a", "only-a from A", "fixture://only-a"),
        (
            "mcpd:a:fixture://shared",
            "shared from A",
            "mcpd:a:fixture://shared",
        ),
        (
            "mcpd:b:fixture://shared",
            "shared from B",
            "mcpd:b:fixture://shared",
        ),
        // The qualified form works for any resource, and for template expansions.
        (
            "mcpd:a:fixture://only-a",
            "only-a from A",
            "fixture://only-a",
        ),
        (
            "mcpd:b:fixture://items/7",
            "item 7 from B",
            "fixture://items/7",
        ),
    ] {
        let r = agent
            .request("resources/read", Some(json!({"uri": uri})))
            .await;
        let content = &r["result"]["contents"][0];
        assert_eq!(content["text"], want, "{uri}: {r}");
        assert_eq!(content["uri"], shown, "{uri}: {r}");
    }
    // Both servers' templates match an unqualified expansion: the agent is told what to do.
    let r = agent
        .request("resources/read", Some(json!({"uri": "fixture://items/7"})))
        .await;
    assert_eq!(error_code(&r), Some(-32002), "{r}");
    assert!(error_message(&r).contains("mcpd:SERVER:"), "{r}");
    let templates = list(&mut agent, "resources/templates/list", "resourceTemplates").await;
    assert_eq!(
        strings(&templates, "uriTemplate"),
        ["mcpd:a:fixture://items/{id}", "mcpd:b:fixture://items/{id}"]
    );
    let r = agent
        .request("resources/read", Some(json!({"uri": "fixture://nowhere"})))
        .await;
    assert_eq!(error_code(&r), Some(-32002), "{r}");
}

#[tokio::test]
async fn list_changes_reach_every_agent_once_and_subscriptions_only_their_subscriber() {
    // Pinning would hold the changed lists (pins.rs); this test is about them reaching agents.
    let d = DaemonBuilder::new()
        .daemon("pin = \"off\"")
        .fixture("a", &[])
        .start()
        .await;
    d.wait_ready().await;
    wait_resources(&d, 2).await;
    let mut watcher = d.initialized_agent().await;
    let mut other = d.initialized_agent().await;
    let r = watcher
        .request(
            "resources/subscribe",
            Some(json!({"uri": "fixture://alpha"})),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let r = other
        .call("a__touch", json!({"uri": "fixture://alpha"}))
        .await;
    assert_eq!(text(&r), "touched", "{r}");
    let n = notification(&mut watcher, "notifications/resources/updated").await;
    assert_eq!(n["params"]["uri"], "fixture://alpha", "{n}");

    let r = other.call("a__add_prompt", json!({"name": "fresh"})).await;
    assert_eq!(text(&r), "ok", "{r}");
    notification(&mut watcher, "notifications/prompts/list_changed").await;
    notification(&mut other, "notifications/prompts/list_changed").await;
    let prompts = strings(&list(&mut other, "prompts/list", "prompts").await, "name");
    assert!(prompts.contains(&"a__fresh".to_owned()), "{prompts:?}");
    let r = other
        .call("a__add_resource", json!({"name": "gamma"}))
        .await;
    assert_eq!(text(&r), "ok", "{r}");
    notification(&mut watcher, "notifications/resources/list_changed").await;
    // The other agent never subscribed, so it saw no update: the next message it gets
    // after a ping is the ping's answer.
    let id = json!(other.fresh_id());
    other
        .send(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
        .await;
    loop {
        let m = within("the ping answer", other.recv()).await.expect("open");
        assert_ne!(m["method"], "notifications/resources/updated", "{m}");
        if m["id"] == id {
            break;
        }
    }
    // Unsubscribed, the watcher hears no more; a ping answer comes first.
    let r = watcher
        .request(
            "resources/unsubscribe",
            Some(json!({"uri": "fixture://alpha"})),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
    other
        .call("a__touch", json!({"uri": "fixture://alpha"}))
        .await;
    let id = json!(watcher.fresh_id());
    watcher
        .send(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
        .await;
    loop {
        let m = within("the ping answer", watcher.recv())
            .await
            .expect("open");
        assert_ne!(m["method"], "notifications/resources/updated", "{m}");
        if m["id"] == id {
            break;
        }
    }
}

#[tokio::test]
async fn log_messages_reach_only_the_calling_agent_at_its_level() {
    let d = DaemonBuilder::new().fixture("a", &[]).start().await;
    d.wait_ready().await;
    let mut caller = d.initialized_agent().await;
    let mut bystander = d.initialized_agent().await;
    let id = caller
        .start_call("a__log", json!({"message": "hello", "level": "info"}))
        .await;
    let n = notification(&mut caller, "notifications/message").await;
    assert_eq!(n["params"]["data"], "hello", "{n}");
    assert_eq!(text(&caller.response(&id).await), "logged");
    // A level set by the agent filters its own calls only.
    let r = caller
        .request("logging/setLevel", Some(json!({"level": "error"})))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let id = caller
        .start_call("a__log", json!({"message": "quiet", "level": "info"}))
        .await;
    // A list change may come between (a server's lists arriving after the agent
    // initialized); a log message before the answer is the failure.
    let first = within("the answer", async {
        loop {
            let m = caller.recv().await.expect("open");
            if m["method"] == "notifications/message" || m.get("id").is_some() {
                break m;
            }
        }
    })
    .await;
    assert_eq!(
        first["id"], id,
        "an info message passed an error threshold: {first}"
    );
    let id = bystander
        .start_call("a__log", json!({"message": "mine", "level": "info"}))
        .await;
    let n = notification(&mut bystander, "notifications/message").await;
    assert_eq!(n["params"]["data"], "mine", "{n}");
    bystander.response(&id).await;
}

#[tokio::test]
async fn tool_results_are_checked_before_they_reach_agents() {
    let d = DaemonBuilder::new()
        .daemon("max_media_bytes = 1000")
        .fixture("a", &[])
        .start()
        .await;
    d.wait_ready().await;
    let mut agent = d.initialized_agent().await;
    let r = agent.call("a__bad_result", json!({})).await;
    assert_eq!(error_code(&r), Some(-32015), "{r}");
    assert!(error_message(&r).contains("not a CallToolResult"), "{r}");

    let r = agent.call("a__image", json!({})).await;
    assert_eq!(
        r["result"]["content"][0]["type"], "image",
        "a valid PNG passes: {r}"
    );
    for (args, why) in [
        (json!({"mime": "image/x-unknown"}), "MIME"),
        (json!({"data": "not base64!"}), "base64"),
        (json!({"size": 5000}), "1000"),
    ] {
        let r = agent.call("a__image", args.clone()).await;
        let block = &r["result"]["content"][0];
        assert_eq!(block["type"], "text", "{args}: {r}");
        let t = block["text"].as_str().unwrap_or("");
        assert!(
            t.contains("removed an image block") && t.to_lowercase().contains(&why.to_lowercase()),
            "{args}: {t}"
        );
    }
    let r = agent
        .call("a__structured", json!({"value": {"count": 3}}))
        .await;
    assert_eq!(r["result"]["structuredContent"], json!({"count": 3}), "{r}");
    assert_ne!(r["result"]["isError"], true, "{r}");
    let r = agent
        .call("a__structured", json!({"value": {"count": "three"}}))
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(text(&r).contains("/count"), "{r}");
}

#[tokio::test]
async fn a_server_request_goes_only_to_the_agent_whose_call_it_belongs_to() {
    let d = DaemonBuilder::new().fixture("a", &[]).start().await;
    d.wait_ready().await;
    let caps = json!({"elicitation": {}});
    let mut asker = d.agent().await;
    let mut bystander = d.agent().await;
    for a in [&mut asker, &mut bystander] {
        let r = a
            .request(
                "initialize",
                Some(json!({"protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": {"name": "t", "version": "1"}})),
            )
            .await;
        assert!(r.get("result").is_some(), "{r}");
    }
    let id = asker.start_call("a__ask", json!({})).await;
    let ask = notification(&mut asker, "elicitation/create").await;
    asker
        .send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}))
        .await;
    assert_eq!(text(&asker.response(&id).await), "hello, Ada");
    let ping = json!(bystander.fresh_id());
    bystander
        .send(json!({"jsonrpc": "2.0", "id": ping, "method": "ping"}))
        .await;
    let m = within("the ping answer", bystander.recv())
        .await
        .expect("open");
    assert_eq!(m["id"], ping, "the bystander got something else first: {m}");
}

#[tokio::test]
async fn a_legacy_agent_gets_log_messages_from_a_modern_server_at_its_level() {
    let d = DaemonBuilder::new()
        .fixture("m", &["--era", "modern"])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    // No level set: a legacy agent gets everything, so mcpd asks the modern server for it.
    let id = a
        .start_call(
            "m__log",
            json!({"message": "from modern", "level": "debug"}),
        )
        .await;
    let n = notification(&mut a, "notifications/message").await;
    assert_eq!(n["params"]["data"], "from modern", "{n}");
    assert_eq!(text(&a.response(&id).await), "logged");
    // A level the agent set is the level asked for.
    let r = a
        .request("logging/setLevel", Some(json!({"level": "error"})))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let id = a
        .start_call("m__log", json!({"message": "quiet", "level": "info"}))
        .await;
    let first = within("the answer", a.recv()).await.expect("open");
    assert_eq!(
        first["id"], id,
        "an info message passed an error threshold: {first}"
    );
}
