//! Routing of calls in flight: a late answer to a timed-out call never reaches the agent, and
//! progress notifications go only to the agent whose call they belong to.

use crate::failure::support::*;
use crate::support::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------- timeouts and routing

#[tokio::test]
async fn a_late_answer_to_a_timed_out_call_never_reaches_the_agent() {
    let d = DaemonBuilder::new()
        .fixture_with("s", &["--tools", "sleep,echo"], "timeout = \"200ms\"")
        .fixture_with("t", &["--tools", "sleep"], "timeout = \"10s\"")
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let id = a.start_call("s__sleep", json!({"ms": 600})).await;
    let r = a.response(&id).await;
    assert_error(&r, -32011, &["'s'", "200ms"]);
    // The agent may reuse the id now; it must get the new answer, not the late one.
    a.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "s__echo", "arguments": {"text": "second use of the id"}}}))
        .await;
    assert_eq!(text(&a.response(&id).await), "second use of the id");

    // Calls whose answers straddle the timeout: some answers are on their way when the
    // timeout fires. Each call gets exactly one response.
    let mut calls = Vec::new();
    for i in 0..40u64 {
        let ms = 150 + i * 5 / 2;
        calls.push((a.start_call("s__sleep", json!({"ms": ms})).await, ms));
    }
    let (mut ok, mut timed_out) = (0, 0);
    for (id, ms) in &calls {
        let r = a.response(id).await;
        if error_code(&r) == Some(-32011) {
            timed_out += 1;
        } else {
            assert_eq!(text(&r), format!("slept {ms}"), "{r}");
            ok += 1;
        }
    }
    println!("straddling calls: {ok} answered, {timed_out} timed out");
    // Outlast every late answer (the longest sleep was 600 ms) with a call on another server.
    assert_eq!(
        text(&a.call("t__sleep", json!({"ms": 700})).await),
        "slept 700"
    );
    assert_eq!(a.request("ping", None).await["result"], json!({}));
    assert!(
        a.stray.is_empty(),
        "late or duplicate answers: {:?}",
        a.stray
    );
    assert!(
        a.notifications.iter().all(|n| n.get("id").is_none()),
        "{:?}",
        a.notifications
    );
}

#[tokio::test]
async fn two_agents_using_the_same_progress_token_each_get_only_their_own_progress() {
    let d = DaemonBuilder::new()
        .fixture("s", &["--tools", "progress"])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.agent().await;
    let mut b = d.agent().await;
    a.initialize().await;
    b.initialize().await;
    let args = json!({"steps": 3, "ms": 50});
    let ida = a
        .start_call_with_progress("s__progress", args.clone(), json!("tok"))
        .await;
    let idb = b
        .start_call_with_progress("s__progress", args, json!("tok"))
        .await;
    for (agent, id, name) in [(&mut a, &ida, "a"), (&mut b, &idb, "b")] {
        let r = agent.response(id).await;
        assert_eq!(text(&r), "done 3", "{name}: {r}");
        agent.request("ping", None).await;
        let progress: Vec<&Value> = agent
            .notifications
            .iter()
            .filter(|n| n["method"] == "notifications/progress")
            .collect();
        assert_eq!(progress.len(), 3, "agent {name} got {progress:?}");
        for (i, n) in progress.iter().enumerate() {
            assert_eq!(n["params"]["progressToken"], "tok", "{n}");
            assert_eq!(n["params"]["progress"], i as u64 + 1, "{n}");
        }
        assert!(agent.stray.is_empty(), "{:?}", agent.stray);
    }
}
