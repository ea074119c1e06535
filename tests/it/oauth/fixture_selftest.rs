//! Self-tests of the OAuth fixture, driving it with plain reqwest through a whole login
//! (challenge, metadata, registration, authorization, token, refresh, step-up, revocation,
//! migration), so tests of mcpd's OAuth client can trust what the fixture does. `edges`
//! covers each endpoint's refusals and the remaining options; `machine` the grants without
//! a user (client credentials, `private_key_jwt`, jwt-bearer), `idp` the identity provider's
//! token exchange, `idp_signin` signing in there for an ID token, `dpop` and `dpop_resource`
//! DPoP at the token endpoint, at the resource, and the nonces of both.

mod client;
mod dpop;
mod dpop_resource;
mod edges;
mod idp;
mod idp_signin;
mod machine;
mod proofs;

use crate::oauth::fixture::{Client, OAuthFixture, RefreshTokens, ResourceOutcome, Revocation};
use client::*;
use reqwest::{StatusCode, Url};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn an_unauthenticated_request_gets_a_challenge_that_leads_to_the_as_metadata() {
    let fx = OAuthFixture::builder()
        .challenge_scope("mcp:basic")
        .prm_scopes(&["mcp:basic", "mcp:write"])
        .start()
        .await;
    let resp = mcp(&fx.mcp_url(), None, None, &initialize()).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let prm_url = fx.prm_url().unwrap();
    let expected = format!(r#"Bearer resource_metadata="{prm_url}", scope="mcp:basic""#);
    assert_eq!(resp.headers()["www-authenticate"], expected.as_str());
    assert!(prm_url.ends_with("/.well-known/oauth-protected-resource/mcp"));

    let (status, prm) = get_json(&challenge(&resp)["resource_metadata"]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(prm["resource"], fx.mcp_url());
    assert_eq!(prm["authorization_servers"], json!([fx.issuer()]));
    assert_eq!(prm["scopes_supported"], json!(["mcp:basic", "mcp:write"]));
    assert_ne!(
        fx.issuer(),
        Url::parse(&fx.mcp_url())
            .unwrap()
            .origin()
            .ascii_serialization()
    );

    let meta = as_metadata(prm["authorization_servers"][0].as_str().unwrap()).await;
    let issuer = fx.issuer();
    assert_eq!(meta["issuer"], issuer);
    assert_eq!(
        meta["authorization_endpoint"],
        format!("{issuer}/authorize")
    );
    assert_eq!(meta["token_endpoint"], format!("{issuer}/token"));
    assert_eq!(meta["registration_endpoint"], format!("{issuer}/register"));
    assert_eq!(meta["revocation_endpoint"], format!("{issuer}/revoke"));
    assert_eq!(meta["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(meta["authorization_response_iss_parameter_supported"], true);
    assert!(meta.get("client_id_metadata_document_supported").is_none());
    assert!(meta.get("scopes_supported").is_none());
    let methods = json!(["none", "client_secret_basic", "client_secret_post"]);
    assert_eq!(meta["token_endpoint_auth_methods_supported"], methods);

    let root = format!(
        "{}/.well-known/oauth-protected-resource",
        Url::parse(&prm_url).unwrap().origin().ascii_serialization()
    );
    assert_eq!(get_json(&root).await.0, StatusCode::NOT_FOUND);
    let stats = fx.handle().stats();
    let seen = &stats.resource_requests[0];
    assert_eq!(
        (seen.token.as_deref(), &seen.outcome),
        (None, &ResourceOutcome::Unauthorized)
    );
    assert_eq!(seen.rpc_method.as_deref(), Some("initialize"));
    let logged: Vec<(&str, u16)> = stats
        .requests
        .iter()
        .map(|r| (r.path.as_str(), r.status))
        .collect();
    assert_eq!(
        logged,
        vec![
            ("/.well-known/oauth-protected-resource/mcp", 200),
            ("/.well-known/oauth-authorization-server", 200),
            ("/.well-known/oauth-protected-resource", 404),
        ]
    );
    fx.stop().await;
}

#[tokio::test]
async fn a_full_login_gives_a_token_the_mcp_endpoint_accepts() {
    let fx = OAuthFixture::builder()
        .access_ttl(Duration::from_secs(2))
        .start()
        .await;
    let meta = as_metadata(&fx.issuer()).await;
    let reg = register(&meta).await;
    let client_id = reg["client_id"].as_str().unwrap();
    assert_eq!(reg["token_endpoint_auth_method"], "none");
    assert!(reg.get("client_secret").is_none(), "{reg}");
    assert_eq!(reg["redirect_uris"], json!([REDIRECT]));

    let code = code_for(&meta, client_id, Some("mcp:basic"), &fx.mcp_url()).await;
    assert_eq!(code.callback["iss"], fx.issuer());
    let (status, tokens) = redeem(&meta, client_id, &code, &fx.mcp_url()).await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["expires_in"], 2);
    assert_eq!(tokens["scope"], "mcp:basic");
    let access = tokens["access_token"].as_str().unwrap();
    assert!(tokens["refresh_token"].is_string(), "{tokens}");

    let session = open_session(&fx.mcp_url(), access).await;
    let (status, list) =
        json_of(mcp(&fx.mcp_url(), Some(access), Some(&session), &tools_list()).await).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        list["result"]["tools"].as_array().unwrap().len() > 3,
        "{list}"
    );

    let h = fx.handle();
    assert_eq!(h.token_requests("authorization_code"), 1);
    assert_eq!(h.valid_access_tokens(), vec![access.to_owned()]);
    let stats = h.stats();
    let asked = &stats.authorizations[0];
    assert_eq!(asked.param("code_challenge_method"), Some("S256"));
    assert_eq!(asked.param("resource"), Some(fx.mcp_url().as_str()));
    assert_eq!(asked.scopes(), vec!["mcp:basic"]);
    assert_eq!(stats.registrations[0]["application_type"], "native");
    assert_eq!(
        stats.token_log[0].param("code_verifier"),
        Some(code.verifier.as_str())
    );
    assert!(
        stats
            .resource_requests
            .iter()
            .all(|r| r.outcome == ResourceOutcome::Admitted && r.token.as_deref() == Some(access))
    );
    assert_eq!(fx.http().stats().tools_lists, 1);
    fx.stop().await;
}

#[tokio::test]
async fn reusing_a_rotated_refresh_token_revokes_the_whole_family() {
    let fx = OAuthFixture::builder().rotating(true).start().await;
    let first = login(&fx, None).await;
    let rt1 = first.refresh.clone().unwrap();
    let (status, second) = refresh(&first.meta, &first.client_id, &rt1).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    let rt2 = second["refresh_token"].as_str().unwrap();
    assert_ne!(rt2, rt1);
    let (_, third) = refresh(&first.meta, &first.client_id, rt2).await;
    let at3 = third["access_token"].as_str().unwrap();
    let rt3 = third["refresh_token"].as_str().unwrap();
    let session = open_session(&fx.mcp_url(), at3).await;

    let (status, reused) = refresh(&first.meta, &first.client_id, &rt1).await;
    assert_eq!(
        (status, error_code(&reused)),
        (StatusCode::BAD_REQUEST, "invalid_grant")
    );
    let h = fx.handle();
    assert!(h.any_family_revoked());
    assert_eq!(h.stats().families_revoked[0].why, Revocation::RefreshReuse);
    assert!(h.valid_access_tokens().is_empty() && h.valid_refresh_tokens().is_empty());

    let resp = mcp(&fx.mcp_url(), Some(at3), Some(&session), &tools_list()).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(challenge(&resp)["error"], "invalid_token");
    let (status, latest) = refresh(&first.meta, &first.client_id, rt3).await;
    assert_eq!(
        (status, error_code(&latest)),
        (StatusCode::BAD_REQUEST, "invalid_grant")
    );
    assert_eq!(h.refreshes_of(&rt1), 2);
    assert_eq!(h.token_requests("refresh_token"), 4);
    fx.stop().await;
}

#[tokio::test]
async fn refresh_without_rotation_keeps_the_refresh_token_and_offline_access_gates_it() {
    let fx = OAuthFixture::builder().rotating(false).start().await;
    let login1 = login(&fx, None).await;
    let rt = login1.refresh.unwrap();
    for _ in 0..2 {
        let (status, tokens) = refresh(&login1.meta, &login1.client_id, &rt).await;
        assert_eq!(status, StatusCode::OK, "{tokens}");
        assert!(tokens.get("refresh_token").is_none(), "{tokens}");
    }
    assert_eq!(fx.handle().valid_refresh_tokens(), vec![rt]);
    fx.stop().await;

    let fx = OAuthFixture::builder()
        .refresh_tokens(RefreshTokens::WithOfflineAccess)
        .auth_scopes(&["mcp:basic", "offline_access"])
        .start()
        .await;
    assert!(login(&fx, Some("mcp:basic")).await.refresh.is_none());
    assert!(
        login(&fx, Some("mcp:basic offline_access"))
            .await
            .refresh
            .is_some()
    );
    fx.stop().await;
}

#[tokio::test]
async fn a_tool_call_lacking_a_scope_gets_403_until_a_wider_authorization() {
    let fx = OAuthFixture::builder()
        .challenge_scope("mcp:basic")
        .auth_scopes(&["mcp:basic", "mcp:write"])
        .step_up("add", &["mcp:write"])
        .start()
        .await;
    let narrow = login(&fx, Some("mcp:basic")).await;
    let session = open_session(&fx.mcp_url(), &narrow.access).await;
    let add = call("add", json!({"a": 2, "b": 3}));
    let resp = mcp(&fx.mcp_url(), Some(&narrow.access), Some(&session), &add).await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let expected = format!(
        r#"Bearer error="insufficient_scope", scope="mcp:write", resource_metadata="{}""#,
        fx.prm_url().unwrap()
    );
    assert_eq!(resp.headers()["www-authenticate"], expected.as_str());
    let echo = call("echo", json!({"text": "hi"}));
    let resp = mcp(&fx.mcp_url(), Some(&narrow.access), Some(&session), &echo).await;
    assert_eq!(resp.status(), StatusCode::OK);

    let (status, wider) = post_to(
        &narrow.meta,
        "token_endpoint",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", narrow.refresh.as_deref().unwrap()),
            ("client_id", &narrow.client_id),
            ("scope", "mcp:basic mcp:write"),
        ],
    )
    .await;
    assert_eq!(
        (status, error_code(&wider)),
        (StatusCode::BAD_REQUEST, "invalid_scope")
    );
    let (_, code_challenge) = pkce();
    let refused = callback(
        &authorize(
            &narrow.meta,
            &[
                ("response_type", "code"),
                ("client_id", &narrow.client_id),
                ("redirect_uri", REDIRECT),
                ("state", "s"),
                ("code_challenge", &code_challenge),
                ("code_challenge_method", "S256"),
                ("scope", "mcp:admin"),
            ],
        )
        .await,
    );
    assert_eq!(
        (refused["error"].as_str(), refused["state"].as_str()),
        ("invalid_scope", "s")
    );

    let code = code_for(
        &narrow.meta,
        &narrow.client_id,
        Some("mcp:basic mcp:write"),
        &fx.mcp_url(),
    )
    .await;
    let (_, tokens) = redeem(&narrow.meta, &narrow.client_id, &code, &fx.mcp_url()).await;
    let wide = tokens["access_token"].as_str().unwrap();
    let (status, sum) = json_of(mcp(&fx.mcp_url(), Some(wide), Some(&session), &add).await).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(sum["result"]["content"][0]["text"], "5");
    let outcomes: Vec<ResourceOutcome> = fx
        .handle()
        .stats()
        .resource_requests
        .into_iter()
        .filter(|r| r.tool.as_deref() == Some("add"))
        .map(|r| r.outcome)
        .collect();
    assert_eq!(
        outcomes,
        vec![
            ResourceOutcome::InsufficientScope(vec!["mcp:write".into()]),
            ResourceOutcome::Admitted
        ]
    );
    fx.stop().await;
}

#[tokio::test]
async fn revocation_expiry_and_the_test_controls_end_access() {
    let fx = OAuthFixture::builder().start().await;
    let l = login(&fx, None).await;
    let url = fx.mcp_url();
    let status_with =
        async |token: &str| mcp(&url, Some(token), None, &initialize()).await.status();
    assert_eq!(status_with(&l.access).await, StatusCode::OK);
    fx.handle().expire_access_tokens();
    assert_eq!(status_with(&l.access).await, StatusCode::UNAUTHORIZED);

    let (_, renewed) = refresh(&l.meta, &l.client_id, l.refresh.as_deref().unwrap()).await;
    let at2 = renewed["access_token"].as_str().unwrap().to_owned();
    let rt2 = renewed["refresh_token"].as_str().unwrap().to_owned();
    assert_eq!(status_with(&at2).await, StatusCode::OK);
    let revoke = async |token: &str| {
        let pairs = [("token", token), ("client_id", &l.client_id)];
        post_to(&l.meta, "revocation_endpoint", &pairs).await.0
    };
    assert_eq!(revoke(&at2).await, StatusCode::OK);
    assert_eq!(status_with(&at2).await, StatusCode::UNAUTHORIZED);
    assert!(
        !fx.handle().any_family_revoked(),
        "an access token goes alone"
    );

    let (_, renewed) = refresh(&l.meta, &l.client_id, &rt2).await;
    let at3 = renewed["access_token"].as_str().unwrap().to_owned();
    let rt3 = renewed["refresh_token"].as_str().unwrap().to_owned();
    assert_eq!(revoke(&rt3).await, StatusCode::OK);
    assert_eq!(status_with(&at3).await, StatusCode::UNAUTHORIZED);
    let (status, gone) = refresh(&l.meta, &l.client_id, &rt3).await;
    assert_eq!(
        (status, error_code(&gone)),
        (StatusCode::BAD_REQUEST, "invalid_grant")
    );
    assert_eq!(revoke("no-such-token").await, StatusCode::OK);
    let stats = fx.handle().stats();
    assert_eq!(stats.families_revoked[0].why, Revocation::Endpoint);
    assert_eq!(
        stats
            .revocations
            .iter()
            .map(|r| r.known)
            .collect::<Vec<_>>(),
        vec![true, true, false]
    );

    let again = login(&fx, None).await;
    assert_eq!(status_with(&again.access).await, StatusCode::OK);
    fx.handle().revoke_all();
    assert_eq!(status_with(&again.access).await, StatusCode::UNAUTHORIZED);
    assert_eq!(
        fx.handle().stats().families_revoked.last().unwrap().why,
        Revocation::Test
    );
    fx.stop().await;
}

#[tokio::test]
async fn migration_moves_the_resource_to_another_as() {
    let fx = OAuthFixture::builder().start().await;
    let as2 = OAuthFixture::builder().resource(false).start().await;
    let status_with = async |token: &str| {
        let resp = mcp(&fx.mcp_url(), Some(token), None, &initialize()).await;
        resp.status()
    };
    let old = login(&fx, None).await;
    as2.handle().add_client(Client::public("as2-app"));
    let meta2 = as_metadata(&as2.issuer()).await;
    let code = code_for(&meta2, "as2-app", None, &fx.mcp_url()).await;
    let (_, tokens) = redeem(&meta2, "as2-app", &code, &fx.mcp_url()).await;
    let new = tokens["access_token"].as_str().unwrap();
    assert_eq!(status_with(&old.access).await, StatusCode::OK);
    assert_eq!(status_with(new).await, StatusCode::UNAUTHORIZED);
    fx.handle().trust(as2.handle());
    assert_eq!(status_with(new).await, StatusCode::OK);

    fx.handle().migrate_to(as2.handle());
    assert_eq!(status_with(&old.access).await, StatusCode::UNAUTHORIZED);
    assert_eq!(status_with(new).await, StatusCode::OK);
    let (_, prm) = get_json(&fx.prm_url().unwrap()).await;
    assert_eq!(prm["authorization_servers"], json!([as2.issuer()]));

    let (_, code_challenge) = pkce();
    let leaked = [
        ("response_type", "code"),
        ("client_id", &old.client_id),
        ("redirect_uri", REDIRECT),
        ("code_challenge", &code_challenge),
        ("code_challenge_method", "S256"),
    ];
    let resp = authorize(&meta2, &leaked).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let asked = as2.handle().stats().authorizations;
    assert_eq!(asked[1].param("client_id"), Some(old.client_id.as_str()));
    assert_eq!(asked[1].error.as_deref(), Some("invalid_request"));
    as2.stop().await;
    fx.stop().await;
}
