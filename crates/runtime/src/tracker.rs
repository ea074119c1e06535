//! Every task the daemon spawns, on one tracker.
//!
//! So shutdown can wait for all of them with a deadline and say how many did not end.
//!
//! One process runs one daemon, and a task may be spawned from any depth (an upstream's
//! stderr reader, a credential's revocation, a status query): a tracker handed down
//! through every constructor would thread one more argument through forty signatures
//! and add nothing. `TaskTracker` is built to be shared (it only counts), so a single
//! static one stands in for that argument. `clippy.toml` forbids `tokio::spawn` and
//! `spawn_blocking` everywhere else, and `tests/it/tidy.rs` checks it too.

use std::future::Future;
use std::sync::LazyLock;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

static TRACKER: LazyLock<TaskTracker> = LazyLock::new(TaskTracker::new);

/// Spawns `future` on the runtime, tracked.
#[allow(clippy::disallowed_methods, reason = "the one place that spawns")]
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    TRACKER.spawn(future)
}

/// Runs `f` on the blocking pool, tracked.
#[allow(clippy::disallowed_methods, reason = "the one place that spawns")]
pub fn spawn_blocking<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    TRACKER.spawn_blocking(f)
}

/// The last step of shutdown: waits up to `deadline` for every tracked task to end and
/// returns how many are still running (0 when all ended).
pub async fn drain(deadline: Duration) -> usize {
    TRACKER.close();
    let _ = tokio::time::timeout(deadline, TRACKER.wait()).await; // the count says the rest
    TRACKER.len()
}
