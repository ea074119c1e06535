//! An agent's own task under a sealed id, in each pair of eras.
//!
//! Made, polled, answered and cancelled, translated between 2025-11-25 tasks and the
//! extension's where agent and server differ; and ids that cannot be forged.

use super::*;
use crate::support::*;
use serde_json::{Value, json};

#[tokio::test]
async fn a_modern_agent_makes_polls_and_cancels_a_servers_task_under_a_sealed_id() {
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
    let r = modern(&mut a, "server/discover", json!({}), true).await;
    assert!(
        r["result"]["capabilities"]["extensions"][EXT].is_object(),
        "mcpd advertises the extension: {r}"
    );

    // A task: its id is mcpd's, sealed; the server's own id never shows.
    let r = modern(
        &mut a,
        "tools/call",
        json!({"name": "jobs__task_sleep", "arguments": {"ms": 150}}),
        true,
    )
    .await;
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    let task = r["result"]["taskId"].as_str().expect("taskId").to_owned();
    assert!(task.starts_with("mcpdt1."), "{r}");
    assert!(!r.to_string().contains("fixture-task-"), "{r}");
    assert_eq!(r["result"]["status"], "working", "{r}");

    // Polled from another connection of the same user, as a client may after a restart.
    let mut other = d.agent().await;
    let done = poll_until(&mut other, &task, "completed").await;
    assert_eq!(
        done["result"]["result"]["content"][0]["text"], "slept 150 ms",
        "{done}"
    );
    let pid = d.server_status("jobs").await["pid"].as_u64().expect("pid") as u32;
    let seen: Vec<Value> = recorded_requests(&rec, pid)
        .into_iter()
        .filter(|m| m["method"] == "tasks/get")
        .collect();
    assert!(
        !seen.is_empty()
            && seen
                .iter()
                .all(|m| m["params"]["taskId"] == "fixture-task-1"),
        "the server gets its own id back: {seen:?}"
    );

    // Failures: a JSON-RPC error is `failed`; a tool error is a completed result.
    let r = modern(
        &mut a,
        "tools/call",
        json!({"name": "jobs__task_fail", "arguments": {}}),
        true,
    )
    .await;
    let failed = r["result"]["taskId"].as_str().expect("taskId").to_owned();
    let r = poll_until(&mut a, &failed, "failed").await;
    assert_eq!(r["result"]["error"]["message"], "the job failed", "{r}");
    let r = modern(
        &mut a,
        "tools/call",
        json!({"name": "jobs__task_error", "arguments": {}}),
        true,
    )
    .await;
    let errored = r["result"]["taskId"].as_str().expect("taskId").to_owned();
    let r = poll_until(&mut a, &errored, "completed").await;
    assert_eq!(r["result"]["result"]["isError"], true, "{r}");

    // Input: inputRequests pass through, tasks/update answers them.
    let r = modern(
        &mut a,
        "tools/call",
        json!({"name": "jobs__task_ask", "arguments": {}}),
        true,
    )
    .await;
    let asking = r["result"]["taskId"].as_str().expect("taskId").to_owned();
    let r = poll_until(&mut a, &asking, "input_required").await;
    assert_eq!(
        r["result"]["inputRequests"]["name"]["method"], "elicitation/create",
        "{r}"
    );
    let answer = json!({"taskId": asking, "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}}});
    let r = modern(&mut a, "tasks/update", answer, true).await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let r = poll_until(&mut a, &asking, "completed").await;
    assert_eq!(
        r["result"]["result"]["content"][0]["text"], "hello Ada",
        "{r}"
    );

    // Cancel.
    let r = modern(
        &mut a,
        "tools/call",
        json!({"name": "jobs__task_sleep", "arguments": {"ms": 600000}}),
        true,
    )
    .await;
    let long = r["result"]["taskId"].as_str().expect("taskId").to_owned();
    let r = modern(&mut a, "tasks/cancel", json!({"taskId": long}), true).await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    poll_until(&mut a, &long, "cancelled").await;
}

#[tokio::test]
async fn task_ids_cannot_be_forged_and_the_extension_must_be_declared() {
    let (b, _rec, _arg) = daemon();
    let d = b
        .fixture("jobs", &["--era", "modern", "--tools", TOOLS])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.agent().await;
    let r = modern(
        &mut a,
        "tools/call",
        json!({"name": "jobs__task_sleep", "arguments": {"ms": 10}}),
        true,
    )
    .await;
    let task = r["result"]["taskId"].as_str().expect("taskId").to_owned();

    // The server's own id, an edited id, and ids mcpd never issued are unknown.
    for bad in [
        "fixture-task-1".to_owned(),
        task.replacen("mcpdt1.W", "mcpdt1.X", 1),
        format!("{task}x"),
        "mcpdt1.nodot".into(),
    ] {
        if bad == task {
            continue;
        }
        let r = modern(&mut a, "tasks/get", json!({"taskId": bad}), true).await;
        assert_eq!(error_code(&r), Some(-32602), "{bad}: {r}");
    }
    // The extension is declared per request.
    let r = modern(&mut a, "tasks/get", json!({"taskId": task}), false).await;
    assert_eq!(error_code(&r), Some(-32021), "{r}");
    assert!(
        r["error"]["data"]["requiredCapabilities"]["extensions"][EXT].is_object(),
        "{r}"
    );
    // The 2025-11-25 methods the extension dropped are not there.
    for m in ["tasks/result", "tasks/list"] {
        let r = modern(&mut a, m, json!({"taskId": task}), true).await;
        assert_eq!(error_code(&r), Some(-32601), "{m}: {r}");
    }
    // The legacy `task` parameter means nothing to a modern agent's call.
    let r = modern(
        &mut a,
        "tools/call",
        json!({"name": "jobs__echo", "arguments": {"text": "x"}, "task": {"ttl": 1000}}),
        true,
    )
    .await;
    assert_eq!(text(&r), "x", "{r}");
}

#[tokio::test]
async fn a_legacy_agent_makes_polls_awaits_and_cancels_2025_11_25_tasks_under_sealed_ids() {
    let (b, rec, arg) = daemon();
    let d = b
        .fixture("old", &["--tools", LEGACY_TOOLS, "--record", &arg])
        .start()
        .await;
    d.wait_ready().await;
    let (mut a, init) = legacy_agent(&d).await;
    assert!(
        init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"].is_object(),
        "{init}"
    );
    assert!(
        init["result"]["capabilities"]["tasks"]["list"].is_object(),
        "{init}"
    );
    let r = a.request("tools/list", None).await;
    let tool = r["result"]["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "old__ltask_sleep"))
        .cloned()
        .expect("listed");
    assert_eq!(tool["execution"]["taskSupport"], "required", "{tool}");

    let call =
        json!({"name": "old__ltask_sleep", "arguments": {"ms": 100}, "task": {"ttl": 60000}});
    let r = a.request("tools/call", Some(call)).await;
    let task = r["result"]["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    assert!(task.starts_with("mcpdt1."), "{r}");
    assert!(!r.to_string().contains("legacy-task-"), "{r}");
    let r = a.request("tasks/get", Some(json!({"taskId": task}))).await;
    assert_eq!(r["result"]["taskId"], task, "{r}");
    // tasks/result waits for the end.
    let r = a
        .request("tasks/result", Some(json!({"taskId": task})))
        .await;
    assert_eq!(text(&r), "slept 100 ms", "{r}");
    assert_eq!(
        r["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], task,
        "the related task is the agent's id: {r}"
    );
    let pid = d.server_status("old").await["pid"].as_u64().expect("pid") as u32;
    assert!(
        recorded_requests(&rec, pid)
            .iter()
            .filter(|m| m["method"] == "tasks/result")
            .all(|m| m["params"]["taskId"] == "legacy-task-1"),
        "the server got its own id"
    );

    let call = json!({"name": "old__ltask_sleep", "arguments": {"ms": 600000}, "task": {}});
    let r = a.request("tools/call", Some(call)).await;
    let long = r["result"]["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let r = a
        .request("tasks/cancel", Some(json!({"taskId": long})))
        .await;
    assert_eq!(r["result"]["status"], "cancelled", "{r}");
    assert_eq!(r["result"]["taskId"], long, "{r}");
    // tasks/list: this owner's tasks, newest first, under the agent's ids.
    let r = a.request("tasks/list", None).await;
    let ids: Vec<&str> = r["result"]["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    assert_eq!(ids, [long.as_str(), task.as_str()], "{r}");
    assert_eq!(r["result"]["tasks"][0]["status"], "cancelled", "{r}");
    assert!(r["result"].get("nextCursor").is_none(), "{r}");
    let r = a
        .request("tasks/get", Some(json!({"taskId": "legacy-task-1"})))
        .await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
}

#[tokio::test]
async fn a_legacy_agents_task_on_an_extension_server_is_translated_both_ways() {
    let (b, rec, arg) = daemon();
    let d = b
        .fixture(
            "jobs",
            &["--era", "modern", "--tools", TOOLS, "--record", &arg],
        )
        .start()
        .await;
    d.wait_ready().await;
    let (mut a, _) = legacy_agent(&d).await;
    let r = a.request("tools/list", None).await;
    let tool = r["result"]["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "jobs__echo"))
        .cloned()
        .expect("listed");
    assert_eq!(
        tool["execution"]["taskSupport"], "optional",
        "an extension server's tools may run as 2025-11-25 tasks: {tool}"
    );

    // The agent's `task` becomes the extension's declaration; the task comes back in
    // 2025-11-25's shape.
    let call =
        json!({"name": "jobs__task_sleep", "arguments": {"ms": 100}, "task": {"ttl": 60000}});
    let r = a.request("tools/call", Some(call)).await;
    let task = r["result"]["task"]["taskId"]
        .as_str()
        .expect("a 2025-11-25 task")
        .to_owned();
    assert!(task.starts_with("mcpdt1."), "{r}");
    assert!(r["result"].get("resultType").is_none(), "{r}");
    assert!(r["result"]["task"].get("ttl").is_some(), "{r}");
    assert!(r["result"]["task"].get("ttlMs").is_none(), "{r}");
    let pid = d.server_status("jobs").await["pid"].as_u64().expect("pid") as u32;
    let created = recorded_requests(&rec, pid)
        .into_iter()
        .find(|m| m["method"] == "tools/call")
        .expect("recorded");
    assert!(created["params"].get("task").is_none(), "{created}");
    assert!(
        created["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"][EXT]
            .is_object(),
        "{created}"
    );

    let r = a.request("tasks/get", Some(json!({"taskId": task}))).await;
    assert_eq!(r["result"]["taskId"], task, "{r}");
    assert!(r["result"].get("resultType").is_none(), "{r}");
    assert!(r["result"].get("ttlMs").is_none(), "{r}");
    // tasks/result: mcpd follows the extension task to its end.
    let r = a
        .request("tasks/result", Some(json!({"taskId": task})))
        .await;
    assert_eq!(text(&r), "slept 100 ms", "{r}");
    assert_eq!(
        r["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], task,
        "{r}"
    );
    let r = a.request("tasks/get", Some(json!({"taskId": task}))).await;
    assert_eq!(r["result"]["status"], "completed", "{r}");
    assert!(r["result"].get("result").is_none(), "{r}");

    // Input while the agent waits on tasks/result: a real elicitation, tied to the task.
    let call = json!({"name": "jobs__task_ask", "arguments": {}, "task": {}});
    let r = a.request("tools/call", Some(call)).await;
    let asking = r["result"]["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let id = a
        .send_request("tasks/result", Some(json!({"taskId": asking})))
        .await;
    let ask = within("the task's elicitation", async {
        loop {
            let m = a.recv().await.expect("open");
            if m["method"] == "elicitation/create" {
                break m;
            }
        }
    })
    .await;
    assert_eq!(
        ask["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], asking,
        "{ask}"
    );
    a.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}))
        .await;
    let r = a.response(&id).await;
    assert_eq!(text(&r), "hello Ada", "{r}");

    // A tool error is a failed 2025-11-25 task whose result is the tool's.
    let call = json!({"name": "jobs__task_error", "arguments": {}, "task": {}});
    let r = a.request("tools/call", Some(call)).await;
    let errored = r["result"]["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let r = a
        .request("tasks/result", Some(json!({"taskId": errored})))
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    let r = a
        .request("tasks/get", Some(json!({"taskId": errored})))
        .await;
    assert_eq!(r["result"]["status"], "failed", "{r}");

    // Cancelling answers with the task, as 2025-11-25 does.
    let call = json!({"name": "jobs__task_sleep", "arguments": {"ms": 600000}, "task": {}});
    let r = a.request("tools/call", Some(call)).await;
    let long = r["result"]["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let r = a
        .request("tasks/cancel", Some(json!({"taskId": long})))
        .await;
    assert_eq!(r["result"]["taskId"], long, "{r}");
    assert_eq!(r["result"]["status"], "cancelled", "{r}");

    // The id opens for a modern agent of the same user too: at its server it is an
    // extension task.
    let mut m = d.agent().await;
    let r = modern(&mut m, "tasks/get", json!({"taskId": task}), true).await;
    assert_eq!(r["result"]["status"], "completed", "{r}");
}

#[tokio::test]
async fn a_modern_agents_task_on_a_2025_11_25_server_is_translated() {
    let (b, rec, arg) = daemon();
    let d = b
        .fixture("old", &["--tools", LEGACY_TOOLS, "--record", &arg])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.agent().await;
    let r = modern(
        &mut a,
        "tools/call",
        json!({"name": "old__ltask_sleep", "arguments": {"ms": 100}}),
        true,
    )
    .await;
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    let task = r["result"]["taskId"].as_str().expect("taskId").to_owned();
    assert!(task.starts_with("mcpdt1."), "{r}");
    assert!(r["result"].get("task").is_none(), "{r}");
    assert!(r["result"].get("ttl").is_none(), "{r}");
    assert!(r["result"].get("ttlMs").is_some(), "{r}");
    let done = poll_until(&mut a, &task, "completed").await;
    assert_eq!(
        done["result"]["result"]["content"][0]["text"], "slept 100 ms",
        "the result is inlined: {done}"
    );
    assert!(
        done["result"]["result"]["_meta"]["io.modelcontextprotocol/related-task"].is_null(),
        "{done}"
    );
    let pid = d.server_status("old").await["pid"].as_u64().expect("pid") as u32;
    let created = recorded_requests(&rec, pid)
        .into_iter()
        .find(|m| m["method"] == "tools/call")
        .expect("recorded");
    assert!(created["params"]["task"].is_object(), "{created}");

    // Input: the server's elicitation, which it sends during a tasks/result, shows as an
    // input request; tasks/update answers it.
    let r = modern(
        &mut a,
        "tools/call",
        json!({"name": "old__ltask_ask", "arguments": {}}),
        true,
    )
    .await;
    let asking = r["result"]["taskId"].as_str().expect("taskId").to_owned();
    let start = std::time::Instant::now();
    let (key, req) = loop {
        let r = poll_until(&mut a, &asking, "input_required").await;
        if let Some((k, v)) = r["result"]["inputRequests"]
            .as_object()
            .and_then(|m| m.iter().next())
        {
            break (k.clone(), v.clone());
        }
        assert!(start.elapsed() < WAIT, "no input request shown: {r}");
    };
    assert_eq!(req["method"], "elicitation/create", "{req}");
    assert!(
        req["params"]["_meta"]["io.modelcontextprotocol/related-task"].is_null(),
        "{req}"
    );
    let update = json!({"taskId": asking, "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}}});
    let r = modern(&mut a, "tasks/update", update, true).await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let done = poll_until(&mut a, &asking, "completed").await;
    assert_eq!(
        done["result"]["result"]["content"][0]["text"], "hello Ada",
        "{done}"
    );

    // Cancelling: an empty acknowledgement, then the task is cancelled; again, the same.
    let r = modern(
        &mut a,
        "tools/call",
        json!({"name": "old__ltask_sleep", "arguments": {"ms": 600000}}),
        true,
    )
    .await;
    let long = r["result"]["taskId"].as_str().expect("taskId").to_owned();
    for _ in 0..2 {
        let r = modern(&mut a, "tasks/cancel", json!({"taskId": long}), true).await;
        assert_eq!(r["result"]["resultType"], "complete", "{r}");
        assert!(
            r["result"].get("taskId").is_none() && r["result"].get("status").is_none(),
            "an empty acknowledgement: {r}"
        );
    }
    poll_until(&mut a, &long, "cancelled").await;
}
