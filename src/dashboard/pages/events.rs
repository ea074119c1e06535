//! `GET /events`: the overview's event stream.
//!
//! While a page has it open, the task serving it asks the supervisor and the roster once
//! a second and sends the `Live` fragment when something in it changed (times aside: the
//! page counts those itself); with no page open nothing runs. The stream ends with the
//! session, the connection, or shutdown.

use super::Pages;
use super::overview::Live;
pub(super) use crate::agent::http::sse::event;
use crate::dashboard::auth::SessionId;
use askama::Template;
use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::convert::Infallible;
use std::time::Duration;

/// How often an open stream looks for changes.
const POLL: Duration = Duration::from_secs(1);
/// How often (in polls) an open stream checks that its session still is; a comment line
/// goes out then too, so a closed page is noticed.
const SESSION_EVERY: u32 = 15;

/// An event-stream response of `events`.
pub(super) fn stream<S>(events: S) -> Response
where
    S: futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        Body::from_stream(events),
    )
        .into_response()
}

struct Follow {
    pages: Pages,
    session: SessionId,
    /// The last fragment sent, times left out.
    last: String,
    polls: u32,
}

pub(super) async fn overview(
    State(pages): State<Pages>,
    Extension(session): Extension<SessionId>,
) -> Response {
    let follow = Follow {
        pages,
        session,
        last: String::new(),
        polls: 0,
    };
    let events = futures::stream::unfold(follow, |mut f| async move {
        loop {
            if f.polls > 0 {
                tokio::select! {
                    () = f.pages.shutdown.cancelled() => return None,
                    () = tokio::time::sleep(POLL) => {}
                }
            }
            f.polls = f.polls.wrapping_add(1);
            if f.polls % SESSION_EVERY == 0 {
                if !f.pages.keys.check(f.session.0).await {
                    return None;
                }
                return Some((Ok(Bytes::from_static(b": still here\n\n")), f));
            }
            let Some(live) = Live::now(&f.pages).await else {
                continue;
            };
            let (Ok(key), Ok(text)) = (live.without_times().render(), live.render()) else {
                continue;
            };
            if key != f.last {
                f.last = key;
                return Some((Ok(event("live", &text)), f));
            }
        }
    });
    stream(events)
}
