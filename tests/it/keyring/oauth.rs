//! OAuth logins kept in the desktop keyring (`[servers.NAME.oauth] store = "keyring"`).
//!
//! They go through the real daemon, against the OAuth fixture and a throwaway
//! gnome-keyring: the login, a rotated refresh token, a restart that needs no new login,
//! logout, a server removed by a reload, and a sign-in at an identity provider with its
//! machine token.
//!
//! They run only inside `tests/keyring/with-keyring.sh` (`MCPD_TEST_KEYRING=1`), whose
//! private session bus the daemon inherits, so a developer's own keyring is never written
//! to; elsewhere they skip, or fail when `MCPD_REQUIRE_KEYRING=1`. Each test's server has
//! a name of its own: they share the one keyring.

use crate::oauth::fixture::OAuthFixture;
use crate::oauth::logins::log_in;
use crate::support::*;
use secret_service::{EncryptionType, SecretService};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;

/// The wrapper's bus address, or None (after saying why) outside it. With
/// `MCPD_REQUIRE_KEYRING=1` a missing keyring fails the test instead.
fn keyring_bus(test: &str) -> Option<String> {
    let required = std::env::var("MCPD_REQUIRE_KEYRING").as_deref() == Ok("1");
    let why = if std::env::var("MCPD_TEST_KEYRING").as_deref() != Ok("1") {
        "not inside tests/keyring/with-keyring.sh, which starts a throwaway gnome-keyring \
         (the tests never use your own keyring)"
    } else if let Ok(address) = std::env::var("DBUS_SESSION_BUS_ADDRESS") {
        return Some(address);
    } else {
        "the wrapper set no DBUS_SESSION_BUS_ADDRESS"
    };
    if required {
        panic!("{test}: {why} (MCPD_REQUIRE_KEYRING=1 makes this a failure)");
    }
    eprintln!("skipped: {test}: {why}");
    None
}

/// The login the keyring holds for `server`, as JSON; None when it holds none.
async fn kept(bus: &str, server: &str) -> Option<Value> {
    let conn = zbus::connection::Builder::address(bus)
        .expect("bus address")
        .build()
        .await
        .expect("the wrapper's bus");
    let ss = SecretService::connect_with_existing(EncryptionType::Dh, conn)
        .await
        .expect("the Secret Service");
    let found = ss
        .search_items(HashMap::from([
            ("application", "mcpd"),
            ("credential", server),
        ]))
        .await
        .expect("search");
    assert!(found.locked.is_empty(), "the test keyring stays unlocked");
    assert!(found.unlocked.len() <= 1, "one item per server");
    let item = found.unlocked.first()?;
    let text = item.get_secret().await.expect("the item's secret");
    Some(serde_json::from_slice(&text).expect("a login in JSON"))
}

fn refresh_token(login: &Value) -> String {
    login["tokens"]["refresh_token"]
        .as_str()
        .expect("a refresh token")
        .to_owned()
}

/// The lines of a server's table that keep its login in the keyring.
fn keyring_store(server: &str) -> String {
    format!("[servers.{server}.oauth]\nstore = \"keyring\"")
}

async fn daemon(fx: &OAuthFixture, server: &str) -> Daemon {
    DaemonBuilder::new()
        .fixture("local", &["--tools", "echo"])
        .remote(server, &fx.mcp_url(), &keyring_store(server))
        .start()
        .await
}

async fn wait_state(d: &Daemon, server: &str, state: &str) -> Value {
    d.wait_server(server, &format!("{server} is {state}"), |s| {
        s["state"] == state
    })
    .await
}

#[tokio::test]
async fn a_login_kept_in_the_keyring_is_refreshed_there_and_survives_a_restart() {
    let test = "a_login_kept_in_the_keyring_is_refreshed_there_and_survives_a_restart";
    let Some(bus) = keyring_bus(test) else {
        return;
    };
    let server = "kro1";
    let fx = OAuthFixture::builder().start().await;
    let mut d = daemon(&fx, server).await;
    wait_state(&d, server, "needs-login").await;
    assert!(kept(&bus, server).await.is_none());
    log_in(&d, server).await;
    wait_state(&d, server, "ready").await;
    let tool = format!("{server}__echo");
    let mut a = d.initialized_agent().await;
    assert_eq!(text(&a.call(&tool, json!({"text": "x"})).await), "x");

    // The whole login is one keyring item; nothing went to state_dir/credentials/.
    let login = kept(&bus, server)
        .await
        .expect("the login is in the keyring");
    let first = refresh_token(&login);
    assert!(fx.handle().valid_refresh_tokens().contains(&first));
    assert_eq!(login["metadata"]["issuer"], json!(fx.issuer()));
    assert!(login["client"]["client_id"].is_string(), "{login}");
    assert!(!d.dir().join("state/credentials").exists());

    // A refused access token is refreshed; the rotated refresh token replaces the old
    // one in the keyring before the new access token is used.
    fx.handle().expire_access_tokens();
    assert_eq!(text(&a.call(&tool, json!({"text": "y"})).await), "y");
    assert_eq!(fx.handle().token_requests("refresh_token"), 1);
    let second = refresh_token(&kept(&bus, server).await.expect("still kept"));
    assert_ne!(first, second, "the keyring holds the rotated refresh token");
    assert_eq!(
        fx.handle().valid_refresh_tokens(),
        std::slice::from_ref(&second)
    );

    // A restarted daemon reads the login back from the keyring: no new login.
    d.restart_daemon().await;
    wait_state(&d, server, "ready").await;
    let mut a = d.initialized_agent().await;
    assert_eq!(text(&a.call(&tool, json!({"text": "z"})).await), "z");
    assert_eq!(fx.handle().token_requests("authorization_code"), 1);
    assert!(!fx.handle().any_family_revoked(), "no refresh token reused");
    let s = d.server_status(server).await;
    assert_eq!(s["auth"]["state"], "logged-in", "{s}");
    assert!(!d.dir().join("state/credentials").exists());
    // Tokens stay in the keyring: never in the log or the status.
    let log = d.log_text();
    let status = s.to_string();
    for t in fx.handle().valid_access_tokens().iter().chain([&second]) {
        assert!(!log.contains(t.as_str()), "a token reached the log");
        assert!(!status.contains(t.as_str()), "a token reached status");
    }

    // Logout removes the item.
    let (code, _, err) = d.run_cli(&["ctl", "logout", server]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        kept(&bus, server).await.is_none(),
        "logout removes the item"
    );
}

#[tokio::test]
async fn a_server_removed_by_a_reload_leaves_no_login_in_the_keyring() {
    let test = "a_server_removed_by_a_reload_leaves_no_login_in_the_keyring";
    let Some(bus) = keyring_bus(test) else {
        return;
    };
    let server = "kro2";
    let fx = OAuthFixture::builder().start().await;
    let d = daemon(&fx, server).await;
    wait_state(&d, server, "needs-login").await;
    log_in(&d, server).await;
    wait_state(&d, server, "ready").await;
    assert!(kept(&bus, server).await.is_some());

    // The remote server is the config's last table: cut it, and reload.
    let config = std::fs::read_to_string(&d.config).expect("config");
    let at = config
        .find(&format!("[servers.{server}]"))
        .expect("the server's table");
    std::fs::write(&d.config, &config[..at]).expect("write config");
    let (code, out, err) = d.run_cli(&["ctl", "reload"]).await;
    assert_eq!(code, 0, "{out}{err}");
    let line = format!("removed the stored login of {server} (no longer configured)");
    eventually("the login removed", Duration::from_secs(10), || async {
        d.log_text().contains(&line).then_some(())
    })
    .await;
    assert!(kept(&bus, server).await.is_none(), "the item is gone");
}

#[tokio::test]
async fn a_sign_in_at_the_identity_provider_and_its_machine_token_are_kept_in_the_keyring() {
    let test = "a_sign_in_at_the_identity_provider_and_its_machine_token_are_kept_in_the_keyring";
    let Some(bus) = keyring_bus(test) else {
        return;
    };
    let server = "kro3";
    let fx = OAuthFixture::builder()
        .idp(
            crate::oauth::fixture::IdpOptions::new("mcpd-at-idp", "unused")
                .sign_in(true)
                .for_client("app"),
        )
        .client(crate::oauth::fixture::Client::public("app"))
        .start()
        .await;
    let oauth = format!(
        "[servers.{server}.oauth]\nstore = \"keyring\"\ngrant = \"jwt_bearer\"\nclient_id = \"app\"\n\
         [servers.{server}.oauth.identity_provider]\nissuer = \"{}\"\nclient_id = \"mcpd-at-idp\"",
        fx.idp_issuer()
    );
    let d = DaemonBuilder::new()
        .remote(server, &fx.mcp_url(), &oauth)
        .start()
        .await;
    wait_state(&d, server, "needs-login").await;
    log_in(&d, server).await;
    wait_state(&d, server, "ready").await;
    let mut a = d.initialized_agent().await;
    let tool = format!("{server}__echo");
    assert_eq!(text(&a.call(&tool, json!({"text": "x"})).await), "x");

    // Two items: the sign-in (with the ID token it gave) and the token of the grant.
    let sign_in = kept(&bus, &format!("{server}.idp"))
        .await
        .expect("the sign-in is in the keyring");
    let issued = fx.handle().stats().id_tokens;
    assert_eq!(sign_in["id_token"], json!(issued[0]), "{sign_in}");
    assert!(sign_in["refresh_token"].is_string(), "{sign_in}");
    let login = kept(&bus, server)
        .await
        .expect("the token is in the keyring");
    assert_eq!(login["grant"], "jwt_bearer", "{login}");
    assert_eq!(
        fx.handle().valid_access_tokens(),
        [login["tokens"]["access_token"].as_str().expect("a token")]
    );
    assert!(!d.dir().join("state/credentials").exists(), "no file");

    // Logout forgets both.
    let (code, _, err) = d.run_cli(&["ctl", "logout", server]).await;
    assert_eq!(code, 0, "{err}");
    let gone = async {
        loop {
            let idp = kept(&bus, &format!("{server}.idp")).await;
            if idp.is_none() && kept(&bus, server).await.is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    within("both items removed", gone).await;
}
