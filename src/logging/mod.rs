//! Logging setup: journald under systemd's journal, stderr otherwise.
//!
//! Beside either runs a tap into the log book the dashboard reads.

mod book;
mod line;
mod tap;

pub use book::LogBook;
pub use line::{LogFilter, LogLine};
pub use tap::{LogTap, MAX_TEXT};

use std::io::IsTerminal;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::prelude::*;

/// Installs the global subscriber. `filter` (from `--log-level`) beats `$RUST_LOG`, which
/// beats `default`. A filter is a level (`info`) or `TARGET=LEVEL` pairs separated by
/// commas (`info,mcpd::upstream=debug`). `Targets` parses these without the regex engine
/// `EnvFilter` compiles at start, which a daemon's idle memory does not need; a filter
/// that does not parse falls back to `default`, with a warning.
///
/// Every event the filter lets through also goes to the tap; the returned `LogTap` is
/// where it comes out, for `LogBook::spawn`. A command that keeps no book drops it, and
/// the tap then does nothing.
#[must_use = "the daemon starts its log book with the tap; other commands drop it"]
pub fn init(filter: Option<&str>, default: &str) -> LogTap {
    let given = filter.map(str::to_owned).or_else(|| {
        std::env::var("RUST_LOG")
            .ok()
            .filter(|s| !s.trim().is_empty())
    });
    let parsed = given.as_deref().map(str::parse::<Targets>);
    let bad = matches!(parsed, Some(Err(_)));
    let filter = match parsed {
        Some(Ok(t)) => t,
        _ => default.parse().unwrap_or_default(),
    };
    let (tap, logs) = tap::channel(tap::CAPACITY);
    // The tap sits above the filter, so it sees exactly what is logged.
    let registry = tracing_subscriber::registry().with(filter).with(tap);
    if std::env::var_os("JOURNAL_STREAM").is_some()
        && let Ok(journald) = tracing_journald::layer()
    {
        registry
            .with(journald.with_syslog_identifier("mcpd".into()))
            .init();
        warn_bad(bad, given.as_deref());
        return logs;
    }
    registry
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal())
                .with_target(false),
        )
        .init();
    warn_bad(bad, given.as_deref());
    logs
}

fn warn_bad(bad: bool, given: Option<&str>) {
    if bad {
        tracing::warn!(
            filter = given.unwrap_or_default(),
            "the log filter is not LEVEL or TARGET=LEVEL,...; using the default"
        );
    }
}
