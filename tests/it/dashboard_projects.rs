//! The dashboard and servers run per project or per agent, against the real daemon: an instance's link on the overview opens its page.

use crate::dashboard::{cookie_for, launch_url, origin};
use crate::projects::{
    agent_in, cwd, instance, instance_ready, project_daemon, projects, show, tools_listed,
};
use crate::support::*;
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
