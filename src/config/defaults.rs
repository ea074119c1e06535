//! Default limits, documented in docs/configuration.md.
use std::time::Duration;
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
pub const TOOL_NAME_LIMIT: usize = 64;
pub const MAX_AGENTS: usize = 512;
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
pub const MAX_IN_FLIGHT: usize = 1024;
pub const AGENT_QUEUE: usize = 1024;
pub const BACKOFF_INITIAL: Duration = Duration::from_millis(250);
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);
pub const MAX_RESTARTS: u32 = 5;
pub const RESTART_WINDOW: Duration = Duration::from_secs(60);
pub const STABLE_AFTER: Duration = Duration::from_secs(30);
pub const PING_INTERVAL: Duration = Duration::from_secs(30);
pub const PING_TIMEOUT: Duration = Duration::from_secs(10);
pub const STOP_GRACE: Duration = Duration::from_secs(2);
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// A package runner's first start may download and install its package on a busy
/// machine: minutes, not seconds.
pub const FIRST_START_TIMEOUT: Duration = Duration::from_secs(300);
/// Instances of one `share = "project"` server at once, by default and at most.
pub const MAX_PROJECTS: usize = 8;
pub const MAX_PROJECTS_LIMIT: usize = 64;
/// How long a project's instance runs without calls, unless `idle_timeout` says otherwise.
pub const PROJECT_IDLE: Duration = Duration::from_secs(600);
pub const MAX_MEDIA_BYTES: usize = 10 * 1024 * 1024;
/// The longest duration any setting takes: far beyond any sensible timeout, and far
/// from where adding it to the clock could overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

/// The default byte budget of one queue: 32 MiB, or two of the largest messages.
pub fn queue_bytes(max_message_bytes: usize) -> usize {
    (32 * 1024 * 1024).max(max_message_bytes.saturating_mul(2))
}
