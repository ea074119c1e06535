//! DPoP through the real daemon.
//!
//! The code flow's token bound to the key mcpd keeps (and the same key after a restart),
//! nonces demanded on both sides and after a rotation, a machine grant's bound token, and
//! a token stolen from the store that is useless without the key (while a Bearer token,
//! with DPoP turned off, is not).

use super::*;
use crate::oauth::fixture::jwt::Es256Key;
use crate::oauth::fixture::{AuthMethod, OAuthFixture, OAuthStats, ResourceOutcome};
use crate::oauth::logins::log_in;
use crate::support::*;
use std::collections::HashSet;

/// A daemon with one remote server `r` at the fixture and these `[servers.r]` lines.
async fn daemon(fx: &OAuthFixture, extra: &str) -> Daemon {
    DaemonBuilder::new()
        .remote("r", &fx.mcp_url(), extra)
        .start()
        .await
}

/// The resource requests from index `from` on that carried a token.
fn with_token(stats: &OAuthStats, from: usize) -> Vec<&crate::oauth::fixture::ResourceRequest> {
    (stats.resource_requests.iter().skip(from))
        .filter(|r| r.token.is_some())
        .collect()
}

/// Every request from index `from` on that carried a token sent `token` with the DPoP
/// scheme and a proof by the key `jkt` that passed, each proof its own `jti`; at least
/// `calls` of them were admitted tool calls. The `jti`s seen go into `jtis`.
fn proved(
    stats: &OAuthStats,
    from: usize,
    token: &str,
    jkt: &str,
    calls: usize,
    jtis: &mut HashSet<String>,
) {
    let requests = with_token(stats, from);
    assert!(!requests.is_empty(), "no request carried a token");
    for r in &requests {
        assert_eq!(r.token.as_deref(), Some(token), "{r:?}");
        assert_eq!(r.scheme.as_deref(), Some("DPoP"), "{r:?}");
        let check = r.dpop.as_ref().expect("a checked proof");
        assert!(check.ok(), "{r:?}");
        assert_eq!(check.jkt.as_deref(), Some(jkt), "{r:?}");
        let jti = check.jti.clone().expect("a jti");
        assert!(jtis.insert(jti), "a proof was sent twice: {r:?}");
        assert_eq!(r.outcome, ResourceOutcome::Admitted, "{r:?}");
    }
    let admitted_calls = (requests.iter())
        .filter(|r| r.tool.as_deref() == Some("echo"))
        .count();
    assert!(
        admitted_calls >= calls,
        "{admitted_calls} calls: {requests:?}"
    );
}

#[tokio::test]
async fn dpop_on_the_code_flow_binds_the_token_to_the_key_mcpd_keeps_across_a_restart() {
    let fx = OAuthFixture::builder().dpop(true).start().await;
    let mut d = daemon(&fx, "").await;
    wait_state(&d, "r", "needs-login").await;
    log_in(&d, "r").await;
    wait_state(&d, "r", "ready").await;
    for i in 0..3 {
        echo_through(&d, "r", &format!("p{i}")).await;
    }
    let h = fx.handle();
    let stats = h.stats();
    let exchanges = stats.token_log_for("authorization_code");
    assert_eq!(exchanges.len(), 1, "{:?}", stats.token_log);
    let check = exchanges[0]
        .dpop
        .as_ref()
        .expect("the exchange carried a proof");
    assert!(check.ok(), "{check:?}");
    assert_eq!(exchanges[0].token_type.as_deref(), Some("DPoP"));
    let token = the_access_token(&fx);
    let bound = h.token_binding(&token).expect("the token is DPoP-bound");
    assert_eq!(check.jkt.as_deref(), Some(bound.as_str()));
    let kept = stored(&d, "r");
    assert_eq!(kept["tokens"]["dpop_bound"], true, "{kept}");
    assert_eq!(
        stored_key_thumbprint(&kept),
        bound,
        "the token is bound to the key mcpd keeps"
    );
    let mut jtis = HashSet::new();
    proved(&stats, 0, &token, &bound, 3, &mut jtis);
    let (status, _) = status_outputs(&d).await;
    let line = auth_line(&status, "r");
    assert!(
        line.starts_with("auth: logged in (expires in ") && line.contains(", DPoP"),
        "{line}"
    );

    // A restarted daemon reads the login and its key back: the same token passes the
    // binding check, with no new login.
    let before = stats.resource_requests.len();
    d.restart_daemon().await;
    wait_state(&d, "r", "ready").await;
    echo_through(&d, "r", "after").await;
    echo_through(&d, "r", "again").await;
    let stats = h.stats();
    proved(&stats, before, &token, &bound, 2, &mut jtis);
    assert_eq!(stats.authorizations.len(), 1, "no new login");
    assert_eq!(stats.token_log.len(), 1, "no token request at all");
    assert_eq!(stored_key_thumbprint(&stored(&d, "r")), bound);
}

#[tokio::test]
async fn dpop_nonces_are_honoured_at_the_token_endpoint_and_the_server_and_after_a_rotation() {
    let fx = OAuthFixture::builder()
        .dpop(true)
        .token_dpop_nonce(true)
        .rs_dpop_nonce(true)
        .start()
        .await;
    let d = daemon(&fx, "").await;
    wait_state(&d, "r", "needs-login").await;
    log_in(&d, "r").await;
    wait_state(&d, "r", "ready").await;
    echo_through(&d, "r", "n1").await;
    let h = fx.handle();
    let stats = h.stats();

    let token_nonce = h.token_nonce().expect("the AS demands a nonce");
    let at_as: Vec<(u16, Option<&str>, Option<&str>)> = (stats.token_log.iter())
        .map(|r| {
            let check = r.dpop.as_ref().expect("a proof");
            (r.status, r.error.as_deref(), check.nonce.as_deref())
        })
        .collect();
    assert_eq!(
        at_as,
        [
            (400, Some("use_dpop_nonce"), None),
            (200, None, Some(token_nonce.as_str()))
        ],
        "a refusal asking for the nonce, then the exchange with it"
    );

    let rs_nonce = h.rs_nonce().expect("the server demands a nonce");
    let token = the_access_token(&fx);
    let at_rs = with_token(&stats, 0);
    let first = at_rs.first().expect("a request with the token");
    assert_eq!(first.error.as_deref(), Some("use_dpop_nonce"), "{first:?}");
    assert_eq!(first.dpop.as_ref().and_then(|c| c.nonce.clone()), None);
    let second = at_rs.get(1).expect("the retry");
    assert_eq!(second.outcome, ResourceOutcome::Admitted, "{second:?}");
    assert_eq!(
        second.dpop.as_ref().and_then(|c| c.nonce.as_deref()),
        Some(rs_nonce.as_str())
    );
    let refusals = |requests: &[&crate::oauth::fixture::ResourceRequest]| {
        (requests.iter())
            .filter(|r| r.error.as_deref() == Some("use_dpop_nonce"))
            .count()
    };
    assert_eq!(refusals(&at_rs), 1, "the nonce was kept after the retry");

    // The server moves to a new nonce: the next call meets one refusal and goes through.
    let before = stats.resource_requests.len();
    let next = h.rotate_rs_nonce();
    echo_through(&d, "r", "n2").await;
    let stats = h.stats();
    let after = with_token(&stats, before);
    assert_eq!(refusals(&after), 1, "one retry: {after:?}");
    let refused = (after.iter())
        .find(|r| r.error.is_some())
        .expect("the refusal");
    assert_eq!(
        refused.dpop.as_ref().and_then(|c| c.nonce.as_deref()),
        Some(rs_nonce.as_str())
    );
    let call = (after.iter())
        .find(|r| r.tool.as_deref() == Some("echo") && r.outcome == ResourceOutcome::Admitted)
        .expect("the call went through");
    assert_eq!(
        call.dpop.as_ref().and_then(|c| c.nonce.as_deref()),
        Some(next.as_str())
    );
    assert_eq!(call.token.as_deref(), Some(token.as_str()));
    assert_eq!(h.token_requests("authorization_code"), 2, "no new login");
}

#[tokio::test]
async fn dpop_with_client_credentials_binds_the_machine_token() {
    let fx = with_client_credentials()
        .dpop(true)
        .client(app("s3cret", AuthMethod::ClientSecretBasic))
        .start()
        .await;
    let d = Machine::new()
        .secret("app-secret", "s3cret")
        .remote("r", &fx.mcp_url(), CLIENT_CREDENTIALS)
        .start()
        .await;
    wait_state(&d, "r", "ready").await;
    echo_through(&d, "r", "m1").await;
    echo_through(&d, "r", "m2").await;
    let h = fx.handle();
    let stats = h.stats();
    let grants = stats.token_log_for("client_credentials");
    assert_eq!(grants.len(), 1, "{:?}", stats.token_log);
    let check = grants[0].dpop.as_ref().expect("the grant carried a proof");
    assert!(check.ok(), "{check:?}");
    assert_eq!(grants[0].token_type.as_deref(), Some("DPoP"));
    let token = the_access_token(&fx);
    let bound = h.token_binding(&token).expect("the token is DPoP-bound");
    let kept = stored(&d, "r");
    assert_eq!(kept["tokens"]["dpop_bound"], true, "{kept}");
    assert_eq!(stored_key_thumbprint(&kept), bound);
    proved(&stats, 0, &token, &bound, 2, &mut HashSet::new());
    let (status, _) = status_outputs(&d).await;
    let line = auth_line(&status, "r");
    assert!(
        line.starts_with("auth: client credentials, token expires in ") && line.contains(", DPoP"),
        "{line}"
    );
}

/// What the fixture's MCP endpoint answers an `initialize` sent straight to it with
/// `Authorization: SCHEME TOKEN` and these DPoP proofs.
async fn replay(fx: &OAuthFixture, scheme: &str, token: &str, proof: Option<&str>) -> u16 {
    let mut req = http_client()
        .post(fx.mcp_url())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("authorization", format!("{scheme} {token}"))
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "attacker", "version": "1"}}})
            .to_string(),
        );
    if let Some(proof) = proof {
        req = req.header("dpop", proof);
    }
    within("the replayed request", req.send())
        .await
        .expect("the fixture answers")
        .status()
        .as_u16()
}

/// A daemon getting a client_credentials token from a fixture that offers DPoP, with
/// these extra `[servers.r.oauth]` lines; the token as its store keeps it.
async fn steal(fx: &OAuthFixture, oauth: &str) -> (Daemon, String) {
    let d = Machine::new()
        .secret("app-secret", "s3cret")
        .remote(
            "r",
            &fx.mcp_url(),
            &format!("{CLIENT_CREDENTIALS}\n{oauth}"),
        )
        .start()
        .await;
    wait_state(&d, "r", "ready").await;
    echo_through(&d, "r", "mine").await;
    let token = stored(&d, "r")["tokens"]["access_token"]
        .as_str()
        .expect("the stored access token")
        .to_owned();
    assert_eq!(token, the_access_token(fx));
    (d, token)
}

async fn dpop_fixture() -> OAuthFixture {
    with_client_credentials()
        .dpop(true)
        .client(app("s3cret", AuthMethod::ClientSecretBasic))
        .start()
        .await
}

#[tokio::test]
async fn a_token_stolen_from_the_store_is_useless_without_the_dpop_key_and_a_bearer_one_is_not() {
    let fx = dpop_fixture().await;
    let (d, token) = steal(&fx, "").await;
    assert!(fx.handle().token_binding(&token).is_some());
    assert_eq!(replay(&fx, "Bearer", &token, None).await, 401);
    assert_eq!(replay(&fx, "DPoP", &token, None).await, 401);
    let thief = Es256Key::generate();
    let proof = thief.dpop_proof("POST", &fx.mcp_url(), Some(&token), None);
    assert_eq!(
        replay(&fx, "DPoP", &token, Some(&proof)).await,
        401,
        "a proof by another key"
    );
    // The token itself is good: mcpd, which holds the key, still gets through.
    echo_through(&d, "r", "still mine").await;

    // The counterpart: the same theft with DPoP turned off in mcpd works, so the
    // refusals above are DPoP's doing.
    let fx = dpop_fixture().await;
    let (_d, token) = steal(&fx, "dpop = false").await;
    assert_eq!(fx.handle().token_binding(&token), None, "a Bearer token");
    assert_eq!(replay(&fx, "Bearer", &token, None).await, 200);
}
