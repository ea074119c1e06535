//! `/logs`: the daemon's recent log from the log book, filtered by server and level.
//!
//! Also `/logs/events`, the new lines as they are logged (an event stream that follows
//! the book while a page is open). Log text includes servers' stderr: every field is
//! escaped by the templates.

use super::events::{event, stream};
use super::{Pages, html, query};
use crate::logging::{LogFilter, LogLine};
use askama::Template;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use std::convert::Infallible;
use tracing::Level;

/// Lines a page shows when opened.
const SHOWN: usize = 500;
const LEVELS: [&str; 5] = ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"];

#[derive(Template)]
#[template(path = "dashboard/logs.html")]
struct LogsPage {
    title: &'static str,
    version: &'static str,
    /// Each server, and whether it is the one chosen.
    servers: Vec<(String, bool)>,
    levels: Vec<(&'static str, bool)>,
    /// The address of the event stream for the same filter.
    events: String,
    rows: String,
    shown: usize,
    dropped: u64,
}

/// Rows of the log table (the page's, and each event's).
#[derive(Template)]
#[template(path = "dashboard/log_rows.html")]
struct Rows<'a> {
    lines: &'a [Row],
}

struct Row {
    seq: u64,
    time: String,
    level: &'static str,
    server: String,
    text: String,
}

impl Row {
    fn of(l: LogLine) -> Row {
        Row {
            seq: l.seq,
            time: l.time,
            level: l.level.as_str(),
            server: l.server.unwrap_or_default(),
            text: l.text,
        }
    }
}

/// The filter a page's query asks for: `server` (empty: all), `level` (default INFO).
fn filter(uri: &Uri) -> (LogFilter, &'static str) {
    let server = query(uri, "server").filter(|s| !s.is_empty());
    let level = query(uri, "level")
        .and_then(|l| LEVELS.into_iter().find(|k| k.eq_ignore_ascii_case(&l)))
        .unwrap_or("INFO");
    let min_level = level.parse::<Level>().unwrap_or(Level::INFO);
    (LogFilter { server, min_level }, level)
}

fn rows(lines: Vec<LogLine>) -> String {
    let lines: Vec<Row> = lines.into_iter().map(Row::of).collect();
    Rows { lines: &lines }.render().unwrap_or_default()
}

/// `GET /logs?server=NAME&level=LEVEL`.
pub(super) async fn page(State(pages): State<Pages>, uri: Uri) -> Response {
    let (filter, level) = filter(&uri);
    let mut servers: Vec<String> = pages
        .ctx
        .catalog
        .borrow()
        .servers()
        .map(|(s, _)| s)
        .map(|s| s.to_string())
        .collect();
    servers.sort();
    let server = filter.server.clone().unwrap_or_default();
    let lines = pages.logs.recent(filter, SHOWN).await;
    let shown = lines.len();
    let mut events = format!("/logs/events?level={level}");
    if !server.is_empty() {
        events.push_str("&server=");
        events.push_str(&super::segment(&server));
    }
    let page = LogsPage {
        title: "Log",
        version: env!("CARGO_PKG_VERSION"),
        servers: servers
            .into_iter()
            .map(|s| {
                let on = s == server;
                (s, on)
            })
            .collect(),
        levels: LEVELS.iter().map(|l| (*l, *l == level)).collect(),
        events,
        rows: rows(lines),
        shown,
        dropped: pages.logs.dropped(),
    };
    html(StatusCode::OK, &page)
}

/// `GET /logs/events?…`: each new line matching the filter, as a table row.
pub(super) async fn events(State(pages): State<Pages>, uri: Uri) -> Response {
    let (filter, _) = filter(&uri);
    let Some(rx) = pages.logs.follow(filter).await else {
        return super::message(
            StatusCode::SERVICE_UNAVAILABLE,
            "Too many followers",
            "Eight pages already follow the log.",
            "Close one, or reload later.",
        );
    };
    let shutdown = pages.shutdown.clone();
    let lines = futures::stream::unfold((rx, shutdown), |(mut rx, shutdown)| async move {
        let line = tokio::select! {
            () = shutdown.cancelled() => return None,
            line = rx.recv() => line?,
        };
        let row = rows(vec![line]);
        Some((
            Ok::<Bytes, Infallible>(event("line", row.trim_end())),
            (rx, shutdown),
        ))
    });
    stream(lines)
}
