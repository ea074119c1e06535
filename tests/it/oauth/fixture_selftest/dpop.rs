//! Self-tests of DPoP at the token endpoint: a valid proof binds the token to its key, each
//! check of the proof fails once, DPoP can be required or ignored, and a public client's
//! refresh token stays bound to the key that first proved itself.

use super::client::*;
use super::proofs::*;
use crate::oauth::fixture::jwt::{self, Es256Key};
use crate::oauth::fixture::{AuthMethod, Client, OAuthFixture};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use serde_json::{Value, json};

/// A fixture with the client_credentials grant for client `app` (Basic, `s3cret`).
async fn fixture(builder: crate::oauth::fixture::OAuthBuilder) -> OAuthFixture {
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

/// A client_credentials request of `app` with these DPoP headers.
pub(super) async fn credentials(fx: &OAuthFixture, proofs: &[&str]) -> Answer {
    let pairs = [("grant_type", "client_credentials")];
    post_form(
        &fx.token_endpoint(),
        &pairs,
        Some(("app", "s3cret")),
        proofs,
    )
    .await
}

#[test]
fn the_jwt_helper_follows_rfc_7638_and_its_keys_round_trip() {
    // The key of RFC 9449's example proof (§4.1) and its `jkt` (§6.1).
    let jwk = json!({"kty": "EC", "crv": "P-256",
        "x": "l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs",
        "y": "9VE4jf_Ok_o64zbTTlcuNJajHmt6v9TDVrU0CdvGRDA"});
    let jkt = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I";
    assert_eq!(jwt::thumbprint_of(&jwk), jkt);
    // The fixture's own thumbprints are compared with this one wherever a token is bound.

    let key = Es256Key::generate();
    let again = Es256Key::from_pkcs8(key.pkcs8_der());
    assert_eq!(again.public_point(), key.public_point());
    let pem = key.pkcs8_pem();
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----\n"), "{pem}");
    assert_eq!(STANDARD.decode(body).unwrap(), key.pkcs8_der());
    let private = key.private_jwk();
    let d = URL_SAFE_NO_PAD
        .decode(private["d"].as_str().unwrap())
        .unwrap();
    let rng = SystemRandom::new();
    let point = key.public_point();
    let alg = &ECDSA_P256_SHA256_FIXED_SIGNING;
    assert!(EcdsaKeyPair::from_private_key_and_public_key(alg, &d, &point, &rng).is_ok());
    assert_eq!(private["x"], key.public_jwk()["x"]);
}

#[tokio::test]
async fn a_valid_proof_binds_the_token_and_each_bad_one_is_refused() {
    let fx = fixture(OAuthFixture::builder().dpop_metadata(true)).await;
    let meta = as_metadata(&fx.issuer()).await;
    assert_eq!(meta["dpop_signing_alg_values_supported"], json!(["ES256"]));
    let (key, other) = (Es256Key::generate(), Es256Key::generate());
    let te = fx.token_endpoint();

    let proof = key.dpop_proof("POST", &te, None, None);
    let answer = credentials(&fx, &[&proof]).await;
    assert!(answer.ok(), "{}", answer.body);
    assert_eq!(answer.get("token_type"), "DPoP");
    let h = fx.handle();
    let thumbprint = key.thumbprint();
    assert_eq!(
        h.token_binding(answer.get("access_token")),
        Some(thumbprint.clone())
    );
    let bearer = credentials(&fx, &[]).await;
    assert_eq!(bearer.get("token_type"), "Bearer");
    assert_eq!(h.token_binding(bearer.get("access_token")), None);
    let with_query = key.dpop_proof("POST", &format!("{te}?x=1#f"), None, None);
    let answer = credentials(&fx, &[&with_query]).await;
    assert_eq!(
        answer.outcome(),
        accepted(),
        "htu is compared without query and fragment"
    );

    let claims = || jwt::dpop_claims("POST", &te);
    let header = key.dpop_header();
    let edited_header = |name: &str, value: Value| {
        let mut h = header.clone();
        h[name] = value;
        key.sign(&h, &claims())
    };
    let edited_claims = |name: &str, value: Value| {
        let mut c = claims();
        c[name] = value;
        key.sign(&header, &c)
    };
    let mut no_jti = claims();
    no_jti.as_object_mut().unwrap().remove("jti");
    let bad_proofs = [
        ("typ", edited_header("typ", json!("jwt"))),
        ("alg", edited_header("alg", json!("ES384"))),
        ("private jwk", edited_header("jwk", key.private_jwk())),
        ("no jwk", edited_header("jwk", Value::Null)),
        ("signature", other.sign(&header, &claims())),
        (
            "htu",
            edited_claims("htu", json!(format!("{}/other", fx.issuer()))),
        ),
        ("htm", edited_claims("htm", json!("GET"))),
        ("stale iat", edited_claims("iat", json!(jwt::now() - 600))),
        ("future iat", edited_claims("iat", json!(jwt::now() + 600))),
        ("ath", key.dpop_proof("POST", &te, Some("at-1"), None)),
        ("no jti", key.sign(&header, &no_jti)),
        ("garbage", "not-a-jwt".to_owned()),
    ];
    let invalid = refused(400, "invalid_dpop_proof");
    for (what, proof) in &bad_proofs {
        assert_eq!(
            credentials(&fx, &[proof]).await.outcome(),
            invalid,
            "{what}"
        );
    }
    let replayed = credentials(&fx, &[&proof]).await;
    assert_eq!(replayed.outcome(), invalid, "a replayed jti");
    let (a, b) = (
        key.dpop_proof("POST", &te, None, None),
        key.dpop_proof("POST", &te, None, None),
    );
    assert_eq!(
        credentials(&fx, &[&a, &b]).await.outcome(),
        invalid,
        "two headers"
    );
    let fine = key.dpop_proof("POST", &te, None, None);
    assert_eq!(credentials(&fx, &[&fine]).await.outcome(), accepted());

    let stats = h.stats();
    let total = 2 + bad_proofs.len() + 3;
    assert_eq!(stats.token_requests_for("client_credentials"), total + 1);
    let checks: Vec<_> = stats
        .token_log
        .iter()
        .filter_map(|r| r.dpop.as_ref())
        .collect();
    assert_eq!(
        checks.len(),
        total,
        "every request with a proof is recorded"
    );
    let first = checks[0];
    assert!(first.ok() && first.had_proof);
    assert_eq!(first.jti.as_deref(), jwt::claims_of(&proof)["jti"].as_str());
    assert_eq!(first.jkt.as_deref(), Some(thumbprint.as_str()));
    assert_eq!(stats.token_log[0].token_type.as_deref(), Some("DPoP"));
    let replay = checks[2 + bad_proofs.len()];
    assert!(
        replay.error.as_deref().unwrap().contains("jti"),
        "{replay:?}"
    );
    fx.stop().await;

    let strict = fixture(OAuthFixture::builder().require_dpop(true)).await;
    assert_eq!(credentials(&strict, &[]).await.outcome(), invalid);
    let proof = key.dpop_proof("POST", &strict.token_endpoint(), None, None);
    assert_eq!(
        credentials(&strict, &[&proof]).await.get("token_type"),
        "DPoP"
    );
    strict.stop().await;
    let deaf = fixture(OAuthFixture::builder().dpop_ignored(true)).await;
    let proof = key.dpop_proof("POST", &deaf.token_endpoint(), None, None);
    let answer = credentials(&deaf, &[&proof]).await;
    assert_eq!(answer.get("token_type"), "Bearer");
    assert!(deaf.handle().stats().token_log[0].dpop.is_none());
    deaf.stop().await;
}

#[tokio::test]
async fn a_public_clients_code_and_refresh_tokens_are_bound_to_the_proving_key() {
    let fx = OAuthFixture::builder().dpop_metadata(true).start().await;
    let meta = as_metadata(&fx.issuer()).await;
    let client_id = register(&meta).await["client_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (key, other) = (Es256Key::generate(), Es256Key::generate());
    let te = fx.token_endpoint();
    let code = code_for(&meta, &client_id, None, &fx.mcp_url()).await;
    let pairs = [
        ("grant_type", "authorization_code"),
        ("code", code.code.as_str()),
        ("redirect_uri", REDIRECT),
        ("code_verifier", code.verifier.as_str()),
        ("client_id", client_id.as_str()),
    ];
    let proof = key.dpop_proof("POST", &te, None, None);
    let tokens = post_form(&te, &pairs, None, &[&proof]).await;
    assert!(tokens.ok(), "{}", tokens.body);
    assert_eq!(tokens.get("token_type"), "DPoP");
    let h = fx.handle();
    assert_eq!(
        h.token_binding(tokens.get("access_token")),
        Some(key.thumbprint())
    );

    let refresh = async |proofs: &[&str]| {
        let pairs = [
            ("grant_type", "refresh_token"),
            ("refresh_token", tokens.get("refresh_token")),
            ("client_id", client_id.as_str()),
        ];
        post_form(&te, &pairs, None, proofs).await
    };
    assert_eq!(refresh(&[]).await.outcome(), refused(400, "invalid_grant"));
    let by_other = other.dpop_proof("POST", &te, None, None);
    assert_eq!(
        refresh(&[&by_other]).await.outcome(),
        refused(400, "invalid_grant")
    );
    let by_key = key.dpop_proof("POST", &te, None, None);
    let renewed = refresh(&[&by_key]).await;
    assert!(renewed.ok(), "{}", renewed.body);
    assert_eq!(renewed.get("token_type"), "DPoP");
    assert_eq!(
        h.token_binding(renewed.get("access_token")),
        Some(key.thumbprint())
    );
    assert!(!h.any_family_revoked(), "the refusals rotated nothing");

    let plain = login(&fx, None).await;
    assert_eq!(h.token_binding(&plain.access), None);
    let stats = h.stats();
    let refreshes = stats.token_log_for("refresh_token");
    let had: Vec<bool> = refreshes.iter().map(|r| r.dpop.is_some()).collect();
    assert_eq!(had, vec![false, true, true]);
    fx.stop().await;
}
