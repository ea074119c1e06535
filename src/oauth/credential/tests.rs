//! The credential actor against a loopback token endpoint with rotating refresh tokens.
//!
//! One refresh for many refused callers, refresh ahead of expiry, and a refused grant
//! that needs a login.
#![allow(clippy::disallowed_methods, reason = "tests may block")]

use super::*;
use crate::oauth::discovery::ServerMetadata;
use crate::oauth::registration::{AuthMethod, Source};
use crate::oauth::store::StoredClient;
use axum::{Form, Json, Router, http::StatusCode, response::IntoResponse, routing::post};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// A token endpoint with rotating refresh tokens: the current one works once; any
/// older one is refused with invalid_grant.
#[derive(Default)]
struct Endpoint {
    current: String,
    refreshes: usize,
    lifetime: u64,
}

async fn serve(state: Arc<Mutex<Endpoint>>) -> String {
    let app = Router::new().route(
        "/token",
        post(move |Form(form): Form<HashMap<String, String>>| {
            let state = state.clone();
            async move {
                let mut s = state.lock().unwrap();
                if form.get("refresh_token") != Some(&s.current) {
                    return (
                        StatusCode::BAD_REQUEST,
                        Json(serde_json::json!({"error": "invalid_grant"})),
                    )
                        .into_response();
                }
                s.refreshes += 1;
                s.current = format!("r{}", s.refreshes);
                Json(
                    serde_json::json!({"access_token": format!("a{}", s.refreshes),
                    "token_type": "Bearer", "expires_in": s.lifetime, "refresh_token": s.current}),
                )
                .into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    mcpd_runtime::tracker::spawn(async move { axum::serve(listener, app).await });
    url
}

const SERVER: &str = "http://127.0.0.1:9/mcp";

fn stored(token_endpoint: String, lifetime: u64) -> Stored {
    Stored {
        server_url: SERVER.into(),
        resource: "http://127.0.0.1/mcp".into(),
        metadata: ServerMetadata {
            issuer: "http://127.0.0.1".into(),
            token_endpoint,
            ..ServerMetadata::default()
        },
        client: StoredClient {
            client_id: "c".into(),
            client_secret: None,
            method: AuthMethod::None,
            source: Source::Dynamic,
            redirect_uri: None,
        },
        requested_scopes: Vec::new(),
        tokens: StoredTokens {
            access_token: "a0".into(),
            expires_at: Some(store::epoch_secs(SystemTime::now()) + lifetime),
            lifetime: Some(lifetime),
            refresh_token: Some("r0".into()),
            scope: None,
            dpop_bound: false,
        },
        grant: crate::config::Grant::AuthorizationCode,
        dpop_key: None,
    }
}

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// A credential whose store holds `stored`, as after a login.
async fn spawn(stored: Stored, file: PathBuf) -> CredentialHandle {
    let place = Place::File(file);
    store::save(&place, &stored).await.unwrap();
    let cred = spawn_at(Some(place));
    assert!(cred.current().await.is_some(), "the stored login is used");
    cred
}

/// A credential kept at `place`, whatever it holds.
fn spawn_at(place: Option<Place>) -> CredentialHandle {
    let setup = Arc::new(Setup {
        server: "x".into(),
        url: Url::parse(SERVER).unwrap(),
        oauth: crate::config::OAuthConfig::default(),
        http: http(),
        secrets: crate::secrets::Secrets::new(None, crate::secrets::Preferred::File),
    });
    CredentialHandle::spawn(setup, place, Box::new(|_| {}))
}

#[tokio::test]
async fn many_refused_callers_share_one_refresh_and_the_rotated_token_is_stored_first() {
    let endpoint = Arc::new(Mutex::new(Endpoint {
        current: "r0".into(),
        lifetime: 3600,
        ..Endpoint::default()
    }));
    let url = serve(endpoint.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("credentials/x.json");
    let cred = spawn(stored(url, 3600), file.clone()).await;
    let old = cred.token().unwrap();
    let calls: Vec<_> = (0..16)
        .map(|_| {
            let cred = cred.clone();
            let old = old.clone();
            mcpd_runtime::tracker::spawn(async move { cred.refused(Some(old), None).await })
        })
        .collect();
    for c in calls {
        assert_eq!(c.await.unwrap().unwrap().token.expose(), "a1");
    }
    assert_eq!(endpoint.lock().unwrap().refreshes, 1, "one refresh for all");
    let kept: Stored = store::load(&Place::File(file)).await.unwrap().unwrap();
    assert_eq!(kept.tokens.refresh_token.as_deref(), Some("r1"));
    assert_eq!(cred.token().unwrap().token.expose(), "a1");
    // A caller still holding the old token gets the new one without a refresh.
    assert_eq!(
        cred.refused(Some(old), None).await.unwrap().token.expose(),
        "a1"
    );
    assert_eq!(endpoint.lock().unwrap().refreshes, 1);
}

#[tokio::test]
async fn tokens_are_refreshed_ahead_of_expiry_and_a_refused_grant_needs_a_login() {
    let endpoint = Arc::new(Mutex::new(Endpoint {
        current: "r0".into(),
        lifetime: 2,
        ..Endpoint::default()
    }));
    let url = serve(endpoint.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let cred = spawn(stored(url, 2), dir.path().join("x.json")).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while endpoint.lock().unwrap().refreshes < 2 {
        assert!(Instant::now() < deadline, "refreshed ahead of expiry");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(matches!(cred.view().state, AuthState::LoggedIn { .. }));
    // The server forgets the token family: the next refresh is refused for good.
    endpoint.lock().unwrap().current = "gone".into();
    // A refresh ahead of expiry that the server answered before it forgot may still
    // bring one more token; a refresh ahead of expiry may also meet the refusal first.
    // Either way, the first refused refresh is final.
    let mut successes = 0;
    while let Some(current) = cred.token() {
        match cred.refused(Some(current), None).await {
            Ok(_) => successes += 1,
            Err(e) => {
                assert!(e.0.contains("invalid_grant"), "{e}");
                break;
            }
        }
        assert!(
            successes <= 1,
            "the server forgot the family: at most one refresh in flight could succeed"
        );
    }
    assert!(
        cred.needs_login()
            .is_some_and(|why| why.contains("invalid_grant"))
    );
    assert!(cred.token().is_none());
    let refreshes = endpoint.lock().unwrap().refreshes;
    assert!(
        cred.refused(
            Some(Arc::new(Access {
                token: Secret::new("x".into()),
                dpop: None
            })),
            None
        )
        .await
        .is_err()
    );
    assert_eq!(
        endpoint.lock().unwrap().refreshes,
        refreshes,
        "no retry storm"
    );
}

#[tokio::test]
async fn a_forgotten_login_is_removed_and_never_stored_again() {
    let endpoint = Arc::new(Mutex::new(Endpoint {
        current: "r0".into(),
        lifetime: 3600,
        ..Endpoint::default()
    }));
    let url = serve(endpoint.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("credentials/x.json");
    let cred = spawn(stored(url, 3600), file.clone()).await;
    cred.forget();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while file.exists() {
        assert!(std::time::Instant::now() < deadline, "the file stays");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A connection still stopping may refresh: the tokens work, and no file comes back.
    let old = cred.token().unwrap();
    assert_eq!(
        cred.refused(Some(old), None).await.unwrap().token.expose(),
        "a1"
    );
    assert!(!file.exists());
}

#[tokio::test]
async fn a_keyring_that_cannot_be_reached_means_a_login_is_needed_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let bus = format!("unix:path={}", dir.path().join("no-bus").display());
    let place = Place::Keyring {
        server: "x".into(),
        items: crate::secrets::CredentialItems::with_bus(crate::secrets::Bus::Address(bus)),
    };
    let cred = spawn_at(Some(place));
    assert!(cred.current().await.is_none());
    let NoToken(why) = cred.refused(None, None).await.unwrap_err();
    assert!(why.contains("the stored login cannot be used"), "{why}");
    assert!(why.contains("session bus"), "{why}");
    assert_eq!(cred.needs_login(), Some(why));
    // A login fails before any browser is involved, and never writes a file.
    let e = cred.login().await.unwrap_err();
    assert!(matches!(e, LoginError::NotStored(_)), "{e:?}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
