//! Gives the heap that large messages used back to the kernel once they have passed.
//!
//! A burst of big results then does not leave the daemon's RSS high.
//!
//! glibc keeps freed memory in its arenas, and after the first large buffer is freed it
//! raises its mmap threshold, so later megabyte buffers come from the arenas too and stay
//! resident when freed. The framing code counts the bytes of every large frame and each
//! grown read buffer a reader gives back; a ticker calls `malloc_trim` once that count
//! has stopped moving for a tick, which releases what is free. Counting the give-backs
//! matters: they come a second after the last frame, and a trim before them would leave
//! those buffers in the heap. While large messages keep coming nothing is trimmed (that memory is
//! about to be reused), and an idle daemon never trims at all. The count is one atomic
//! integer bumped by whoever read a frame: nothing waits on it, so no actor is needed.
//! Between bursts the ticker does not tick: it sleeps until the next large frame wakes it
//! (a `Notify`), so an idle daemon is not woken every second for nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A frame at least this long counts as large.
pub const LARGE: usize = 256 * 1024;
/// How often the ticker looks; memory comes back one to two ticks after the last large
/// frame.
const TICK: Duration = Duration::from_secs(1);

static LARGE_BYTES: AtomicU64 = AtomicU64::new(0);
/// Wakes the ticker from its sleep between bursts. `notify_one` keeps a permit when the
/// ticker is not waiting yet, so a frame noted just before it sleeps still wakes it.
static WAKE: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Notes a frame of `len` bytes that was read or written; only large ones count.
pub fn note(len: usize) {
    if len >= LARGE {
        LARGE_BYTES.fetch_add(len as u64, Ordering::Relaxed);
        WAKE.notify_one();
    }
}

/// Notes that a reader replaced a grown buffer by a small one, freeing the large one.
pub fn gave_back() {
    LARGE_BYTES.fetch_add(1, Ordering::Relaxed);
    WAKE.notify_one();
}

/// Trims after each burst of large frames, until `stop`.
pub async fn run(stop: CancellationToken) {
    let mut trimmed_at = LARGE_BYTES.load(Ordering::Relaxed);
    let mut last_seen = trimmed_at;
    loop {
        if last_seen == trimmed_at {
            // Nothing since the last trim: sleep until a large frame comes.
            tokio::select! {
                () = WAKE.notified() => {}
                () = stop.cancelled() => return,
            }
            last_seen = LARGE_BYTES.load(Ordering::Relaxed);
        }
        tokio::select! {
            () = tokio::time::sleep(TICK) => {}
            () = stop.cancelled() => return,
        }
        let now = LARGE_BYTES.load(Ordering::Relaxed);
        if now == last_seen && now != trimmed_at {
            release();
            trimmed_at = now;
        }
        last_seen = now;
    }
}

/// Puts every thread's allocations in glibc's main arena. `malloc_trim` shrinks only the
/// main arena's top chunk: in a thread's own arena, megabyte buffers freed into its top
/// chunk stayed resident below the (dynamically raised) trim threshold, and a burst left
/// RSS megabytes high or not depending on where its buffers happened to lie. The daemon
/// has one runtime worker and a few blocking threads, so one arena costs no contention
/// worth having (and each arena a thread touches costs resident memory). Called before
/// any thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn one_arena() {
    // SAFETY: mallopt only sets an allocator parameter; called before other threads exist.
    let set = unsafe { nix::libc::mallopt(nix::libc::M_ARENA_MAX, 1) };
    if set != 1 {
        tracing::debug!("glibc refused M_ARENA_MAX=1; large bursts may leave RSS high");
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn one_arena() {}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release() {
    // SAFETY: malloc_trim only walks and trims the allocator's own free lists; it takes
    // the arena locks itself and is safe to call from any thread at any time.
    let released = unsafe { nix::libc::malloc_trim(0) };
    tracing::debug!(
        released = released != 0,
        "returned free heap to the kernel after large messages"
    );
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release() {}
