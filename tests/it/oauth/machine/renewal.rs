//! A machine grant's token renewed and refused.
//!
//! Twenty calls after the token ran out share one new grant, and a grant refused for good
//! (a wrong client secret) parks the server with the reason and what to do, sends nothing
//! more per call, and `mcpd ctl login` runs it again once the cause is fixed.

use super::*;
use crate::oauth::fixture::{AuthMethod, ResourceOutcome};
use crate::support::*;

#[tokio::test]
async fn twenty_calls_after_the_token_ran_out_share_one_new_grant() {
    let fx = with_client_credentials()
        .client(app("s3cret", AuthMethod::ClientSecretBasic))
        .start()
        .await;
    let d = Machine::new()
        .secret("app-secret", "s3cret")
        .remote("r", &fx.mcp_url(), CLIENT_CREDENTIALS)
        .start()
        .await;
    wait_state(&d, "r", "ready").await;
    echo_through(&d, "r", "warm").await;
    let h = fx.handle();
    assert_eq!(h.token_requests("client_credentials"), 1);
    let mut agents = Vec::new();
    for _ in 0..20 {
        agents.push(d.initialized_agent().await);
    }
    // The token runs out at the AS; mcpd learns it from the server's 401s.
    let old = the_access_token(&fx);
    assert!(h.expire(&old));
    let calls: Vec<_> = (agents.into_iter().enumerate())
        .map(|(i, mut a)| {
            tokio::spawn(async move {
                let said = format!("call-{i}");
                let r = a.call("r__echo", json!({ "text": said })).await;
                (said, r)
            })
        })
        .collect();
    for call in calls {
        let (said, r) = within("a call", call).await.expect("the call's task");
        assert_eq!(text(&r), said, "{r}");
    }
    let stats = h.stats();
    assert_eq!(
        stats.token_requests_for("client_credentials"),
        2,
        "exactly one new grant for all twenty: {:?}",
        stats.token_log
    );
    let new = the_access_token(&fx);
    assert_ne!(new, old);
    let with = |token: &str, outcome: ResourceOutcome| {
        (stats.resource_requests.iter())
            .filter(|r| r.token.as_deref() == Some(token) && r.outcome == outcome)
            .filter(|r| r.tool.as_deref() == Some("echo"))
            .count()
    };
    assert!(
        with(&old, ResourceOutcome::Unauthorized) >= 1,
        "the calls met the expired token's refusal"
    );
    assert_eq!(
        with(&new, ResourceOutcome::Admitted),
        20,
        "each call went through once, with the new token"
    );
}

#[tokio::test]
async fn a_refused_grant_waits_for_the_fix_and_ctl_login_then_works() {
    let fx = with_client_credentials()
        .client(app("the-right-secret", AuthMethod::ClientSecretBasic))
        .start()
        .await;
    let d = Machine::new()
        .secret("app-secret", "a-wrong-secret")
        .remote("r", &fx.mcp_url(), CLIENT_CREDENTIALS)
        .start()
        .await;
    let s = wait_state(&d, "r", "needs-login").await;
    let detail = s["auth"]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("invalid_client"), "{s}");
    let h = fx.handle();
    assert_eq!(h.token_requests("client_credentials"), 1);
    assert_eq!(
        h.stats().token_log[0].error.as_deref(),
        Some("invalid_client")
    );

    let mut a = d.initialized_agent().await;
    for i in 0..3 {
        let r = a.call("r__echo", json!({ "text": format!("x{i}") })).await;
        let message = error_message(&r);
        assert!(
            message.contains("[servers.r.oauth]") && message.contains("mcpd ctl login r"),
            "the error says what to do: {r}"
        );
    }
    assert_eq!(
        h.token_requests("client_credentials"),
        1,
        "a refused grant is not repeated per call"
    );
    let (status, json) = status_outputs(&d).await;
    let line = auth_line(&status, "r");
    assert!(line.contains("invalid_client"), "{line}");
    assert!(
        line.contains("fix [servers.r.oauth]") && line.contains("mcpd ctl login r"),
        "{line}"
    );
    assert!(json.contains("invalid_client"), "{json}");

    // The AS now holds the secret mcpd has (as if the client's secret had been reset).
    h.add_client(app("a-wrong-secret", AuthMethod::ClientSecretBasic));
    let (code, _, err) = d.run_cli(&["ctl", "login", "r", "--no-browser"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "r: mcpd got a token with the client_credentials grant (no browser login needed)"
        ),
        "{err}"
    );
    assert_eq!(h.token_requests("client_credentials"), 2);
    wait_state(&d, "r", "ready").await;
    let r = a.call("r__echo", json!({ "text": "fixed" })).await;
    assert_eq!(text(&r), "fixed", "{r}");
    let (status, _) = status_outputs(&d).await;
    assert!(
        auth_line(&status, "r").starts_with("auth: client credentials, token expires in "),
        "{status}"
    );
}
