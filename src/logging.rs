//! Logging setup: journald when running under systemd's journal, stderr otherwise.

use std::io::IsTerminal;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::prelude::*;

/// Installs the global subscriber. `filter` (from `--log-level`) beats `$RUST_LOG`, which
/// beats `default`. A filter is a level (`info`) or `TARGET=LEVEL` pairs separated by
/// commas (`info,mcpd::upstream=debug`). `Targets` parses these without the regex engine
/// `EnvFilter` compiles at start, which a daemon's idle memory does not need; a filter
/// that does not parse falls back to `default`, with a warning.
pub fn init(filter: Option<&str>, default: &str) {
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
    let registry = tracing_subscriber::registry().with(filter);
    if std::env::var_os("JOURNAL_STREAM").is_some()
        && let Ok(journald) = tracing_journald::layer()
    {
        registry
            .with(journald.with_syslog_identifier("mcpd".into()))
            .init();
        warn_bad(bad, given.as_deref());
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
    warn_bad(bad, given.as_deref());
}

fn warn_bad(bad: bool, given: Option<&str>) {
    if bad {
        tracing::warn!(
            filter = given.unwrap_or_default(),
            "the log filter is not LEVEL or TARGET=LEVEL,...; using the default"
        );
    }
}
