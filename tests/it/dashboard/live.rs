//! The dashboard as a person uses it, in a real Chromium against the real daemon.
//!
//! The overview follows a server's crash and restart without a reload; the try-it form
//! calls a tool through mcpd and shows its answer; Cancel on a call in flight cancels it
//! upstream; a tool's hostile description and result are shown as text; Approve releases
//! a held tool; Log in completes an OAuth login against the OAuth fixture.

use crate::dashboard::browser::{Browser, step};
use crate::dashboard::login::launch_url;
use crate::oauth::fixture::OAuthFixture;
use crate::support::*;
use fantoccini::Locator;
use serde_json::json;

/// Logs a fresh browser in and waits until the overview follows the event stream.
async fn open(d: &Daemon, test: &str) -> Option<Browser> {
    let url = launch_url(d).await;
    let browser = Browser::start(test).await?;
    browser.goto(&url).await;
    browser
        .wait_for_text(
            "#freshness",
            "Live: this page follows the daemon as it changes.",
        )
        .await;
    Some(browser)
}

/// A page's body over plain HTTP, logged in with a fresh token of its own.
async fn plain_get(d: &Daemon, path: &str) -> String {
    let cookie = crate::dashboard::login::cookie_for(&launch_url(d).await).await;
    let origin = crate::dashboard::login::origin(d).await;
    let r = http_client()
        .get(format!("{origin}{path}"))
        .header("cookie", cookie)
        .send()
        .await
        .expect("get");
    assert!(r.status().is_success(), "{path}: {}", r.status());
    r.text().await.expect("body")
}

/// Clicks the first element matching `css`.
async fn click(browser: &Browser, css: &str) {
    let el = browser.wait_for(css).await;
    step(&format!("click {css}"), el.click()).await;
}

#[tokio::test]
async fn a_killed_server_goes_to_backoff_and_back_to_ready_on_the_open_page_without_a_reload() {
    let d = DaemonBuilder::new()
        .fixture_with("alpha", &[], "restart = { backoff_initial = \"3s\" }")
        .start()
        .await;
    let status = d.wait_ready().await;
    let pid = status_pid(&status["servers"][0]).expect("pid");
    let Some(browser) = open(&d, "dashboard::live::restart").await else {
        return;
    };
    let state = "tr[data-server=alpha] td.state";
    browser.wait_for_text(state, "ready").await;
    browser
        .wait_for_text("tr[data-server=alpha] td.pid", &pid.to_string())
        .await;
    // A marker the page keeps only if it is never reloaded.
    let mark = "document.body.dataset.mark = 'same page';";
    step("mark the page", browser.client().execute(mark, vec![])).await;
    assert!(send_signal(pid, nix::sys::signal::Signal::SIGKILL));
    let seen = browser
        .wait_for_text_like(state, "backoff with a countdown", |t| {
            t.starts_with("backoff retry in")
        })
        .await;
    assert!(seen.ends_with('s'), "{seen}");
    browser.wait_for_text(state, "ready").await;
    let new_pid = browser
        .wait_for_text_like("tr[data-server=alpha] td.pid", "a new pid", |t| {
            t.parse::<u32>().is_ok_and(|p| p != pid)
        })
        .await;
    browser
        .wait_for_text("tr[data-server=alpha] td.restarts", "1")
        .await;
    let kept = step(
        "read the marker",
        browser
            .client()
            .execute("return document.body.dataset.mark || '';", vec![]),
    )
    .await;
    assert_eq!(kept, json!("same page"), "the page was not reloaded");
    assert_eq!(
        status_pid(&d.server_status("alpha").await).map(|p| p.to_string()),
        Some(new_pid)
    );
    browser.close().await;
}

#[tokio::test]
async fn the_try_it_form_calls_a_tool_through_mcpd_and_shows_the_answer() {
    let d = DaemonBuilder::new()
        .fixture("alpha", &["--tools", "echo,add"])
        .start()
        .await;
    d.wait_ready().await;
    let Some(browser) = open(&d, "dashboard::live::tryit").await else {
        return;
    };
    click(&browser, "tr[data-server=alpha] td.name a").await;
    browser.wait_for_text("#server-name", "alpha").await;
    // A ready server offers Restart and Stop, not Start.
    for (css, n) in [("#restart", 1), ("#stop", 1), ("#start", 0)] {
        let found = step(css, browser.client().find_all(Locator::Css(css))).await;
        assert_eq!(found.len(), n, "{css}");
    }
    let tool = "details.tool[data-tool=alpha__echo]";
    click(&browser, &format!("{tool} > summary")).await;
    let field = browser
        .wait_for(&format!("{tool} input[name='arg:text']"))
        .await;
    step("type", field.send_keys("hello from the page")).await;
    click(&browser, &format!("{tool} button.call")).await;
    browser
        .wait_for_text("#result-text-1", "hello from the page")
        .await;
    // A number field, checked and converted: add's answer is the sum.
    let add = "details.tool[data-tool=alpha__add]";
    click(&browser, &format!("{add} > summary")).await;
    for (name, v) in [("a", "2"), ("b", "40")] {
        let f = browser
            .wait_for(&format!("{add} input[name='arg:{name}']"))
            .await;
        step("type", f.send_keys(v)).await;
    }
    click(&browser, &format!("{add} button.call")).await;
    browser.wait_for_text("#result-text-1", "42").await;
    // The latency chart, drawn on the server, shows those calls.
    browser
        .goto(&format!(
            "{}/servers/alpha",
            crate::dashboard::login::origin(&d).await
        ))
        .await;
    let drawn = browser
        .wait_until("the chart to load", WAIT, |c| async move {
            let js = "const i = document.querySelector('#latency img'); return i && i.complete ? i.naturalWidth : 0;";
            let w = c.execute(js, vec![]).await.ok()?;
            w.as_u64().filter(|w| *w > 0)
        })
        .await;
    assert_eq!(drawn, 640);
    let svg = plain_get(&d, "/servers/alpha/latency.svg").await;
    assert!(svg.contains("2 calls, 0 errors"), "{svg}");
    // The call went through mcpd as an agent's does: it is counted.
    let (_, metrics, _) = d.run_cli(&["ctl", "metrics"]).await;
    assert!(
        metrics.contains("mcpd_calls_total{server=\"alpha\",method=\"tools/call\"} 2"),
        "{metrics}"
    );
    browser.close().await;
}

#[tokio::test]
async fn cancel_on_a_call_in_flight_cancels_it_upstream_and_tells_the_agent() {
    let mut h = Hanging::start().await;
    let Some(browser) = open(&h.d, "dashboard::live::cancel").await else {
        return;
    };
    browser.wait_for("#no-calls").await;
    let id = h.hang().await;
    let row = "tr.call[data-tool=s__hang]";
    browser.wait_for(row).await;
    click(&browser, &format!("{row} button.cancel")).await;
    wait_for_line(&h.log, "notifications/cancelled").await;
    let answer = h.agent.response(&id).await;
    assert_eq!(error_code(&answer), Some(-32026), "{answer}");
    browser.wait_for("#no-calls").await;
    browser.close().await;
}

#[tokio::test]
async fn a_tools_hostile_description_and_result_are_shown_as_text_and_run_nothing() {
    let payload =
        "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>";
    let describe = format!("echo={payload}");
    let d = DaemonBuilder::new()
        .fixture("alpha", &["--tools", "echo", "--describe", &describe])
        .start()
        .await;
    d.wait_ready().await;
    let Some(browser) = open(&d, "dashboard::live::hostile").await else {
        return;
    };
    click(&browser, "tr[data-server=alpha] td.name a").await;
    let tool = "details.tool[data-tool=alpha__echo]";
    let description = browser.wait_for(&format!("{tool} .description")).await;
    let shown = step("description", description.text()).await;
    assert_eq!(shown, payload, "the description, as text");
    click(&browser, &format!("{tool} > summary")).await;
    let field = browser
        .wait_for(&format!("{tool} input[name='arg:text']"))
        .await;
    step("type", field.send_keys(payload)).await;
    click(&browser, &format!("{tool} button.call")).await;
    browser.wait_for_text("#result-text-1", payload).await;
    let client = browser.client().clone();
    let count = |css: &'static str| {
        let client = client.clone();
        async move { step(css, client.find_all(Locator::Css(css))).await.len() }
    };
    assert_eq!(
        count("main img[src=x]").await,
        0,
        "no element made of server text"
    );
    assert_eq!(count("script").await, 1, "the page's own script alone");
    let title = step("title", browser.client().title()).await;
    assert_eq!(title, "alpha · mcpd");
    // The counterpart: the same text as markup is found by the checks above.
    let js = "document.querySelector('#result-text-1').innerHTML = arguments[0];";
    step("inject", browser.client().execute(js, vec![payload.into()])).await;
    assert_eq!(
        count("main img[src=x]").await,
        1,
        "the check sees unescaped markup"
    );
    browser.close().await;
}

#[tokio::test]
async fn the_log_page_shows_a_servers_lines_and_follows_new_ones_live() {
    let d = DaemonBuilder::new()
        .fixture("alpha", &[])
        .fixture("beta", &[])
        .start()
        .await;
    d.wait_ready().await;
    let Some(browser) = open(&d, "dashboard::live::logs").await else {
        return;
    };
    let origin = crate::dashboard::login::origin(&d).await;
    browser
        .goto(&format!("{origin}/logs?server=alpha&level=info"))
        .await;
    browser
        .wait_for_text("#freshness", "Live: new lines appear as they are logged.")
        .await;
    let rows = "#log-lines tr";
    let servers = |c: fantoccini::Client| async move {
        let cells = c
            .find_all(Locator::Css("#log-lines td.server"))
            .await
            .ok()?;
        let mut names = Vec::new();
        for cell in cells {
            names.push(cell.text().await.ok()?);
        }
        Some(names)
    };
    let before = browser
        .wait_until("alpha's lines", WAIT, |c| async move {
            servers(c).await.filter(|n| !n.is_empty())
        })
        .await;
    assert!(before.iter().all(|n| n == "alpha"), "{before:?}");
    let count = step("rows", browser.client().find_all(Locator::Css(rows)))
        .await
        .len();
    // A restart of each server: alpha's lines appear without a reload, beta's never.
    for name in ["beta", "alpha"] {
        let (code, _, err) = d.run_cli(&["ctl", "restart", name]).await;
        assert_eq!(code, 0, "{err}");
    }
    let after = browser
        .wait_until("new lines of alpha's", WAIT, |c| async move {
            servers(c).await.filter(|n| n.len() > count)
        })
        .await;
    assert!(after.iter().all(|n| n == "alpha"), "{after:?}");
    let text = step("log text", browser.wait_for("#log-lines").await.text()).await;
    assert!(text.contains("control request"), "{text}");
    browser.close().await;
}

#[tokio::test]
async fn approve_on_the_server_page_releases_a_held_tool() {
    let d = DaemonBuilder::new()
        .daemon("pin = \"approve\"")
        .fixture("fx", &["--tools", "echo"])
        .start()
        .await;
    d.wait_ready().await;
    d.wait_server("fx", "fx's definitions held", |r| {
        r["pins"]["held"].as_u64().is_some_and(|n| n >= 1)
    })
    .await;
    let mut a = d.initialized_agent().await;
    assert!(!a.tool_names().await.contains(&"fx__echo".to_owned()));
    let Some(browser) = open(&d, "dashboard::live::approve").await else {
        return;
    };
    click(&browser, "tr[data-server=fx] td.name a").await;
    let held = browser.wait_for("#held .held").await;
    let shown = step("held text", held.text()).await;
    assert!(shown.contains("new tool"), "{shown}");
    assert!(
        shown.contains("Echoes the text argument"),
        "the diff shows the description: {shown}"
    );
    click(&browser, "#held button.approve").await;
    browser
        .wait_for_text("#notice", "Approved; agents were told its lists changed.")
        .await;
    eventually("fx__echo listed", WAIT, || async {
        let mut a = d.initialized_agent().await;
        a.tool_names()
            .await
            .contains(&"fx__echo".to_owned())
            .then_some(())
    })
    .await;
    let r = a.call("fx__echo", json!({"text": "released"})).await;
    assert_eq!(text(&r), "released", "{r}");
    browser.close().await;
}

#[tokio::test]
async fn log_in_on_the_server_page_completes_an_oauth_login() {
    let fx = OAuthFixture::builder().start().await;
    let d = DaemonBuilder::new()
        .remote("r", &fx.mcp_url(), "")
        .start()
        .await;
    d.wait_server("r", "r needs a login", |s| s["state"] == "needs-login")
        .await;
    let Some(browser) = open(&d, "dashboard::live::login").await else {
        return;
    };
    click(&browser, "tr[data-server=r] td.name a").await;
    browser
        .wait_for_text_like("#server-auth", "needs login", |t| {
            t.starts_with("needs login")
        })
        .await;
    click(&browser, "#login").await;
    click(&browser, "#continue").await;
    // The authorization server approves at once and sends the browser to mcpd's
    // loopback redirect listener.
    browser
        .wait_for_text_like("body", "the login's end page", |t| t.contains("logged in"))
        .await;
    d.wait_server("r", "r ready", |s| s["state"] == "ready")
        .await;
    let mut a = d.initialized_agent().await;
    let r = a.call("r__echo", json!({"text": "hi"})).await;
    assert_eq!(text(&r), "hi", "{r}");
    browser.close().await;
}
