//! Self-tests of the identity provider: discovery, the token exchange of an ID token for
//! an ID-JAG (each parameter missing or wrong once), the ID-JAG's signature and claims, and
//! the AS's jwt-bearer grant accepting it from the client it names.

use super::client::*;
use super::proofs::*;
use crate::oauth::fixture::jwt::{self, ID_JAG_TYPE, ID_TOKEN_TYPE, JWT_BEARER, TOKEN_EXCHANGE};
use crate::oauth::fixture::{Client, IdpOptions, OAuthFixture};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::StatusCode;
use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
use serde_json::{Value, json};

/// The parameters of a good exchange at `fx`'s IdP.
fn exchange_params(fx: &OAuthFixture, id_token: &str) -> Vec<(String, String)> {
    let pairs = [
        ("grant_type", TOKEN_EXCHANGE.to_owned()),
        ("requested_token_type", ID_JAG_TYPE.to_owned()),
        ("subject_token", id_token.to_owned()),
        ("subject_token_type", ID_TOKEN_TYPE.to_owned()),
        ("audience", fx.issuer()),
        ("resource", fx.mcp_url()),
        ("client_id", "idp-client".to_owned()),
    ];
    pairs.map(|(k, v)| (k.to_owned(), v)).to_vec()
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
async fn the_idp_exchanges_the_id_token_for_an_id_jag_the_as_accepts() {
    let fx = OAuthFixture::builder()
        .idp(IdpOptions::new("idp-client", "id-token-1").for_client("mcp-app"))
        .client(Client::public("mcp-app"))
        .client(Client::public("other-app"))
        .check_audience(true)
        .start()
        .await;
    let idp = fx.idp_issuer();
    assert_ne!(idp, fx.issuer());
    let (status, discovery) = get_json(&format!("{idp}/.well-known/openid-configuration")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(discovery["issuer"], idp);
    assert_eq!(discovery["token_endpoint"], format!("{idp}/token"));
    let meta = as_metadata(&fx.issuer()).await;
    let grants = meta["grant_types_supported"].as_array().unwrap();
    assert!(grants.contains(&json!(JWT_BEARER)), "{meta}");

    let answer = post_form(
        &format!("{idp}/token"),
        &exchange_params(&fx, "id-token-1"),
        None,
        &[],
    )
    .await;
    assert!(answer.ok(), "{}", answer.body);
    assert_eq!(answer.get("issued_token_type"), ID_JAG_TYPE);
    assert_eq!(answer.get("token_type"), "N_A");
    assert_eq!(answer.body["expires_in"], 300);
    let jag = answer.get("access_token").to_owned();
    assert_eq!(jwt::header_of(&jag)["typ"], "oauth-id-jag+jwt");
    let claims = jwt::claims_of(&jag);
    assert_eq!(claims["iss"], idp);
    assert_eq!(claims["aud"], fx.issuer());
    assert_eq!(claims["resource"], fx.mcp_url());
    assert_eq!(claims["client_id"], "mcp-app");
    assert_eq!(claims["sub"], "fixture-user");
    let lifetime = claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap();
    assert_eq!(lifetime, 300);
    let (_, jwks) = get_json(discovery["jwks_uri"].as_str().unwrap()).await;
    assert!(signed_by(&jwks, &jag), "{jwks}");

    let redeem = async |client_id: &str| {
        let pairs = [
            ("grant_type", JWT_BEARER),
            ("assertion", &jag),
            ("client_id", client_id),
        ];
        post_form(&fx.token_endpoint(), &pairs, None, &[]).await
    };
    let tokens = redeem("mcp-app").await;
    assert!(tokens.ok(), "{}", tokens.body);
    let resp = mcp(
        &fx.mcp_url(),
        Some(tokens.get("access_token")),
        None,
        &initialize(),
    )
    .await;
    assert_eq!(
        resp.status(),
        StatusCode::OK,
        "the ID-JAG's resource is the token's audience"
    );
    assert_eq!(
        redeem("other-app").await.outcome(),
        refused(400, "invalid_grant")
    );

    let h = fx.handle();
    h.set_id_token("id-token-2");
    let te = format!("{idp}/token");
    let stale = post_form(&te, &exchange_params(&fx, "id-token-1"), None, &[]).await;
    assert_eq!(stale.outcome(), refused(400, "invalid_grant"));
    let fresh = post_form(&te, &exchange_params(&fx, "id-token-2"), None, &[]).await;
    assert_eq!(fresh.outcome(), accepted());
    let stats = h.stats();
    assert_eq!(stats.idp_requests.len(), 3);
    assert_eq!(
        stats.idp_requests[0].param("subject_token"),
        Some("id-token-1")
    );
    assert_eq!(
        stats.idp_requests[1].error.as_deref(),
        Some("invalid_grant")
    );
    assert_eq!(
        stats.id_jags,
        vec![jag.clone(), fresh.get("access_token").to_owned()]
    );
    assert_eq!(stats.token_requests_for(JWT_BEARER), 2);
    fx.stop().await;
}

#[tokio::test]
async fn the_idp_refuses_each_missing_or_wrong_parameter() {
    let fx = OAuthFixture::builder()
        .idp(IdpOptions::new("idp-client", "id-token-1").secret("idp-secret"))
        .start()
        .await;
    let url = format!("{}/token", fx.idp_issuer());
    let mut good = exchange_params(&fx, "id-token-1");
    good.push(("client_secret".to_owned(), "idp-secret".to_owned()));
    let attempt = async |name: &str, value: Option<&str>| {
        let mut pairs = good.clone();
        pairs.retain(|(k, _)| k != name);
        pairs.extend(value.map(|v| (name.to_owned(), v.to_owned())));
        post_form(&url, &pairs, None, &[]).await.outcome()
    };
    let request = refused(400, "invalid_request");
    let target = refused(400, "invalid_target");
    let client = refused(401, "invalid_client");
    let wrong_audience = format!("{}/", fx.issuer());
    let access_token_type = "urn:ietf:params:oauth:token-type:access_token";
    let cases = [
        ("grant_type", None, request.clone()),
        (
            "grant_type",
            Some("client_credentials"),
            refused(400, "unsupported_grant_type"),
        ),
        ("subject_token", None, request.clone()),
        (
            "subject_token",
            Some("id-token-0"),
            refused(400, "invalid_grant"),
        ),
        ("subject_token_type", None, request.clone()),
        (
            "subject_token_type",
            Some(access_token_type),
            request.clone(),
        ),
        ("requested_token_type", None, request.clone()),
        (
            "requested_token_type",
            Some(access_token_type),
            request.clone(),
        ),
        ("audience", None, request.clone()),
        ("audience", Some(wrong_audience.as_str()), target.clone()),
        ("resource", None, request.clone()),
        ("resource", Some("http://127.0.0.1:1/mcp"), target.clone()),
        ("client_id", None, client.clone()),
        ("client_id", Some("someone"), client.clone()),
        ("client_secret", None, client.clone()),
        ("client_secret", Some("wrong"), client.clone()),
    ];
    let refusals = cases.len();
    for (name, value, expected) in cases {
        assert_eq!(attempt(name, value).await, expected, "{name} = {value:?}");
    }
    assert_eq!(attempt("scope", Some("mcp:basic")).await, accepted());
    let mut by_basic = good.clone();
    by_basic.retain(|(k, _)| !k.starts_with("client_"));
    let answer = post_form(&url, &by_basic, Some(("idp-client", "idp-secret")), &[]).await;
    assert_eq!(answer.outcome(), accepted());
    let stats = fx.handle().stats();
    assert_eq!(stats.idp_requests.len(), refusals + 2);
    assert!(
        stats
            .idp_requests
            .iter()
            .all(|r| r.param("client_secret").is_none())
    );
    assert!(stats.idp_requests.last().unwrap().basic);
    assert_eq!(
        stats.idp_requests[refusals].param("scope"),
        Some("mcp:basic")
    );
    assert_eq!(jwt::claims_of(&stats.id_jags[0])["scope"], "mcp:basic");
    fx.stop().await;
}
