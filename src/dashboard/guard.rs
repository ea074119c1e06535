//! The layer in front of every dashboard route.
//!
//! The `Host` must name this listener (the DNS-rebinding defence), a state-changing
//! request must come from the page itself (no CSRF), every page but the login and the
//! stylesheet needs the session cookie, and every response carries the security headers.
//!
//! The checks read only the request head, before any handler or body extractor runs.

use super::actor::DashboardHandle;
use super::auth::{SessionId, session_cookie};
use super::pages;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use std::net::SocketAddr;
use std::sync::Arc;

/// The headers every response carries: no script, style, frame or form target from
/// elsewhere; no MIME sniffing; no address (with a token) sent on; nothing cached.
const HARDENING: &[(header::HeaderName, &str)] = &[
    (
        header::CONTENT_SECURITY_POLICY,
        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    ),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::REFERRER_POLICY, "no-referrer"),
    (header::CACHE_CONTROL, "no-store"),
];

/// Whether a check is applied. Only unit tests turn one off, to show that the request
/// they use is stopped by that check and by nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Check {
    On,
    #[cfg(test)]
    Off,
}

impl Check {
    fn on(self) -> bool {
        match self {
            Check::On => true,
            #[cfg(test)]
            Check::Off => false,
        }
    }
}

/// Why a request is refused before it reaches a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// `Host` names something other than this listener: a page of another site whose
    /// name was made to resolve to 127.0.0.1 (DNS rebinding), or a misdirected request.
    ForeignHost,
    /// A state-changing request that another origin made the browser send (CSRF), or
    /// one that says nothing of where it comes from.
    CrossSite,
}

/// Why a connection is not served at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Peer {
    /// Another local user's (or one the socket table does not show).
    OtherUser,
    /// A process of a server mcpd started, or one that could not be told apart from one.
    Server,
}

/// What a request that passed the head checks still needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Need {
    /// Nothing: the login page and the static assets.
    Nothing,
    /// An open session's cookie.
    Session,
}

/// The checks, made once for the bound address.
#[derive(Debug)]
pub(super) struct Policy {
    /// `Host` values a request may carry: the loopback names with the bound port, and
    /// the bound address itself (`127.0.0.2:PORT` is loopback too).
    hosts: Vec<String>,
    pub(super) host_check: Check,
    pub(super) origin_check: Check,
    /// The daemon's user: only its connections (and root's) are served.
    own_uid: u32,
}

impl Policy {
    pub(super) fn new(addr: std::net::SocketAddr) -> Policy {
        let port = addr.port();
        let mut hosts = vec![
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ];
        let own = addr.to_string();
        if !hosts.contains(&own) {
            hosts.push(own);
        }
        Policy {
            hosts,
            host_check: Check::On,
            origin_check: Check::On,
            own_uid: nix::unistd::getuid().as_raw(),
        }
    }

    /// Who the request's connection is, as the kernel's socket table and `/proc` say: the
    /// daemon's user (or root) and no process of a server mcpd started. A connection
    /// that cannot be told is refused.
    fn peer(&self, req: &Request) -> Result<(), Peer> {
        let ends = (
            req.extensions()
                .get::<axum::extract::ConnectInfo<SocketAddr>>(),
            req.extensions().get::<crate::http_accept::LocalAddr>(),
        );
        let client = match ends {
            (Some(remote), Some(local)) => super::peer::client_of(remote.0, local.0),
            _ => None,
        };
        let remote = ends.0.map(|r| r.0);
        if !super::peer::allowed(client.map(|c| c.uid), self.own_uid) {
            tracing::warn!(
                remote = remote.map(tracing::field::display),
                uid = client.map(|c| c.uid),
                "refused a dashboard request from another user (or one whose user could not be told)"
            );
            return Err(Peer::OtherUser);
        }
        let inode = client.map_or(0, |c| c.inode);
        match super::peer::held_by_descendant(inode) {
            Ok(false) => Ok(()),
            Ok(true) => {
                tracing::warn!(
                    remote = remote.map(tracing::field::display),
                    "refused a dashboard request from a process of a server mcpd started"
                );
                Err(Peer::Server)
            }
            Err(why) => {
                tracing::warn!(
                    remote = remote.map(tracing::field::display),
                    "refused a dashboard request whose process could not be told from a server's: {why}"
                );
                Err(Peer::Server)
            }
        }
    }

    /// The head checks of one request.
    pub(super) fn check(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
    ) -> Result<Need, Refusal> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_ascii_lowercase);
        let own_host = host.as_ref().filter(|h| self.hosts.contains(h));
        if self.host_check.on() && own_host.is_none() {
            return Err(Refusal::ForeignHost);
        }
        let safe = matches!(*method, Method::GET | Method::HEAD);
        // The login form comes from the launch page `mcpd ctl ui` opens, a local file
        // (origin `null`, cross-site): it changes nothing but trades a launch token, which
        // no other site holds, for a session.
        let login = path == "/login";
        if !safe && !login && self.origin_check.on() && !same_origin(headers, host.as_deref()) {
            return Err(Refusal::CrossSite);
        }
        if path == "/login" || path.starts_with("/static/") {
            Ok(Need::Nothing)
        } else {
            Ok(Need::Session)
        }
    }
}

/// Whether a request says it comes from the page's own origin: every signal it carries
/// agrees, and it carries at least one. `Sec-Fetch-Site` is `same-origin` (or `none`: the
/// person typed the address), `Origin` is `http://` and the `Host` it was sent to.
/// `Origin: null` says nothing: a browser sends it for the page's own form posts when
/// the page's referrer policy is `no-referrer`, as the dashboard's is.
fn same_origin(headers: &HeaderMap, host: Option<&str>) -> bool {
    let site = headers
        .get("sec-fetch-site")
        .map(|v| matches!(v.as_bytes(), b"same-origin" | b"none"));
    let origin = headers
        .get(header::ORIGIN)
        .filter(|v| v.as_bytes() != b"null");
    let origin = origin.map(|v| {
        let own = host.map(|h| format!("http://{h}"));
        v.to_str()
            .ok()
            .map(str::to_ascii_lowercase)
            .is_some_and(|o| Some(o) == own)
    });
    match (site, origin) {
        (None, None) => false,
        (site, origin) => site.unwrap_or(true) && origin.unwrap_or(true),
    }
}

/// Adds the security headers to a response.
pub(super) fn harden(headers: &mut HeaderMap) {
    for (name, value) in HARDENING {
        headers.insert(name.clone(), HeaderValue::from_static(value));
    }
}

/// What the layer needs: the policy and the keys' owner.
#[derive(Clone)]
pub(super) struct Guard {
    pub(super) policy: Arc<Policy>,
    pub(super) keys: DashboardHandle,
}

/// The layer: refuses what the policy refuses, sends a request without an open session
/// to the login page, and hardens every response.
pub(super) async fn guard(State(g): State<Guard>, req: Request, next: Next) -> Response {
    let mut response = match g.policy.peer(&req) {
        Ok(()) => checked(&g, req, next).await,
        Err(Peer::OtherUser) => pages::other_user(),
        Err(Peer::Server) => pages::from_a_server(),
    };
    harden(response.headers_mut());
    response
}

/// The head checks and the session, for a connection of the daemon's own user.
async fn checked(g: &Guard, mut req: Request, next: Next) -> Response {
    let checked = g
        .policy
        .check(req.method(), req.uri().path(), req.headers());
    match checked {
        Err(Refusal::ForeignHost) => pages::foreign_host(),
        Err(Refusal::CrossSite) => pages::cross_site(),
        Ok(Need::Nothing) => next.run(req).await,
        Ok(Need::Session) => match session_cookie(req.headers()) {
            Some(id) if g.keys.check(id).await => {
                req.extensions_mut().insert(SessionId(id));
                next.run(req).await
            }
            _ => pages::login_needed(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PORT: std::net::SocketAddr =
        std::net::SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8766);

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn check(
        policy: &Policy,
        method: Method,
        path: &str,
        pairs: &[(&str, &str)],
    ) -> Result<Need, Refusal> {
        policy.check(&method, path, &headers(pairs))
    }

    #[test]
    fn dashboard_guard_takes_the_loopback_names_of_its_own_port_only() {
        let p = Policy::new(PORT);
        for host in [
            "127.0.0.1:8766",
            "localhost:8766",
            "LocalHost:8766",
            "[::1]:8766",
        ] {
            assert_eq!(
                check(&p, Method::GET, "/", &[("host", host)]),
                Ok(Need::Session),
                "{host}"
            );
        }
        for host in [
            "evil.test:8766",
            "127.0.0.1",
            "localhost",
            "127.0.0.1:8767",
            "127.0.0.1.evil.test:8766",
            "0.0.0.0:8766",
            "",
        ] {
            assert_eq!(
                check(&p, Method::GET, "/login", &[("host", host)]),
                Err(Refusal::ForeignHost),
                "{host}"
            );
        }
        // Bound to another loopback address: that address is its name too.
        let other = Policy::new("127.0.0.2:8766".parse().unwrap());
        for (host, want) in [
            ("127.0.0.2:8766", Ok(Need::Session)),
            ("127.0.0.1:8766", Ok(Need::Session)),
            ("127.0.0.3:8766", Err(Refusal::ForeignHost)),
        ] {
            assert_eq!(
                check(&other, Method::GET, "/", &[("host", host)]),
                want,
                "{host}"
            );
        }
        assert_eq!(
            check(&p, Method::GET, "/", &[]),
            Err(Refusal::ForeignHost),
            "no Host"
        );
    }

    #[test]
    fn dashboard_guard_with_the_host_check_off_lets_a_rebinding_request_through() {
        // The request the test above refuses passes once that one check is off: it is
        // the Host check, and nothing else, that stops it.
        let mut p = Policy::new(PORT);
        let rebinding = [("host", "evil.test:8766")];
        assert_eq!(
            check(&p, Method::GET, "/", &rebinding),
            Err(Refusal::ForeignHost)
        );
        p.host_check = Check::Off;
        assert_eq!(check(&p, Method::GET, "/", &rebinding), Ok(Need::Session));
    }

    #[test]
    fn dashboard_guard_takes_state_changes_from_the_page_itself_only() {
        let p = Policy::new(PORT);
        let host = ("host", "127.0.0.1:8766");
        let ok = |pairs: &[(&str, &str)]| check(&p, Method::POST, "/logout", pairs);
        assert_eq!(
            ok(&[host, ("sec-fetch-site", "same-origin")]),
            Ok(Need::Session)
        );
        assert_eq!(ok(&[host, ("sec-fetch-site", "none")]), Ok(Need::Session));
        assert_eq!(
            ok(&[host, ("origin", "http://127.0.0.1:8766")]),
            Ok(Need::Session)
        );
        assert_eq!(
            ok(&[
                host,
                ("origin", "http://127.0.0.1:8766"),
                ("sec-fetch-site", "same-origin")
            ]),
            Ok(Need::Session)
        );
        // What Chromium sends for the page's own form under `Referrer-Policy: no-referrer`.
        assert_eq!(
            ok(&[host, ("origin", "null"), ("sec-fetch-site", "same-origin")]),
            Ok(Need::Session)
        );
        for refused in [
            vec![host],
            vec![host, ("origin", "http://evil.test")],
            vec![host, ("origin", "http://evil.test:8766")],
            vec![host, ("origin", "http://localhost:8766")],
            vec![host, ("origin", "http://127.0.0.1:9999")],
            vec![host, ("origin", "null")],
            vec![host, ("origin", "null"), ("sec-fetch-site", "cross-site")],
            vec![host, ("sec-fetch-site", "cross-site")],
            vec![host, ("sec-fetch-site", "same-site")],
            vec![
                host,
                ("origin", "http://127.0.0.1:8766"),
                ("sec-fetch-site", "cross-site"),
            ],
            vec![
                host,
                ("origin", "http://evil.test"),
                ("sec-fetch-site", "same-origin"),
            ],
        ] {
            assert_eq!(ok(&refused), Err(Refusal::CrossSite), "{refused:?}");
        }
        // Reading is no state change: a GET needs no Origin.
        assert_eq!(check(&p, Method::GET, "/", &[host]), Ok(Need::Session));
        assert_eq!(
            check(
                &p,
                Method::HEAD,
                "/",
                &[host, ("sec-fetch-site", "cross-site")]
            ),
            Ok(Need::Session)
        );
    }

    #[test]
    fn dashboard_guard_with_the_origin_check_off_lets_a_cross_site_post_through() {
        let mut p = Policy::new(PORT);
        let csrf = [("host", "127.0.0.1:8766"), ("origin", "http://evil.test")];
        assert_eq!(
            check(&p, Method::POST, "/logout", &csrf),
            Err(Refusal::CrossSite)
        );
        p.origin_check = Check::Off;
        assert_eq!(check(&p, Method::POST, "/logout", &csrf), Ok(Need::Session));
    }

    #[test]
    fn dashboard_guard_asks_a_session_of_every_page_but_the_login_and_the_assets() {
        let p = Policy::new(PORT);
        let host = [("host", "localhost:8766")];
        for (path, need) in [
            ("/", Need::Session),
            ("/login", Need::Nothing),
            ("/static/style.css", Need::Nothing),
            ("/login/x", Need::Session),
            ("/loginx", Need::Session),
            ("/anything", Need::Session),
            ("/static", Need::Session),
        ] {
            assert_eq!(check(&p, Method::GET, path, &host), Ok(need), "{path}");
        }
    }

    #[test]
    fn dashboard_responses_get_the_security_headers() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("max-age=60"),
        );
        harden(&mut h);
        assert_eq!(
            h[header::CONTENT_SECURITY_POLICY],
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
        );
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(h[header::REFERRER_POLICY], "no-referrer");
        assert_eq!(h[header::CACHE_CONTROL], "no-store");
    }
}
