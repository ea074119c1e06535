//! Where tasks end and whose they are.
//!
//! tasks/result outlasting the server's request timeout, tasks/list paging an owner's
//! tasks on every server, and a task made while its call was cancelled.

use super::*;
use crate::support::*;
use serde_json::json;

#[tokio::test]
async fn tasks_result_waits_for_the_task_not_for_the_servers_request_timeout() {
    let d = DaemonBuilder::new()
        .fixture_with("old", &["--tools", LEGACY_TOOLS], "timeout = \"300ms\"")
        .start()
        .await;
    d.wait_ready().await;
    let (mut a, _) = legacy_agent(&d).await;
    // A task that runs longer than any request to its server may take.
    let call = json!({"name": "old__ltask_sleep", "arguments": {"ms": 1500}, "task": {}});
    let r = a.request("tools/call", Some(call)).await;
    let task = r["result"]["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let r = a
        .request("tasks/result", Some(json!({"taskId": task})))
        .await;
    assert_eq!(text(&r), "slept 1500 ms", "{r}");
    // So does mcpd's own wait, for an agent that asked for no task.
    let r = a.call("old__ltask_sleep", json!({"ms": 1500})).await;
    assert_eq!(text(&r), "slept 1500 ms", "{r}");
}

#[tokio::test]
async fn tasks_list_pages_through_an_owners_tasks_on_every_server() {
    let d = DaemonBuilder::new()
        .fixture("old", &["--tools", LEGACY_TOOLS])
        .fixture("jobs", &["--era", "modern", "--tools", TOOLS])
        .start()
        .await;
    d.wait_ready().await;
    let (mut a, _) = legacy_agent(&d).await;
    let mut made = Vec::new();
    for i in 0..54 {
        let tool = if i % 2 == 0 {
            "old__ltask_sleep"
        } else {
            "jobs__task_sleep"
        };
        let call = json!({"name": tool, "arguments": {"ms": 0}, "task": {}});
        let r = a.request("tools/call", Some(call)).await;
        made.push(
            r["result"]["task"]["taskId"]
                .as_str()
                .unwrap_or_else(|| panic!("a task: {r}"))
                .to_owned(),
        );
    }
    made.reverse();
    // Another connection of the same user lists them too, a page at a time.
    let (mut b, _) = legacy_agent(&d).await;
    let first = b.request("tasks/list", Some(json!({}))).await;
    let cursor = first["result"]["nextCursor"]
        .as_str()
        .unwrap_or_else(|| panic!("a next page: {first}"))
        .to_owned();
    let second = b
        .request("tasks/list", Some(json!({"cursor": cursor})))
        .await;
    assert!(second["result"].get("nextCursor").is_none(), "{second}");
    let listed: Vec<String> = [&first, &second]
        .iter()
        .flat_map(|r| r["result"]["tasks"].as_array().cloned().unwrap_or_default())
        .map(|t| {
            assert!(
                t.get("ttlMs").is_none() && t.get("resultType").is_none(),
                "{t}"
            );
            t["taskId"].as_str().expect("taskId").to_owned()
        })
        .collect();
    assert_eq!(listed, made, "every task once, newest first");
    let r = b
        .request("tasks/list", Some(json!({"cursor": "not-a-cursor"})))
        .await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
}

#[tokio::test]
async fn a_task_whose_call_is_cancelled_while_it_is_made_is_cancelled_at_its_server() {
    let (b, rec, arg) = daemon();
    let d = b
        .fixture(
            "jobs",
            &["--era", "modern", "--tools", TOOLS, "--record", &arg],
        )
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.agent().await;
    let pid = d.server_status("jobs").await["pid"].as_u64().expect("pid") as u32;
    let mut params =
        json!({"name": "jobs__task_sleep", "arguments": {"ms": 600000, "create_ms": 300}});
    params["_meta"] = envelope(true);
    let id = a.send_request("tools/call", Some(params)).await;
    eventually("the server is asked to make the task", WAIT, || async {
        recorded_requests(&rec, pid)
            .iter()
            .any(|m| m["method"] == "tools/call")
            .then_some(())
    })
    .await;
    a.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}),
    )
    .await;
    // The task the server made anyway is cancelled: no one else knows its id.
    eventually("the made task is cancelled", WAIT, || async {
        recorded_requests(&rec, pid)
            .iter()
            .any(|m| m["method"] == "tasks/cancel" && m["params"]["taskId"] == "fixture-task-1")
            .then_some(())
    })
    .await;
    // The agent's connection carries on.
    let r = modern(
        &mut a,
        "tools/call",
        json!({"name": "jobs__echo", "arguments": {"text": "on"}}),
        false,
    )
    .await;
    assert_eq!(text(&r), "on", "{r}");
}
