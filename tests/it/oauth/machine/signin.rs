//! Enterprise-managed authorization with the user's sign-in at the identity provider.
//!
//! No ID token is configured: `ctl login` signs in there (OIDC code flow with PKCE), the
//! ID token is exchanged for each ID-JAG, kept across a restart, renewed with the refresh
//! token when it runs out, and a sign-in the identity provider no longer takes waits for
//! the next `ctl login`.

use super::*;
use crate::oauth::fixture::IdpOptions;
use crate::oauth::logins::log_in;
use std::time::Duration;

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

/// An AS with the jwt-bearer grant for public client `app`, and an identity provider
/// where the user signs in, whose ID tokens live `ttl`.
async fn fixture(ttl: Duration) -> OAuthFixture {
    OAuthFixture::builder()
        .idp(
            IdpOptions::new("mcpd-at-idp", "a-configured-token-mcpd-never-sees")
                .sign_in(true)
                .id_token_ttl(ttl)
                .for_client("app"),
        )
        .client(Client::public("app"))
        .start()
        .await
}

async fn daemon(fx: &OAuthFixture) -> Daemon {
    let oauth = format!(
        "grant = \"jwt_bearer\"\nclient_id = \"app\"\n\
         [servers.r.oauth.identity_provider]\nissuer = \"{}\"\nclient_id = \"mcpd-at-idp\"",
        fx.idp_issuer()
    );
    Machine::new()
        .remote("r", &fx.mcp_url(), &oauth)
        .start()
        .await
}

/// The `subject_token` of each token exchange the identity provider saw, in order.
fn exchanged(fx: &OAuthFixture) -> Vec<(String, u16)> {
    let stats = fx.handle().stats();
    (stats.idp_requests.iter())
        .filter(|r| r.param("grant_type") == Some(TOKEN_EXCHANGE))
        .map(|r| (r.param("subject_token").unwrap_or("").to_owned(), r.status))
        .collect()
}

/// The sign-in mcpd keeps beside the login, if any.
fn stored_sign_in(d: &Daemon) -> Option<Value> {
    let path = d.dir().join("state/credentials/r.idp.json");
    let text = std::fs::read_to_string(path).ok()?;
    Some(serde_json::from_str(&text).expect("the sign-in is JSON"))
}

#[tokio::test]
async fn ctl_login_signs_in_at_the_identity_provider_and_its_id_token_gets_the_id_jag() {
    let fx = fixture(Duration::from_secs(300)).await;
    let h = fx.handle();
    let mut d = daemon(&fx).await;
    // No ID token yet: the server waits for the user, and says where to sign in.
    let row = wait_state(&d, "r", "needs-login").await;
    let (status, _) = status_outputs(&d).await;
    assert!(
        auth_line(&status, "r").contains("sign in at the identity provider"),
        "{status}\n{row}"
    );
    assert!(
        exchanged(&fx).is_empty(),
        "nothing to exchange before the sign-in"
    );

    log_in(&d, "r").await;
    wait_state(&d, "r", "ready").await;
    echo_through(&d, "r", "signed in").await;
    let stats = h.stats();
    assert_eq!(stats.idp_authorizations.len(), 1, "one sign-in");
    let scope = stats.idp_authorizations[0].param("scope").unwrap_or("");
    assert!(scope.split(' ').any(|s| s == "openid"), "{scope}");
    assert_eq!(stats.id_tokens.len(), 1);
    assert_eq!(
        exchanged(&fx),
        [(stats.id_tokens[0].clone(), 200)],
        "the ID token the sign-in gave is exchanged"
    );
    let kept = stored_sign_in(&d).expect("the sign-in is kept");
    assert_eq!(kept["id_token"], stats.id_tokens[0]);
    assert!(kept["refresh_token"].is_string(), "{kept}");

    // A restarted daemon signs in no more: the kept ID token serves the next grant.
    d.restart_daemon().await;
    wait_state(&d, "r", "ready").await;
    assert!(h.expire(&the_access_token(&fx)));
    echo_through(&d, "r", "after a restart").await;
    assert_eq!(h.stats().idp_authorizations.len(), 1, "no second sign-in");
    let after = exchanged(&fx);
    assert_eq!(after.len(), 2, "{after:?}");
    assert_eq!(after[1], (stats.id_tokens[0].clone(), 200));

    // The identity provider stops taking that ID token: the sign-in is over, the server
    // waits for the next `ctl login`, and that one works.
    h.expire_id_tokens();
    assert!(h.expire(&the_access_token(&fx)));
    let mut agent = d.initialized_agent().await;
    let answer = agent.call("r__echo", json!({"text": "refused"})).await;
    let text = answer.to_string();
    assert!(text.contains("mcpd ctl login r"), "{text}");
    wait_state(&d, "r", "needs-login").await;
    assert!(
        stored_sign_in(&d).is_none(),
        "the refused sign-in is forgotten"
    );
    log_in(&d, "r").await;
    wait_state(&d, "r", "ready").await;
    echo_through(&d, "r", "signed in again").await;
    assert_eq!(h.stats().idp_authorizations.len(), 2);
}

#[tokio::test]
async fn an_id_token_about_to_expire_is_renewed_with_the_refresh_token_first() {
    // ID tokens of 5 s: each is within mcpd's 30 s margin at once, so the first grant
    // renews it before the exchange.
    let fx = fixture(Duration::from_secs(5)).await;
    let h = fx.handle();
    let d = daemon(&fx).await;
    wait_state(&d, "r", "needs-login").await;
    log_in(&d, "r").await;
    wait_state(&d, "r", "ready").await;
    echo_through(&d, "r", "renewed").await;
    assert_eq!(h.idp_token_requests("authorization_code"), 1);
    assert_eq!(h.idp_token_requests("refresh_token"), 1, "renewed once");
    let stats = h.stats();
    assert_eq!(
        stats.id_tokens.len(),
        2,
        "the sign-in's and the renewed one"
    );
    let sent = exchanged(&fx);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        sent[0],
        (stats.id_tokens[1].clone(), 200),
        "the renewed one"
    );
    // The rotated refresh token is the one kept.
    let kept = stored_sign_in(&d).expect("kept");
    assert_eq!(kept["id_token"], stats.id_tokens[1]);
    let valid = h.idp_refresh_tokens();
    assert_eq!(valid.len(), 1, "{valid:?}");
    assert_eq!(kept["refresh_token"], valid[0]);
}
