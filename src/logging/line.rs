//! One line of the daemon's own log (`LogLine`), and which lines a reader wants (`LogFilter`).
//!
//! `LogLine` is a line as the book keeps it; both are shared by the tap that makes lines
//! and the book that keeps them.

use serde::Serialize;
use tracing::Level;

/// One logged event, formatted once by the tap.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LogLine {
    /// Numbered by the book as lines arrive, from 1: a page that follows the book and
    /// also asks for the recent lines skips the ones it already has by this number.
    pub seq: u64,
    /// When the event happened, RFC 3339 in UTC with milliseconds.
    pub time: String,
    /// Serialised as tracing names it (`"INFO"`); kept as a `Level` so filters compare.
    #[serde(serialize_with = "level_name")]
    pub level: Level,
    /// The event's target (`mcpd::upstream::actor`, `mcpd::stderr` for servers' stderr).
    pub target: String,
    /// The server the event concerns: its `upstream` or `server` field, if it has one.
    pub server: Option<String>,
    /// The message, then every other field as `key=value`, at most `MAX_TEXT` bytes.
    pub text: String,
}

impl LogLine {
    /// What the line counts against the book's byte budget.
    pub(super) fn bytes(&self) -> usize {
        self.time.len()
            + self.target.len()
            + self.server.as_ref().map_or(0, String::len)
            + self.text.len()
    }
}

fn level_name<S: serde::Serializer>(level: &Level, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(level.as_str())
}

/// Which lines a reader wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogFilter {
    /// Only lines about this server; `None` for every line, about a server or not.
    pub server: Option<String>,
    /// The least severe level shown: `INFO` shows info, warnings and errors.
    pub min_level: Level,
}

impl Default for LogFilter {
    /// Every line.
    fn default() -> LogFilter {
        LogFilter {
            server: None,
            min_level: Level::TRACE,
        }
    }
}

impl LogFilter {
    pub fn matches(&self, line: &LogLine) -> bool {
        // tracing orders levels by verbosity: ERROR < WARN < INFO < DEBUG < TRACE.
        line.level <= self.min_level
            && self
                .server
                .as_ref()
                .is_none_or(|s| line.server.as_ref() == Some(s))
    }
}
