//! The keyring store against a real Secret Service.
//!
//! gnome-keyring on a throwaway session bus, started by `tests/keyring/with-keyring.sh`;
//! elsewhere these tests skip, or fail when `MCPD_REQUIRE_KEYRING=1`.
//!
//! They run only where the wrapper says the bus is its own (`MCPD_TEST_KEYRING=1`), so a
//! developer's own keyring is never written to. Each test uses names of its own: nextest
//! runs them at once against the one keyring.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_macros,
    reason = "tests may block, and print why they skip"
)]

use super::*;
use secret_service::{EncryptionType, SecretService};

mod logins;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The throwaway keyring's bus, or None (after saying why) when this is not the wrapper's
/// session. With `MCPD_REQUIRE_KEYRING=1` a missing keyring fails the test instead.
async fn keyring_bus(test: &str) -> Option<Bus> {
    let required = std::env::var("MCPD_REQUIRE_KEYRING").as_deref() == Ok("1");
    let skip = |why: String| {
        if required {
            panic!("{test}: {why} (MCPD_REQUIRE_KEYRING=1 makes this a failure)");
        }
        eprintln!("skipped: {test}: {why}");
        None
    };
    if std::env::var("MCPD_TEST_KEYRING").as_deref() != Ok("1") {
        return skip(
            "not inside tests/keyring/with-keyring.sh, which starts a throwaway gnome-keyring \
             (the tests never use your own keyring)"
                .to_owned(),
        );
    }
    let Some(address) = std::env::var("DBUS_SESSION_BUS_ADDRESS").ok() else {
        return skip("the wrapper set no DBUS_SESSION_BUS_ADDRESS".to_owned());
    };
    let bus = Bus::Address(address);
    if let Err(keyring::Unavailable(why)) =
        Keyring::new(bus.clone()).answers(keyring::DEADLINE).await
    {
        return skip(format!(
            "no Secret Service answers on the wrapper's bus: {why}"
        ));
    }
    Some(bus)
}

/// The stores with the throwaway keyring, empty credentials and file stores, and `preferred`.
struct Fixture {
    _dir: tempfile::TempDir,
    creds: PathBuf,
    state: PathBuf,
    secrets: Secrets,
}

fn fixture(bus: Bus, preferred: Preferred) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("creds");
    let state = dir.path().join("state");
    std::fs::create_dir(&creds).unwrap();
    let secrets = Secrets::new(Some(&state), preferred)
        .with_credentials_dir(Some(creds.clone()))
        .with_bus(bus);
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
async fn a_secret_set_in_the_keyring_is_found_there() {
    let Some(bus) = keyring_bus("a_secret_set_in_the_keyring_is_found_there").await else {
        return;
    };
    let f = fixture(bus, Preferred::Keyring);
    let v = "kr-canary-1 with spaces, \"quotes\" and ünïcode";
    assert_eq!(
        f.secrets.set("kr-set", &value(v)).await.unwrap(),
        Store::Keyring
    );
    let (found, store) = f.secrets.lookup("kr-set").await.unwrap();
    assert_eq!((found.expose(), store), (v, Store::Keyring));
    // Nothing went to the file store.
    assert!(!f.state.join("secrets").exists());
    // Setting it again replaces it: one item, the new value.
    f.secrets.set("kr-set", &value("kr-second")).await.unwrap();
    assert_eq!(
        f.secrets.lookup("kr-set").await.unwrap().0.expose(),
        "kr-second"
    );
    let listed = f.secrets.list().await.unwrap();
    assert_eq!(
        listed.iter().filter(|(n, _)| n == "kr-set").count(),
        1,
        "{listed:?}"
    );
}

#[tokio::test]
async fn items_carry_mcpds_attributes_and_label() {
    let Some(bus) = keyring_bus("items_carry_mcpds_attributes_and_label").await else {
        return;
    };
    let f = fixture(bus.clone(), Preferred::Keyring);
    f.secrets
        .set("kr-attrs", &value("kr-canary-2"))
        .await
        .unwrap();
    // Read back with the Secret Service itself, as another tool (secret-tool) would.
    let Bus::Address(address) = bus else {
        unreachable!()
    };
    let conn = zbus::connection::Builder::address(address.as_str())
        .unwrap()
        .build()
        .await
        .unwrap();
    let ss = SecretService::connect_with_existing(EncryptionType::Dh, conn)
        .await
        .unwrap();
    let found = ss
        .search_items(HashMap::from([
            ("application", "mcpd"),
            ("name", "kr-attrs"),
        ]))
        .await
        .unwrap();
    assert_eq!((found.unlocked.len(), found.locked.len()), (1, 0));
    let item = &found.unlocked[0];
    assert_eq!(item.get_label().await.unwrap(), "mcpd: kr-attrs");
    let attributes = item.get_attributes().await.unwrap();
    assert_eq!(
        attributes.get("application").map(String::as_str),
        Some("mcpd")
    );
    assert_eq!(attributes.get("name").map(String::as_str), Some("kr-attrs"));
    assert_eq!(item.get_secret().await.unwrap(), b"kr-canary-2");
    let default = ss.get_default_collection().await.unwrap();
    assert!(
        item.item_path
            .as_str()
            .starts_with(default.collection_path.as_str())
    );
}

#[tokio::test]
async fn list_shows_keyring_names_and_never_values() {
    let Some(bus) = keyring_bus("list_shows_keyring_names_and_never_values").await else {
        return;
    };
    let f = fixture(bus, Preferred::Keyring);
    f.secrets
        .set("kr-list-a", &value("kr-canary-3a"))
        .await
        .unwrap();
    f.secrets
        .set("kr-list-b", &value("kr-canary-3b"))
        .await
        .unwrap();
    let listed = f.secrets.list().await.unwrap();
    for name in ["kr-list-a", "kr-list-b"] {
        assert!(
            listed.contains(&(name.to_owned(), Store::Keyring)),
            "{listed:?}"
        );
    }
    assert!(!format!("{listed:?}").contains("kr-canary"), "{listed:?}");
}

#[tokio::test]
async fn a_removed_secret_is_gone_from_the_keyring() {
    let Some(bus) = keyring_bus("a_removed_secret_is_gone_from_the_keyring").await else {
        return;
    };
    let f = fixture(bus, Preferred::Keyring);
    f.secrets.set("kr-rm", &value("kr-canary-4")).await.unwrap();
    assert_eq!(f.secrets.remove("kr-rm").await.unwrap(), [Store::Keyring]);
    assert_eq!(f.secrets.remove("kr-rm").await.unwrap(), []);
    match f.secrets.lookup("kr-rm").await {
        Err(SecretError::Missing { tried, .. }) => {
            assert_eq!(tried, [Store::Credentials, Store::Keyring, Store::File]);
        }
        other => panic!("{other:?}"),
    }
    let listed = f.secrets.list().await.unwrap();
    assert!(!listed.iter().any(|(n, _)| n == "kr-rm"), "{listed:?}");
}

#[tokio::test]
async fn stores_are_searched_credentials_then_keyring_then_file() {
    let Some(bus) = keyring_bus("stores_are_searched_credentials_then_keyring_then_file").await
    else {
        return;
    };
    let keyring = fixture(bus.clone(), Preferred::Keyring);
    let file = Secrets::new(Some(&keyring.state), Preferred::File).with_bus(bus);
    for name in ["kr-order-1", "kr-order-2"] {
        keyring
            .secrets
            .set(name, &value("from-keyring"))
            .await
            .unwrap();
        file.set(name, &value("from-file")).await.unwrap();
    }
    std::fs::write(keyring.creds.join("kr-order-1"), "from-credentials\n").unwrap();
    let (v, store) = keyring.secrets.lookup("kr-order-1").await.unwrap();
    assert_eq!(
        (v.expose(), store),
        ("from-credentials", Store::Credentials)
    );
    let (v, store) = keyring.secrets.lookup("kr-order-2").await.unwrap();
    assert_eq!((v.expose(), store), ("from-keyring", Store::Keyring));
    // Removal takes it from both writable stores; the unit's credential stays.
    assert_eq!(
        keyring.secrets.remove("kr-order-1").await.unwrap(),
        [Store::Keyring, Store::File]
    );
    assert_eq!(
        keyring.secrets.lookup("kr-order-1").await.unwrap().1,
        Store::Credentials
    );
}

#[tokio::test]
async fn the_default_store_is_the_keyring_when_one_answers() {
    let Some(bus) = keyring_bus("the_default_store_is_the_keyring_when_one_answers").await else {
        return;
    };
    let f = fixture(bus, Preferred::Auto);
    let start = Instant::now();
    assert_eq!(f.secrets.default_store().await, Store::Keyring);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(
        f.secrets
            .set("kr-auto", &value("kr-canary-5"))
            .await
            .unwrap(),
        Store::Keyring
    );
    // And the file store when the bus is gone, at once.
    let gone = f.secrets.clone().with_bus(Bus::Address(format!(
        "unix:path={}",
        f.state.join("no-bus").display()
    )));
    let start = Instant::now();
    assert_eq!(gone.default_store().await, Store::File);
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
}

/// gnome-keyring's own interface for making and unlocking a collection with a password
/// and no prompt (what libsecret's tests use): a locked collection of this test's own,
/// so the other tests' default collection stays unlocked.
struct PasswordCollection {
    conn: zbus::Connection,
    session: zbus::zvariant::OwnedObjectPath,
    path: zbus::zvariant::OwnedObjectPath,
}

const PASSWORD: &[u8] = b"mcpd-locked-test";

impl PasswordCollection {
    async fn create(address: &str) -> PasswordCollection {
        use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};
        let conn = zbus::connection::Builder::address(address)
            .unwrap()
            .build()
            .await
            .unwrap();
        let service = zbus::Proxy::new(
            &conn,
            "org.freedesktop.secrets",
            "/org/freedesktop/secrets",
            "org.freedesktop.Secret.Service",
        )
        .await
        .unwrap();
        let (_, session): (OwnedValue, OwnedObjectPath) = service
            .call("OpenSession", &("plain", Value::from("")))
            .await
            .unwrap();
        let label = HashMap::from([(
            "org.freedesktop.Secret.Collection.Label",
            Value::from("mcpd locked test"),
        )]);
        let master = (&session, Vec::<u8>::new(), PASSWORD.to_vec(), "text/plain");
        let path: OwnedObjectPath = Self::internal(&conn)
            .await
            .call("CreateWithMasterPassword", &(label, master))
            .await
            .unwrap();
        PasswordCollection {
            conn,
            session,
            path,
        }
    }

    async fn internal(conn: &zbus::Connection) -> zbus::Proxy<'static> {
        zbus::Proxy::new(
            conn,
            "org.freedesktop.secrets",
            "/org/freedesktop/secrets",
            "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface",
        )
        .await
        .unwrap()
    }

    async fn unlock(&self) {
        let master = (
            &self.session,
            Vec::<u8>::new(),
            PASSWORD.to_vec(),
            "text/plain",
        );
        let () = Self::internal(&self.conn)
            .await
            .call("UnlockWithMasterPassword", &(&self.path, master))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_locked_keyring_that_is_not_unlocked_is_an_error_never_passed_over() {
    let test = "a_locked_keyring_that_is_not_unlocked_is_an_error_never_passed_over";
    let Some(bus) = keyring_bus(test).await else {
        return;
    };
    let f = fixture(bus.clone(), Preferred::Keyring);
    let Bus::Address(address) = bus.clone() else {
        unreachable!()
    };
    let locked = PasswordCollection::create(&address).await;
    let ss = SecretService::connect_with_existing(EncryptionType::Dh, locked.conn.clone())
        .await
        .unwrap();
    let collection = ss
        .get_collection_by_path(locked.path.clone())
        .await
        .unwrap();
    let attributes = HashMap::from([("application", "mcpd"), ("name", "kr-locked")]);
    collection
        .create_item(
            "mcpd: kr-locked",
            attributes,
            b"from-keyring",
            true,
            "text/plain",
        )
        .await
        .unwrap();
    collection.lock().await.unwrap();
    assert!(collection.is_locked().await.unwrap());
    // The same name in the file store must not stand in for it.
    let file = Secrets::new(Some(&f.state), Preferred::File).with_bus(bus.clone());
    file.set("kr-locked", &value("from-file")).await.unwrap();

    // Headless, gnome-keyring's unlock prompt is dismissed at once: a clear error.
    let start = Instant::now();
    let e = f.secrets.lookup("kr-locked").await.unwrap_err();
    assert!(start.elapsed() < keyring::DEADLINE, "{:?}", start.elapsed());
    let SecretError::Keyring(why) = &e else {
        panic!("{e:?}");
    };
    assert!(
        why.contains("\"kr-locked\" is in a locked keyring"),
        "{why}"
    );
    assert!(why.contains("unlock the keyring"), "{why}");
    // Listing reads a locked item's name without unlocking it (GNOME Keyring allows it).
    // Waited for: once in a CI run the listing just after the dismissed prompt came back
    // without the keyring's items (not reproduced in later runs); what the keyring said
    // then is printed if it happens again.
    let want = ("kr-locked".to_owned(), Store::Keyring);
    let deadline = Instant::now() + keyring::DEADLINE;
    loop {
        let listed = f.secrets.list().await.unwrap();
        if listed.contains(&want) {
            break;
        }
        let open = keyring::Keyring::new(bus.clone())
            .open(keyring::DEADLINE)
            .await
            .map(|_| ());
        eprintln!("listing without the keyring's item: {listed:?}; the keyring opens: {open:?}");
        assert!(Instant::now() < deadline, "{listed:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    locked.unlock().await;
    let (v, store) = f.secrets.lookup("kr-locked").await.unwrap();
    assert_eq!((v.expose(), store), ("from-keyring", Store::Keyring));
    collection.delete().await.unwrap();
}
