//! The stores together without a keyring.
//!
//! Lookup order, where `set` writes, listing, removal, errors, redaction, and a bus that
//! is missing or never answers.

#![allow(clippy::disallowed_methods, reason = "tests may block")]

use super::*;
use std::time::{Duration, Instant};

/// A bus address where nothing listens: the keyring is never reached, and a developer's
/// own keyring is never touched by these tests.
fn no_bus(dir: &Path) -> Bus {
    Bus::Address(format!("unix:path={}", dir.join("no-bus").display()))
}

struct Fixture {
    _dir: tempfile::TempDir,
    creds: PathBuf,
    state: PathBuf,
    secrets: Secrets,
}

fn fixture(preferred: Preferred) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("creds");
    let state = dir.path().join("state");
    std::fs::create_dir(&creds).unwrap();
    let secrets = Secrets::new(Some(&state), preferred)
        .with_credentials_dir(Some(creds.clone()))
        .with_bus(no_bus(dir.path()));
    Fixture {
        _dir: dir,
        creds,
        state,
        secrets,
    }
}

fn value(v: &str) -> SecretValue {
    SecretValue::new(v.to_owned())
}

#[tokio::test]
async fn credentials_come_before_the_file_store() {
    let f = fixture(Preferred::File);
    assert_eq!(
        f.secrets.set("tok", &value("from-file")).await.unwrap(),
        Store::File
    );
    let (v, store) = f.secrets.lookup("tok").await.unwrap();
    assert_eq!((v.expose(), store), ("from-file", Store::File));

    std::fs::write(f.creds.join("tok"), "from-credentials\n").unwrap();
    let (v, store) = f.secrets.lookup("tok").await.unwrap();
    assert_eq!(
        (v.expose(), store),
        ("from-credentials", Store::Credentials)
    );
}

#[tokio::test]
async fn a_missing_secret_names_where_mcpd_looked_and_how_to_set_it() {
    let f = fixture(Preferred::Auto);
    let e = f.secrets.lookup("gh-token").await.unwrap_err();
    let SecretError::Missing { name, tried } = &e else {
        panic!("{e:?}");
    };
    assert_eq!(
        (name.as_str(), tried.as_slice()),
        ("gh-token", &[Store::Credentials, Store::File][..])
    );
    assert_eq!(
        e.to_string(),
        "secret \"gh-token\" is not set (looked in: systemd credentials, mcpd's file store; \
         no Secret Service answered, so the keyring was not searched); set it with \
         `mcpd ctl secret set gh-token`, or give it to mcpd's unit with \
         `LoadCredential=gh-token:/path/to/file` (or `LoadCredentialEncrypted=`)"
    );
    // Without systemd's directory or a state directory, only what is left is searched.
    let bare = Secrets::new(None, Preferred::Auto)
        .with_credentials_dir(None)
        .with_bus(no_bus(&f.state));
    match bare.lookup("x").await {
        Err(SecretError::Missing { tried, .. }) => assert!(tried.is_empty()),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn set_writes_the_configured_store_and_never_the_credentials() {
    // Auto without a Secret Service is the file store.
    let f = fixture(Preferred::Auto);
    std::fs::write(f.creds.join("tok"), "unit's").unwrap();
    assert_eq!(
        f.secrets.set("tok", &value("mine")).await.unwrap(),
        Store::File
    );
    assert!(f.state.join("secrets/tok.json").exists());
    assert_eq!(
        std::fs::read_to_string(f.creds.join("tok")).unwrap(),
        "unit's"
    );
    // The unit's credential still wins the lookup.
    assert_eq!(f.secrets.lookup("tok").await.unwrap().1, Store::Credentials);

    // A configured keyring that cannot be reached is an error that says what to do.
    let f = fixture(Preferred::Keyring);
    let e = f.secrets.set("tok", &value("mine")).await.unwrap_err();
    assert!(matches!(e, SecretError::Keyring(_)), "{e:?}");
    assert!(
        e.to_string().contains("set [daemon] secrets = \"file\""),
        "{e}"
    );
    assert!(!f.state.join("secrets").exists());

    // The file store without a state directory.
    let none = Secrets::new(None, Preferred::File).with_bus(no_bus(&f.state));
    let e = none.set("tok", &value("mine")).await.unwrap_err();
    assert!(matches!(e, SecretError::NoStateDir), "{e:?}");
}

#[tokio::test]
async fn list_gives_names_and_stores_and_remove_leaves_the_credentials() {
    let f = fixture(Preferred::File);
    std::fs::write(f.creds.join("both"), "canary-creds").unwrap();
    std::fs::write(f.creds.join("unit-only"), "canary-unit").unwrap();
    f.secrets.set("both", &value("canary-file")).await.unwrap();
    f.secrets.set("a-file", &value("canary-a")).await.unwrap();
    let listed = f.secrets.list().await.unwrap();
    let expected = [
        ("a-file", Store::File),
        ("both", Store::Credentials),
        ("both", Store::File),
        ("unit-only", Store::Credentials),
    ]
    .map(|(n, s)| (n.to_owned(), s));
    assert_eq!(listed, expected);
    assert!(!format!("{listed:?}").contains("canary"));

    assert_eq!(f.secrets.remove("both").await.unwrap(), [Store::File]);
    assert_eq!(f.secrets.remove("both").await.unwrap(), []);
    assert_eq!(f.secrets.remove("unit-only").await.unwrap(), []);
    assert!(f.creds.join("unit-only").exists());
    assert_eq!(
        f.secrets.lookup("both").await.unwrap().1,
        Store::Credentials
    );
}

#[tokio::test]
async fn invalid_names_are_refused_by_every_operation() {
    let f = fixture(Preferred::File);
    std::fs::write(f.state.parent().unwrap().join("outside"), "x").unwrap();
    for name in ["", "../outside", "a/b", "..", "has space"] {
        let errs = [
            f.secrets.lookup(name).await.map(|_| ()).unwrap_err(),
            f.secrets
                .lookup_all(&[name.to_owned()])
                .await
                .map(|_| ())
                .unwrap_err(),
            f.secrets
                .set(name, &value("v"))
                .await
                .map(|_| ())
                .unwrap_err(),
            f.secrets.remove(name).await.map(|_| ()).unwrap_err(),
        ];
        for e in errs {
            assert!(matches!(e, SecretError::Invalid(_)), "{name:?}: {e:?}");
        }
    }
    assert!(f.state.parent().unwrap().join("outside").exists());
}

#[tokio::test]
async fn lookup_all_finds_each_name_in_its_own_store() {
    let f = fixture(Preferred::File);
    std::fs::write(f.creds.join("a"), "A").unwrap();
    f.secrets.set("b", &value("B")).await.unwrap();
    let found = f
        .secrets
        .lookup_all(&["b".into(), "a".into()])
        .await
        .unwrap();
    let found: Vec<_> = found
        .iter()
        .map(|(n, v, s)| (n.as_str(), v.expose(), *s))
        .collect();
    assert_eq!(
        found,
        [("b", "B", Store::File), ("a", "A", Store::Credentials)]
    );
    let e = f
        .secrets
        .lookup_all(&["a".into(), "c".into()])
        .await
        .unwrap_err();
    assert!(
        matches!(&e, SecretError::Missing { name, .. } if name == "c"),
        "{e:?}"
    );
}

#[tokio::test]
async fn values_never_show_in_debug_output_or_errors() {
    let f = fixture(Preferred::File);
    let canary = "canary-5f0c1d";
    f.secrets.set("tok", &value(canary)).await.unwrap();
    let found = f.secrets.lookup("tok").await.unwrap();
    let all = f.secrets.lookup_all(&["tok".into()]).await.unwrap();
    let printed = format!("{found:?} {all:?} {:?} {}", found.0, found.0);
    assert!(!printed.contains(canary), "{printed}");
    assert!(printed.contains("<redacted>"), "{printed}");
    // A file store damaged so that its value is all there is to show.
    let file = f.state.join("secrets/tok.json");
    std::fs::write(&file, format!("{{\"value\": \"{canary}\"")).unwrap();
    let e = f.secrets.lookup("tok").await.unwrap_err();
    assert!(!format!("{e} {e:?}").contains(canary), "{e}");
}

/// A bus that accepts connections and never says a word: the worst a session bus can do.
fn silent_bus(dir: &Path) -> (Bus, std::os::unix::net::UnixListener) {
    let path = dir.join("silent-bus");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    (
        Bus::Address(format!("unix:path={}", path.display())),
        listener,
    )
}

#[tokio::test]
async fn without_a_bus_the_default_store_is_the_file_store_at_once() {
    let f = fixture(Preferred::Auto);
    let start = Instant::now();
    assert_eq!(f.secrets.default_store().await, Store::File);
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn a_bus_that_never_answers_costs_a_bounded_wait_then_the_file_store() {
    let f = fixture(Preferred::Auto);
    let (bus, _listener) = silent_bus(f.state.parent().unwrap());
    let secrets = f.secrets.clone().with_bus(bus);
    f.secrets.set("tok", &value("v")).await.unwrap();
    let start = Instant::now();
    let (store, found, listed) = tokio::join!(
        secrets.default_store(),
        secrets.lookup("tok"),
        secrets.list()
    );
    let elapsed = start.elapsed();
    assert_eq!(store, Store::File);
    assert_eq!(found.unwrap().1, Store::File);
    assert_eq!(listed.unwrap(), [("tok".to_owned(), Store::File)]);
    // The probe waits 2 s, a lookup 5 s: no more, with room for a slow machine.
    assert!(elapsed >= keyring::PROBE_DEADLINE, "{elapsed:?}");
    assert!(
        elapsed < keyring::DEADLINE + Duration::from_secs(3),
        "{elapsed:?}"
    );
}

#[test]
fn the_futures_can_be_spawned() {
    fn send<T: Send>(_: T) {}
    let s = Secrets::new(None, Preferred::Auto);
    send(s.lookup("a"));
    send(s.lookup_all(&[]));
    send(s.set("a", &SecretValue::default()));
    send(s.list());
    send(s.remove("a"));
    send(s.default_store());
}
