//! Self-tests of the grants without a user: `client_credentials` with a secret (Basic or
//! in the body) and with `private_key_jwt` (each check of the assertion failing once), the
//! jwt-bearer grant with registered assertions, and short-lived tokens the handle ends.

use super::client::*;
use super::proofs::*;
use crate::oauth::fixture::jwt::{self, CLIENT_ASSERTION_TYPE, Es256Key, JWT_BEARER};
use crate::oauth::fixture::{AssertionAudience, AuthMethod, Client, OAuthFixture};
use crate::support::eventually;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

/// The status of an `initialize` at the resource with a Bearer token.
async fn bearer_status(fx: &OAuthFixture, token: &str) -> u16 {
    mcp(&fx.mcp_url(), Some(token), None, &initialize())
        .await
        .status()
        .as_u16()
}

#[tokio::test]
async fn client_credentials_with_a_secret_gives_an_access_token_and_no_refresh_token() {
    let fx = OAuthFixture::builder()
        .client_credentials(true)
        .auth_scopes(&["mcp:basic", "mcp:write"])
        .client(Client::confidential(
            "basic-app",
            "s3cret",
            AuthMethod::ClientSecretBasic,
        ))
        .client(Client::confidential(
            "post-app",
            "p0st",
            AuthMethod::ClientSecretPost,
        ))
        .client(Client::public("public-app"))
        .access_ttl(Duration::from_secs(3))
        .start()
        .await;
    let meta = as_metadata(&fx.issuer()).await;
    let grants = json!(["authorization_code", "refresh_token", "client_credentials"]);
    assert_eq!(meta["grant_types_supported"], grants);
    assert!(
        meta.get("token_endpoint_auth_signing_alg_values_supported")
            .is_none()
    );
    assert!(meta.get("dpop_signing_alg_values_supported").is_none());

    let (url, mcp_url) = (fx.token_endpoint(), fx.mcp_url());
    let grant = [
        ("grant_type", "client_credentials"),
        ("scope", "mcp:basic"),
        ("resource", mcp_url.as_str()),
    ];
    let basic = post_form(&url, &grant, Some(("basic-app", "s3cret")), &[]).await;
    assert!(basic.ok(), "{}", basic.body);
    assert_eq!(basic.get("token_type"), "Bearer");
    assert_eq!(basic.body["expires_in"], 3);
    assert_eq!(basic.get("scope"), "mcp:basic");
    assert!(basic.body.get("refresh_token").is_none(), "{}", basic.body);
    assert_eq!(bearer_status(&fx, basic.get("access_token")).await, 200);

    let with = |extra: &[(&'static str, &'static str)]| {
        let mut pairs = grant.to_vec();
        pairs.extend_from_slice(extra);
        pairs
    };
    let post = with(&[("client_id", "post-app"), ("client_secret", "p0st")]);
    let answer = post_form(&url, &post, None, &[]).await;
    assert_eq!(answer.outcome(), accepted(), "{}", answer.body);
    let cases = [
        (
            Some(("basic-app", "wrong")),
            with(&[]),
            refused(401, "invalid_client"),
        ),
        (
            Some(("post-app", "p0st")),
            with(&[]),
            refused(401, "invalid_client"),
        ),
        (
            None,
            with(&[("client_id", "public-app")]),
            refused(400, "unauthorized_client"),
        ),
        (
            Some(("basic-app", "s3cret")),
            vec![("grant_type", "client_credentials"), ("scope", "mcp:admin")],
            refused(400, "invalid_scope"),
        ),
        (None, with(&[]), refused(401, "invalid_client")),
    ];
    for (basic, pairs, expected) in cases {
        let answer = post_form(&url, &pairs, basic, &[]).await;
        assert_eq!(answer.outcome(), expected, "{basic:?} {pairs:?}");
    }
    let h = fx.handle();
    assert_eq!(h.token_requests("client_credentials"), 7);
    let stats = h.stats();
    let log = stats.token_log_for("client_credentials");
    assert_eq!(log[0].token_type.as_deref(), Some("Bearer"));
    assert!(
        log[0]
            .authorization
            .as_deref()
            .unwrap()
            .starts_with("Basic ")
    );
    assert!(log.iter().all(|r| r.dpop.is_none()));
    assert!(h.valid_refresh_tokens().is_empty());
    fx.stop().await;

    let off = OAuthFixture::builder()
        .client(Client::confidential(
            "app",
            "s",
            AuthMethod::ClientSecretBasic,
        ))
        .start()
        .await;
    let answer = post_form(&off.token_endpoint(), &grant, Some(("app", "s")), &[]).await;
    assert_eq!(answer.outcome(), refused(400, "unsupported_grant_type"));
    off.stop().await;
}

#[tokio::test]
async fn private_key_jwt_checks_the_signature_audience_issuer_lifetime_and_replay() {
    let key = Es256Key::generate();
    let other = Es256Key::generate();
    let other_jwk = other.public_jwk();
    let fx = OAuthFixture::builder()
        .client_credentials(true)
        .auth_methods(&[AuthMethod::ClientSecretBasic, AuthMethod::PrivateKeyJwt])
        .client(Client::private_key_jwt("jwt-app", &key.public_point()))
        .client(Client::private_key_jwt_xy(
            "jwk-app",
            other_jwk["x"].as_str().unwrap(),
            other_jwk["y"].as_str().unwrap(),
        ))
        .client(Client::confidential(
            "basic-app",
            "s3cret",
            AuthMethod::ClientSecretBasic,
        ))
        .start()
        .await;
    let meta = as_metadata(&fx.issuer()).await;
    let methods = json!(["client_secret_basic", "private_key_jwt"]);
    assert_eq!(meta["token_endpoint_auth_methods_supported"], methods);
    assert_eq!(
        meta["token_endpoint_auth_signing_alg_values_supported"],
        json!(["ES256"])
    );
    let (issuer, url) = (fx.issuer(), fx.token_endpoint());
    let attempt = async |assertion: &str, extra: &[(&str, &str)], basic: Option<(&str, &str)>| {
        let mut pairs = vec![
            ("grant_type", "client_credentials"),
            ("client_assertion_type", CLIENT_ASSERTION_TYPE),
            ("client_assertion", assertion),
        ];
        pairs.retain(|(k, _)| !extra.iter().any(|(e, _)| e == k));
        pairs.extend(extra.iter().filter(|(_, v)| !v.is_empty()));
        post_form(&url, &pairs, basic, &[]).await.outcome()
    };
    let signed = |claims: &Value| key.jwt(claims);
    let edited = |edit: &dyn Fn(&mut Value)| {
        let mut claims = jwt::assertion_claims("jwt-app", &issuer);
        edit(&mut claims);
        signed(&claims)
    };
    let bad = refused(401, "invalid_client");

    let good = key.client_assertion("jwt-app", &issuer);
    assert_eq!(attempt(&good, &[], None).await, accepted());
    assert_eq!(attempt(&good, &[], None).await, bad, "a replayed jti");
    let by_jwk = other.client_assertion("jwk-app", &issuer);
    assert_eq!(attempt(&by_jwk, &[], None).await, accepted());
    let named = key.client_assertion("jwt-app", &issuer);
    let same_id = [("client_id", "jwt-app")];
    assert_eq!(attempt(&named, &same_id, None).await, accepted());
    let as_array = edited(&|c| c["aud"] = json!(["https://else.example", issuer.as_str()]));
    assert_eq!(attempt(&as_array, &[], None).await, accepted());

    let forged = other.client_assertion("jwt-app", &issuer);
    assert_eq!(attempt(&forged, &[], None).await, bad, "another key");
    let to_endpoint = key.client_assertion("jwt-app", &url);
    assert_eq!(
        attempt(&to_endpoint, &[], None).await,
        bad,
        "aud: token endpoint"
    );
    let slash = key.client_assertion("jwt-app", &format!("{issuer}/"));
    assert_eq!(
        attempt(&slash, &[], None).await,
        bad,
        "aud: issuer with a slash"
    );
    let iss = edited(&|c| c["iss"] = json!("someone-else"));
    assert_eq!(attempt(&iss, &[], None).await, bad, "iss differs from sub");
    let now = jwt::now();
    let expired = edited(&|c| {
        c["iat"] = json!(now - 120);
        c["exp"] = json!(now - 60);
    });
    assert_eq!(attempt(&expired, &[], None).await, bad, "expired");
    let long = edited(&|c| c["exp"] = json!(now + 600));
    assert_eq!(
        attempt(&long, &[], None).await,
        bad,
        "lives over five minutes"
    );
    let no_jti = edited(&|c| {
        c.as_object_mut().unwrap().remove("jti");
    });
    assert_eq!(attempt(&no_jti, &[], None).await, bad, "no jti");
    let claims = jwt::assertion_claims("jwt-app", &issuer);
    let es384 = key.sign(&json!({"alg": "ES384", "typ": "JWT"}), &claims);
    assert_eq!(attempt(&es384, &[], None).await, bad, "alg");
    let fresh = key.client_assertion("jwt-app", &issuer);
    let wrong_type = [("client_assertion_type", "urn:example:other")];
    assert_eq!(attempt(&fresh, &wrong_type, None).await, bad, "type");
    let other_id = [("client_id", "jwk-app")];
    assert_eq!(attempt(&fresh, &other_id, None).await, bad, "client_id");
    let twice = Some(("basic-app", "s3cret"));
    let both = attempt(&fresh, &[], twice).await;
    assert_eq!(both, refused(400, "invalid_request"), "two methods");
    let secret_client = key.client_assertion("basic-app", &issuer);
    assert_eq!(
        attempt(&secret_client, &[], None).await,
        bad,
        "wrong method"
    );
    assert_eq!(attempt("not.a.jwt", &[], None).await, bad, "garbage");
    assert_eq!(
        attempt(&fresh, &[], None).await,
        accepted(),
        "unused so far"
    );

    let reg = json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt",
        "grant_types": ["client_credentials"], "jwks": {"keys": [key.public_jwk()]}});
    let endpoint = meta["registration_endpoint"].as_str().unwrap();
    let (status, reg) = json_of(send("DCR", client().post(endpoint).json_body(&reg)).await).await;
    assert_eq!(status, StatusCode::CREATED, "{reg}");
    assert!(reg.get("client_secret").is_none(), "{reg}");
    let registered = key.client_assertion(reg["client_id"].as_str().unwrap(), &issuer);
    assert_eq!(attempt(&registered, &[], None).await, accepted());
    let stats = fx.handle().stats();
    assert_eq!(stats.token_requests_for("client_credentials"), 20);
    let logged = stats.token_log[0].param("client_assertion");
    assert_eq!(logged, Some(good.as_str()));
    fx.stop().await;

    let fx = OAuthFixture::builder()
        .client_credentials(true)
        .assertion_audiences(&[AssertionAudience::TokenEndpoint])
        .client(Client::private_key_jwt("jwt-app", &key.public_point()))
        .start()
        .await;
    let (issuer, url) = (fx.issuer(), fx.token_endpoint());
    let attempt = async |aud: &str| {
        let pairs = [
            ("grant_type", "client_credentials"),
            ("client_assertion_type", CLIENT_ASSERTION_TYPE),
            ("client_assertion", &key.client_assertion("jwt-app", aud)),
        ];
        post_form(&url, &pairs, None, &[]).await.outcome()
    };
    assert_eq!(attempt(&url).await, accepted());
    assert_eq!(attempt(&issuer).await, refused(401, "invalid_client"));
    fx.stop().await;
}

#[tokio::test]
async fn the_jwt_bearer_grant_takes_only_assertions_it_knows() {
    let fx = OAuthFixture::builder()
        .jwt_bearer(true)
        .client(Client::public("app"))
        .client(Client::confidential(
            "conf",
            "s3cret",
            AuthMethod::ClientSecretBasic,
        ))
        .start()
        .await;
    let meta = as_metadata(&fx.issuer()).await;
    let grants = json!(["authorization_code", "refresh_token", JWT_BEARER]);
    assert_eq!(meta["grant_types_supported"], grants);
    let url = fx.token_endpoint();
    let public = async |assertion: Option<&str>| {
        let mut pairs = vec![("grant_type", JWT_BEARER), ("client_id", "app")];
        pairs.extend(assertion.map(|a| ("assertion", a)));
        post_form(&url, &pairs, None, &[]).await
    };
    let unknown = public(Some("assertion-1")).await.outcome();
    assert_eq!(unknown, refused(400, "invalid_grant"));
    let missing = public(None).await.outcome();
    assert_eq!(missing, refused(400, "invalid_request"));

    fx.handle().accept_assertion("assertion-1");
    let answer = public(Some("assertion-1")).await;
    assert!(answer.ok(), "{}", answer.body);
    assert_eq!(answer.get("token_type"), "Bearer");
    assert!(
        answer.body.get("refresh_token").is_none(),
        "{}",
        answer.body
    );
    assert_eq!(bearer_status(&fx, answer.get("access_token")).await, 200);
    let pairs = [("grant_type", JWT_BEARER), ("assertion", "assertion-1")];
    let conf = post_form(&url, &pairs, Some(("conf", "s3cret")), &[]).await;
    assert_eq!(conf.outcome(), accepted(), "{}", conf.body);
    let wrong = post_form(&url, &pairs, Some(("conf", "wrong")), &[]).await;
    assert_eq!(wrong.outcome(), refused(401, "invalid_client"));

    assert!(fx.handle().forget_assertion("assertion-1"));
    let forgotten = public(Some("assertion-1")).await.outcome();
    assert_eq!(forgotten, refused(400, "invalid_grant"));
    assert_eq!(fx.handle().token_requests(JWT_BEARER), 6);
    fx.stop().await;
}

#[tokio::test]
async fn a_short_lived_token_expires_and_the_handle_expires_or_revokes_one() {
    let fx = OAuthFixture::builder()
        .client_credentials(true)
        .client(Client::confidential(
            "app",
            "s3cret",
            AuthMethod::ClientSecretBasic,
        ))
        .access_ttl(Duration::from_secs(2))
        .start()
        .await;
    let url = fx.token_endpoint();
    let fetch = async || {
        let pairs = [("grant_type", "client_credentials")];
        let answer = post_form(&url, &pairs, Some(("app", "s3cret")), &[]).await;
        assert_eq!(answer.body["expires_in"], 2);
        answer.get("access_token").to_owned()
    };
    let first = fetch().await;
    assert_eq!(bearer_status(&fx, &first).await, 200);
    let h = fx.handle().clone();
    eventually(
        "the 2 s token to expire",
        Duration::from_secs(6),
        async || (!h.valid_access_tokens().contains(&first)).then_some(()),
    )
    .await;
    assert_eq!(bearer_status(&fx, &first).await, 401);

    let second = fetch().await;
    assert!(h.expire(&second));
    assert!(!h.expire("no-such-token"));
    assert_eq!(bearer_status(&fx, &second).await, 401);
    let third = fetch().await;
    assert!(h.revoke(&third));
    assert_eq!(bearer_status(&fx, &third).await, 401);
    assert_eq!(h.token_requests("client_credentials"), 3);
    fx.stop().await;
}
