//! Tasks (the 2026-07-28 extension) through mcpd: modern agents make, poll, answer and cancel a server's tasks under sealed ids; agents that cannot do tasks get the task's result as a plain call result.

use crate::support::*;
use serde_json::{Value, json};
use std::path::PathBuf;

const MODERN: &str = "2026-07-28";
const EXT: &str = "io.modelcontextprotocol/tasks";

fn envelope(tasks: bool) -> Value {
    let mut caps = json!({"elicitation": {}});
    if tasks {
        caps["extensions"] = json!({ EXT: {} });
    }
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": { "name": "tasks-test", "version": "1" },
    })
}

async fn modern(a: &mut Agent, method: &str, mut params: Value, tasks: bool) -> Value {
    params["_meta"] = envelope(tasks);
    a.request(method, Some(params)).await
}

/// Polls `tasks/get` until the task's status is `want` (within `WAIT`).
async fn poll_until(a: &mut Agent, task: &str, want: &str) -> Value {
    let mut last = Value::Null;
    let start = std::time::Instant::now();
    while start.elapsed() < WAIT {
        let r = modern(a, "tasks/get", json!({"taskId": task}), true).await;
        assert_eq!(
            r["result"]["taskId"], task,
            "the agent's own id comes back: {r}"
        );
        if r["result"]["status"] == want {
            return r;
        }
        last = r;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("task {task} never reached {want}: {last}");
}

/// A modern agent's call of `tool` (without the extension) whose one input request is an
/// `input_required` round: answered with the name Ada; returns the retry's answer.
async fn answered_as_ada(a: &mut Agent, tool: &str) -> Value {
    let call = json!({"name": tool, "arguments": {}});
    let r = modern(a, "tools/call", call, false).await;
    assert_eq!(r["result"]["resultType"], "input_required", "{r}");
    let key = r["result"]["inputRequests"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .expect("one input request");
    let retry = json!({
        "name": tool, "arguments": {},
        "inputResponses": { key: {"action": "accept", "content": {"name": "Ada"}} },
        "requestState": r["result"]["requestState"],
    });
    modern(a, "tools/call", retry, false).await
}

fn daemon() -> (DaemonBuilder, PathBuf, String) {
    let b = DaemonBuilder::new();
    let dir = b.dir().join("rec");
    let arg = dir.to_str().expect("utf-8 temp path").to_owned();
    (b, dir, arg)
}

const TOOLS: &str = "echo,task_sleep,task_fail,task_error,task_ask";

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
async fn an_agent_without_tasks_gets_the_result_of_a_task_only_tool_and_its_input_requests() {
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
    let r = a
        .request(
            "initialize",
            Some(json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}})),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
    a.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;

    let r = a.call("jobs__task_sleep", json!({"ms": 100})).await;
    assert_eq!(text(&r), "slept 100 ms", "{r}");
    let r = a.call("jobs__task_fail", json!({})).await;
    assert_eq!(r["error"]["message"], "the job failed", "{r}");
    let r = a.call("jobs__task_error", json!({})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");

    // The task's input request reaches the agent as a real elicitation.
    let id = a.start_call("jobs__task_ask", json!({})).await;
    let ask = within("mcpd's elicitation request", async {
        loop {
            let m = a.recv().await.expect("open");
            if m["method"] == "elicitation/create" {
                break m;
            }
        }
    })
    .await;
    a.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}))
        .await;
    let r = a.response(&id).await;
    assert_eq!(text(&r), "hello Ada", "{r}");

    // Cancelling the call cancels the task at its server.
    let id = a
        .start_call("jobs__task_sleep", json!({"ms": 600000}))
        .await;
    let pid = d.server_status("jobs").await["pid"].as_u64().expect("pid") as u32;
    // The fifth task this server made; mcpd polls it once it exists.
    eventually("mcpd follows the task", WAIT, || async {
        recorded_requests(&rec, pid)
            .iter()
            .any(|m| m["method"] == "tasks/get" && m["params"]["taskId"] == "fixture-task-5")
            .then_some(())
    })
    .await;
    a.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}),
    )
    .await;
    eventually("the server is asked to cancel the task", WAIT, || async {
        recorded_requests(&rec, pid)
            .iter()
            .any(|m| m["method"] == "tasks/cancel" && m["params"]["taskId"] == "fixture-task-5")
            .then_some(())
    })
    .await;
}

/// A legacy agent at 2025-11-25, declaring elicitation.
async fn legacy_agent(d: &Daemon) -> (Agent, Value) {
    let mut a = d.agent().await;
    let r = a
        .request(
            "initialize",
            Some(json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}})),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
    a.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    (a, r)
}

const LEGACY_TOOLS: &str = "echo,ltask_sleep,ltask_ask";

const STATUS: &str = "notifications/tasks/status";

/// The `notifications/tasks/status` an agent got (kept while it waited for answers, then
/// read) until one says `until` (within `WAIT`).
async fn statuses_until(a: &mut Agent, until: &str) -> Vec<Value> {
    let mut seen: Vec<Value> = a
        .notifications
        .drain(..)
        .filter(|m| m["method"] == STATUS)
        .collect();
    within(STATUS, async {
        while !seen.iter().any(|m| m["params"]["status"] == until) {
            let m = a.recv().await.expect("open");
            if m["method"] == STATUS {
                seen.push(m);
            }
        }
    })
    .await;
    seen
}

/// The `notifications/tasks/status` an agent (a modern one if `is_modern`) got so far,
/// read up to the answer of a request (a `ping`; `tools/list` in 2026-07-28, which has no
/// `ping`), which comes after everything queued before it.
async fn got_statuses(a: &mut Agent, is_modern: bool) -> Vec<Value> {
    let r = if is_modern {
        modern(a, "tools/list", json!({}), false).await
    } else {
        a.request("ping", None).await
    };
    assert!(r.get("result").is_some(), "{r}");
    a.notifications
        .iter()
        .filter(|m| m["method"] == STATUS)
        .cloned()
        .collect()
}

/// Every status names `task` (mcpd's id), in `taskId` and the related-task `_meta`.
fn all_about(statuses: &[Value], task: &str) {
    for m in statuses {
        assert_eq!(m["params"]["taskId"], task, "{m}");
        assert_eq!(
            m["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], task,
            "{m}"
        );
        assert!(!m.to_string().contains("legacy-task-"), "{m}");
    }
}

#[tokio::test]
async fn a_legacy_agent_gets_its_own_2025_11_25_tasks_status_notifications_under_sealed_ids() {
    let d = DaemonBuilder::new()
        .fixture(
            "old",
            &["--tools", LEGACY_TOOLS, "--task-status-notifications"],
        )
        .start()
        .await;
    d.wait_ready().await;
    // Two legacy agents of the same user, and a modern one, at the same time.
    let (mut a, _) = legacy_agent(&d).await;
    let (mut b, _) = legacy_agent(&d).await;
    let mut m = d.agent().await;
    let make = async |a: &mut Agent, ms: u64| {
        let call = json!({"name": "old__ltask_sleep", "arguments": {"ms": ms}, "task": {}});
        let r = a.request("tools/call", Some(call)).await;
        r["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("a task: {r}"))
            .to_owned()
    };
    let task = make(&mut a, 300).await;
    let r = modern(
        &mut m,
        "tools/call",
        json!({"name": "old__ltask_sleep", "arguments": {"ms": 300}}),
        true,
    )
    .await;
    let modern_task = r["result"]["taskId"].as_str().expect("a task").to_owned();
    let statuses = statuses_until(&mut a, "completed").await;
    all_about(&statuses, &task);
    // A cancelled task says so too.
    let long = make(&mut a, 600_000).await;
    let r = a
        .request("tasks/cancel", Some(json!({"taskId": long})))
        .await;
    assert_eq!(r["result"]["status"], "cancelled", "{r}");
    let statuses = statuses_until(&mut a, "cancelled").await;
    all_about(&statuses, &long);

    // The other agent got none of them; its own task's come to it alone.
    assert_eq!(got_statuses(&mut b, false).await, Vec::<Value>::new());
    let own = make(&mut b, 100).await;
    all_about(&statuses_until(&mut b, "completed").await, &own);
    assert_eq!(got_statuses(&mut a, false).await, Vec::<Value>::new());

    // A modern agent's task on the same server: no `notifications/tasks/status` (it
    // would name the task in a `subscriptions/listen`).
    poll_until(&mut m, &modern_task, "completed").await;
    assert_eq!(got_statuses(&mut m, true).await, Vec::<Value>::new());
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
async fn an_agent_that_asks_for_no_task_gets_the_result_of_a_tool_that_requires_one() {
    let (b, rec, arg) = daemon();
    let d = b
        .fixture("old", &["--tools", LEGACY_TOOLS, "--record", &arg])
        .start()
        .await;
    d.wait_ready().await;
    let (mut a, _) = legacy_agent(&d).await;
    let r = a.call("old__ltask_sleep", json!({"ms": 50})).await;
    assert_eq!(text(&r), "slept 50 ms", "{r}");
    assert!(
        r["result"]["_meta"]["io.modelcontextprotocol/related-task"].is_null(),
        "a plain result: {r}"
    );

    // The server's request while mcpd waits on tasks/result reaches the agent.
    let id = a.start_call("old__ltask_ask", json!({})).await;
    let ask = within("the server's elicitation", async {
        loop {
            let m = a.recv().await.expect("open");
            if m["method"] == "elicitation/create" {
                break m;
            }
        }
    })
    .await;
    a.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}))
        .await;
    let r = a.response(&id).await;
    assert_eq!(text(&r), "hello Ada", "{r}");

    // Cancelling the call cancels its task (the third this server made).
    let id = a
        .start_call("old__ltask_sleep", json!({"ms": 600000}))
        .await;
    let pid = d.server_status("old").await["pid"].as_u64().expect("pid") as u32;
    eventually("mcpd waits on the task", WAIT, || async {
        recorded_requests(&rec, pid)
            .iter()
            .any(|m| m["method"] == "tasks/result" && m["params"]["taskId"] == "legacy-task-3")
            .then_some(())
    })
    .await;
    a.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}),
    )
    .await;
    eventually("the server is asked to cancel the task", WAIT, || async {
        recorded_requests(&rec, pid)
            .iter()
            .any(|m| m["method"] == "tasks/cancel" && m["params"]["taskId"] == "legacy-task-3")
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_modern_agent_without_the_extension_gets_the_result_of_a_task_only_tool() {
    // The server answers -32021 to a request that did not declare the extension; mcpd
    // can do tasks, so it declares it, follows the task and answers with its result, as
    // it does for a legacy agent. (The conformance suite's tasks-required-task-error
    // expects the -32021 of a server that cannot serve the call otherwise: through mcpd
    // it gets the result, tests/conformance/mcpd-known-losses.txt.)
    let (b, rec, arg) = daemon();
    let d = b
        .fixture(
            "jobs",
            &["--era", "modern", "--tools", TOOLS, "--record", &arg],
        )
        .start()
        .await;
    d.wait_ready().await;
    let pid = status_pid(&d.server_status("jobs").await).expect("pid");
    let mut a = d.agent().await;
    let r = modern(
        &mut a,
        "tools/call",
        json!({"name": "jobs__task_sleep", "arguments": {"ms": 50}}),
        false,
    )
    .await;
    assert_eq!(text(&r), "slept 50 ms", "{r}");
    assert!(
        r["result"]["_meta"]["io.modelcontextprotocol/related-task"].is_null(),
        "a plain result: {r}"
    );
    let asked = recorded_requests(&rec, pid);
    assert!(
        asked.iter().any(|m| m["method"] == "tasks/get"),
        "mcpd followed the task: {asked:?}"
    );
    // A tool error stays a tool error; a failed task is the task's error.
    let r = modern(
        &mut a,
        "tools/call",
        json!({"name": "jobs__task_error", "arguments": {}}),
        false,
    )
    .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    let r = modern(
        &mut a,
        "tools/call",
        json!({"name": "jobs__task_fail", "arguments": {}}),
        false,
    )
    .await;
    assert_eq!(error_message(&r), "the job failed", "{r}");
    // The task's input request is an input_required round of the agent's own call.
    let r = answered_as_ada(&mut a, "jobs__task_ask").await;
    assert_eq!(text(&r), "hello Ada", "{r}");
    // An agent that declared the extension still gets the task itself.
    let r = modern(
        &mut a,
        "tools/call",
        json!({"name": "jobs__task_sleep", "arguments": {"ms": 50}}),
        true,
    )
    .await;
    assert_eq!(r["result"]["resultType"], "task", "{r}");
}

#[tokio::test]
async fn a_modern_agent_gets_the_result_of_a_tool_that_requires_a_2025_11_25_task() {
    let (b, _rec, _arg) = daemon();
    let d = b.fixture("old", &["--tools", LEGACY_TOOLS]).start().await;
    d.wait_ready().await;
    let mut a = d.agent().await;
    let r = modern(
        &mut a,
        "tools/call",
        json!({"name": "old__ltask_sleep", "arguments": {"ms": 50}}),
        false,
    )
    .await;
    assert_eq!(text(&r), "slept 50 ms", "{r}");
    // The server's elicitation while mcpd waits on tasks/result is an input_required round.
    let r = answered_as_ada(&mut a, "old__ltask_ask").await;
    assert_eq!(text(&r), "hello Ada", "{r}");
    assert!(
        r["result"]["_meta"]["io.modelcontextprotocol/related-task"].is_null(),
        "a plain result: {r}"
    );
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

/// The notifications mcpd sends on `listen` until `until` accepts one (within `WAIT`).
async fn notes_until(a: &mut Agent, until: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut seen = Vec::new();
    within("notifications/tasks", async {
        loop {
            let m = a.recv().await.expect("open");
            if m["method"] == "notifications/tasks" {
                let done = until(&m);
                seen.push(m);
                if done {
                    break;
                }
            }
        }
    })
    .await;
    seen
}

#[tokio::test]
async fn a_listen_with_task_ids_gets_each_change_of_the_tasks_status() {
    let d = DaemonBuilder::new()
        .fixture("jobs", &["--era", "modern", "--tools", TOOLS])
        .fixture("old", &["--tools", LEGACY_TOOLS])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.agent().await;
    let make = async |a: &mut Agent, tool: &str, args: Value| {
        let r = modern(
            a,
            "tools/call",
            json!({"name": tool, "arguments": args}),
            true,
        )
        .await;
        r["result"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("a task: {r}"))
            .to_owned()
    };
    let sleeping = make(&mut a, "jobs__task_sleep", json!({"ms": 300})).await;
    let asking = make(&mut a, "old__ltask_ask", json!({})).await;
    let mut params = json!({"notifications": {"taskIds": [sleeping, asking, "mcpdt1.forged.x"]}});
    params["_meta"] = envelope(true);
    a.send(json!({"jsonrpc": "2.0", "id": "watch", "method": "subscriptions/listen", "params": params}))
        .await;
    let ack = within("the acknowledgement", async {
        loop {
            let m = a.recv().await.expect("open");
            if m["method"] == "notifications/subscriptions/acknowledged" {
                break m;
            }
        }
    })
    .await;
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([sleeping, asking]),
        "only the ids mcpd can route are honoured: {ack}"
    );
    let notes = notes_until(&mut a, |m| {
        m["params"]["taskId"] == sleeping && m["params"]["status"] == "completed"
    })
    .await;
    let done = notes.last().expect("a notification");
    assert_eq!(
        done["params"]["result"]["content"][0]["text"], "slept 300 ms",
        "{done}"
    );
    assert_eq!(
        done["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "watch",
        "{done}"
    );
    // The 2025-11-25 task's input request shows in its notification; answering it ends it.
    let mut all = notes.clone();
    if !all.iter().any(|m| {
        m["params"]["taskId"] == asking
            && m["params"]["inputRequests"]
                .as_object()
                .is_some_and(|r| !r.is_empty())
    }) {
        all.extend(
            notes_until(&mut a, |m| {
                m["params"]["taskId"] == asking
                    && m["params"]["inputRequests"]
                        .as_object()
                        .is_some_and(|r| !r.is_empty())
            })
            .await,
        );
    }
    let key = all
        .iter()
        .rev()
        .find_map(|m| {
            (m["params"]["taskId"] == asking)
                .then(|| {
                    m["params"]["inputRequests"]
                        .as_object()?
                        .keys()
                        .next()
                        .cloned()
                })
                .flatten()
        })
        .expect("an input request");
    let update = json!({"taskId": asking, "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}}});
    let r = modern(&mut a, "tasks/update", update, true).await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let notes = notes_until(&mut a, |m| {
        m["params"]["taskId"] == asking && m["params"]["status"] == "completed"
    })
    .await;
    let done = notes.last().expect("a notification");
    assert_eq!(
        done["params"]["result"]["content"][0]["text"], "hello Ada",
        "{done}"
    );

    // Without the extension declared, taskIds are refused as the spec says.
    let params = json!({"notifications": {"taskIds": [sleeping]}, "_meta": envelope(false)});
    let r = a.request("subscriptions/listen", Some(params)).await;
    assert_eq!(error_code(&r), Some(-32021), "{r}");
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
