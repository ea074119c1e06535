//! Self-tests of DPoP at the protected resource (a bound token needs the DPoP scheme and a
//! matching proof; the challenges), and of the AS's and the resource's nonces: demanded,
//! honoured on the retry, rotated through the handle.

use super::client::*;
use super::dpop::credentials;
use super::proofs::*;
use crate::oauth::fixture::jwt::{self, Es256Key};
use crate::oauth::fixture::{AuthMethod, Client, OAuthBuilder, OAuthFixture, ResourceOutcome};
use serde_json::json;
use std::collections::HashMap;

async fn fixture(builder: OAuthBuilder) -> OAuthFixture {
    builder
        .client_credentials(true)
        .client(Client::confidential(
            "app",
            "s3cret",
            AuthMethod::ClientSecretBasic,
        ))
        .start()
        .await
}

/// A DPoP-bound access token for `key` from `fx` (which demands no nonce).
async fn bound_token(fx: &OAuthFixture, key: &Es256Key) -> String {
    let proof = key.dpop_proof("POST", &fx.token_endpoint(), None, None);
    let answer = credentials(fx, &[&proof]).await;
    assert_eq!(answer.get("token_type"), "DPoP", "{}", answer.body);
    answer.get("access_token").to_owned()
}

#[tokio::test]
async fn a_bound_token_passes_only_with_the_dpop_scheme_and_a_matching_proof() {
    let fx = fixture(OAuthFixture::builder().dpop(true)).await;
    let url = fx.mcp_url();
    let prm = fx.prm_url().unwrap();
    let resp = mcp_as(&url, None, &[], &initialize()).await;
    let params = [("resource_metadata", prm.as_str()), ("algs", "ES256")];
    let expected = vec![(
        "DPoP".to_owned(),
        HashMap::from(params.map(|(k, v)| (k.to_owned(), v.to_owned()))),
    )];
    assert_eq!((resp.status().as_u16(), challenges(&resp)), (401, expected));
    let (_, doc) = get_json(&prm).await;
    assert_eq!(doc["dpop_signing_alg_values_supported"], json!(["ES256"]));

    let (key, other) = (Es256Key::generate(), Es256Key::generate());
    let token = bound_token(&fx, &key).await;
    let proof = |key: &Es256Key, htm: &str, htu: &str, token: &str| {
        key.dpop_proof(htm, htu, Some(token), None)
    };
    let good = proof(&key, "POST", &url, &token);
    let resp = mcp_as(&url, Some(("DPoP", &token)), &[&good], &initialize()).await;
    assert_eq!(resp.status().as_u16(), 200);

    let dpop = |error: &str| (401, "DPoP".to_owned(), error.to_owned());
    let as_bearer = mcp_as(&url, Some(("Bearer", &token)), &[], &initialize()).await;
    assert_eq!(denial(&as_bearer), dpop("invalid_token"));
    let with_proof = proof(&key, "POST", &url, &token);
    let as_bearer = mcp_as(
        &url,
        Some(("Bearer", &token)),
        &[&with_proof],
        &initialize(),
    )
    .await;
    assert_eq!(
        denial(&as_bearer),
        dpop("invalid_token"),
        "a proof does not help Bearer"
    );
    let challenge = &challenges(&as_bearer)[0].1;
    assert_eq!(challenge["resource_metadata"], prm);
    assert_eq!(challenge["algs"], "ES256");

    let other_token = bound_token(&fx, &key).await;
    let bad_proofs = [
        ("missing", None),
        ("wrong ath", Some(proof(&key, "POST", &url, &other_token))),
        ("other key", Some(proof(&other, "POST", &url, &token))),
        (
            "wrong htu",
            Some(proof(&key, "POST", &fx.token_endpoint(), &token)),
        ),
        ("wrong htm", Some(proof(&key, "GET", &url, &token))),
        ("replayed", Some(good.clone())),
        ("no ath", Some(key.dpop_proof("POST", &url, None, None))),
    ];
    for (what, proof) in &bad_proofs {
        let proofs: Vec<&str> = proof.iter().map(String::as_str).collect();
        let resp = mcp_as(&url, Some(("DPoP", &token)), &proofs, &initialize()).await;
        assert_eq!(denial(&resp), dpop("invalid_dpop_proof"), "{what}");
    }
    let plain = credentials(&fx, &[]).await.get("access_token").to_owned();
    let fresh = proof(&key, "POST", &url, &plain);
    let resp = mcp_as(&url, Some(("DPoP", &plain)), &[&fresh], &initialize()).await;
    assert_eq!(
        denial(&resp),
        dpop("invalid_token"),
        "a Bearer token sent as DPoP"
    );
    let resp = mcp_as(&url, Some(("Bearer", &plain)), &[], &initialize()).await;
    assert_eq!(resp.status().as_u16(), 200, "Bearer tokens still pass");
    fx.handle().expire(&token);
    let late = proof(&key, "POST", &url, &token);
    let resp = mcp_as(&url, Some(("DPoP", &token)), &[&late], &initialize()).await;
    assert_eq!(
        denial(&resp),
        dpop("invalid_token"),
        "an expired bound token"
    );

    let stats = fx.handle().stats();
    let requests = &stats.resource_requests;
    let admitted = &requests[1];
    assert_eq!(admitted.outcome, ResourceOutcome::Admitted);
    assert_eq!(admitted.scheme.as_deref(), Some("DPoP"));
    let check = admitted.dpop.as_ref().unwrap();
    assert!(check.ok());
    assert_eq!(check.jti.as_deref(), jwt::claims_of(&good)["jti"].as_str());
    assert_eq!(check.jkt.as_deref(), Some(key.thumbprint().as_str()));
    let errors: Vec<Option<&str>> = requests.iter().map(|r| r.error.as_deref()).collect();
    let mut expected = vec![None, None, Some("invalid_token"), Some("invalid_token")];
    expected.extend([Some("invalid_dpop_proof")].repeat(bad_proofs.len()));
    expected.extend([Some("invalid_token"), None, Some("invalid_token")]);
    assert_eq!(errors, expected);
    let missing = requests[4].dpop.as_ref().unwrap();
    assert!(!missing.had_proof && !missing.ok());
    fx.stop().await;

    let both = fixture(
        OAuthFixture::builder()
            .dpop(true)
            .rs_dpop_bearer_challenge(true),
    )
    .await;
    let resp = mcp_as(&both.mcp_url(), None, &[], &initialize()).await;
    let schemes: Vec<String> = challenges(&resp).into_iter().map(|(s, _)| s).collect();
    assert_eq!(schemes, ["DPoP", "Bearer"]);
    let resp = mcp_as(
        &both.mcp_url(),
        Some(("Bearer", "at-unknown")),
        &[],
        &initialize(),
    )
    .await;
    let all = challenges(&resp);
    assert_eq!(
        all[1].1["error"], "invalid_token",
        "the error is in the Bearer challenge"
    );
    assert!(!all[0].1.contains_key("error"), "{all:?}");
    both.stop().await;
}

#[tokio::test]
async fn nonces_are_demanded_at_the_as_and_the_resource_and_honoured_on_the_retry() {
    let builder = OAuthFixture::builder()
        .dpop(true)
        .token_dpop_nonce(true)
        .rs_dpop_nonce(true);
    let fx = fixture(builder).await;
    let (h, key, te) = (fx.handle(), Es256Key::generate(), fx.token_endpoint());
    let token_nonce_1 = h.token_nonce().unwrap();

    let first = credentials(&fx, &[&key.dpop_proof("POST", &te, None, None)]).await;
    assert_eq!(first.outcome(), refused(400, "use_dpop_nonce"));
    assert_eq!(first.header("dpop-nonce"), Some(token_nonce_1.as_str()));
    let retry = key.dpop_proof("POST", &te, None, Some(&token_nonce_1));
    let answer = credentials(&fx, &[&retry]).await;
    assert_eq!(answer.outcome(), accepted(), "{}", answer.body);
    assert_eq!(answer.header("dpop-nonce"), Some(token_nonce_1.as_str()));
    let token = answer.get("access_token").to_owned();
    let rotated = h.rotate_token_nonce();
    assert_ne!(rotated, token_nonce_1);
    let stale = credentials(
        &fx,
        &[&key.dpop_proof("POST", &te, None, Some(&token_nonce_1))],
    )
    .await;
    assert_eq!(stale.outcome(), refused(400, "use_dpop_nonce"));
    assert_eq!(stale.header("dpop-nonce"), Some(rotated.as_str()));
    let renewed = key.dpop_proof("POST", &te, None, Some(&rotated));
    assert_eq!(credentials(&fx, &[&renewed]).await.outcome(), accepted());

    let url = fx.mcp_url();
    let call = async |nonce: Option<&str>| {
        let proof = key.dpop_proof("POST", &url, Some(&token), nonce);
        mcp_as(&url, Some(("DPoP", &token)), &[&proof], &initialize()).await
    };
    let rs_nonce = h.rs_nonce().unwrap();
    let resp = call(None).await;
    assert_eq!(
        denial(&resp),
        (401, "DPoP".to_owned(), "use_dpop_nonce".to_owned())
    );
    assert_eq!(resp.headers()["dpop-nonce"], rs_nonce.as_str());
    assert_eq!(call(Some(&rs_nonce)).await.status().as_u16(), 200);
    let next = h.rotate_rs_nonce();
    let resp = call(Some(&rs_nonce)).await;
    assert_eq!(denial(&resp).2, "use_dpop_nonce");
    assert_eq!(resp.headers()["dpop-nonce"], next.as_str());
    assert_eq!(call(Some(&next)).await.status().as_u16(), 200);

    let stats = h.stats();
    let nonces: Vec<(Option<&str>, bool)> = (stats.token_log.iter())
        .map(|r| r.dpop.as_ref().unwrap())
        .map(|c| (c.nonce.as_deref(), c.ok()))
        .collect();
    let expected = [
        (None, false),
        (Some(&token_nonce_1), true),
        (Some(&token_nonce_1), false),
    ];
    let mut expected: Vec<_> = expected.map(|(n, ok)| (n.map(String::as_str), ok)).to_vec();
    expected.push((Some(rotated.as_str()), true));
    assert_eq!(nonces, expected);
    let refused_check = stats.token_log[0].dpop.as_ref().unwrap();
    assert!(
        refused_check
            .error
            .as_deref()
            .unwrap()
            .starts_with("use_dpop_nonce")
    );
    let at_rs: Vec<Option<&str>> = (stats.resource_requests.iter())
        .map(|r| r.error.as_deref())
        .collect();
    let nonce_error = Some("use_dpop_nonce");
    assert_eq!(at_rs, vec![nonce_error, None, nonce_error, None]);
    fx.stop().await;
}
