//! The dashboard's address across daemon restarts.
//!
//! Without `ui_listen` the port it last listened on is kept in the state directory and
//! listened on again, a kept port that is taken gives way to a fresh one (logged, and
//! kept in turn), and an explicit `ui_listen` is used as it is and keeps nothing.

use crate::dashboard::login::{launch_url, origin};
use crate::support::*;
use std::os::unix::fs::PermissionsExt;

/// The port of the dashboard's address.
fn port_of(origin: &str) -> u16 {
    origin
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {origin}"))
}

#[tokio::test]
async fn the_dashboards_address_stays_the_same_across_a_daemon_restart() {
    let mut d = DaemonBuilder::new().fixture("alpha", &[]).start().await;
    d.wait_ready().await;
    let before = origin(&d).await;
    assert!(
        launch_url(&d)
            .await
            .starts_with(&format!("{before}/login?"))
    );
    for _ in 0..2 {
        d.restart_daemon().await;
        d.wait_ready().await;
        assert_eq!(origin(&d).await, before);
        let url = launch_url(&d).await;
        assert!(url.starts_with(&format!("{before}/login?")), "{url}");
    }
    // Kept in the state directory, for the daemon's user alone.
    let kept = d.dir().join("state/dashboard.json");
    let mode = std::fs::metadata(&kept).expect("kept").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", kept.display());
}

#[tokio::test]
async fn a_kept_port_that_is_taken_gives_way_to_a_fresh_one_which_is_kept_in_turn() {
    let mut d = DaemonBuilder::new().fixture("alpha", &[]).start().await;
    d.wait_ready().await;
    let first = port_of(&origin(&d).await);
    d.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(d.wait_exit().await, Some(0));
    let taken = std::net::TcpListener::bind(("127.0.0.1", first)).expect("take the port");
    d.start_again().await;
    d.wait_ready().await;
    let second = port_of(&origin(&d).await);
    assert_ne!(second, first);
    let log = d.log_text();
    assert!(
        log.contains(&format!(
            "the dashboard cannot listen on its port of the last run, {first}"
        )),
        "{log}"
    );
    // The page works on the new port, and the new port is the one kept now.
    assert!(launch_url(&d).await.contains(&format!(":{second}/login?")));
    drop(taken);
    d.restart_daemon().await;
    d.wait_ready().await;
    assert_eq!(port_of(&origin(&d).await), second);
}

#[tokio::test]
async fn an_explicit_ui_listen_is_used_as_it_is_and_keeps_no_port() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = free.local_addr().expect("addr").port();
    drop(free);
    let d = DaemonBuilder::new()
        .daemon(&format!("ui_listen = \"127.0.0.1:{port}\""))
        .fixture("alpha", &[])
        .start()
        .await;
    d.wait_ready().await;
    assert_eq!(origin(&d).await, format!("http://127.0.0.1:{port}"));
    assert!(!d.dir().join("state/dashboard.json").exists());
    // Port 0 written out: a fresh port at each start, nothing kept.
    let d = DaemonBuilder::new()
        .daemon("ui_listen = \"127.0.0.1:0\"")
        .fixture("alpha", &[])
        .start()
        .await;
    d.wait_ready().await;
    assert_ne!(port_of(&origin(&d).await), 0);
    assert!(!d.dir().join("state/dashboard.json").exists());
}
