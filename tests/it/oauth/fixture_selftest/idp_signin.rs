//! Self-tests of signing in at the identity provider (`IdpOptions::sign_in`): discovery,
//! the authorization code flow with PKCE and its refusals, the ID token's claims and
//! signature, single-use codes, rotating refresh tokens, and the token exchange taking the
//! ID tokens issued until they expire; and none of it when the option is off.

use super::client::*;
use super::proofs::*;
use crate::oauth::fixture::jwt::{self, ID_JAG_TYPE, ID_TOKEN_TYPE, TOKEN_EXCHANGE};
use crate::oauth::fixture::{IdpOptions, OAuthFixture};
use crate::support::eventually;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::StatusCode;
use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;

/// A fixture whose IdP client `idp-client` can sign in, with these options on top.
async fn signing_in(edit: impl FnOnce(IdpOptions) -> IdpOptions) -> OAuthFixture {
    let idp = IdpOptions::new("idp-client", "configured-id-token").sign_in(true);
    OAuthFixture::builder().idp(edit(idp)).start().await
}

async fn discovery(fx: &OAuthFixture) -> Value {
    let url = format!("{}/.well-known/openid-configuration", fx.idp_issuer());
    let (status, doc) = get_json(&url).await;
    assert_eq!(status, StatusCode::OK);
    doc
}

/// A good authorization request's parameters, one of them replaced (or removed: None).
fn sign_in_params(challenge: &str, edit: Option<(&str, Option<&str>)>) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = [
        ("response_type", "code"),
        ("client_id", "idp-client"),
        ("redirect_uri", REDIRECT),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
        ("state", "state-1"),
        ("scope", "openid offline_access"),
        ("nonce", "nonce-1"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .to_vec();
    if let Some((name, value)) = edit {
        pairs.retain(|(k, _)| k != name);
        pairs.extend(value.map(|v| (name.to_owned(), v.to_owned())));
    }
    pairs
}

/// Signs in with `scope` and returns (the callback's query, the verifier).
async fn sign_in(doc: &Value, scope: &str) -> (HashMap<String, String>, String) {
    let (verifier, challenge) = pkce();
    let params = sign_in_params(&challenge, Some(("scope", Some(scope))));
    (callback(&authorize(doc, &params).await), verifier)
}

/// Redeems `code` at the IdP as the public client `idp-client`.
async fn redeem_at(fx: &OAuthFixture, code: &str, verifier: &str, redirect: &str) -> Answer {
    let pairs = [
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", redirect),
        ("code_verifier", verifier),
        ("client_id", "idp-client"),
    ];
    post_form(&format!("{}/token", fx.idp_issuer()), &pairs, None, &[]).await
}

async fn refresh_at(fx: &OAuthFixture, refresh_token: &str) -> Answer {
    let pairs = [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token),
        ("client_id", "idp-client"),
    ];
    post_form(&format!("{}/token", fx.idp_issuer()), &pairs, None, &[]).await
}

/// A token exchange of `id_token` for an ID-JAG at `fx`'s IdP.
async fn exchange(fx: &OAuthFixture, id_token: &str) -> Answer {
    let pairs = [
        ("grant_type", TOKEN_EXCHANGE.to_owned()),
        ("requested_token_type", ID_JAG_TYPE.to_owned()),
        ("subject_token", id_token.to_owned()),
        ("subject_token_type", ID_TOKEN_TYPE.to_owned()),
        ("audience", fx.issuer()),
        ("resource", fx.mcp_url()),
        ("client_id", "idp-client".to_owned()),
    ];
    post_form(&format!("{}/token", fx.idp_issuer()), &pairs, None, &[]).await
}

/// Whether `jws` carries an ES256 signature by the first key of `jwks`.
fn signed_by(jwks: &Value, jws: &str) -> bool {
    let key = &jwks["keys"][0];
    let coordinate = |name: &str| URL_SAFE_NO_PAD.decode(key[name].as_str().unwrap()).unwrap();
    let mut point = vec![4];
    point.extend(coordinate("x"));
    point.extend(coordinate("y"));
    let (input, signature) = jws.rsplit_once('.').unwrap();
    let signature = URL_SAFE_NO_PAD.decode(signature).unwrap();
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
        .verify(input.as_bytes(), &signature)
        .is_ok()
}

#[tokio::test]
async fn signing_in_at_the_idp_gives_a_signed_id_token_the_exchange_accepts() {
    let fx = signing_in(|idp| idp).await;
    let idp = fx.idp_issuer();
    let doc = discovery(&fx).await;
    assert_eq!(doc["authorization_endpoint"], format!("{idp}/authorize"));
    assert_eq!(doc["response_types_supported"], json!(["code"]));
    assert_eq!(doc["code_challenge_methods_supported"], json!(["S256"]));
    let scopes = doc["scopes_supported"].as_array().unwrap();
    assert!(scopes.contains(&json!("openid")) && scopes.contains(&json!("offline_access")));
    let grants = doc["grant_types_supported"].as_array().unwrap();
    for grant in ["authorization_code", "refresh_token", TOKEN_EXCHANGE] {
        assert!(grants.contains(&json!(grant)), "{doc}");
    }
    assert_eq!(
        doc["token_endpoint_auth_methods_supported"],
        json!(["none"])
    );

    let (back, verifier) = sign_in(&doc, "openid offline_access").await;
    assert_eq!(back["state"], "state-1");
    assert_eq!(back["iss"], idp);
    let code = &back["code"];
    let (_, wrong) = pkce();
    let bad = redeem_at(&fx, code, &wrong, REDIRECT).await;
    assert_eq!(bad.outcome(), refused(400, "invalid_grant"));
    let moved = "http://127.0.0.1:53682/elsewhere";
    let bad = redeem_at(&fx, code, &verifier, moved).await;
    assert_eq!(bad.outcome(), refused(400, "invalid_grant"));
    let tokens = redeem_at(&fx, code, &verifier, REDIRECT).await;
    assert!(tokens.ok(), "{}", tokens.body);
    assert_eq!(tokens.get("token_type"), "Bearer");
    assert_eq!(tokens.body["expires_in"], 300);
    assert_eq!(tokens.get("scope"), "openid offline_access");
    assert!(!tokens.get("access_token").is_empty());
    assert!(!tokens.get("refresh_token").is_empty());
    let again = redeem_at(&fx, code, &verifier, REDIRECT).await;
    assert_eq!(again.outcome(), refused(400, "invalid_grant"), "single use");

    let id_token = tokens.get("id_token").to_owned();
    assert_eq!(jwt::header_of(&id_token)["alg"], "ES256");
    let claims = jwt::claims_of(&id_token);
    assert_eq!(claims["iss"], idp);
    assert_eq!(claims["aud"], "idp-client");
    assert_eq!(claims["sub"], "fixture-user");
    assert_eq!(claims["nonce"], "nonce-1");
    let lifetime = claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap();
    assert_eq!(lifetime, 300);
    let (_, jwks) = get_json(doc["jwks_uri"].as_str().unwrap()).await;
    assert!(signed_by(&jwks, &id_token), "{jwks}");

    let jag = exchange(&fx, &id_token).await;
    assert!(jag.ok(), "{}", jag.body);
    assert_eq!(
        jwt::claims_of(jag.get("access_token"))["sub"],
        "fixture-user"
    );
    let configured = exchange(&fx, "configured-id-token").await;
    assert_eq!(configured.outcome(), accepted(), "the configured one still");

    let h = fx.handle();
    assert_eq!(h.idp_token_requests("authorization_code"), 4);
    assert_eq!(h.idp_token_requests(TOKEN_EXCHANGE), 2);
    let stats = h.stats();
    assert_eq!(stats.id_tokens, vec![id_token]);
    assert_eq!(stats.idp_token_requests_for("refresh_token"), 0);
    assert_eq!(stats.idp_authorizations.len(), 1);
    let seen = &stats.idp_authorizations[0];
    assert_eq!((seen.status, seen.error.as_deref()), (302, None));
    assert_eq!(seen.param("nonce"), Some("nonce-1"));
    assert_eq!(h.idp_refresh_tokens(), vec![tokens.get("refresh_token")]);
    fx.stop().await;
}

#[tokio::test]
async fn the_idp_refuses_bad_sign_in_requests() {
    let fx = signing_in(|idp| idp.secret("idp-secret")).await;
    let doc = discovery(&fx).await;
    let methods = json!(["client_secret_basic", "client_secret_post"]);
    assert_eq!(doc["token_endpoint_auth_methods_supported"], methods);
    let (_, challenge) = pkce();
    // Refused without a redirect: the client or the redirect URI cannot be trusted.
    let not_redirected = [
        ("client_id", Some("someone-else")),
        ("client_id", None),
        ("redirect_uri", Some("https://app.example.com/callback")),
        ("redirect_uri", Some("http://192.0.2.1:53682/callback")),
        ("redirect_uri", None),
    ];
    for edit in not_redirected {
        let resp = authorize(&doc, &sign_in_params(&challenge, Some(edit))).await;
        let (status, body) = json_of(resp).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{edit:?}");
        assert_eq!(error_code(&body), "invalid_request", "{edit:?}");
    }
    // Refused by an error redirect.
    let redirected = [
        ("scope", Some("profile offline_access"), "invalid_scope"),
        ("scope", None, "invalid_scope"),
        ("response_type", Some("token"), "unsupported_response_type"),
        ("code_challenge", None, "invalid_request"),
        ("code_challenge_method", Some("plain"), "invalid_request"),
        ("state", None, "invalid_request"),
    ];
    for (name, value, error) in redirected {
        let params = sign_in_params(&challenge, Some((name, value)));
        let back = callback(&authorize(&doc, &params).await);
        assert_eq!(back["error"], error, "{name} = {value:?}");
        assert_eq!(back["iss"], fx.idp_issuer());
        assert!(!back.contains_key("code"));
        if name != "state" {
            assert_eq!(back["state"], "state-1");
        }
    }
    let stats = fx.handle().stats();
    let statuses: Vec<u16> = stats.idp_authorizations.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [[400; 5].as_slice(), &[302; 6]].concat());

    // The token endpoint authenticates the confidential IdP client.
    let (back, verifier) = sign_in(&doc, "openid").await;
    let url = format!("{}/token", fx.idp_issuer());
    let pairs = |secret: Option<&'static str>| {
        let mut pairs = vec![
            ("grant_type", "authorization_code"),
            ("code", back["code"].as_str()),
            ("redirect_uri", REDIRECT),
            ("code_verifier", verifier.as_str()),
            ("client_id", "idp-client"),
        ];
        pairs.extend(secret.map(|s| ("client_secret", s)));
        pairs
    };
    let client = refused(401, "invalid_client");
    assert_eq!(
        post_form(&url, &pairs(None), None, &[]).await.outcome(),
        client
    );
    let wrong = post_form(&url, &pairs(Some("wrong")), None, &[]).await;
    assert_eq!(wrong.outcome(), client);
    let basic = Some(("idp-client", "idp-secret"));
    let tokens = post_form(&url, &pairs(None), basic, &[]).await;
    assert!(tokens.ok(), "{}", tokens.body);
    assert!(
        tokens.body.get("refresh_token").is_none(),
        "no offline_access"
    );
    assert_eq!(tokens.get("scope"), "openid");
    let (back, verifier) = sign_in(&doc, "openid").await;
    let mut by_post = pairs(Some("idp-secret"));
    by_post[1].1 = back["code"].as_str();
    by_post[3].1 = verifier.as_str();
    assert_eq!(
        post_form(&url, &by_post, None, &[]).await.outcome(),
        accepted()
    );
    let refresh = [
        ("grant_type", "refresh_token"),
        ("refresh_token", "idp-refresh-0"),
    ];
    let unknown = post_form(&url, &refresh, basic, &[]).await;
    assert_eq!(unknown.outcome(), refused(400, "invalid_grant"));
    fx.stop().await;
}

#[tokio::test]
async fn idp_refresh_tokens_rotate_and_renew_the_id_token() {
    let fx = signing_in(|idp| idp).await;
    let doc = discovery(&fx).await;
    let (back, verifier) = sign_in(&doc, "openid offline_access").await;
    let first = redeem_at(&fx, &back["code"], &verifier, REDIRECT).await;
    assert!(first.ok(), "{}", first.body);
    let renewed = refresh_at(&fx, first.get("refresh_token")).await;
    assert!(renewed.ok(), "{}", renewed.body);
    for name in ["access_token", "id_token", "refresh_token"] {
        assert_ne!(renewed.get(name), first.get(name), "{name}");
        assert!(!renewed.get(name).is_empty(), "{name}");
    }
    assert_eq!(renewed.get("scope"), "openid offline_access");
    let claims = jwt::claims_of(renewed.get("id_token"));
    assert_eq!(claims["aud"], "idp-client");
    assert!(claims.get("nonce").is_none());
    let old = refresh_at(&fx, first.get("refresh_token")).await;
    assert_eq!(old.outcome(), refused(400, "invalid_grant"), "rotated");
    let next = refresh_at(&fx, renewed.get("refresh_token")).await;
    assert_eq!(next.outcome(), accepted());
    let h = fx.handle();
    assert_eq!(h.idp_refresh_tokens(), vec![next.get("refresh_token")]);
    assert_eq!(h.idp_token_requests("refresh_token"), 3);
    assert_eq!(h.idp_token_requests("authorization_code"), 1);
    let ids = [&first, &renewed, &next].map(|a| a.get("id_token").to_owned());
    assert_eq!(h.stats().id_tokens, ids);
    for id_token in &ids {
        assert_eq!(exchange(&fx, id_token).await.outcome(), accepted());
    }
    fx.stop().await;
}

#[tokio::test]
async fn the_exchange_refuses_an_expired_id_token() {
    let fx = signing_in(|idp| idp.id_token_ttl(Duration::from_secs(1))).await;
    let doc = discovery(&fx).await;
    let (back, verifier) = sign_in(&doc, "openid offline_access").await;
    let tokens = redeem_at(&fx, &back["code"], &verifier, REDIRECT).await;
    assert_eq!(tokens.body["expires_in"], 1);
    let short = tokens.get("id_token").to_owned();
    let claims = jwt::claims_of(&short);
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        1
    );
    let refused_once_expired = async || {
        let answer = exchange(&fx, &short).await;
        (!answer.ok()).then(|| answer.outcome())
    };
    let outcome = eventually(
        "the ID token expires",
        Duration::from_secs(5),
        refused_once_expired,
    )
    .await;
    assert_eq!(outcome, refused(400, "invalid_grant"));
    assert!(jwt::now() >= claims["exp"].as_i64().unwrap());
    let renewed = refresh_at(&fx, tokens.get("refresh_token")).await;
    assert!(renewed.ok(), "{}", renewed.body);
    fx.stop().await;

    let fx = signing_in(|idp| idp).await;
    let doc = discovery(&fx).await;
    let (back, verifier) = sign_in(&doc, "openid offline_access").await;
    let tokens = redeem_at(&fx, &back["code"], &verifier, REDIRECT).await;
    let id_token = tokens.get("id_token");
    assert_eq!(exchange(&fx, id_token).await.outcome(), accepted());
    fx.handle().expire_id_tokens();
    assert_eq!(
        exchange(&fx, id_token).await.outcome(),
        refused(400, "invalid_grant")
    );
    let configured = exchange(&fx, "configured-id-token").await;
    assert_eq!(
        configured.outcome(),
        accepted(),
        "the configured one is not issued"
    );
    let renewed = refresh_at(&fx, tokens.get("refresh_token")).await;
    assert_eq!(
        exchange(&fx, renewed.get("id_token")).await.outcome(),
        accepted()
    );
    let errors: Vec<_> = (fx.handle().stats().idp_requests.iter())
        .map(|r| r.error.clone())
        .collect();
    let refusal = Some("invalid_grant".to_owned());
    // The code, the exchange, its refusal, the configured token's, the refresh, the renewed.
    assert_eq!(errors, [None, None, refusal, None, None, None]);
    fx.stop().await;
}

#[tokio::test]
async fn without_sign_in_the_idp_has_no_authorization_endpoint() {
    let fx = OAuthFixture::builder()
        .idp(IdpOptions::new("idp-client", "configured-id-token"))
        .start()
        .await;
    let doc = discovery(&fx).await;
    assert!(doc.get("authorization_endpoint").is_none(), "{doc}");
    assert!(doc.get("response_types_supported").is_none(), "{doc}");
    assert_eq!(doc["grant_types_supported"], json!([TOKEN_EXCHANGE]));
    let (_, challenge) = pkce();
    let mut url = reqwest::Url::parse(&format!("{}/authorize", fx.idp_issuer())).unwrap();
    url.query_pairs_mut()
        .extend_pairs(sign_in_params(&challenge, None));
    let resp = send("authorize", client().get(url)).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let (_, verifier) = pkce();
    let code = redeem_at(&fx, "idp-code-0", &verifier, REDIRECT).await;
    assert_eq!(code.outcome(), refused(400, "unsupported_grant_type"));
    let refresh = refresh_at(&fx, "idp-refresh-0").await;
    assert_eq!(refresh.outcome(), refused(400, "unsupported_grant_type"));
    let h = fx.handle();
    assert!(h.stats().idp_authorizations.is_empty());
    assert_eq!(h.idp_token_requests("authorization_code"), 1);
    fx.stop().await;
}
