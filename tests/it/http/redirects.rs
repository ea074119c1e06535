//! Remote servers that redirect.
//!
//! Followed within the server's origin, refused across origins so that its configured
//! headers and token go nowhere else.

use crate::http::fixture::{FixtureOptions, HttpFixture};
use crate::support::*;
use serde_json::{Value, json};

/// The remote server's table: a bearer token and a custom secret header.
const SECRETS: &str =
    "bearer_token_env = \"FIXTURE_TOKEN\"\nheaders = { X-Fixture-Key = \"k:${FIXTURE_KEY}\" }";

fn daemon_with_secrets(url: &str) -> DaemonBuilder {
    DaemonBuilder::new()
        .env("FIXTURE_TOKEN", "tok-123")
        .env("FIXTURE_KEY", "key-456")
        .remote("remote", url, SECRETS)
}

#[tokio::test]
async fn a_redirect_to_another_origin_is_refused_and_the_headers_never_go_there() {
    // Another port on loopback is another origin; it records whatever reaches it.
    let elsewhere = HttpFixture::start(FixtureOptions::default()).await;
    let fx = HttpFixture::start(FixtureOptions {
        redirect: Some(elsewhere.url()),
        ..FixtureOptions::default()
    })
    .await;
    let d = daemon_with_secrets(&fx.url()).start().await;
    let s = d
        .wait_server("remote", "the redirect is refused", |s| {
            s["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("another origin"))
        })
        .await;
    let err = s["last_error"].as_str().unwrap_or_default();
    let (from, to) = (
        format!("http://127.0.0.1:{}", fx.port()),
        format!("http://127.0.0.1:{}", elsewhere.port()),
    );
    assert!(err.contains(&from) && err.contains(&to), "{err}");
    assert!(err.contains("does not send"), "{err}");
    assert_ne!(s["state"], "ready", "{s}");

    // The configured origin got the headers; the other one got nothing at all.
    assert!(
        fx.stats().custom_header.iter().all(|v| v == "k:key-456"),
        "{:?}",
        fx.stats().custom_header
    );
    assert!(!fx.stats().custom_header.is_empty());
    let seen = elsewhere.stats();
    assert_eq!(
        (seen.posts, seen.get_requests, seen.delete_requests),
        (0, 0, 0),
        "{seen:?}"
    );
    assert!(seen.custom_header.is_empty(), "{:?}", seen.custom_header);
    assert!(seen.authorization.is_empty(), "{:?}", seen.authorization);

    let log = d.log_text();
    assert!(
        log.contains("another origin") && log.contains("WARN"),
        "{log}"
    );
    for shown in [err.to_owned(), log] {
        assert!(
            !shown.contains("tok-123") && !shown.contains("key-456"),
            "a secret leaked: {shown}"
        );
    }
}

#[tokio::test]
async fn a_redirect_within_the_origin_is_followed_with_the_headers() {
    let fx = HttpFixture::start(FixtureOptions {
        redirect: Some("/moved".into()),
        ..FixtureOptions::default()
    })
    .await;
    let d = daemon_with_secrets(&fx.url()).start().await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let r = a.call("remote__echo", json!({"text": "moved"})).await;
    assert_eq!(text(&r), "moved", "{r}");
    // `whoami` reports the headers of the request that reached /moved.
    let who: Value = serde_json::from_str(text(&a.call("remote__whoami", json!({})).await))
        .expect("whoami answers JSON");
    assert_eq!(who["authorization"], "Bearer tok-123");
    assert_eq!(who["key"], "k:key-456");
    assert_eq!(d.server_status("remote").await["state"], "ready");
}
