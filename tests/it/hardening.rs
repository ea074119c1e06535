//! Inputs that once stalled, exhausted or fooled the shared daemon: each is a regression test against the real binary.

use crate::support::*;
use serde_json::json;

#[tokio::test]
async fn a_huge_resource_uri_is_refused_at_once_and_every_agent_is_still_served() {
    let d = DaemonBuilder::new().fixture("a", &[]).start().await;
    d.wait_ready().await;
    let mut agent = d.initialized_agent().await;
    let mut other = d.initialized_agent().await;
    // Matching this against `fixture://items/{id}` once tried every split point of the
    // URI, and a million characters kept the runtime busy for minutes.
    let huge = format!("fixture://items/{}", "a".repeat(1_000_000));
    let id = agent.fresh_id();
    agent
        .send(json!({"jsonrpc": "2.0", "id": id, "method": "resources/read", "params": {"uri": huge}}))
        .await;
    let ping = other.request("ping", None).await;
    assert!(ping["result"].is_object(), "{ping}");
    let r = agent.response(&json!(id)).await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    assert!(error_message(&r).contains("at most 8192 bytes"), "{r}");
    assert!(
        r.to_string().len() < 1_000,
        "the refusal does not echo the URI"
    );
    // A long URI under the cap is matched and routed as usual.
    let long = format!("fixture://items/{}", "b".repeat(8_000));
    let r = agent
        .request("resources/read", Some(json!({"uri": long})))
        .await;
    let text = r["result"]["contents"][0]["text"].as_str().unwrap_or("");
    assert!(text.starts_with("item bbbb"), "{r}");
    // The same cap guards subscriptions.
    let huge = format!("fixture://items/{}", "c".repeat(20_000));
    let r = agent
        .request("resources/subscribe", Some(json!({"uri": huge})))
        .await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    let status = d.status().await;
    assert_eq!(status["servers"][0]["state"], "ready", "{status}");
}
