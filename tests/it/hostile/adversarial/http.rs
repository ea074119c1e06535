//! The hostile input of the storm over the HTTP listener.
//!
//! Also an over-long body's effect on the client's next request.

use super::hostile::{Hostile, seed, storm_messages};
use super::{MAX_LINE, MODERN, assert_still_serving, storm_daemon};
use crate::support::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use tokio::time::Instant;
/// A daemon with the HTTP listener on a free port: its `/mcp` URL and bearer token.
async fn http_daemon() -> (Daemon, String, String) {
    let d = storm_daemon(DaemonBuilder::new().daemon("http_listen = \"127.0.0.1:0\"")).await;
    let url = d.status().await["daemon"]["http"]
        .as_str()
        .expect("status names the HTTP URL")
        .to_owned();
    let (code, out, err) = d.run_cli(&["ctl", "http-token"]).await;
    assert_eq!(code, 0, "ctl http-token: {err}");
    (d, url, out.trim().to_owned())
}

/// Opens a legacy session; returns its id.
async fn http_session(client: &reqwest::Client, url: &str, token: &str) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "storm", "version": "1"}}});
    let r = within(
        "initialize over HTTP",
        client
            .post(url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(body.to_string())
            .send(),
    )
    .await
    .expect("initialize");
    assert_eq!(r.status().as_u16(), 200);
    r.headers()["mcp-session-id"]
        .to_str()
        .expect("a session id")
        .to_owned()
}

/// The messages of a JSON or SSE response body.
fn messages_of(body: &str) -> Vec<Value> {
    let data: Vec<String> = if body.trim_start().starts_with('{') {
        vec![body.to_owned()]
    } else {
        body.split("\n\n")
            .map(|event| {
                event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect()
            })
            .collect()
    };
    data.iter()
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

/// POSTs each hostile message as one body, in a legacy session or, with the 2026-07-28
/// headers, statelessly. Every POST must get a response that is no server error, and one
/// that answers a request carries its id.
async fn http_storm_agent(
    url: String,
    token: String,
    agent: usize,
    messages: Vec<Hostile>,
    statuses: std::sync::Arc<std::sync::Mutex<BTreeMap<u16, usize>>>,
) -> Vec<String> {
    let client = http_client();
    let session = http_session(&client, &url, &token).await;
    let mut problems = Vec::new();
    let mut previous = String::new();
    for (k, m) in messages.into_iter().enumerate() {
        let parsed: Option<Value> = serde_json::from_slice(&m.line).ok();
        let method = parsed
            .as_ref()
            .and_then(|p| p["method"].as_str())
            .unwrap_or("");
        let mut post = client
            .post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(m.line.clone());
        let header_ok = |v: &str| reqwest::header::HeaderValue::from_str(v).is_ok();
        if k % 3 == 0 {
            post = post.header("mcp-protocol-version", MODERN);
            if header_ok(method) {
                post = post.header("mcp-method", method);
            }
            if let Some(name) = parsed.as_ref().and_then(|p| p["params"]["name"].as_str())
                && header_ok(name)
            {
                post = post.header("mcp-name", name);
            }
        } else {
            post = post.header("mcp-session-id", &session);
        }
        let what = format!("agent {agent} message {k} ({method:.40}) after {previous}");
        previous = format!("{method:.40} of {} bytes", m.line.len());
        let r = match tokio::time::timeout(WAIT, post.send()).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                let mut chain = format!("{e}");
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    chain.push_str(&format!(": {s}"));
                    source = s.source();
                }
                problems.push(format!(
                    "{what}: the POST of {} bytes failed: {chain}",
                    m.line.len()
                ));
                continue;
            }
            Err(_) => {
                problems.push(format!("{what}: no response within {WAIT:?}"));
                continue;
            }
        };
        let status = r.status().as_u16();
        previous.push_str(&format!(" answered {status}"));
        *statuses.lock().unwrap().entry(status).or_default() += 1;
        if status >= 500 && status != 503 {
            problems.push(format!("{what}: status {status}"));
        }
        // A subscription's stream stays open: closing it ends the subscription.
        if method == "subscriptions/listen" {
            continue;
        }
        let body = match tokio::time::timeout(WAIT, r.text()).await {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                problems.push(format!("{what}: reading the body failed: {e}"));
                continue;
            }
            Err(_) => {
                problems.push(format!("{what}: the body did not end within {WAIT:?}"));
                continue;
            }
        };
        if let (200, Some(id)) = (status, &m.owed)
            && !messages_of(&body).iter().any(|msg| &msg["id"] == id)
        {
            problems.push(format!(
                "{what}: a 200 without the answer to {id}: {body:.300}"
            ));
        }
    }
    problems
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn garbage_over_http_leaves_the_daemon_serving() {
    let seed = seed();
    println!("HTTP storm seed {seed} (replay with MCPD_STORM_SEED={seed})");
    let (d, url, token) = http_daemon().await;
    // A well-behaved HTTP client whose session must come through unharmed.
    let client = http_client();
    let session = http_session(&client, &url, &token).await;
    let statuses = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::new()));
    let started = Instant::now();
    let agents: Vec<_> = (0..8)
        .map(|n| {
            let mut messages = storm_messages(seed, n);
            messages.truncate(80);
            tokio::spawn(http_storm_agent(
                url.clone(),
                token.clone(),
                n,
                messages,
                statuses.clone(),
            ))
        })
        .collect();
    let mut problems = Vec::new();
    for a in agents {
        problems.extend(a.await.expect("HTTP storm agent"));
    }
    println!(
        "HTTP storm: 8 clients x 80 bodies in {:.1} s; statuses {:?}",
        started.elapsed().as_secs_f64(),
        statuses.lock().unwrap()
    );
    assert!(
        problems.is_empty(),
        "seed {seed}: {} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "fx__echo", "arguments": {"text": "unharmed"}}});
    let r = within(
        "a call in the well-behaved session",
        client
            .post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .header("mcp-session-id", &session)
            .body(call.to_string())
            .send(),
    )
    .await
    .expect("POST");
    assert_eq!(r.status().as_u16(), 200);
    let body: Value = serde_json::from_str(&r.text().await.expect("body")).expect("JSON");
    assert_eq!(text(&body), "unharmed", "{body}");
    assert_still_serving(&d, "the HTTP storm").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_oversized_http_body_does_not_cost_the_client_its_next_request() {
    let (_d, url, token) = http_daemon().await;
    let client = http_client();
    let session = http_session(&client, &url, &token).await;
    let post = |body: String| {
        client
            .post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .header("mcp-session-id", &session)
            .body(body)
            .send()
    };
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                     "params": {"pad": "o".repeat(4 * MAX_LINE)}});
    for i in 0..10 {
        let r = within("an oversized POST", post(big.to_string()))
            .await
            .expect("an answer to the oversized POST");
        assert_eq!(r.status().as_u16(), 413);
        // mcpd does not read the rest, so it closes the connection, and says so.
        assert_eq!(r.headers()["connection"], "close", "{:?}", r.headers());
        let ping = json!({"jsonrpc": "2.0", "id": i, "method": "ping"}).to_string();
        let r = within("the next POST", post(ping))
            .await
            .unwrap_or_else(|e| panic!("the request after a 413 was lost: {e}"));
        assert_eq!(r.status().as_u16(), 200);
    }
}
