//! The machine grants working.
//!
//! Client credentials with a secret (Basic or in the body, as the metadata or
//! `client_auth` says) and with `private_key_jwt` (a key file or a secret), jwt-bearer
//! with an `assertion_file` read again at each grant (and an expired one never sent), and
//! an enterprise-managed login through an identity provider's ID-JAG.

use super::*;
use crate::oauth::fixture::jwt::{
    CLIENT_ASSERTION_TYPE, Es256Key, ID_JAG_TYPE, ID_TOKEN_TYPE, JWT_BEARER, TOKEN_EXCHANGE,
    claims_of,
};
use crate::oauth::fixture::{AssertionAudience, AuthMethod, Client, IdpOptions, OAuthFixture};
use crate::support::*;
use base64::Engine;

/// Client `app` with a secret registered for `registered`, the AS listing `listed`, mcpd
/// told `client_auth` (or not): one call works with no `ctl login`, after exactly one
/// client_credentials request made the way `expected` says.
async fn with_a_secret(
    listed: &[AuthMethod],
    registered: AuthMethod,
    client_auth: Option<&str>,
    expected: AuthMethod,
) {
    let fx = with_client_credentials()
        .auth_methods(listed)
        .client(app("s3cret-value", registered))
        .start()
        .await;
    let mut oauth = CLIENT_CREDENTIALS.to_owned();
    if let Some(method) = client_auth {
        oauth.push_str(&format!("\nclient_auth = \"{method}\""));
    }
    let d = Machine::new()
        .secret("app-secret", "s3cret-value")
        .remote("r", &fx.mcp_url(), &oauth)
        .start()
        .await;
    wait_state(&d, "r", "ready").await;
    echo_through(&d, "r", "hello").await;

    let stats = fx.handle().stats();
    assert_eq!(
        stats.token_requests_for("client_credentials"),
        1,
        "{:?}",
        stats.token_log
    );
    assert_eq!(stats.token_log.len(), 1, "no other token request");
    assert!(stats.authorizations.is_empty(), "no browser login");
    let request = &stats.token_log[0];
    assert_eq!(request.status, 200, "{request:?}");
    assert_eq!(request.param("resource"), Some(fx.mcp_url().as_str()));
    match expected {
        AuthMethod::ClientSecretBasic => {
            let basic = base64::engine::general_purpose::STANDARD.encode("app:s3cret-value");
            assert_eq!(
                request.authorization.as_deref(),
                Some(format!("Basic {basic}").as_str())
            );
            assert_eq!(request.param("client_secret"), None);
        }
        AuthMethod::ClientSecretPost => {
            assert_eq!(request.authorization, None);
            assert_eq!(request.param("client_id"), Some("app"));
            assert_eq!(request.param("client_secret"), Some("s3cret-value"));
        }
        other => panic!("not a secret method: {other:?}"),
    }
    let (status, _) = status_outputs(&d).await;
    let line = auth_line(&status, "r");
    assert!(
        line.starts_with("auth: client credentials, token expires in "),
        "{line}"
    );
    assert!(line.contains(&format!("issuer {}", fx.issuer())), "{line}");
    let s = d.server_status("r").await;
    assert_eq!(s["auth"]["grant"], "client_credentials", "{s}");
    assert_eq!(s["auth"]["state"], "logged-in", "{s}");
}

#[tokio::test]
async fn client_credentials_with_basic_as_the_metadata_lists_it_first() {
    let listed = [AuthMethod::ClientSecretBasic, AuthMethod::ClientSecretPost];
    let basic = AuthMethod::ClientSecretBasic;
    with_a_secret(&listed, basic, None, basic).await;
}

#[tokio::test]
async fn client_credentials_with_post_as_the_metadata_lists_it_first() {
    let listed = [AuthMethod::ClientSecretPost, AuthMethod::ClientSecretBasic];
    let post = AuthMethod::ClientSecretPost;
    with_a_secret(&listed, post, None, post).await;
}

#[tokio::test]
async fn client_credentials_with_the_method_client_auth_forces() {
    // The metadata puts Basic first; the client is registered for the body.
    let listed = [AuthMethod::ClientSecretBasic, AuthMethod::ClientSecretPost];
    let post = AuthMethod::ClientSecretPost;
    with_a_secret(&listed, post, Some("client_secret_post"), post).await;
}

/// Client `app` authenticating with `private_key_jwt` by `key`, configured with these
/// `[servers.r.oauth]` lines: the grant works, and the fixture verified an assertion
/// signed by the key, for the issuer.
async fn with_a_private_key(key: &Es256Key, m: Machine, key_lines: &str) {
    let fx = with_client_credentials()
        .auth_methods(&[AuthMethod::PrivateKeyJwt, AuthMethod::ClientSecretBasic])
        .assertion_audiences(&[AssertionAudience::Issuer])
        .client(Client::private_key_jwt("app", &key.public_point()))
        .start()
        .await;
    let oauth = format!("grant = \"client_credentials\"\nclient_id = \"app\"\n{key_lines}");
    let d = m.remote("r", &fx.mcp_url(), &oauth).start().await;
    wait_state(&d, "r", "ready").await;
    echo_through(&d, "r", "signed").await;

    let stats = fx.handle().stats();
    let requests = stats.token_log_for("client_credentials");
    assert_eq!(requests.len(), 1, "{:?}", stats.token_log);
    let request = requests[0];
    assert_eq!(request.status, 200, "the fixture verified it: {request:?}");
    assert_eq!(request.authorization, None);
    assert_eq!(
        request.param("client_assertion_type"),
        Some(CLIENT_ASSERTION_TYPE)
    );
    let assertion = request.param("client_assertion").expect("an assertion");
    let claims = claims_of(assertion);
    assert_eq!(claims["aud"], fx.issuer(), "{claims}");
    assert_eq!(claims["iss"], "app", "{claims}");
    assert_eq!(claims["sub"], "app", "{claims}");
    let (status, _) = status_outputs(&d).await;
    assert!(
        auth_line(&status, "r").starts_with("auth: client credentials, token expires in "),
        "{status}"
    );
}

#[tokio::test]
async fn private_key_jwt_with_the_key_in_a_file() {
    let key = Es256Key::generate();
    let m = Machine::new();
    let path = m.file("app-key.pem", &key.pkcs8_pem());
    let line = format!("private_key_file = \"{}\"", path.display());
    with_a_private_key(&key, m, &line).await;
}

#[tokio::test]
async fn private_key_jwt_with_the_key_in_a_secret() {
    let key = Es256Key::generate();
    let m = Machine::new().secret("app-key", &key.pkcs8_pem());
    with_a_private_key(&key, m, "private_key = \"${secret:app-key}\"").await;
}

/// A fixture for the jwt-bearer grant of public client `wl`.
async fn jwt_bearer_fixture() -> OAuthFixture {
    OAuthFixture::builder()
        .jwt_bearer(true)
        .client(Client::public("wl"))
        .start()
        .await
}

/// The `[servers.r.oauth]` lines of client `wl` whose assertion is in `path`.
fn assertion_file_lines(path: &Path) -> String {
    format!(
        "grant = \"jwt_bearer\"\nclient_id = \"wl\"\nassertion_file = \"{}\"",
        path.display()
    )
}

#[tokio::test]
async fn jwt_bearer_reads_the_assertion_file_again_at_each_grant() {
    let fx = jwt_bearer_fixture().await;
    let h = fx.handle();
    let first = workload_jwt(&fx.issuer(), 600);
    h.accept_assertion(&first);
    let m = Machine::new();
    let path = m.file("assertion.jwt", &format!("{first}\n"));
    let d = m
        .remote("r", &fx.mcp_url(), &assertion_file_lines(&path))
        .start()
        .await;
    wait_state(&d, "r", "ready").await;
    echo_through(&d, "r", "one").await;
    let sent = |n: usize| -> Vec<(String, u16)> {
        let stats = h.stats();
        let log = stats.token_log_for(JWT_BEARER);
        assert_eq!(log.len(), n, "{:?}", stats.token_log);
        (log.iter())
            .map(|r| (r.param("assertion").unwrap_or("").to_owned(), r.status))
            .collect()
    };
    assert_eq!(sent(1), [(first.clone(), 200)]);

    // The workload's identity is rotated: the file holds a new JWT, and the AS no longer
    // takes the old one. The token runs out; the next grant must read the file again.
    let second = workload_jwt(&fx.issuer(), 600);
    h.accept_assertion(&second);
    assert!(h.forget_assertion(&first));
    private_file(&path, &second);
    assert!(h.expire(&the_access_token(&fx)));
    echo_through(&d, "r", "two").await;
    assert_eq!(sent(2), [(first, 200), (second, 200)]);
    wait_state(&d, "r", "ready").await;
}

#[tokio::test]
async fn an_expired_assertion_file_is_not_sent_and_the_error_says_so() {
    let fx = jwt_bearer_fixture().await;
    let stale = workload_jwt(&fx.issuer(), -120);
    fx.handle().accept_assertion(&stale);
    let m = Machine::new();
    let path = m.file("assertion.jwt", &stale);
    let d = m
        .remote("r", &fx.mcp_url(), &assertion_file_lines(&path))
        .start()
        .await;
    let shown = path.display().to_string();
    let s = wait_state(&d, "r", "needs-login").await;
    let detail = s["auth"]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains(&shown) && detail.contains("expired"), "{s}");
    let mut a = d.initialized_agent().await;
    let r = a.call("r__echo", json!({"text": "x"})).await;
    let message = error_message(&r);
    assert!(
        message.contains(&shown) && message.contains("expired"),
        "the call's error names the file and says it expired: {r}"
    );
    let (status, _) = status_outputs(&d).await;
    let line = auth_line(&status, "r");
    assert!(line.contains(&shown) && line.contains("expired"), "{line}");
    let stats = fx.handle().stats();
    assert!(
        stats.token_log.is_empty(),
        "nothing was sent to the token endpoint: {:?}",
        stats.token_log
    );
}

#[tokio::test]
async fn enterprise_managed_login_exchanges_the_id_token_for_an_id_jag_then_a_token() {
    let idp_key = Es256Key::generate();
    let id_token = idp_key.jwt(&json!({
        "iss": "https://idp.example.com", "sub": "alice", "aud": "mcpd-at-idp",
        "iat": crate::oauth::fixture::jwt::now(), "exp": crate::oauth::fixture::jwt::now() + 3600,
    }));
    let fx = OAuthFixture::builder()
        .idp(IdpOptions::new("mcpd-at-idp", &id_token).for_client("app"))
        .client(Client::public("app"))
        .start()
        .await;
    let m = Machine::new();
    let path = m.file("id_token", &id_token);
    let oauth = format!(
        "grant = \"jwt_bearer\"\nclient_id = \"app\"\n\
         [servers.r.oauth.identity_provider]\nissuer = \"{}\"\nclient_id = \"mcpd-at-idp\"\nid_token_file = \"{}\"",
        fx.idp_issuer(),
        path.display()
    );
    let d = m.remote("r", &fx.mcp_url(), &oauth).start().await;
    wait_state(&d, "r", "ready").await;
    echo_through(&d, "r", "enterprise").await;

    let stats = fx.handle().stats();
    assert_eq!(stats.idp_requests.len(), 1, "{:?}", stats.idp_requests);
    let exchange = &stats.idp_requests[0];
    assert_eq!(exchange.status, 200, "{exchange:?}");
    assert_eq!(exchange.param("grant_type"), Some(TOKEN_EXCHANGE));
    assert_eq!(exchange.param("requested_token_type"), Some(ID_JAG_TYPE));
    assert_eq!(exchange.param("audience"), Some(fx.issuer().as_str()));
    assert_eq!(exchange.param("resource"), Some(fx.mcp_url().as_str()));
    assert_eq!(exchange.param("subject_token"), Some(id_token.as_str()));
    assert_eq!(exchange.param("subject_token_type"), Some(ID_TOKEN_TYPE));
    assert_eq!(exchange.param("client_id"), Some("mcpd-at-idp"));
    assert_eq!(stats.id_jags.len(), 1);
    let grants = stats.token_log_for(JWT_BEARER);
    assert_eq!(grants.len(), 1, "{:?}", stats.token_log);
    assert_eq!(stats.token_log.len(), 1, "no other token request");
    assert_eq!(grants[0].status, 200, "{:?}", grants[0]);
    assert_eq!(
        grants[0].param("assertion"),
        Some(stats.id_jags[0].as_str())
    );
    assert_eq!(grants[0].param("client_id"), Some("app"));
    let (status, _) = status_outputs(&d).await;
    let line = auth_line(&status, "r");
    assert!(
        line.starts_with("auth: jwt bearer, token expires in "),
        "{line}"
    );
}

#[tokio::test]
async fn client_credentials_with_a_client_assertion_from_a_file() {
    let key = Es256Key::generate();
    let fx = with_client_credentials()
        .auth_methods(&[AuthMethod::PrivateKeyJwt])
        .assertion_audiences(&[AssertionAudience::Issuer])
        .client(Client::private_key_jwt("app", &key.public_point()))
        .start()
        .await;
    // Made elsewhere (a platform's signer), not by mcpd: mcpd has no key here.
    let made = key.client_assertion("app", &fx.issuer());
    let m = Machine::new();
    let path = m.file("client-assertion.jwt", &format!("{made}\n"));
    let oauth = format!(
        "grant = \"client_credentials\"\nclient_id = \"app\"\nassertion_file = \"{}\"",
        path.display()
    );
    let d = m.remote("r", &fx.mcp_url(), &oauth).start().await;
    wait_state(&d, "r", "ready").await;
    echo_through(&d, "r", "made elsewhere").await;
    let stats = fx.handle().stats();
    let requests = stats.token_log_for("client_credentials");
    assert_eq!(requests.len(), 1, "{:?}", stats.token_log);
    assert_eq!(requests[0].status, 200, "{:?}", requests[0]);
    assert_eq!(
        requests[0].param("client_assertion_type"),
        Some(CLIENT_ASSERTION_TYPE)
    );
    assert_eq!(
        requests[0].param("client_assertion"),
        Some(made.as_str()),
        "the file's assertion, as it is"
    );
}
