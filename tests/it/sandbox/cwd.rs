//! A confined server's `cwd` at home (or above it) is where it starts, never a grant.
//!
//! `cwd = "~"` does not open every file of home.

use crate::sandbox::escapes::*;
use serde_json::json;

#[tokio::test]
async fn a_confined_server_started_in_home_reads_nothing_of_home() {
    let s = secrets();
    let home = s.home().display().to_string();
    let table = format!("cwd = \"{home}\"");
    let d = pair(&s)
        .fixture_with("athome", &["--tools", ESCAPE], &table)
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    // Unconfined (`open`) the key is read; confined in home, it is not, by absolute path
    // or relative to the working directory.
    let args = json!({"path": s.key()});
    escape(
        &mut a,
        "athome",
        "reading home's SSH key",
        "try_read",
        args,
        &["EACCES"],
    )
    .await;
    let r = attempt(&mut a, "athome", "try_read", json!({"path": ".ssh/id_rsa"})).await;
    assert!(r.contains("EACCES"), "relative to its cwd: {r}");
}
