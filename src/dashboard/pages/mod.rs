//! The dashboard's pages.
//!
//! The login exchange, logging out, the overview and its event stream, a server's page,
//! the log, cancelling a call, the stylesheet and script, and the pages that say why a
//! request was refused. Rendered on the server by askama templates compiled into the
//! binary, every value HTML-escaped; the one script only puts server-rendered fragments
//! in place.

mod call;
mod chart;
mod events;
mod logs;
mod overview;
mod server;
mod tryit;

use super::actor::DashboardHandle;
use super::auth::{COOKIE, Key, SessionId};
use crate::supervisor::SupervisorHandle;
use askama::Template;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};

/// What the pages need.
#[derive(Clone)]
pub(super) struct Pages {
    pub(super) supervisor: SupervisorHandle,
    pub(super) keys: DashboardHandle,
    /// The daemon's agent context: the roster, metrics, and what an agent connection of
    /// the page's own needs.
    pub(super) ctx: crate::agent::AgentContext,
    /// The daemon's recent log, for the log page.
    pub(super) logs: crate::logging::LogBook,
    /// Ends the event streams and the page's own calls at shutdown.
    pub(super) shutdown: tokio_util::sync::CancellationToken,
}

/// The largest form a page posts (a try-it form's arguments).
const MAX_FORM: usize = 256 * 1024;

/// The routes (the guard is layered on by the caller).
pub(super) fn routes(pages: Pages) -> Router {
    use axum::routing::{get, post};
    Router::new()
        .route("/", get(overview::page))
        .route("/events", get(events::overview))
        .route("/servers/{name}", get(server::page))
        .route("/servers/{name}/latency.svg", get(server::latency))
        .route("/servers/{name}/{verb}", post(server::act))
        .route("/agents/{agent}/cancel", post(cancel))
        .route("/logs", get(logs::page))
        .route("/logs/events", get(logs::events))
        .route("/login", get(login).post(login_form))
        .route("/logout", post(logout))
        .route("/static/style.css", get(style))
        .route("/static/live.js", get(script))
        .fallback(not_found_page)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_FORM))
        .with_state(pages)
}

/// A page that says one thing: why the request got no further, and what to do.
#[derive(Template)]
#[template(path = "dashboard/message.html")]
struct Message<'a> {
    title: &'a str,
    text: &'a str,
    hint: &'a str,
}

/// A rendered template as an HTML response.
fn html(status: StatusCode, page: &impl Template) -> Response {
    match page.render() {
        Ok(body) => (
            status,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            body,
        )
            .into_response(),
        Err(e) => {
            tracing::error!("dashboard page failed to render: {e}");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the page failed to render",
            )
                .into_response()
        }
    }
}

fn message(status: StatusCode, title: &str, text: &str, hint: &str) -> Response {
    html(status, &Message { title, text, hint })
}

const RUN_CTL_UI: &str = "Run mcpd ctl ui on this machine: it prints (and with a display, opens) an address that logs this browser in.";

/// No open session: the login page, which says how to get one.
pub(super) fn login_needed() -> Response {
    message(
        StatusCode::UNAUTHORIZED,
        "Log in to mcpd",
        "This page shows the mcpd daemon's servers to the person running it.",
        RUN_CTL_UI,
    )
}

/// A request whose `Host` is not this listener's.
pub(super) fn foreign_host() -> Response {
    message(
        StatusCode::FORBIDDEN,
        "Refused",
        "This request names a host other than the mcpd dashboard's loopback address \
         (a defence against DNS rebinding).",
        "Open the address mcpd ctl ui prints, as it is printed.",
    )
}

/// A connection of another user than the daemon's.
pub(super) fn other_user() -> Response {
    message(
        StatusCode::FORBIDDEN,
        "Refused",
        "This mcpd dashboard is for the user who runs the daemon, only.",
        "Run mcpd ctl ui as that user.",
    )
}

/// A connection of a process of a server mcpd started.
pub(super) fn from_a_server() -> Response {
    message(
        StatusCode::FORBIDDEN,
        "Refused",
        "This connection comes from a process of a server mcpd started (or one mcpd could \
         not tell apart from one): servers never use the dashboard, whatever token or \
         cookie they hold.",
        "Open the dashboard from a browser the person using mcpd started.",
    )
}

/// A state-changing request from another origin.
pub(super) fn cross_site() -> Response {
    message(
        StatusCode::FORBIDDEN,
        "Refused",
        "This request did not come from the dashboard's own page.",
        "Use the dashboard's own buttons.",
    )
}

async fn not_found_page() -> Response {
    not_found().await
}

pub(super) async fn not_found() -> Response {
    message(
        StatusCode::NOT_FOUND,
        "Not found",
        "The dashboard has no such page.",
        "",
    )
}

/// `GET /login?token=T`: a valid launch token becomes a session cookie and a redirect to
/// `/`, so the token leaves the address bar (and the history entry is the plain page).
/// The address `mcpd ctl ui --no-browser` prints, for a person to open.
async fn login(State(pages): State<Pages>, uri: Uri) -> Response {
    let token = uri.query().and_then(|q| token_in(q.as_bytes()));
    enter(&pages, token, Then::Redirect).await
}

/// `POST /login` (form: `token`): the same from the launch page `mcpd ctl ui` opens, so
/// the token is on no command line and in no address.
async fn login_form(State(pages): State<Pages>, body: axum::body::Bytes) -> Response {
    enter(&pages, token_in(&body), Then::Page).await
}

/// How a login goes on to the overview.
enum Then {
    /// `303 See Other`.
    Redirect,
    /// A page that goes there itself: after a cross-site post (the launch page is a local
    /// file), a browser would not send a `SameSite=Strict` cookie on a redirect, but it
    /// does on the page's own navigation.
    Page,
}

/// The page `Then::Page` answers with.
const ENTER_PAGE: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url=/\"><title>mcpd</title></head><body><p><a href=\"/\">Continue to the dashboard</a></p></body></html>";

/// The launch token in a query or form.
fn token_in(form: &[u8]) -> Option<Key> {
    url::form_urlencoded::parse(form)
        .find(|(k, _)| k == "token")
        .and_then(|(_, v)| Key::parse(&v))
}

/// Trades a launch token for a session cookie and the overview.
async fn enter(pages: &Pages, token: Option<Key>, then: Then) -> Response {
    let session = match token {
        Some(token) => pages.keys.redeem(token).await,
        None => None,
    };
    let Some(session) = session else {
        return message(
            StatusCode::FORBIDDEN,
            "This login address is used up",
            "A login address works once, within two minutes of mcpd ctl ui printing it.",
            "Run mcpd ctl ui again for a new one.",
        );
    };
    let cookie = format!(
        "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
        session.hex()
    );
    let mut r = match then {
        Then::Redirect => return redirect_home(&cookie),
        Then::Page => (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            ENTER_PAGE,
        )
            .into_response(),
    };
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// `POST /logout`: ends the session and clears the cookie.
async fn logout(State(pages): State<Pages>, Extension(session): Extension<SessionId>) -> Response {
    pages.keys.end(session.0).await;
    redirect_home(&format!(
        "{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
    ))
}

/// `303 See Other` to `/`, setting `cookie`.
fn redirect_home(cookie: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    r.headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static("/"));
    match HeaderValue::from_str(cookie) {
        Ok(v) => {
            r.headers_mut().insert(header::SET_COOKIE, v);
        }
        // Hex digits and fixed text: always a valid header value.
        Err(e) => tracing::error!("dashboard cookie: {e}"),
    }
    r
}

/// A name as one path segment (percent-encoded).
pub(super) fn segment(name: &str) -> String {
    url::form_urlencoded::byte_serialize(name.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// A query parameter of `uri`.
pub(super) fn query(uri: &Uri, key: &str) -> Option<String> {
    let q = uri.query()?;
    url::form_urlencoded::parse(q.as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// `POST /agents/N/cancel` (form: `id`): cancels that agent's request, then shows the
/// overview again.
async fn cancel(
    State(pages): State<Pages>,
    axum::extract::Path(agent): axum::extract::Path<u64>,
    body: axum::body::Bytes,
) -> Response {
    let id = url::form_urlencoded::parse(&body)
        .find(|(k, _)| k == "id")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    match pages.ctx.agents.cancel(agent, &id).await {
        Ok(()) => {
            let mut r = StatusCode::SEE_OTHER.into_response();
            r.headers_mut()
                .insert(header::LOCATION, HeaderValue::from_static("/"));
            r
        }
        Err(why) => message(
            StatusCode::CONFLICT,
            "Not cancelled",
            &why.to_string(),
            "Go back to the overview: the call may have finished meanwhile.",
        ),
    }
}

/// The script, compiled into the binary.
async fn script() -> Response {
    const JS: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/templates/dashboard/live.js"
    ));
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        JS,
    )
        .into_response()
}

/// The stylesheet, compiled into the binary.
async fn style() -> Response {
    const CSS: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/templates/dashboard/style.css"
    ));
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS).into_response()
}
