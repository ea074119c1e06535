//! Unit tests of the credential store.
//!
//! The place a config names, the file store's modes and round trip, damaged logins, and a
//! keyring that cannot be reached failing without a file written.
#![allow(clippy::disallowed_methods, reason = "tests may block")]

use super::*;
use crate::config::{Config, Launch};
use crate::secrets::Bus;
use std::os::unix::fs::PermissionsExt;

fn sample() -> Stored {
    Stored {
        server_url: "https://mcp.example.com/mcp".into(),
        resource: "https://mcp.example.com/mcp".into(),
        metadata: ServerMetadata {
            issuer: "https://auth.example.com".into(),
            ..ServerMetadata::default()
        },
        client: StoredClient {
            client_id: "c".into(),
            client_secret: None,
            method: AuthMethod::None,
            source: Source::Dynamic,
            redirect_uri: None,
        },
        requested_scopes: vec!["mcp:basic".into()],
        tokens: StoredTokens {
            access_token: "a".into(),
            expires_at: Some(epoch_secs(SystemTime::now()) + 60),
            lifetime: Some(60),
            refresh_token: Some("r".into()),
            scope: Some("mcp:basic".into()),
            dpop_bound: false,
        },
        grant: crate::config::Grant::AuthorizationCode,
        dpop_key: None,
    }
}

#[tokio::test]
async fn a_login_is_kept_privately_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let place = Place::of(Some(dir.path()), "remote", CredentialStore::File).unwrap();
    let Place::File(file) = &place else {
        panic!("{place:?}")
    };
    assert_eq!(*file, dir.path().join("credentials/remote.json"));
    save(&place, &sample()).await.unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
    let back: Stored = load(&place).await.unwrap().unwrap();
    assert_eq!(back.tokens.refresh_token.as_deref(), Some("r"));
    assert_eq!(back.metadata.issuer, "https://auth.example.com");
    assert!(remove(&place).await.unwrap());
    assert!(load::<Stored>(&place).await.unwrap().is_none());
    assert!(!remove(&place).await.unwrap());
}

/// The place of server `r` under a config whose oauth table holds `oauth`.
fn place_of(oauth: &str, state_dir: Option<&Path>) -> Option<Place> {
    let text = format!("[servers.r]\nurl = \"https://mcp.example.com/mcp\"\n{oauth}");
    let config = Config::parse(&text, Path::new("/etc/mcpd.toml")).unwrap();
    let Launch::Http(launch) = &config.servers["r"].launch else {
        panic!("a remote server")
    };
    let store = launch.oauth.as_ref().unwrap().store;
    Place::of(state_dir, "r", store)
}

#[test]
fn the_configured_store_decides_where_a_login_is_kept() {
    let state = Path::new("/var/lib/mcpd");
    let file = |p: Option<Place>| match p {
        Some(Place::File(path)) => Some(path),
        other => panic!("{other:?}"),
    };
    let want = Some(state.join("credentials/r.json"));
    assert_eq!(file(place_of("", Some(state))), want);
    assert_eq!(file(place_of("[servers.r.oauth]\n", Some(state))), want);
    let explicit = "[servers.r.oauth]\nstore = \"file\"";
    assert_eq!(file(place_of(explicit, Some(state))), want);
    assert!(place_of(explicit, None).is_none(), "no state_dir, no file");
    // The keyring needs no state directory.
    for dir in [Some(state), None] {
        match place_of("[servers.r.oauth]\nstore = \"keyring\"", dir) {
            Some(Place::Keyring { server, .. }) => assert_eq!(server, "r"),
            other => panic!("{other:?}"),
        }
    }
    let text =
        "[servers.r]\nurl = \"https://mcp.example.com/mcp\"\n[servers.r.oauth]\nstore = \"vault\"";
    let e = Config::parse(text, Path::new("/etc/mcpd.toml")).unwrap_err();
    assert!(e.to_string().contains("`servers.r.oauth.store`"), "{e}");
    assert!(e.to_string().contains("\"file\" or \"keyring\""), "{e}");
}

#[tokio::test]
async fn a_damaged_login_is_unreadable_not_absent() {
    let dir = tempfile::tempdir().unwrap();
    let place = Place::File(path(dir.path(), "r"));
    std::fs::create_dir_all(dir.path().join("credentials")).unwrap();
    std::fs::write(path(dir.path(), "r"), "{not json").unwrap();
    match load::<Stored>(&place).await {
        Err(StoreError::Unreadable { place, .. }) => assert!(place.ends_with("r.json")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_keyring_that_cannot_be_reached_is_an_error_and_no_file_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let bus = format!("unix:path={}", dir.path().join("no-bus").display());
    let place = Place::Keyring {
        server: "r".into(),
        items: CredentialItems::with_bus(Bus::Address(bus)),
    };
    let start = std::time::Instant::now();
    assert!(matches!(
        reachable(&place).await,
        Err(StoreError::Keyring(_))
    ));
    let e = save(&place, &sample()).await.unwrap_err();
    assert!(matches!(e, StoreError::Keyring(_)), "{e:?}");
    assert!(e.to_string().contains("store = \"file\""), "{e}");
    assert!(matches!(
        load::<Stored>(&place).await,
        Err(StoreError::Keyring(_))
    ));
    assert!(matches!(remove(&place).await, Err(StoreError::Keyring(_))));
    assert!(start.elapsed() < std::time::Duration::from_secs(2));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
