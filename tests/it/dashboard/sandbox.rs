//! The sandbox shown for a server run per project, against the real daemon.
//!
//! The daemon runs with `[daemon] sandbox = true`: the server's own row, which runs no
//! process, shows the confinement its instances get (in `mcpd/status`, `mcpd ctl status`
//! and the dashboard's overview), as its instances' rows do; a project server with
//! `sandbox = false` shows none in the same places.

use crate::dashboard::projects::Page;
use crate::projects::instances::{
    IN_PROJECT, agent_in, cwd, instance, instance_ready, projects, row, show,
};
use crate::support::*;

/// The text of the overview's sandbox cell in the row of server `name`.
fn sandbox_cell(overview: &str, name: &str) -> String {
    let at = overview
        .find(&format!("data-server=\"{name}\""))
        .unwrap_or_else(|| panic!("no row {name} in {overview}"));
    let cell = "<td class=\"sandbox\">";
    let start = overview[at..].find(cell).expect("a sandbox cell") + at + cell.len();
    let end = overview[start..].find("</td>").expect("the cell's end") + start;
    overview[start..end].to_owned()
}

/// The notes `mcpd ctl status` prints under server `name`.
fn notes<'a>(text: &'a str, name: &str) -> &'a str {
    let head = format!("\n{name}:\n");
    let Some(at) = text.find(&head) else {
        return "";
    };
    let body = &text[at + head.len()..];
    body.split("\n\n").next().unwrap_or(body)
}

#[tokio::test]
async fn a_project_servers_own_row_shows_the_sandbox_its_instances_get() {
    let p = projects(1);
    let d = DaemonBuilder::new()
        .daemon("sandbox = true")
        .fixture_with("fx", &["--tools", "cwd,pid"], IN_PROJECT)
        .fixture_with(
            "open",
            &["--tools", "echo"],
            &format!("{IN_PROJECT}\nsandbox = false"),
        )
        .start()
        .await;
    // Before any instance: the own rows, which run no process.
    let s = d
        .wait_status("both servers idle", |s| {
            ["fx", "open"]
                .iter()
                .all(|n| row(s, n).is_some_and(|r| r["state"] == "idle"))
        })
        .await;
    let fx = row(&s, "fx").expect("fx");
    assert_eq!(fx["sandbox"]["mechanism"], "landlock", "{fx}");
    assert_eq!(fx["sandbox"]["network"], "all", "{fx}");
    assert!(fx["pid"].is_null(), "{fx}");
    let open = row(&s, "open").expect("open");
    assert!(open["sandbox"].is_null(), "{open}");
    // Its instances are confined by that profile.
    let mut a = agent_in(&d, &p.dirs[0]).await;
    eventually("fx's tools listed", WAIT, || async {
        let mut b = d.initialized_agent().await;
        b.tool_names()
            .await
            .contains(&"fx__cwd".to_owned())
            .then_some(())
    })
    .await;
    assert_eq!(cwd(&mut a).await, show(&p.dirs[0]));
    let inst = instance_ready(&d, &p.dirs[0]).await;
    assert_eq!(inst["sandbox"]["mechanism"], "landlock", "{inst}");
    assert_eq!(inst["sandbox"]["network"], "all", "{inst}");
    let s = d.status().await;
    assert_eq!(
        row(&s, "fx").expect("fx")["sandbox"]["mechanism"],
        "landlock"
    );

    // `mcpd ctl status` says so under the server, and nothing under the unconfined one.
    let (code, text, err) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0, "{err}");
    let under = notes(&text, "fx");
    assert!(
        under.contains("sandbox: landlock ABI") && under.contains("in each instance"),
        "{text}"
    );
    let name = instance(&p.dirs[0]);
    assert!(
        notes(&text, &name).contains("read and"),
        "the instance's own paths: {text}"
    );
    assert!(!notes(&text, "open").contains("sandbox"), "{text}");

    // The overview's rows.
    let page = Page::open(&d).await;
    let (_, overview) = page.get("/").await;
    let cell = sandbox_cell(&overview, "fx");
    assert!(
        cell.starts_with("landlock (ABI ") && cell.contains("in each instance"),
        "{cell}"
    );
    assert!(sandbox_cell(&overview, &name).starts_with("landlock (ABI "));
    assert_eq!(sandbox_cell(&overview, "open"), "none");
}
