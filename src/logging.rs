//! Logging setup: journald when running under systemd's journal, stderr otherwise.

use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

/// Installs the global subscriber. `filter` (from `--log-level`) beats `$RUST_LOG`, which
/// beats `default`.
pub fn init(filter: Option<&str>, default: &str) {
    let filter = filter
        .map(EnvFilter::new)
        .or_else(|| EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| EnvFilter::new(default));
    let registry = tracing_subscriber::registry().with(filter);
    if std::env::var_os("JOURNAL_STREAM").is_some()
        && let Ok(journald) = tracing_journald::layer()
    {
        registry
            .with(journald.with_syslog_identifier("mcpd".into()))
            .init();
        return;
    }
    registry
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal())
                .with_target(false),
        )
        .init();
}
