//! Helpers shared by the failure tests: a `--record` directory, status-row fields, error
//! assertions, a new-pid check and milliseconds for printed timings.

use crate::support::*;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// A `--record` directory inside the daemon's temp dir, and its path as an argument.
pub fn record_dir(b: &DaemonBuilder) -> (PathBuf, String) {
    let dir = b.dir().join("rec");
    let arg = dir.to_str().expect("utf-8 temp path").to_owned();
    (dir, arg)
}

pub fn last_error(row: &Value) -> &str {
    row["last_error"].as_str().unwrap_or("")
}

pub fn last_exit(row: &Value) -> &str {
    row["last_exit"].as_str().unwrap_or("")
}

/// Asserts `r` is an mcpd error with `code` whose message contains every one of `parts`.
pub fn assert_error(r: &Value, code: i64, parts: &[&str]) {
    assert_eq!(error_code(r), Some(code), "expected error {code}, got {r}");
    let msg = error_message(r);
    for p in parts {
        assert!(msg.contains(p), "error message lacks {p:?}: {r}");
    }
}

/// Ready with a pid other than every one in `old`.
pub fn ready_with_new_pid(row: &Value, old: &[u32]) -> bool {
    row["state"] == "ready" && status_pid(row).is_some_and(|p| !old.contains(&p))
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
