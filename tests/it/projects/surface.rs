//! Servers run per project, as agents reach them by methods other than tools/call.
//!
//! prompts/get, resources/read and resources/subscribe go to the agent's own project's
//! instance.

use crate::projects::instances::*;
use crate::support::*;
use serde_json::{Value, json};

#[tokio::test]
async fn prompts_and_resources_reach_the_agents_instance_running_or_not_yet_made() {
    let p = projects(2);
    let d = project_daemon("").start().await;
    let mut a = agent_in(&d, &p.dirs[0]).await;
    eventually("fx's prompts are listed", WAIT, || async {
        let r = d
            .initialized_agent()
            .await
            .request("prompts/list", None)
            .await;
        r["result"]["prompts"]
            .as_array()?
            .iter()
            .any(|p| p["name"] == "fx__greet")
            .then_some(())
    })
    .await;
    let greet = json!({"name": "fx__greet", "arguments": {"name": "x"}});
    let r = a.request("prompts/get", Some(greet.clone())).await;
    let want = format!("Hello, x! (from {})", show(&p.dirs[0]));
    assert_eq!(r["result"]["messages"][0]["content"]["text"], want, "{r}");
    let read = json!({"uri": "mcpd:fx:fixture://alpha"});
    let r = a.request("resources/read", Some(read.clone())).await;
    assert_eq!(
        r["result"]["contents"][0]["text"],
        format!("alpha from {}", show(&p.dirs[0])),
        "{r}"
    );

    // An agent whose roots are not answered yet: its requests wait for its project,
    // whose instance does not exist until then.
    let mut b = roots_agent(&d, async |_: &mut Agent| {}).await;
    let ask = roots_request(&mut b).await;
    let get = b.send_request("prompts/get", Some(greet)).await;
    let res = b.send_request("resources/read", Some(read)).await;
    let s = d.status().await;
    assert!(
        row(&s, &instance(&p.dirs[1])).is_none(),
        "not made yet: {s}"
    );
    answer_roots(&mut b, &ask, &[file_uri(&p.dirs[1])]).await;
    let r = b.response(&get).await;
    let want = format!("Hello, x! (from {})", show(&p.dirs[1]));
    assert_eq!(r["result"]["messages"][0]["content"]["text"], want, "{r}");
    let r = b.response(&res).await;
    assert_eq!(
        r["result"]["contents"][0]["text"],
        format!("alpha from {}", show(&p.dirs[1])),
        "{r}"
    );
}

/// Reads the agent's lines until a notification `method`, keeping the rest.
async fn notification(a: &mut Agent, method: &str) -> Value {
    if let Some(i) = a.notifications.iter().position(|m| m["method"] == method) {
        return a.notifications.remove(i);
    }
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

/// Pings the agent and asserts no `method` notification comes before the answer.
async fn none_before_ping(a: &mut Agent, method: &str) {
    let id = json!(a.fresh_id());
    a.send(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
        .await;
    loop {
        let m = a.recv().await.expect("connection open");
        assert_ne!(m["method"], method, "{m}");
        if m["id"] == id {
            break;
        }
    }
}

#[tokio::test]
async fn a_subscription_reaches_the_agents_project_instance_and_only_its_updates_come_back() {
    let p = projects(2);
    let d = DaemonBuilder::new()
        .fixture_with("fx", &["--tools", "cwd,pid,echo,touch"], IN_PROJECT)
        .start()
        .await;
    let mut watcher = agent_in(&d, &p.dirs[0]).await;
    let mut elsewhere = agent_in(&d, &p.dirs[1]).await;
    tools_listed(&d).await;
    let alpha = json!({"uri": "mcpd:fx:fixture://alpha"});
    for a in [&mut watcher, &mut elsewhere] {
        let r = a.request("resources/subscribe", Some(alpha.clone())).await;
        assert!(r.get("result").is_some(), "{r}");
    }
    // Another agent in p0 touches the resource in p0's instance.
    let mut toucher = agent_in(&d, &p.dirs[0]).await;
    let r = toucher
        .call("fx__touch", json!({"uri": "fixture://alpha"}))
        .await;
    assert_eq!(text(&r), "touched", "{r}");
    let n = notification(&mut watcher, "notifications/resources/updated").await;
    assert_eq!(n["params"]["uri"], "mcpd:fx:fixture://alpha", "{n}");
    none_before_ping(&mut elsewhere, "notifications/resources/updated").await;
    // In p1's instance, the other subscriber hears it.
    let r = elsewhere
        .call("fx__touch", json!({"uri": "fixture://alpha"}))
        .await;
    assert_eq!(text(&r), "touched", "{r}");
    notification(&mut elsewhere, "notifications/resources/updated").await;
}
