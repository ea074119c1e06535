//! OAuth logins kept in a real keyring (`store = "keyring"`).
//!
//! Saved and read back whole, one item per server however often it is saved, removed, and
//! never seen by the secrets' lookups and listings (nor a secret by a login's); run as
//! the other keyring tests are.

use super::*;
use crate::oauth::store::{self, Place, Stored};

/// A stored login for `server`, its refresh token `refresh`.
fn login(refresh: &str) -> Stored {
    serde_json::from_value(serde_json::json!({
        "server_url": "https://mcp.example.com/mcp",
        "resource": "https://mcp.example.com/mcp",
        "metadata": {
            "issuer": "https://auth.example.com",
            "authorization_endpoint": "https://auth.example.com/authorize",
            "token_endpoint": "https://auth.example.com/token"
        },
        "client": {"client_id": "kr-client", "method": "none", "source": "dynamic"},
        "requested_scopes": ["mcp:basic"],
        "tokens": {
            "access_token": format!("kr-access-{refresh}"),
            "expires_at": 4_000_000_000u64,
            "lifetime": 3600,
            "refresh_token": refresh,
            "scope": "mcp:basic"
        }
    }))
    .unwrap()
}

fn place(bus: &Bus, server: &str) -> Place {
    Place::Keyring {
        server: server.to_owned(),
        items: CredentialItems::with_bus(bus.clone()),
    }
}

/// The Secret Service itself, as another tool would read it.
async fn service(bus: &Bus) -> SecretService<'static> {
    let Bus::Address(address) = bus else {
        unreachable!()
    };
    let conn = zbus::connection::Builder::address(address.as_str())
        .unwrap()
        .build()
        .await
        .unwrap();
    SecretService::connect_with_existing(EncryptionType::Dh, conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_login_saved_in_the_keyring_is_read_back_and_a_second_save_replaces_it() {
    let test = "a_login_saved_in_the_keyring_is_read_back_and_a_second_save_replaces_it";
    let Some(bus) = keyring_bus(test).await else {
        return;
    };
    let at = place(&bus, "kr-login-1");
    assert!(store::load::<Stored>(&at).await.unwrap().is_none());
    store::reachable(&at).await.unwrap();
    store::save(&at, &login("kr-r1")).await.unwrap();
    let back = store::load::<Stored>(&at).await.unwrap().unwrap();
    assert_eq!(back.tokens.refresh_token.as_deref(), Some("kr-r1"));
    assert_eq!(back.tokens.access_token, "kr-access-kr-r1");
    assert_eq!(back.client.client_id, "kr-client");
    assert_eq!(
        back.metadata.token_endpoint,
        "https://auth.example.com/token"
    );

    store::save(&at, &login("kr-r2")).await.unwrap();
    let back = store::load::<Stored>(&at).await.unwrap().unwrap();
    assert_eq!(back.tokens.refresh_token.as_deref(), Some("kr-r2"));
    // One item, labelled and keyed as a login, never as a secret.
    let ss = service(&bus).await;
    let found = ss
        .search_items(HashMap::from([
            ("application", "mcpd"),
            ("credential", "kr-login-1"),
        ]))
        .await
        .unwrap();
    assert_eq!((found.unlocked.len(), found.locked.len()), (1, 0));
    let item = &found.unlocked[0];
    assert_eq!(item.get_label().await.unwrap(), "mcpd: kr-login-1 login");
    let attributes = item.get_attributes().await.unwrap();
    assert!(!attributes.contains_key("name"), "{attributes:?}");
    let text = String::from_utf8(item.get_secret().await.unwrap()).unwrap();
    assert!(text.contains("kr-r2") && !text.contains("kr-r1"), "{text}");
}

#[tokio::test]
async fn a_removed_login_is_gone_from_the_keyring() {
    let Some(bus) = keyring_bus("a_removed_login_is_gone_from_the_keyring").await else {
        return;
    };
    let at = place(&bus, "kr-login-2");
    store::save(&at, &login("kr-r1")).await.unwrap();
    assert!(store::remove(&at).await.unwrap());
    assert!(store::load::<Stored>(&at).await.unwrap().is_none());
    assert!(!store::remove(&at).await.unwrap());
}

#[tokio::test]
async fn logins_and_secrets_of_the_same_name_never_see_each_other() {
    let test = "logins_and_secrets_of_the_same_name_never_see_each_other";
    let Some(bus) = keyring_bus(test).await else {
        return;
    };
    let f = fixture(bus.clone(), Preferred::Keyring);
    let name = "kr-login-3";
    let logins = CredentialItems::with_bus(bus.clone());
    // A login alone is no secret: not listed, not found.
    store::save(&place(&bus, name), &login("kr-r1"))
        .await
        .unwrap();
    let listed = f.secrets.list().await.unwrap();
    assert!(!listed.iter().any(|(n, _)| n == name), "{listed:?}");
    assert!(
        matches!(
            f.secrets.lookup(name).await,
            Err(SecretError::Missing { .. })
        ),
        "a login is never a secret"
    );
    assert_eq!(f.secrets.remove(name).await.unwrap(), []);
    // A secret of the same name is its own item; each side finds only its own.
    f.secrets
        .set(name, &value("kr-canary-secret"))
        .await
        .unwrap();
    let (v, store) = f.secrets.lookup(name).await.unwrap();
    assert_eq!((v.expose(), store), ("kr-canary-secret", Store::Keyring));
    let kept = logins.get(name).await.unwrap().unwrap();
    assert!(
        kept.expose().contains("kr-r1"),
        "the login is still the login"
    );
    let listed = f.secrets.list().await.unwrap();
    assert_eq!(
        listed.iter().filter(|(n, _)| n == name).count(),
        1,
        "{listed:?}"
    );
    assert!(!format!("{listed:?}").contains("kr-access"), "{listed:?}");
    // Removing the secret leaves the login, and removing the login leaves the secret.
    assert_eq!(f.secrets.remove(name).await.unwrap(), [Store::Keyring]);
    assert!(logins.get(name).await.unwrap().is_some());
    f.secrets.set(name, &value("kr-again")).await.unwrap();
    assert!(logins.remove(name).await.unwrap());
    assert_eq!(f.secrets.lookup(name).await.unwrap().0.expose(), "kr-again");
}
