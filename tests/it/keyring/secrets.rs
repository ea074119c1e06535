//! `${secret:NAME}` from the desktop keyring through the real daemon.
//!
//! A real Secret Service (gnome-keyring on the private bus of
//! `tests/keyring/with-keyring.sh`), `mcpd ctl secret set` storing there by default, the
//! server receiving the value, a restarted daemon reading it back. Outside the wrapper
//! these tests skip, saying why; `.ci/run` runs them inside it with
//! `MCPD_REQUIRE_KEYRING=1`, where skipping is a failure.

use crate::secrets::stores::{ctl_with_input, server_env};
use crate::support::*;

/// Whether this test runs beside the wrapper's throwaway keyring (never a person's own).
pub fn keyring_here(test: &str) -> bool {
    let inside = std::env::var("MCPD_TEST_KEYRING").as_deref() == Ok("1")
        && std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some();
    if !inside {
        assert!(
            std::env::var("MCPD_REQUIRE_KEYRING").as_deref() != Ok("1"),
            "{test}: not inside tests/keyring/with-keyring.sh (MCPD_REQUIRE_KEYRING=1 makes this a failure)"
        );
        eprintln!(
            "skipped: {test}: not inside tests/keyring/with-keyring.sh, which starts a throwaway gnome-keyring"
        );
    }
    inside
}

#[tokio::test]
async fn ctl_secret_set_stores_in_the_keyring_and_the_server_gets_it_again_after_a_daemon_restart()
{
    if !keyring_here("keyring::secrets::ctl_secret_set_stores_in_the_keyring") {
        return;
    }
    // A name of this run's own: other tests share the keyring.
    let name = format!("it-token-{}", std::process::id());
    let mut d = DaemonBuilder::new()
        .fixture_with(
            "s",
            &["--tools", "env_json"],
            &format!("env = {{ TOKEN = \"${{secret:{name}}}\" }}"),
        )
        .start()
        .await;
    let s = d
        .wait_server("s", "s failed for want of its secret", |s| {
            s["state"] == "failed"
        })
        .await;
    let why = s["last_error"].as_str().unwrap_or_default();
    assert!(
        why.contains("looked in: the keyring, mcpd's file store"),
        "{s}"
    );
    let (_, out, _) = d.run_cli(&["ctl", "status"]).await;
    assert!(out.contains("new secrets go to the keyring"), "{out}");

    let value = "from-the-keyring-42";
    let (code, out, err) = ctl_with_input(&d.socket, &["secret", "set", &name], value).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains(&format!("stored secret {name} in the keyring")),
        "{err}"
    );
    d.wait_server("s", "s starts with its secret", |s| s["state"] == "ready")
        .await;
    assert_eq!(server_env(&d, "s").await["TOKEN"], value);
    assert!(
        !d.dir()
            .join("state/secrets")
            .join(format!("{name}.json"))
            .exists(),
        "the value went to the keyring, not the file store"
    );
    let (_, out, _) = d.run_cli(&["ctl", "secret", "list"]).await;
    assert!(
        out.lines()
            .any(|l| l.starts_with(&name) && l.ends_with("keyring")),
        "{out}"
    );
    assert!(!out.contains(value), "{out}");

    // A new daemon finds it in the keyring.
    d.restart_daemon().await;
    d.wait_server("s", "s starts after a daemon restart", |s| {
        s["state"] == "ready"
    })
    .await;
    assert_eq!(server_env(&d, "s").await["TOKEN"], value);

    let (code, _, err) = d.run_cli(&["ctl", "secret", "rm", &name]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("removed secret") && err.contains("the keyring"),
        "{err}"
    );
}
