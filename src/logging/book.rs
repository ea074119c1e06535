//! The log book: an actor that keeps the daemon's recent log lines.
//!
//! It keeps the last 1,000, at most 512 KiB, as the tap delivers them, answers for the
//! recent ones and passes new ones to a few followers.

use super::line::{LogFilter, LogLine};
use super::tap::LogTap;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Lines kept.
const MAX_LINES: usize = 1000;
/// Bytes of text kept (`LogLine::bytes`), so a run of long lines holds less than
/// `MAX_LINES` of them.
const MAX_BYTES: usize = 512 * 1024;
/// Followers at once: each is an open page.
const MAX_FOLLOWERS: usize = 8;
/// Lines queued for one follower. A follower that falls this far behind is not reading
/// and is dropped; its page reconnects.
const FOLLOW_QUEUE: usize = 256;

/// How long a reader waits for the book.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

enum Msg {
    Recent {
        filter: LogFilter,
        limit: usize,
        respond_to: oneshot::Sender<Vec<LogLine>>,
    },
    Follow {
        filter: LogFilter,
        respond_to: oneshot::Sender<Option<mpsc::Receiver<LogLine>>>,
    },
}

/// The cloneable way to read the book.
#[derive(Clone, Debug)]
pub struct LogBook {
    tx: mpsc::Sender<Msg>,
    /// The tap's count of lines it dropped; only the tap adds to it.
    dropped: Arc<AtomicU64>,
}

impl LogBook {
    /// Starts the book on the lines of `tap`. It stops when `shutdown` fires or every
    /// handle is gone; its followers' channels then close.
    pub fn spawn(tap: LogTap, shutdown: CancellationToken) -> LogBook {
        let (tx, rx) = mpsc::channel(16);
        let dropped = tap.dropped.clone();
        mcpd_runtime::tracker::spawn(Book::new(rx, tap.rx, shutdown).run());
        LogBook { tx, dropped }
    }

    /// The newest `limit` lines that pass `filter`, oldest first. Empty when the book
    /// has stopped or is too busy to answer.
    pub async fn recent(&self, filter: LogFilter, limit: usize) -> Vec<LogLine> {
        mcpd_runtime::ask::ask(&self.tx, ASK_TIMEOUT, |respond_to| Msg::Recent {
            filter,
            limit,
            respond_to,
        })
        .await
        .unwrap_or_default()
    }

    /// New lines that pass `filter`, as they come. `None` when `MAX_FOLLOWERS` already
    /// follow (or the book has stopped). The channel closes when the follower falls
    /// `FOLLOW_QUEUE` lines behind. Follow first, then ask for `recent`, and skip the
    /// `seq`s already seen: the book answers in order, so no line falls in between.
    pub async fn follow(&self, filter: LogFilter) -> Option<mpsc::Receiver<LogLine>> {
        mcpd_runtime::ask::ask(&self.tx, ASK_TIMEOUT, |respond_to| Msg::Follow {
            filter,
            respond_to,
        })
        .await
        .ok()
        .flatten()
    }

    /// Lines the tap dropped since the daemon started because the book was behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// One open follower.
struct Follower {
    filter: LogFilter,
    tx: mpsc::Sender<LogLine>,
}

enum Event {
    Ask(Msg),
    Line(LogLine),
    TapClosed,
    Stop,
}

/// The actor behind `LogBook`.
struct Book {
    /// Oldest first.
    lines: VecDeque<LogLine>,
    /// `LogLine::bytes` of every line in `lines`.
    bytes: usize,
    /// The next line's `seq`.
    next_seq: u64,
    followers: Vec<Follower>,
    rx: mpsc::Receiver<Msg>,
    tap: mpsc::Receiver<LogLine>,
    /// False once every sender of the tap is gone (only in tests: the daemon's tap lives
    /// in the global subscriber).
    tap_open: bool,
    shutdown: CancellationToken,
}

impl Book {
    fn new(
        rx: mpsc::Receiver<Msg>,
        tap: mpsc::Receiver<LogLine>,
        shutdown: CancellationToken,
    ) -> Book {
        Book {
            lines: VecDeque::new(),
            bytes: 0,
            next_seq: 1,
            followers: Vec::new(),
            rx,
            tap,
            tap_open: true,
            shutdown,
        }
    }

    async fn run(mut self) {
        loop {
            // Readers before lines: a flood of lines must not keep a page waiting.
            let event = tokio::select! {
                biased;
                () = self.shutdown.cancelled() => Event::Stop,
                msg = self.rx.recv() => msg.map_or(Event::Stop, Event::Ask),
                line = self.tap.recv(), if self.tap_open => {
                    line.map_or(Event::TapClosed, Event::Line)
                }
            };
            match event {
                Event::Ask(msg) => self.handle_ask(msg),
                Event::Line(line) => self.handle_line(line),
                Event::TapClosed => self.tap_open = false,
                Event::Stop => break,
            }
        }
    }

    fn handle_ask(&mut self, msg: Msg) {
        // A reader that gave up waiting has gone: nobody to answer.
        match msg {
            Msg::Recent {
                filter,
                limit,
                respond_to,
            } => {
                let _ = respond_to.send(self.recent(&filter, limit));
            }
            Msg::Follow { filter, respond_to } => {
                let _ = respond_to.send(self.follow(filter));
            }
        }
    }

    /// Numbers the line, passes it to the followers that want it, keeps it, and lets
    /// the oldest lines go until the book is within both limits.
    fn handle_line(&mut self, mut line: LogLine) {
        line.seq = self.next_seq;
        self.next_seq += 1;
        // A follower whose queue is full is not reading; one whose page closed is gone.
        self.followers
            .retain(|f| !f.filter.matches(&line) || f.tx.try_send(line.clone()).is_ok());
        self.bytes += line.bytes();
        self.lines.push_back(line);
        while self.lines.len() > MAX_LINES || self.bytes > MAX_BYTES {
            let Some(old) = self.lines.pop_front() else {
                break;
            };
            self.bytes -= old.bytes();
        }
    }

    fn recent(&self, filter: &LogFilter, limit: usize) -> Vec<LogLine> {
        let mut out: Vec<LogLine> = self
            .lines
            .iter()
            .rev()
            .filter(|l| filter.matches(l))
            .take(limit)
            .cloned()
            .collect();
        out.reverse();
        out
    }

    fn follow(&mut self, filter: LogFilter) -> Option<mpsc::Receiver<LogLine>> {
        self.followers.retain(|f| !f.tx.is_closed());
        if self.followers.len() >= MAX_FOLLOWERS {
            return None;
        }
        let (tx, rx) = mpsc::channel(FOLLOW_QUEUE);
        self.followers.push(Follower { filter, tx });
        Some(rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    fn line(server: Option<&str>, level: Level, text: &str) -> LogLine {
        LogLine {
            seq: 0,
            time: "2026-12-01T00:00:00.000Z".into(),
            level,
            target: "mcpd::test".into(),
            server: server.map(str::to_owned),
            text: text.into(),
        }
    }

    /// A book outside a task, for its methods alone.
    fn book() -> Book {
        let (_, rx) = mpsc::channel(1);
        let (_, tap) = mpsc::channel(1);
        Book::new(rx, tap, CancellationToken::new())
    }

    fn filter(server: Option<&str>, min_level: Level) -> LogFilter {
        LogFilter {
            server: server.map(str::to_owned),
            min_level,
        }
    }

    /// A running book fed by the returned sender, as the tap feeds it.
    fn running() -> (mpsc::Sender<LogLine>, LogBook) {
        let (tap, logs) = super::super::tap::channel(1024);
        drop(tap); // the test sends lines itself, through a sender of its own
        let (tx, rx) = mpsc::channel(1024);
        let logs = LogTap { rx, ..logs };
        (tx, LogBook::spawn(logs, CancellationToken::new()))
    }

    async fn next(rx: &mut mpsc::Receiver<LogLine>) -> Option<LogLine> {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("a line within the deadline")
    }

    #[test]
    fn the_book_keeps_the_last_thousand_lines() {
        let mut b = book();
        for i in 0..MAX_LINES + 5 {
            b.handle_line(line(None, Level::INFO, &i.to_string()));
        }
        assert_eq!(b.lines.len(), MAX_LINES);
        let all = b.recent(&LogFilter::default(), usize::MAX);
        assert_eq!(all.len(), MAX_LINES);
        assert_eq!(all[0].seq, 6);
        assert_eq!(all[0].text, "5");
        assert_eq!(all.last().unwrap().text, (MAX_LINES + 4).to_string());
    }

    #[test]
    fn the_book_keeps_at_most_its_byte_budget_dropping_the_oldest() {
        let mut b = book();
        let long = "x".repeat(2000);
        let each = line(None, Level::INFO, &long).bytes();
        for _ in 0..400 {
            b.handle_line(line(None, Level::INFO, &long));
        }
        assert!(b.bytes <= MAX_BYTES);
        assert_eq!(b.lines.len(), MAX_BYTES / each);
        assert_eq!(b.bytes, b.lines.iter().map(LogLine::bytes).sum::<usize>());
        assert_eq!(b.lines.back().unwrap().seq, 400);
    }

    #[test]
    fn recent_filters_by_server_and_level_and_gives_the_newest_oldest_first() {
        let mut b = book();
        let rows = [
            (Some("a"), Level::INFO, "a1"),
            (Some("b"), Level::ERROR, "b1"),
            (Some("a"), Level::DEBUG, "a2"),
            (None, Level::WARN, "d1"),
            (Some("a"), Level::ERROR, "a3"),
            (Some("a"), Level::WARN, "a4"),
            (Some("a"), Level::TRACE, "a5"),
        ];
        for (server, level, text) in rows {
            b.handle_line(line(server, level, text));
        }
        let texts = |f: LogFilter, limit| -> Vec<String> {
            b.recent(&f, limit).into_iter().map(|l| l.text).collect()
        };
        assert_eq!(
            texts(filter(Some("a"), Level::INFO), 10),
            ["a1", "a3", "a4"]
        );
        assert_eq!(texts(filter(Some("a"), Level::INFO), 2), ["a3", "a4"]);
        assert_eq!(texts(filter(Some("a"), Level::TRACE), 10).len(), 5);
        assert_eq!(
            texts(filter(None, Level::WARN), 10),
            ["b1", "d1", "a3", "a4"]
        );
        assert_eq!(texts(filter(None, Level::ERROR), 10), ["b1", "a3"]);
        assert_eq!(
            texts(filter(Some("c"), Level::TRACE), 10),
            Vec::<String>::new()
        );
    }

    #[tokio::test]
    async fn a_follower_gets_new_lines_that_pass_its_filter_and_no_others() {
        let (tap, logs) = running();
        tap.send(line(Some("a"), Level::ERROR, "before"))
            .await
            .unwrap();
        let mut rx = logs.follow(filter(Some("a"), Level::INFO)).await.unwrap();
        for (server, level, text) in [
            (Some("a"), Level::INFO, "a-info"),
            (Some("b"), Level::ERROR, "b-error"),
            (Some("a"), Level::DEBUG, "a-debug"),
            (None, Level::ERROR, "none-error"),
            (Some("a"), Level::WARN, "a-warn"),
        ] {
            tap.send(line(server, level, text)).await.unwrap();
        }
        let got = next(&mut rx).await.unwrap();
        // "before" may or may not have reached the book before the follower did.
        let got = if got.text == "before" {
            next(&mut rx).await.unwrap()
        } else {
            got
        };
        assert_eq!(got.text, "a-info");
        assert_eq!(next(&mut rx).await.unwrap().text, "a-warn");
        // Lines are handled in order: everything sent before "a-warn" has been seen.
        assert!(matches!(
            rx.try_recv(),
            Err(mpsc::error::TryRecvError::Empty)
        ));
        let recent = logs.recent(LogFilter::default(), 100).await;
        let seqs: Vec<u64> = recent.iter().map(|l| l.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
    }

    #[tokio::test]
    async fn at_most_eight_follow_and_a_closed_follower_frees_its_place() {
        let (_tap, logs) = running();
        let mut followers = Vec::new();
        for _ in 0..MAX_FOLLOWERS {
            followers.push(logs.follow(LogFilter::default()).await.expect("a place"));
        }
        assert!(logs.follow(LogFilter::default()).await.is_none());
        drop(followers.pop());
        assert!(logs.follow(LogFilter::default()).await.is_some());
    }

    #[tokio::test]
    async fn a_follower_that_does_not_read_is_dropped_and_holds_nobody_up() {
        let (tap, logs) = running();
        let mut stuck = logs.follow(LogFilter::default()).await.unwrap();
        let mut reader = logs.follow(LogFilter::default()).await.unwrap();
        let total = FOLLOW_QUEUE + 50;
        let mut sent = 0;
        for batch in [200, total - 200] {
            for _ in 0..batch {
                sent += 1;
                tap.send(line(None, Level::INFO, &sent.to_string()))
                    .await
                    .unwrap();
            }
            for _ in 0..batch {
                next(&mut reader).await.unwrap();
            }
        }
        // The stuck follower got what fitted in its queue, then its channel closed.
        let mut kept = 0;
        while let Some(l) = next(&mut stuck).await {
            kept += 1;
            assert_eq!(l.seq, kept);
        }
        assert_eq!(kept, FOLLOW_QUEUE as u64);
        assert_eq!(
            logs.recent(LogFilter::default(), 1).await[0].seq,
            total as u64
        );
    }

    #[tokio::test]
    async fn the_book_stops_at_shutdown_and_closes_its_followers() {
        let (_tap, logs) = super::super::tap::channel(8);
        let shutdown = CancellationToken::new();
        let book = LogBook::spawn(logs, shutdown.clone());
        let mut rx = book.follow(LogFilter::default()).await.unwrap();
        shutdown.cancel();
        assert!(next(&mut rx).await.is_none());
        assert!(book.recent(LogFilter::default(), 10).await.is_empty());
        assert!(book.follow(LogFilter::default()).await.is_none());
    }
}
