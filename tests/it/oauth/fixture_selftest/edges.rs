//! Self-tests of the OAuth fixture's refusals and options, endpoint by endpoint: the token
//! and authorization endpoints' checks, `iss`, client authentication, registration policy,
//! where metadata is served, and CIMD.

use super::client::*;
use crate::oauth::fixture::{
    AsMetadataAt, AsPlacement, AuthMethod, Client, ClientSource, Iss, OAuthFixture, PrmAt,
    Revocation,
};
use reqwest::{StatusCode, Url};
use serde_json::json;

#[tokio::test]
async fn the_token_endpoint_checks_the_verifier_the_redirect_uri_and_code_reuse() {
    let fx = OAuthFixture::builder().start().await;
    let meta = as_metadata(&fx.issuer()).await;
    let client_id = register(&meta).await["client_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let code = code_for(&meta, &client_id, None, &fx.mcp_url()).await;
    let good = [
        ("grant_type", "authorization_code"),
        ("code", code.code.as_str()),
        ("redirect_uri", REDIRECT),
        ("code_verifier", code.verifier.as_str()),
        ("client_id", client_id.as_str()),
    ];
    let attempt = async |edits: &[(&str, Option<&str>)]| {
        let (status, body) = post_to(&meta, "token_endpoint", &edited(&good, edits)).await;
        (status.as_u16(), error_code(&body).to_owned())
    };
    let wrong_verifier = pkce().0;
    let refused = |error: &str| (400, error.to_owned());
    assert_eq!(
        attempt(&[("code_verifier", Some(&wrong_verifier))]).await,
        refused("invalid_grant")
    );
    assert_eq!(
        attempt(&[("code_verifier", None)]).await,
        refused("invalid_request")
    );
    assert_eq!(
        attempt(&[("redirect_uri", Some("http://127.0.0.1:1/other"))]).await,
        refused("invalid_grant")
    );
    assert_eq!(
        attempt(&[("client_id", None)]).await,
        (401, "invalid_client".to_owned())
    );
    assert_eq!(
        attempt(&[("code", Some("no-such-code"))]).await,
        refused("invalid_grant")
    );
    assert_eq!(
        attempt(&[]).await.0,
        200,
        "the refusals left the code unused"
    );
    let first = fx.handle().valid_access_tokens();
    assert_eq!(attempt(&[]).await, refused("invalid_grant"));
    assert_eq!(
        fx.handle().stats().families_revoked[0].why,
        Revocation::CodeReuse
    );
    let resp = mcp(&fx.mcp_url(), Some(&first[0]), None, &initialize()).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);

    assert_eq!(
        attempt(&[("grant_type", None)]).await,
        refused("invalid_request")
    );
    assert_eq!(
        attempt(&[("grant_type", Some("password"))]).await,
        refused("unsupported_grant_type")
    );
    let url = meta["token_endpoint"].as_str().unwrap();
    let as_json = client()
        .post(url)
        .json_body(&json!({"grant_type": "authorization_code"}));
    let (status, body) = json_of(send("JSON token request", as_json).await).await;
    assert_eq!(
        (status, error_code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_request")
    );
    let h = fx.handle();
    assert_eq!(
        (h.token_requests("authorization_code"), h.token_requests("")),
        (7, 2)
    );
    fx.stop().await;
}

#[tokio::test]
async fn authorize_checks_the_client_the_redirect_uri_and_pkce() {
    let fx = OAuthFixture::builder()
        .resource(false)
        .client(Client::public("app").redirect_uris(&[REDIRECT]))
        .start()
        .await;
    let meta = as_metadata(&fx.issuer()).await;
    let (_, code_challenge) = pkce();
    let good = [
        ("response_type", "code"),
        ("client_id", "app"),
        ("redirect_uri", REDIRECT),
        ("state", "xyz"),
        ("code_challenge", code_challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let untrusted = [
        ("client_id", Some("nobody")),
        ("client_id", None),
        ("redirect_uri", Some("http://127.0.0.1:9/elsewhere")),
        ("redirect_uri", Some("https://evil.example.com/callback")),
        ("redirect_uri", None),
    ];
    for edit in untrusted {
        let resp = authorize(&meta, &edited(&good, &[edit])).await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{edit:?}");
        assert!(resp.headers().get("location").is_none());
    }
    let other_port = [("redirect_uri", Some("http://127.0.0.1:40000/callback"))];
    let resp = authorize(&meta, &edited(&good, &other_port)).await;
    assert_eq!(resp.status(), StatusCode::FOUND, "any loopback port");

    let refusals = [
        (("code_challenge", None), "invalid_request"),
        (("code_challenge", Some("too-short")), "invalid_request"),
        (("code_challenge_method", Some("plain")), "invalid_request"),
        (("code_challenge_method", None), "invalid_request"),
        (
            ("response_type", Some("token")),
            "unsupported_response_type",
        ),
        (("response_type", None), "invalid_request"),
    ];
    for (edit, error) in refusals {
        let back = callback(&authorize(&meta, &edited(&good, &[edit])).await);
        assert_eq!(back["error"], error, "{edit:?}");
        assert_eq!(
            (back["state"].as_str(), back["iss"].clone()),
            ("xyz", fx.issuer())
        );
        assert!(!back.contains_key("code"));
    }
    let stats = fx.handle().stats();
    let codes = stats.authorizations.iter().filter(|a| a.error.is_none());
    assert_eq!(codes.count(), 1);
    assert_eq!(
        stats.authorizations.len(),
        untrusted.len() + 1 + refusals.len()
    );
    fx.stop().await;
}

#[tokio::test]
async fn the_iss_of_authorization_responses_follows_its_option() {
    for (mode, supported) in [
        (Iss::Correct, true),
        (Iss::Omitted, true),
        (Iss::Wrong, false),
        (Iss::Normalized, true),
    ] {
        let fx = OAuthFixture::builder()
            .resource(false)
            .iss(mode)
            .iss_supported(supported)
            .client(Client::public("app"))
            .start()
            .await;
        let meta = as_metadata(&fx.issuer()).await;
        let flag = meta
            .get("authorization_response_iss_parameter_supported")
            .cloned();
        assert_eq!(flag, supported.then_some(json!(true)));
        let code = code_for(&meta, "app", None, "http://127.0.0.1:1/mcp").await;
        let expected = match mode {
            Iss::Correct => Some(fx.issuer()),
            Iss::Omitted => None,
            Iss::Wrong => Some("https://evil.example.com".to_owned()),
            Iss::Normalized => Some(format!("{}/", fx.issuer())),
        };
        assert_eq!(code.callback.get("iss"), expected.as_ref(), "{mode:?}");
        fx.stop().await;
    }
}

#[tokio::test]
async fn client_authentication_follows_each_clients_method() {
    let fx = OAuthFixture::builder()
        .resource(false)
        .dcr(false)
        .auth_methods(&[AuthMethod::ClientSecretBasic])
        .client(Client::confidential(
            "pre-registered-client",
            "pre-registered-secret",
            AuthMethod::ClientSecretBasic,
        ))
        .client(Client::confidential(
            "poster",
            "post-secret",
            AuthMethod::ClientSecretPost,
        ))
        .start()
        .await;
    let meta = as_metadata(&fx.issuer()).await;
    assert!(meta.get("registration_endpoint").is_none());
    assert_eq!(
        meta["token_endpoint_auth_methods_supported"],
        json!(["client_secret_basic"])
    );
    let url = meta["token_endpoint"].as_str().unwrap().to_owned();
    let try_code = async |id: &str, basic: Option<&str>, post: Option<&str>| {
        let code = code_for(&meta, id, None, "http://127.0.0.1:1/mcp").await;
        let mut pairs = vec![
            ("grant_type", "authorization_code"),
            ("code", code.code.as_str()),
            ("redirect_uri", REDIRECT),
            ("code_verifier", code.verifier.as_str()),
        ];
        if let Some(secret) = post {
            pairs.extend([("client_id", id), ("client_secret", secret)]);
        }
        let mut req = form_post(&url, &pairs);
        if let Some(secret) = basic {
            req = req.basic_auth(id, Some(secret));
        }
        let resp = send("token", req).await;
        let basic_challenge = resp.headers().get("www-authenticate").is_some();
        let (status, body) = json_of(resp).await;
        (
            status.as_u16(),
            error_code(&body).to_owned(),
            basic_challenge,
        )
    };
    let pre = "pre-registered-client";
    assert_eq!(
        try_code(pre, None, Some("pre-registered-secret")).await,
        (401, "invalid_client".into(), true)
    );
    assert_eq!(
        try_code(pre, Some("wrong"), None).await,
        (401, "invalid_client".into(), true)
    );
    assert_eq!(
        try_code(
            pre,
            Some("pre-registered-secret"),
            Some("pre-registered-secret")
        )
        .await,
        (400, "invalid_request".into(), false)
    );
    assert_eq!(
        try_code(pre, Some("pre-registered-secret"), None).await,
        (200, String::new(), false)
    );
    assert_eq!(
        try_code("poster", Some("post-secret"), None).await,
        (401, "invalid_client".into(), true)
    );
    assert_eq!(
        try_code("poster", None, Some("post-secret")).await,
        (200, String::new(), false)
    );
    let basic_header = fx.handle().stats().token_log[3]
        .authorization
        .clone()
        .unwrap();
    assert!(basic_header.starts_with("Basic "), "{basic_header}");
    fx.stop().await;
}

#[tokio::test]
async fn registration_records_the_request_and_applies_the_as_policy() {
    let fx = OAuthFixture::builder()
        .resource(false)
        .dcr_auth_method(AuthMethod::ClientSecretPost)
        .dcr_requires_refresh_grant(true)
        .start()
        .await;
    let meta = as_metadata(&fx.issuer()).await;
    let reg = register(&meta).await;
    assert_eq!(reg["token_endpoint_auth_method"], "client_secret_post");
    assert!(reg["client_secret"].is_string(), "{reg}");
    let url = meta["registration_endpoint"].as_str().unwrap();
    let refused = [
        (
            json!({"redirect_uris": [REDIRECT], "grant_types": ["authorization_code"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": [], "grant_types": ["refresh_token"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["/relative"], "grant_types": ["refresh_token"]}),
            "invalid_redirect_uri",
        ),
    ];
    for (body, error) in refused {
        let (status, answer) =
            json_of(send("DCR", client().post(url).json_body(&body)).await).await;
        assert_eq!(
            (status, error_code(&answer)),
            (StatusCode::BAD_REQUEST, error),
            "{body}"
        );
    }
    let h = fx.handle();
    assert_eq!(h.stats().registrations.len(), 4);
    let clients = h.clients();
    assert_eq!(clients.len(), 1);
    assert_eq!(
        (clients[0].source, clients[0].application_type.as_deref()),
        (ClientSource::Dcr, Some("native"))
    );
    let (id, secret) = (&clients[0].id, clients[0].secret.as_deref().unwrap());
    let pairs = [
        ("grant_type", "refresh_token"),
        ("refresh_token", "rt-unknown"),
        ("client_id", id),
        ("client_secret", secret),
    ];
    let (status, body) = post_to(&meta, "token_endpoint", &pairs).await;
    assert_eq!(
        (status, error_code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_grant")
    );
    assert!(h.forget_client(id));
    let (status, body) = post_to(&meta, "token_endpoint", &pairs).await;
    assert_eq!(
        (status, error_code(&body)),
        (StatusCode::UNAUTHORIZED, "invalid_client")
    );
    fx.stop().await;
}

#[tokio::test]
async fn metadata_is_served_only_where_the_options_say() {
    let fx = OAuthFixture::builder()
        .auth_server(AsPlacement::SameOrigin)
        .issuer_path("/tenant1")
        .metadata_at(&[AsMetadataAt::OidcAppended])
        .prm_at(&[
            PrmAt::Custom("/custom/metadata/location.json".into()),
            PrmAt::Root,
        ])
        .start()
        .await;
    let origin = Url::parse(&fx.mcp_url())
        .unwrap()
        .origin()
        .ascii_serialization();
    assert_eq!(fx.issuer(), format!("{origin}/tenant1"));
    let resp = mcp(&fx.mcp_url(), None, None, &initialize()).await;
    assert_eq!(
        challenge(&resp)["resource_metadata"],
        format!("{origin}/custom/metadata/location.json")
    );
    for (path, status) in [
        ("/custom/metadata/location.json", 200),
        ("/.well-known/oauth-protected-resource", 200),
        ("/.well-known/oauth-protected-resource/mcp", 404),
        ("/.well-known/oauth-authorization-server/tenant1", 404),
        ("/.well-known/openid-configuration/tenant1", 404),
        ("/.well-known/oauth-authorization-server", 404),
        ("/tenant1/.well-known/openid-configuration", 200),
    ] {
        assert_eq!(
            get_json(&format!("{origin}{path}")).await.0.as_u16(),
            status,
            "{path}"
        );
    }
    let (_, meta) = get_json(&format!(
        "{origin}/tenant1/.well-known/openid-configuration"
    ))
    .await;
    assert_eq!(meta["issuer"], fx.issuer());
    assert_eq!(meta["token_endpoint"], format!("{origin}/tenant1/token"));
    assert_eq!(meta["jwks_uri"], format!("{origin}/tenant1/jwks"));
    let logged: Vec<u16> = fx
        .handle()
        .stats()
        .requests
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(logged, vec![200, 200, 404, 404, 404, 404, 200, 200]);

    let bare = OAuthFixture::builder()
        .challenge_resource_metadata(false)
        .prm_at(&[])
        .start()
        .await;
    let resp = mcp(&bare.mcp_url(), None, None, &initialize()).await;
    assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    assert_eq!(bare.prm_url(), None);
    bare.stop().await;
    fx.stop().await;
}

#[tokio::test]
async fn cimd_client_ids_are_clients_only_when_advertised() {
    let url = "https://client.example.com/mcpd.json";
    let doc = json!({"client_id": url, "client_name": "mcpd", "redirect_uris": [REDIRECT],
        "token_endpoint_auth_method": "none"});
    let fx = OAuthFixture::builder()
        .cimd_document(url, doc)
        .start()
        .await;
    let meta = as_metadata(&fx.issuer()).await;
    assert_eq!(meta["client_id_metadata_document_supported"], true);
    let code = code_for(&meta, url, None, &fx.mcp_url()).await;
    let (status, tokens) = redeem(&meta, url, &code, &fx.mcp_url()).await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    let h = fx.handle();
    assert_eq!(h.stats().cimd_lookups, vec![url.to_owned()]);
    assert_eq!(h.clients()[0].source, ClientSource::Cimd);
    fx.stop().await;

    let off = OAuthFixture::builder().resource(false).start().await;
    let meta = as_metadata(&off.issuer()).await;
    let (_, code_challenge) = pkce();
    let resp = authorize(
        &meta,
        &[
            ("response_type", "code"),
            ("client_id", url),
            ("redirect_uri", REDIRECT),
            ("code_challenge", code_challenge.as_str()),
            ("code_challenge_method", "S256"),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    off.stop().await;
}

#[tokio::test]
async fn the_documents_say_what_the_options_make_them_say() {
    let fx = OAuthFixture::builder()
        .prm_resource("https://evil.example.com/mcp")
        .prm_authorization_servers(&["https://as.example.com"])
        .metadata_issuer("https://attacker.example.com")
        .pkce_metadata(false)
        .revocation(false)
        .start()
        .await;
    let (_, prm) = get_json(&fx.prm_url().unwrap()).await;
    assert_eq!(prm["resource"], "https://evil.example.com/mcp");
    assert_eq!(
        prm["authorization_servers"],
        json!(["https://as.example.com"])
    );
    assert!(prm.get("scopes_supported").is_none());
    fx.handle().set_authorization_servers(vec![fx.issuer()]);
    let (_, prm) = get_json(&fx.prm_url().unwrap()).await;
    assert_eq!(prm["authorization_servers"], json!([fx.issuer()]));

    let meta = as_metadata(&fx.issuer()).await;
    assert_eq!(meta["issuer"], "https://attacker.example.com");
    assert_eq!(meta["token_endpoint"], format!("{}/token", fx.issuer()));
    assert!(meta.get("code_challenge_methods_supported").is_none());
    assert!(meta.get("revocation_endpoint").is_none());
    let revoke = format!("{}/revoke", fx.issuer());
    let (status, _) = json_of(send("revoke", form_post(&revoke, &[("token", "x")])).await).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    fx.stop().await;
}

#[tokio::test]
async fn the_audience_check_accepts_only_tokens_for_this_resource() {
    let fx = OAuthFixture::builder().check_audience(true).start().await;
    let meta = as_metadata(&fx.issuer()).await;
    let client_id = register(&meta).await["client_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for (resource, expected) in [
        (fx.mcp_url(), StatusCode::OK),
        (
            "https://other.example.com/mcp".to_owned(),
            StatusCode::UNAUTHORIZED,
        ),
    ] {
        let code = code_for(&meta, &client_id, None, &resource).await;
        let (_, tokens) = redeem(&meta, &client_id, &code, &resource).await;
        let resp = mcp(
            &fx.mcp_url(),
            tokens["access_token"].as_str(),
            None,
            &initialize(),
        )
        .await;
        assert_eq!(resp.status(), expected, "{resource}");
    }
    fx.stop().await;
}
