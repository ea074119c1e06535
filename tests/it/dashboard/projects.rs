//! The dashboard and servers run per project or per agent, against the real daemon.
//!
//! An instance's link on the overview opens its page; try-it on a project server calls
//! the instance of the project picked (or of the instance's page), refuses a project
//! without an instance, and says how one is made when there is none; the server's own row
//! offers no Start, which the daemon refuses for it; and the same in a real Chromium.

use crate::dashboard::browser::{Browser, step};
use crate::dashboard::login::{cookie_for, launch_url, origin};
use crate::projects::instances::{
    agent_in, cwd, instance, instance_ready, project_daemon, projects, show, tools_listed,
};
use crate::support::*;
use fantoccini::Locator;
use reqwest::StatusCode;

/// A logged-in client of the dashboard over plain HTTP (redirects shown, not followed).
pub(crate) struct Page {
    origin: String,
    cookie: String,
    http: reqwest::Client,
}

impl Page {
    pub(crate) async fn open(d: &Daemon) -> Page {
        let _ = http_client(); // installs the TLS provider reqwest needs
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(WAIT)
            .build()
            .expect("client");
        Page {
            origin: origin(d).await,
            cookie: cookie_for(&launch_url(d).await).await,
            http,
        }
    }

    /// `GET path`: the status and the body.
    pub(crate) async fn get(&self, path: &str) -> (StatusCode, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.origin))
            .header("cookie", &self.cookie)
            .send()
            .await
            .expect("get");
        (r.status(), r.text().await.expect("body"))
    }

    /// `POST path` with `form`, as the page's own form sends it.
    pub(crate) async fn post(&self, path: &str, form: &[(&str, &str)]) -> (StatusCode, String) {
        let r = self
            .http
            .post(format!("{}{path}", self.origin))
            .header("cookie", &self.cookie)
            .header("origin", &self.origin)
            .header("sec-fetch-site", "same-origin")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(
                url::form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(form)
                    .finish(),
            )
            .send()
            .await
            .expect("post");
        (r.status(), r.text().await.expect("body"))
    }
}

/// The `href` of the overview's link in the row of server `name`.
fn link_of(overview: &str, name: &str) -> String {
    let row = format!("data-server=\"{}\"", escaped(name));
    let at = overview
        .find(&row)
        .unwrap_or_else(|| panic!("no row {row} in {overview}"));
    let rest = &overview[at..];
    let href = rest.find("href=\"").expect("a link in the row") + "href=\"".len();
    let end = rest[href..].find('"').expect("the link's end");
    rest[href..href + end].to_owned()
}

/// `text` as the templates escape it in an attribute.
fn escaped(text: &str) -> String {
    text.replace('&', "&#38;")
        .replace('<', "&#60;")
        .replace('>', "&#62;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

/// What the page shows as the result's first text, if it shows one.
fn result_text(page: &str) -> Option<String> {
    let at = page.find("id=\"result-text-1\">")? + "id=\"result-text-1\">".len();
    let end = page[at..].find("</pre>")?;
    Some(page[at..at + end].to_owned())
}

#[tokio::test]
async fn a_project_instances_link_on_the_dashboard_opens_its_page() {
    let p = projects(1);
    let d = project_daemon("")
        .fixture_with("ag", &["--tools", "echo"], "share = \"agent\"")
        .start()
        .await;
    let mut a = agent_in(&d, &p.dirs[0]).await;
    tools_listed(&d).await;
    assert_eq!(cwd(&mut a).await, show(&p.dirs[0]));
    let echoed = a.call("ag__echo", serde_json::json!({"text": "hi"})).await;
    assert_eq!(text(&echoed), "hi", "{echoed}");
    let name = instance(&p.dirs[0]);
    let row = instance_ready(&d, &p.dirs[0]).await;
    let pid = row["pid"].to_string();
    let agents_instance = d
        .wait_status("ag's instance of this agent", |s| {
            s["servers"].as_array().is_some_and(|rows| {
                rows.iter().any(|r| {
                    r["name"].as_str().is_some_and(|n| n.starts_with("ag@")) && r["pid"].is_u64()
                })
            })
        })
        .await["servers"]
        .as_array()
        .and_then(|rows| {
            rows.iter()
                .find(|r| r["name"].as_str().is_some_and(|n| n.starts_with("ag@")))
        })
        .map(|r| r["name"].as_str().unwrap_or_default().to_owned())
        .expect("ag's instance");
    let page = Page::open(&d).await;
    let (status, overview) = page.get("/").await;
    assert_eq!(status, StatusCode::OK);
    let link = link_of(&overview, &name);
    assert!(link.starts_with("/servers/fx%40%2F"), "{link}");
    let (status, body) = page.get(&link).await;
    assert_eq!(status, StatusCode::OK, "{link}: {body}");
    assert!(
        body.contains(&format!("id=\"server-name\">{}</h2>", escaped(&name))),
        "{body}"
    );
    assert!(body.contains(&format!("<td>{pid}</td>")), "its pid: {body}");
    // It says whose instance it is, and links to its server.
    assert!(body.contains("href=\"/servers/fx\""), "{body}");
    // Its server's tools, and its own actions.
    assert!(body.contains("data-tool=\"fx__cwd\""), "{body}");
    assert!(
        body.contains(&format!("action=\"{link}/restart\"")),
        "{body}"
    );
    // An agent's instance too.
    let link = link_of(&overview, &agents_instance);
    let (status, body) = page.get(&link).await;
    assert_eq!(status, StatusCode::OK, "{link}: {body}");
    assert!(body.contains("data-tool=\"ag__echo\""), "{body}");
    // A name that is no server's is still refused.
    let (status, body) = page.get("/servers/fx%40%2Fnowhere").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(body.contains("No such server"), "{body}");
}

#[tokio::test]
async fn try_it_on_a_project_server_calls_the_instance_of_the_project_picked() {
    let p = projects(3);
    let d = project_daemon("").start().await;
    let mut agents = Vec::new();
    for dir in &p.dirs[..2] {
        let a = agent_in(&d, dir).await;
        agents.push(a);
    }
    tools_listed(&d).await;
    for (a, dir) in agents.iter_mut().zip(&p.dirs) {
        assert_eq!(cwd(a).await, show(dir));
        instance_ready(&d, dir).await;
    }
    let page = Page::open(&d).await;
    let (status, body) = page.get("/servers/fx").await;
    assert_eq!(status, StatusCode::OK);
    // A choice of the projects that have an instance, and no Start: the daemon refuses
    // to start a project server's own row.
    for dir in &p.dirs[..2] {
        let option = format!("<option>{}</option>", escaped(&show(dir)));
        assert!(body.contains(&option), "{option} in {body}");
    }
    assert!(!body.contains(&escaped(&show(&p.dirs[2]))), "{body}");
    assert!(body.contains("name=\"project\""), "{body}");
    assert!(!body.contains("id=\"start\""), "{body}");
    for dir in [&p.dirs[1], &p.dirs[0]] {
        let project = show(dir);
        let form = [("tool", "fx__cwd"), ("project", project.as_str())];
        let (status, body) = page.post("/servers/fx/call", &form).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(result_text(&body), Some(project.clone()), "{body}");
        assert!(!body.contains("-32023"), "{body}");
    }
    // A project without an instance is not started from the page.
    let other = show(&p.dirs[2]);
    let form = [("tool", "fx__cwd"), ("project", other.as_str())];
    let (status, body) = page.post("/servers/fx/call", &form).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("has no instance for"), "{body}");
    assert_eq!(result_text(&body), None, "{body}");
    let s = d.status().await;
    assert!(
        crate::projects::instances::row(&s, &instance(&p.dirs[2])).is_none(),
        "{s}"
    );
    // An instance's own page calls that instance.
    let link = format!(
        "/servers/{}",
        url::form_urlencoded::byte_serialize(instance(&p.dirs[1]).as_bytes()).collect::<String>()
    );
    let (status, body) = page
        .post(&format!("{link}/call"), &[("tool", "fx__cwd")])
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(result_text(&body), Some(show(&p.dirs[1])), "{body}");
}

#[tokio::test]
async fn try_it_on_a_project_server_without_an_instance_says_how_one_is_made() {
    let d = project_daemon("").start().await;
    d.wait_server("fx", "fx idle", |s| s["state"] == "idle")
        .await;
    let page = Page::open(&d).await;
    let (status, body) = page.get("/servers/fx").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("id=\"no-instance\""), "{body}");
    assert!(body.contains("an agent working in that project"), "{body}");
    assert!(!body.contains("class=\"call\""), "no form to call: {body}");
    assert!(!body.contains("id=\"start\""), "{body}");
    let (status, body) = page.post("/servers/fx/call", &[("tool", "fx__cwd")]).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("id=\"no-instance\""), "{body}");
    assert!(!body.contains("-32023"), "{body}");
    // Start, posted anyway, is refused by the daemon with its reason.
    let (status, body) = page.post("/servers/fx/start", &[]).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
}

#[tokio::test]
async fn in_a_browser_an_instances_link_and_the_project_chosen_reach_that_projects_instance() {
    let p = projects(2);
    let d = project_daemon("").start().await;
    let mut agents = Vec::new();
    for dir in &p.dirs {
        agents.push(agent_in(&d, dir).await);
    }
    tools_listed(&d).await;
    for (a, dir) in agents.iter_mut().zip(&p.dirs) {
        assert_eq!(cwd(a).await, show(dir));
        instance_ready(&d, dir).await;
    }
    let url = launch_url(&d).await;
    let Some(browser) = Browser::start("dashboard::projects::browser").await else {
        return;
    };
    browser.goto(&url).await;
    let name = instance(&p.dirs[1]);
    let link = format!("tr[data-server=\"{name}\"] td.name a");
    // The overview's rows are put in place again as the daemon changes: a link found
    // just before may be gone when clicked, so it is found again until a click lands.
    browser
        .wait_until("a click on the instance's link", WAIT, |c| {
            let link = link.clone();
            async move { c.find(Locator::Css(&link)).await.ok()?.click().await.ok() }
        })
        .await;
    browser.wait_for_text("#server-name", &name).await;
    browser
        .wait_for_text(
            "#call-note",
            &format!(
                "Calls from this page go to this instance, in {}.",
                show(&p.dirs[1])
            ),
        )
        .await;
    step(
        "open its server",
        browser.wait_for("#instance-of a").await.click(),
    )
    .await;
    browser.wait_for_text("#server-name", "fx").await;
    let starts = step("#start", browser.client().find_all(Locator::Css("#start"))).await;
    assert!(starts.is_empty(), "no Start on a project server's own page");
    let tool = "details.tool[data-tool=fx__cwd]";
    let summary = browser.wait_for(&format!("{tool} > summary")).await;
    step("open the tool", summary.click()).await;
    let choice = browser
        .wait_for(&format!("{tool} select[name=project]"))
        .await;
    let project = show(&p.dirs[1]);
    step("choose the project", choice.select_by_label(&project)).await;
    let call = browser.wait_for(&format!("{tool} button.call")).await;
    step("call", call.click()).await;
    browser.wait_for_text("#result-text-1", &project).await;
    browser.close().await;
}
