//! How agents hear of their tasks.
//!
//! 2025-11-25 agents' own `notifications/tasks/status` under sealed ids, and a modern
//! agent's `subscriptions/listen` on task ids.

use super::*;
use crate::support::*;
use serde_json::{Value, json};

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
