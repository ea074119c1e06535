//! The dashboard against the real daemon and a real Chromium.
//!
//! `mcpd ctl ui`'s token logs a browser in once and leaves the address bar, a request
//! without the cookie gets the login page, hostile server text is shown as text, a
//! rebound host name and a cross-origin POST get 403; and each check's counterpart, where
//! the same request gets through once the one thing it lacked is right.

use crate::dashboard::browser::{Browser, step};
use crate::support::{Daemon, DaemonBuilder, WAIT, http_client, run_mcpd, within};
use fantoccini::Locator;
use reqwest::StatusCode;
use reqwest::header::{HOST, HeaderMap, ORIGIN};

/// The dashboard's origin (`http://127.0.0.1:PORT`), from `mcpd/status`.
pub(crate) async fn origin(d: &Daemon) -> String {
    let status = d.status().await;
    let ui = status["daemon"]["ui"]
        .as_str()
        .unwrap_or_else(|| panic!("no dashboard address in {status}"));
    ui.strip_suffix('/')
        .expect("the address ends in /")
        .to_owned()
}

/// A fresh launch URL from `mcpd ctl ui` (which must not try to open a browser here).
pub(crate) async fn launch_url(d: &Daemon) -> String {
    let (code, out, err) = d.run_cli(&["ctl", "ui", "--no-browser"]).await;
    assert_eq!(code, 0, "mcpd ctl ui: {err}");
    assert!(err.contains("works once"), "{err}");
    let url = out.trim().to_owned();
    assert_eq!(out.lines().count(), 1, "the URL alone on stdout: {out:?}");
    url
}

/// An HTTP client that shows redirects instead of following them and keeps no cookies.
pub(crate) fn plain() -> reqwest::Client {
    let _ = http_client(); // installs the TLS provider reqwest needs
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(WAIT)
        .build()
        .expect("client")
}

/// Logs in with a token over plain HTTP; returns the `Cookie` header value.
pub(crate) async fn cookie_for(url: &str) -> String {
    let r = plain().get(url).send().await.expect("login");
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let set = r.headers()["set-cookie"]
        .to_str()
        .expect("ascii")
        .to_owned();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attr), "{set}");
    }
    set.split(';').next().expect("name=value").to_owned()
}

fn assert_hardened(headers: &HeaderMap) {
    assert_eq!(
        headers["content-security-policy"],
        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    );
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    assert_eq!(headers["cache-control"], "no-store");
}

#[tokio::test]
async fn a_launch_token_logs_a_browser_in_once_and_leaves_the_address_bar() {
    let d = DaemonBuilder::new().fixture("alpha", &[]).start().await;
    let status = d.wait_ready().await;
    let pid = status["servers"][0]["pid"]
        .as_u64()
        .expect("pid")
        .to_string();
    let origin = origin(&d).await;
    let (_, text, _) = d.run_cli(&["ctl", "status"]).await;
    assert!(
        text.contains(&format!("dashboard at {origin}/ (log in with mcpd ctl ui)")),
        "{text}"
    );
    let url = launch_url(&d).await;
    assert!(url.starts_with(&format!("{origin}/login?token=")), "{url}");

    // Without the cookie: the login page, no server data.
    let r = plain()
        .get(format!("{origin}/"))
        .send()
        .await
        .expect("get /");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_hardened(r.headers());
    let body = r.text().await.expect("body");
    assert!(body.contains("mcpd ctl ui"), "{body}");
    assert!(!body.contains("alpha") && !body.contains(&pid), "{body}");

    let Some(browser) = Browser::start("dashboard::login::login").await else {
        return;
    };
    browser.goto(&url).await;
    browser
        .wait_for_text("tr[data-server=alpha] td.state", "ready")
        .await;
    browser
        .wait_for_text("tr[data-server=alpha] td.pid", &pid)
        .await;
    let now = step("current URL", browser.client().current_url()).await;
    assert_eq!(
        now.as_str(),
        format!("{origin}/"),
        "the token left the address bar"
    );

    // The same token a second time: refused, in the browser and over plain HTTP.
    browser.goto(&url).await;
    browser
        .wait_for_text("h1", "This login address is used up")
        .await;
    let r = plain().get(&url).send().await.expect("reuse");
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_hardened(r.headers());

    // The session still works, and the page's own button (a same-origin POST) ends it.
    browser.goto(&format!("{origin}/")).await;
    let logout = browser.wait_for("#logout").await;
    step("click Log out", logout.click()).await;
    browser.wait_for_text("h1", "Log in to mcpd").await;
    browser.close().await;
}

#[tokio::test]
async fn hostile_text_from_servers_is_shown_as_text_and_runs_nothing() {
    let img = "/nonexistent/<img src=x onerror=\"document.title='pwned'\">";
    let script = "/nonexistent/<script>document.title='pwned'</script>";
    // Within the shell's single quotes: no single quote.
    let stderr =
        "<script>document.title=\"pwned\"</script><img src=x onerror=\"document.title=1\">";
    let d = DaemonBuilder::new()
        .fixture("alpha", &[])
        .server("img", img, &[], "")
        .server("script", script, &[], "")
        .server(
            "loud",
            "sh",
            &["-c", &format!("echo '{stderr}' >&2; exit 1")],
            "",
        )
        .start()
        .await;
    for name in ["img", "script"] {
        d.wait_server(name, "a last error", |s| s["last_error"].is_string())
            .await;
    }
    d.wait_server("loud", "a stderr line", |s| {
        s["stderr_tail"].as_array().is_some_and(|t| !t.is_empty())
    })
    .await;
    let url = launch_url(&d).await;
    let Some(browser) = Browser::start("dashboard::login::hostile").await else {
        return;
    };
    browser.goto(&url).await;
    browser.wait_for("tr[data-server=alpha]").await;
    // The rows as the event stream put them in place, not only as first served.
    browser
        .wait_for_text(
            "#freshness",
            "Live: this page follows the daemon as it changes.",
        )
        .await;
    let cell = |name: &str| format!("tr[data-server={name}] td.error");
    for (name, payload) in [("img", img), ("script", script), ("loud", stderr)] {
        let text = step("error text", browser.wait_for(&cell(name)).await.text()).await;
        assert!(text.contains(payload), "{name}: {text:?} lacks {payload:?}");
    }
    let client = browser.client().clone();
    let found = |css: &'static str| {
        let client = client.clone();
        async move { step(css, client.find_all(Locator::Css(css))).await.len() }
    };
    assert_eq!(
        found("#servers img").await,
        0,
        "no element made of server text"
    );
    assert_eq!(found("#servers script").await, 0);
    assert_eq!(found("script").await, 1, "the page's own script alone");
    assert_eq!(found("script[src='/static/live.js']").await, 1);
    let title = step("title", browser.client().title()).await;
    assert_eq!(title, "Overview · mcpd");

    // The counterpart: the same text put into the page as markup is found by the checks
    // above, so they would see an escaping hole.
    let js = "document.querySelector(arguments[0]).innerHTML = arguments[1];";
    let args = vec![cell("img").into(), img.into()];
    step("inject", browser.client().execute(js, args)).await;
    assert_eq!(
        found("#servers img").await,
        1,
        "the check sees unescaped markup"
    );
    browser.close().await;
}

#[tokio::test]
async fn a_rebound_host_name_gets_403_and_the_token_it_carried_still_works() {
    let d = DaemonBuilder::new().fixture("alpha", &[]).start().await;
    d.wait_ready().await;
    let origin = origin(&d).await;
    let port = origin.rsplit(':').next().expect("port").to_owned();
    let url = launch_url(&d).await;
    let rebound = url.replace("127.0.0.1", "evil.test");

    // Plain HTTP with the foreign Host: refused before the token is looked at.
    let r = plain()
        .get(&url)
        .header(HOST, format!("evil.test:{port}"))
        .send()
        .await
        .expect("rebound request");
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_hardened(r.headers());

    let rule = "--host-resolver-rules=MAP evil.test 127.0.0.1";
    let Some(browser) = Browser::start_with_args("dashboard::login::rebinding", &[rule]).await
    else {
        return;
    };
    browser.goto(&rebound).await;
    browser.wait_for_text("h1", "Refused").await;
    let text = step("text", browser.wait_for("#text").await.text()).await;
    assert!(text.contains("DNS rebinding"), "{text}");
    browser.goto(&format!("http://evil.test:{port}/")).await;
    browser.wait_for_text("h1", "Refused").await;

    // The counterpart: the same browser and the same token, with the page's own host.
    browser.goto(&url).await;
    browser
        .wait_for_text("tr[data-server=alpha] td.state", "ready")
        .await;
    browser.close().await;
}

#[tokio::test]
async fn a_cross_origin_post_gets_403_and_a_same_origin_one_is_served() {
    let d = DaemonBuilder::new().fixture("alpha", &[]).start().await;
    d.wait_ready().await;
    let origin = origin(&d).await;
    let cookie = cookie_for(&launch_url(&d).await).await;
    let http = plain();
    let get_home = || async {
        http.get(format!("{origin}/"))
            .header("cookie", &cookie)
            .send()
            .await
            .expect("get /")
            .status()
    };
    assert_eq!(get_home().await, StatusCode::OK);
    let logout = |origin_header: Option<&str>, site: Option<&str>| {
        let mut r = http
            .post(format!("{origin}/logout"))
            .header("cookie", &cookie);
        if let Some(o) = origin_header {
            r = r.header(ORIGIN, o);
        }
        if let Some(s) = site {
            r = r.header("sec-fetch-site", s);
        }
        async move { r.send().await.expect("post") }
    };
    for (o, site) in [
        (Some("http://evil.test"), None),
        (Some("http://evil.test"), Some("cross-site")),
        (None, Some("same-site")),
        (None, None),
    ] {
        let r = logout(o, site).await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{o:?} {site:?}");
        assert_hardened(r.headers());
        assert_eq!(get_home().await, StatusCode::OK, "the session survived");
    }
    // The counterpart: the page's own origin gets through, and logs out.
    let r = logout(Some(&origin), Some("same-origin")).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(get_home().await, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn ctl_ui_says_why_when_the_dashboard_is_off() {
    let d = DaemonBuilder::new().daemon("ui = false").start().await;
    assert!(d.status().await["daemon"]["ui"].is_null());
    let (code, out, err) = d.run_cli(&["ctl", "ui", "--no-browser"]).await;
    assert_ne!(code, 0);
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("daemon.ui = false"), "{err}");
    let (code, help, _) = run_mcpd(&["ctl", "ui", "--help"], None).await;
    assert_eq!(code, 0);
    assert!(
        help.contains("dashboard") && help.contains("--no-browser"),
        "{help}"
    );
}

#[tokio::test]
async fn a_taken_ui_port_stops_the_daemon_at_start_with_an_error_naming_the_key() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr");
    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("mcpd.toml");
    std::fs::write(&config, format!("[daemon]\nui_listen = \"{addr}\"\n")).expect("config");
    let socket = dir.path().join("s.sock");
    let config = config.to_string_lossy().into_owned();
    let (code, _, err) = within(
        "mcpd serve fails",
        run_mcpd(&["serve", "--config", &config], Some(&socket)),
    )
    .await;
    assert_ne!(code, 0);
    assert!(
        err.contains(&format!("cannot listen for the dashboard on {addr}"))
            && err.contains("daemon.ui_listen"),
        "{err}"
    );
    drop(taken);
}

/// `GET url` with `cookie` from a Python process running as `uid`: (status, body).
async fn get_as(uid: u32, url: &str, cookie: &str) -> (String, String) {
    const SCRIPT: &str = "import sys, urllib.request as u
req = u.Request(sys.argv[1], headers={'Cookie': sys.argv[2]})
try:
    r = u.urlopen(req, timeout=10)
    print(r.status); print(r.read().decode())
except u.HTTPError as e:
    print(e.code); print(e.read().decode())
";
    let out = tokio::process::Command::new("/usr/bin/python3")
        .args(["-c", SCRIPT, url, cookie])
        .uid(uid)
        .gid(uid)
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .output();
    let out = within("python as another user", out)
        .await
        .expect("python3");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (status, body) = text.split_once('\n').unwrap_or((&text, ""));
    (status.to_owned(), body.to_owned())
}

#[tokio::test]
async fn another_users_connection_with_a_valid_cookie_gets_403_and_the_daemons_user_is_served() {
    if !nix::unistd::getuid().is_root() {
        eprintln!("skipped: switching users needs root (CI runs as root)");
        return;
    }
    let d = DaemonBuilder::new().fixture("alpha", &[]).start().await;
    d.wait_ready().await;
    let origin = origin(&d).await;
    let cookie = cookie_for(&launch_url(&d).await).await;
    let page = format!("{origin}/");
    // The daemon's user (root here, as CI runs), with this cookie: the overview.
    let (status, body) = get_as(0, &page, &cookie).await;
    assert_eq!(status, "200", "{body}");
    assert!(body.contains("data-server=\"alpha\""), "{body}");
    // Another user with the very same cookie: refused before any page is looked at.
    let (status, body) = get_as(65534, &page, &cookie).await;
    assert_eq!(status, "403", "{body}");
    assert!(body.contains("for the user who runs the daemon"), "{body}");
    assert!(!body.contains("alpha"), "{body}");
    assert!(
        d.log_text()
            .contains("refused a dashboard request from another user")
    );
    // A fresh launch token is as useless to that user.
    let (status, _) = get_as(65534, &launch_url(&d).await, "").await;
    assert_eq!(status, "403");
}

#[tokio::test]
async fn without_ui_listen_the_page_shares_the_http_listeners_port_and_mcp_keeps_its_token() {
    let d = DaemonBuilder::new()
        .daemon("http_listen = \"127.0.0.1:0\"")
        .fixture("alpha", &[])
        .start()
        .await;
    d.wait_ready().await;
    let status = d.status().await;
    let http = status["daemon"]["http"]
        .as_str()
        .expect("http url")
        .to_owned();
    let origin = origin(&d).await;
    assert_eq!(format!("{origin}/mcp"), http, "one port for both");
    // The page without a cookie: its login page, not the MCP token's refusal.
    let r = plain()
        .get(format!("{origin}/"))
        .send()
        .await
        .expect("get /");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_hardened(r.headers());
    assert!(r.text().await.unwrap_or_default().contains("mcpd ctl ui"));
    // A login works on that port, and the overview shows the servers.
    let cookie = cookie_for(&launch_url(&d).await).await;
    let r = plain()
        .get(format!("{origin}/"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("overview");
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.text()
            .await
            .unwrap_or_default()
            .contains("data-server=\"alpha\"")
    );
    // MCP still needs its bearer token; the dashboard's cookie is no substitute.
    let r = plain()
        .post(&http)
        .header("cookie", &cookie)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .expect("post /mcp");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(
        r.headers().get("content-security-policy").is_none(),
        "not a dashboard answer"
    );
}

#[tokio::test]
async fn a_ui_listen_of_its_own_keeps_the_page_off_the_http_port() {
    let d = DaemonBuilder::new()
        .daemon("http_listen = \"127.0.0.1:0\"\nui_listen = \"127.0.0.1:0\"")
        .fixture("alpha", &[])
        .start()
        .await;
    d.wait_ready().await;
    let status = d.status().await;
    let http = status["daemon"]["http"]
        .as_str()
        .expect("http url")
        .to_owned();
    let origin = origin(&d).await;
    assert_ne!(format!("{origin}/mcp"), http);
    let http_origin = http.strip_suffix("/mcp").expect("/mcp");
    let r = plain()
        .get(format!("{http_origin}/"))
        .send()
        .await
        .expect("get /");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let body = r.text().await.unwrap_or_default();
    assert!(
        !body.contains("mcpd ctl ui"),
        "the HTTP port serves no page: {body}"
    );
}
