//! No credential of the OAuth extensions in mcpd's outputs.
//!
//! With a client secret, an identity provider's secret, a private key, an assertion file,
//! an ID token, an ID-JAG, DPoP and a refused grant all in play, the daemon's log at the
//! most verbose level, `ctl status` (text and JSON) and what agents are told hold none of
//! them, while each one demonstrably reached the wire or the store.

use super::*;
use crate::oauth::fixture::jwt::{Es256Key, JWT_BEARER, now};
use crate::oauth::fixture::{AuthMethod, Client, IdpOptions, OAuthFixture};
use crate::support::*;

const CLIENT_SECRET: &str = "client-secret-5e0c2a7d91f4";
const IDP_SECRET: &str = "idp-secret-b7a13c6e08d2";

#[tokio::test]
async fn no_secret_key_assertion_id_token_or_token_reaches_the_log_or_status() {
    // e: enterprise-managed, the AS client signing with a private key, DPoP.
    let key = Es256Key::generate();
    let id_token = Es256Key::generate().jwt(&json!({
        "iss": "https://idp.example.com", "sub": "alice", "aud": "mcpd-at-idp",
        "iat": now(), "exp": now() + 3600,
    }));
    let fx_e = OAuthFixture::builder()
        .idp(
            IdpOptions::new("mcpd-at-idp", &id_token)
                .secret(IDP_SECRET)
                .for_client("app"),
        )
        .auth_methods(&[AuthMethod::PrivateKeyJwt])
        .client(Client::private_key_jwt("app", &key.public_point()))
        .dpop(true)
        .start()
        .await;
    // c: client credentials with a secret in the body.
    let fx_c = with_client_credentials()
        .auth_methods(&[AuthMethod::ClientSecretPost])
        .client(app(CLIENT_SECRET, AuthMethod::ClientSecretPost))
        .start()
        .await;
    // w: jwt-bearer from an assertion file.
    let fx_w = OAuthFixture::builder()
        .jwt_bearer(true)
        .client(Client::public("wl"))
        .start()
        .await;
    let assertion = workload_jwt(&fx_w.issuer(), 600);
    fx_w.handle().accept_assertion(&assertion);

    let m = Machine::new()
        .env("RUST_LOG", "trace")
        .secret("app-key", &key.pkcs8_pem())
        .secret("idp-secret", IDP_SECRET)
        .secret("c-secret", CLIENT_SECRET);
    let id_token_file = m.file("id_token", &id_token);
    let assertion_file = m.file("assertion.jwt", &assertion);
    let e = format!(
        "grant = \"jwt_bearer\"\nclient_id = \"app\"\nprivate_key = \"${{secret:app-key}}\"\n\
         [servers.e.oauth.identity_provider]\nissuer = \"{}\"\nclient_id = \"mcpd-at-idp\"\n\
         client_secret = \"${{secret:idp-secret}}\"\nid_token_file = \"{}\"",
        fx_e.idp_issuer(),
        id_token_file.display()
    );
    let c = "grant = \"client_credentials\"\nclient_id = \"app\"\nclient_secret = \"${secret:c-secret}\"";
    let w = format!(
        "grant = \"jwt_bearer\"\nclient_id = \"wl\"\nassertion_file = \"{}\"",
        assertion_file.display()
    );
    let d = m
        .remote("e", &fx_e.mcp_url(), &e)
        .remote("c", &fx_c.mcp_url(), c)
        .remote("w", &fx_w.mcp_url(), &w)
        .start()
        .await;
    for name in ["e", "c", "w"] {
        wait_state(&d, name, "ready").await;
        echo_through(&d, name, name).await;
    }
    let mut needles = vec![
        ("the client secret", CLIENT_SECRET.to_owned()),
        ("the identity provider's secret", IDP_SECRET.to_owned()),
        ("the assertion", assertion.clone()),
        ("the ID token", id_token.clone()),
    ];
    let pem = key.pkcs8_pem();
    let body: Vec<&str> = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    needles.push(("the private key's PEM body", body.concat()));
    needles.extend(
        body.iter()
            .map(|l| ("a line of the private key's PEM", (*l).to_owned())),
    );
    let d_of_key = key.private_jwk()["d"].as_str().expect("d").to_owned();
    needles.push(("the private key's scalar", d_of_key));
    let mut tokens = Vec::new();
    for (name, fx) in [("e", &fx_e), ("c", &fx_c), ("w", &fx_w)] {
        let kept = stored(&d, name);
        let token = kept["tokens"]["access_token"].as_str().expect("a token");
        assert_eq!(fx.handle().valid_access_tokens(), [token.to_owned()]);
        tokens.push(token.to_owned());
        if let Some(k) = kept["dpop_key"].as_str() {
            needles.push(("a stored DPoP key", k.to_owned()));
        }
    }
    let jags = fx_e.handle().stats().id_jags;
    assert_eq!(jags.len(), 1, "one ID-JAG");
    needles.push(("the ID-JAG", jags[0].clone()));

    // Each one went where it belongs, so a search for it can fail.
    let stats_e = fx_e.handle().stats();
    let exchange = &stats_e.idp_requests[0];
    assert_eq!(
        exchange.status, 200,
        "the IdP took its secret: {exchange:?}"
    );
    assert_eq!(exchange.param("subject_token"), Some(id_token.as_str()));
    let grant_e = stats_e.token_log_for(JWT_BEARER)[0];
    assert_eq!(grant_e.status, 200, "the AS took the key's assertion");
    assert_eq!(grant_e.param("assertion"), Some(jags[0].as_str()));
    assert_eq!(grant_e.token_type.as_deref(), Some("DPoP"));
    let stats_c = fx_c.handle().stats();
    assert_eq!(
        stats_c.token_log[0].param("client_secret"),
        Some(CLIENT_SECRET)
    );
    let stats_w = fx_w.handle().stats();
    assert_eq!(
        stats_w.token_log[0].param("assertion"),
        Some(assertion.as_str())
    );

    // A refusal on the way: c's secret no longer matches, and its token runs out.
    let hc = fx_c.handle();
    hc.add_client(app("another-secret", AuthMethod::ClientSecretPost));
    assert!(hc.expire(&tokens[1]));
    let mut a = d.initialized_agent().await;
    let refused = a.call("c__echo", json!({"text": "x"})).await;
    assert!(
        error_message(&refused).contains("mcpd ctl login c"),
        "{refused}"
    );
    let s = wait_state(&d, "c", "needs-login").await;
    assert!(s.to_string().contains("invalid_client"), "{s}");
    needles.extend(tokens.into_iter().map(|t| ("an access token", t)));

    let (status, status_json) = status_outputs(&d).await;
    let (_, tools, _) = d.run_cli(&["ctl", "tools"]).await;
    let log = d.log_text();
    assert!(
        log.contains("got a token") && log.contains("TRACE"),
        "the log is the verbose one"
    );
    let told = refused.to_string();
    for (what, value) in &needles {
        for (channel, text) in [
            ("the daemon's log", &log),
            ("ctl status", &status),
            ("ctl status --json", &status_json),
            ("ctl tools", &tools),
            ("the agent's error", &told),
        ] {
            assert!(!text.contains(value.as_str()), "{what} is in {channel}");
        }
    }
}
