//! A clock for tests that something does not happen.
//!
//! A server that exits during every handshake, whose restart count says how many of the
//! supervisor's backoff periods have passed.
//!
//! A fixed sleep before "nothing happened" passes falsely on a machine too busy to run the
//! daemon's timers in it. The clock's restarts are made by those same timers, so once it
//! has restarted `n` times, a server watched beside it under the same backoff has had `n`
//! periods in which to do what it must not.

use crate::support::{Daemon, DaemonBuilder};

/// The clock server's name.
const CLOCK: &str = "clock";

impl DaemonBuilder {
    /// Adds the clock, restarted `backoff` after each exit (constant, never doubled), with a
    /// crash budget no test exhausts.
    pub fn clock(self, backoff: &str) -> Self {
        let policy = format!(
            "[servers.{CLOCK}.restart]\nbackoff_initial = \"{backoff}\"\nbackoff_max = \"{backoff}\"\nmax_restarts = 100000\nwindow = \"60s\""
        );
        self.fixture_with(CLOCK, &["--exit-during-handshake"], &policy)
    }
}

impl Daemon {
    /// Waits until the clock has restarted `n` more times than now.
    pub async fn clock_ticks(&self, n: u64) {
        let restarts = |s: &serde_json::Value| s["restarts"].as_u64().unwrap_or(0);
        let from = restarts(&self.server_status(CLOCK).await);
        let what = format!("{n} more restarts of the clock server");
        self.wait_server(CLOCK, &what, |s| restarts(s) >= from + n)
            .await;
    }
}
