//! Confined servers' private temporary directories belong to their daemon.
//!
//! Two daemons' servers of the same name get different ones and cannot read each other's
//! files, a daemon removes its own at exit, and one that starts removes those a killed
//! daemon left.

use crate::sandbox::escapes::{ESCAPE, attempt, only_unconfined};
use crate::support::*;
use serde_json::json;
use std::path::{Path, PathBuf};

/// A daemon that confines `boxed` and leaves `open` unconfined, both serving the escape
/// tools.
async fn daemon() -> Daemon {
    let d = DaemonBuilder::new()
        .daemon("sandbox = true")
        .fixture("boxed", &["--tools", ESCAPE])
        .fixture_with("open", &["--tools", ESCAPE], "sandbox = false")
        .start()
        .await;
    d.wait_ready().await;
    d
}

/// The `TMPDIR` a server of `d` was given.
async fn tmpdir(a: &mut Agent, server: &str) -> PathBuf {
    let r = attempt(a, server, "env", json!({})).await;
    let env: serde_json::Value = serde_json::from_str(r.strip_prefix("ok: ").unwrap_or(&r))
        .unwrap_or_else(|_| panic!("{server}: env answers ok and an object: {r}"));
    PathBuf::from(
        env["TMPDIR"]
            .as_str()
            .expect("a confined server has a TMPDIR"),
    )
}

/// The directory of a daemon's servers' temporary directories.
fn daemon_dir(tmp: &Path) -> PathBuf {
    tmp.parent().expect("in the daemon's directory").to_owned()
}

#[tokio::test]
async fn two_daemons_servers_of_one_name_get_temporary_directories_of_their_own_removed_with_them()
{
    let mut first = daemon().await;
    let mut second = daemon().await;
    let mut a = first.initialized_agent().await;
    let mut b = second.initialized_agent().await;
    let (tmp_a, tmp_b) = (tmpdir(&mut a, "boxed").await, tmpdir(&mut b, "boxed").await);
    assert_ne!(
        tmp_a, tmp_b,
        "each daemon's `boxed` has a TMPDIR of its own"
    );

    // What the first daemon's server keeps there, the second's cannot read.
    let note = tmp_a.join("note");
    let r = attempt(
        &mut a,
        "boxed",
        "try_write",
        json!({"path": note, "text": "mine"}),
    )
    .await;
    assert!(r.starts_with("ok"), "a server writes its own TMPDIR: {r}");
    let args = json!({"path": note});
    let open = attempt(&mut b, "open", "try_read", args.clone()).await;
    let boxed = attempt(&mut b, "boxed", "try_read", args).await;
    only_unconfined(
        "reading another daemon's server's temporary file",
        &open,
        &boxed,
        &["EACCES"],
    );

    // A daemon that stops removes its servers' directories.
    first.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(first.wait_exit().await, Some(0));
    assert!(
        !daemon_dir(&tmp_a).exists(),
        "{} is gone with its daemon",
        daemon_dir(&tmp_a).display()
    );
    assert!(tmp_b.is_dir(), "the other daemon's stays");

    // A killed one cannot: the next daemon to start removes what it left.
    second.signal(nix::sys::signal::Signal::SIGKILL);
    second.wait_exit().await;
    drop(b);
    let third = daemon().await;
    let left = daemon_dir(&tmp_b);
    eventually(
        "a starting daemon removes a killed daemon's temporary directories",
        WAIT,
        || {
            let left = left.clone();
            async move { (!left.exists()).then_some(()) }
        },
    )
    .await;
    let mut c = third.initialized_agent().await;
    assert!(tmpdir(&mut c, "boxed").await.is_dir(), "its own are there");
}
