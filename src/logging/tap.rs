//! The tap: a tracing `Layer` that hands each event to the log book as a `LogLine`.
//!
//! It formats each event the log filter lets through into a `LogLine` and hands it to the
//! book with a `try_send`, dropping (and counting) what does not fit, so logging never
//! waits.

use super::line::LogLine;
use std::fmt::{self, Write as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::mpsc;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer};

/// Lines waiting for the book. The book reads them as they come; this only absorbs a
/// burst (or the lines logged before the daemon starts the book).
pub(super) const CAPACITY: usize = 1024;

/// The most bytes of text a line keeps, its `…` included: a server's stderr line or a
/// field's value may be megabytes, and the book keeps a thousand lines.
pub const MAX_TEXT: usize = 2048;

/// A server's name is a config key; anything longer is not one and is cut.
const MAX_SERVER: usize = 256;

/// Marks a cut text.
const CUT: char = '…';

/// The receiving end of the tap, handed from `logging::init` to the daemon, which
/// starts the book with it inside the runtime.
#[derive(Debug)]
pub struct LogTap {
    pub(super) rx: mpsc::Receiver<LogLine>,
    /// Lines the tap dropped because the book was behind; shared with the layer.
    pub(super) dropped: Arc<AtomicU64>,
}

/// The layer. It lives in the global subscriber for the whole process.
pub(super) struct Tap {
    tx: mpsc::Sender<LogLine>,
    dropped: Arc<AtomicU64>,
}

/// A tap and its receiving end, `capacity` lines apart.
pub(super) fn channel(capacity: usize) -> (Tap, LogTap) {
    let (tx, rx) = mpsc::channel(capacity);
    let dropped = Arc::new(AtomicU64::new(0));
    (
        Tap {
            tx,
            dropped: dropped.clone(),
        },
        LogTap { rx, dropped },
    )
}

impl<S: tracing::Subscriber> Layer<S> for Tap {
    // Events the filter below this layer turns away never get here (`Targets` answers
    // `enabled` and the callsite's interest for the whole stack).
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        // `ctl` and `connect` drop the receiving end: then a check of a flag is all.
        if self.tx.is_closed() {
            return;
        }
        // Full already: count the loss without formatting a line nobody will take.
        if self.tx.capacity() == 0 {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        match self.tx.try_send(format(event)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            // The book has stopped (shutdown): nobody reads lines any more.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
}

/// The event as a line, numbered 0 (the book numbers it).
fn format(event: &tracing::Event<'_>) -> LogLine {
    let meta = event.metadata();
    let mut fields = Fields::default();
    event.record(&mut fields);
    let server = fields.server.take().map(|s| s.buf);
    LogLine {
        seq: 0,
        time: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        level: *meta.level(),
        target: meta.target().to_owned(),
        server,
        text: fields.text(),
    }
}

/// What a visit of the event's fields collects. Every buffer is capped, and a value's
/// formatting stops at the cap (`Capped` refuses the rest), so a huge field costs no
/// more than a small one.
struct Fields {
    message: Capped,
    others: Capped,
    server: Option<Capped>,
}

impl Default for Fields {
    fn default() -> Fields {
        let room = MAX_TEXT - CUT.len_utf8();
        Fields {
            message: Capped::new(room),
            others: Capped::new(room),
            server: None,
        }
    }
}

impl Fields {
    /// The message, then the other fields, cut to `MAX_TEXT` bytes with a `…`.
    fn text(self) -> String {
        let mut text = self.message;
        if !self.others.buf.is_empty() {
            let _ = text.write_str(" "); // a cut is marked below
            let _ = text.write_str(&self.others.buf);
        }
        let mut out = text.buf;
        if text.cut || self.others.cut {
            out.push(CUT);
        }
        out
    }

    fn other(&mut self, field: &Field) -> &mut Capped {
        if !self.others.buf.is_empty() {
            let _ = self.others.write_str(" "); // a cut is marked in `text`
        }
        let _ = write!(self.others, "{}=", field.name());
        &mut self.others
    }

    fn take_server(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.server.is_none() && matches!(field.name(), "upstream" | "server") {
            let mut name = Capped::new(MAX_SERVER);
            let _ = write!(name, "{value:?}"); // a longer name is cut
            self.server = Some(name);
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            let _ = self.message.write_str(value); // cut at the cap
            return;
        }
        self.take_server(field, &Raw(value));
        // Strings quoted, as tracing's own formatter writes them.
        let _ = write!(self.other(field), "{value:?}");
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}"); // cut at the cap
            return;
        }
        self.take_server(field, value);
        let _ = write!(self.other(field), "{value:?}");
    }
}

/// A string whose `Debug` is the string itself, unquoted: a server's name given as a
/// `&str` field (`upstream = "fs"`) is the name, not `"fs"` in quotes.
struct Raw<'a>(&'a str);

impl fmt::Debug for Raw<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// A string that takes at most `limit` bytes, cut on a character boundary. Once full it
/// fails every write, which ends the formatting of the value being written.
struct Capped {
    buf: String,
    limit: usize,
    cut: bool,
}

impl Capped {
    fn new(limit: usize) -> Capped {
        Capped {
            buf: String::new(),
            limit,
            cut: false,
        }
    }
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.limit.saturating_sub(self.buf.len());
        if s.len() <= room {
            self.buf.push_str(s);
            return Ok(());
        }
        let mut end = room;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.buf.push_str(s.get(..end).unwrap_or_default());
        self.cut = true;
        Err(fmt::Error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::prelude::*;

    /// Runs `log` under a subscriber of its own with a tap of `capacity` lines, and
    /// returns what came out and the count of drops.
    fn tapped(capacity: usize, log: impl FnOnce()) -> (Vec<LogLine>, u64) {
        let (tap, mut logs) = channel(capacity);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(tap), log);
        let mut lines = Vec::new();
        while let Ok(line) = logs.rx.try_recv() {
            lines.push(line);
        }
        (lines, logs.dropped.load(Ordering::Relaxed))
    }

    #[test]
    fn the_server_comes_from_an_upstream_or_server_field() {
        let name = String::from("fs");
        let (lines, _) = tapped(8, || {
            tracing::info!(upstream = "x", "started");
            tracing::warn!(upstream = %name, rpc_id = 7, "slow");
            tracing::error!(server = "y", "gone");
            tracing::info!(agent = 3, "no server");
        });
        let servers: Vec<_> = lines.iter().map(|l| l.server.as_deref()).collect();
        assert_eq!(servers, [Some("x"), Some("fs"), Some("y"), None]);
        assert_eq!(lines[1].text, "slow upstream=fs rpc_id=7");
        assert_eq!(lines[1].level, tracing::Level::WARN);
        assert_eq!(lines[0].text, r#"started upstream="x""#);
        assert!(lines[0].target.ends_with("logging::tap::tests"));
        // RFC 3339 in UTC with milliseconds.
        assert_eq!(lines[0].time.len(), "2026-12-01T00:00:00.000Z".len());
        assert!(lines[0].time.ends_with('Z'));
    }

    #[test]
    fn long_text_is_cut_on_a_character_boundary_and_marked() {
        let long = "é".repeat(5000);
        let (lines, _) = tapped(8, || {
            tracing::info!("{long}");
            tracing::info!(body = %long, "short");
            tracing::info!("{}", "a".repeat(MAX_TEXT - 3));
        });
        for line in &lines[..2] {
            assert!(line.text.len() <= MAX_TEXT, "{}", line.text.len());
            assert!(line.text.len() > MAX_TEXT - 8);
            assert!(line.text.ends_with('…'));
        }
        assert!(lines[1].text.starts_with("short body=éé"));
        // Exactly what fits is not cut.
        assert_eq!(lines[2].text.len(), MAX_TEXT - 3);
        assert!(!lines[2].text.ends_with('…'));
    }

    #[test]
    fn a_closed_receiver_is_no_error_and_counts_no_drops() {
        let (tap, logs) = channel(8);
        let dropped = logs.dropped.clone();
        drop(logs);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(tap), || {
            for _ in 0..100 {
                tracing::info!(upstream = "x", "nobody reads this");
            }
        });
        assert_eq!(dropped.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_full_channel_drops_and_counts_without_waiting() {
        let (lines, dropped) = tapped(2, || {
            for i in 0..5 {
                tracing::info!("line {i}");
            }
        });
        let texts: Vec<_> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["line 0", "line 1"]);
        assert_eq!(dropped, 3);
    }

    #[test]
    fn events_the_filter_turns_away_never_reach_the_tap() {
        let (tap, mut logs) = channel(8);
        let filter: Targets = "info".parse().unwrap();
        let subscriber = tracing_subscriber::registry().with(filter).with(tap);
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!("hidden");
            tracing::info!("shown");
        });
        assert_eq!(logs.rx.try_recv().unwrap().text, "shown");
        assert!(logs.rx.try_recv().is_err());
        assert_eq!(logs.dropped.load(Ordering::Relaxed), 0);
    }
}
