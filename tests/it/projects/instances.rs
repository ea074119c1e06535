//! Servers run per project (`share = "project"`).
//!
//! The config checks, an agent's claim of its project (accepted or refused), one instance
//! per project, its start before any call, and the tool list cached across restarts;
//! helpers for the other `projects_*` files.

use crate::support::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The table lines of a fixture server run per project, working in its project.
pub const IN_PROJECT: &str = "share = \"project\"\ncwd = \"${PROJECT}\"";

/// A daemon with the project server `fx` (tools cwd, pid, echo; its prompts and resources
/// say its project), with `extra` lines in its table.
pub fn project_daemon(extra: &str) -> DaemonBuilder {
    DaemonBuilder::new().fixture_with(
        "fx",
        &["--tools", "cwd,pid,echo", "--label", "${PROJECT}"],
        &format!("{IN_PROJECT}\n{extra}"),
    )
}

/// Project directories `p0`, `p1`, … (canonical paths) in a temp dir of their own.
pub struct Projects {
    root: tempfile::TempDir,
    pub dirs: Vec<PathBuf>,
}

impl Projects {
    pub fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.root.path()).expect("canonical temp dir")
    }
}

pub fn projects(n: usize) -> Projects {
    let root = tempfile::Builder::new()
        .prefix("mcpd-proj")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let dirs = (0..n)
        .map(|i| {
            let d = root.path().join(format!("p{i}"));
            std::fs::create_dir(&d).expect("project dir");
            std::fs::canonicalize(&d).expect("canonical project dir")
        })
        .collect();
    Projects { root, dirs }
}

pub fn show(p: &Path) -> String {
    p.display().to_string()
}

/// The notification `mcpd connect` sends first: the directory it works in.
pub fn claim(dir: &Path) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/mcpd/project", "params": {"path": dir}})
}

/// A raw agent that claims `dir` as its project, then initializes.
pub async fn agent_in(d: &Daemon, dir: &Path) -> Agent {
    let mut a = d.agent().await;
    a.send(claim(dir)).await;
    a.initialize().await;
    a
}

/// The working directory of the agent's instance of `fx`.
pub async fn cwd(a: &mut Agent) -> String {
    text(&a.call("fx__cwd", json!({})).await).to_owned()
}

/// The pid of the agent's instance of `fx`.
pub async fn pid(a: &mut Agent) -> u32 {
    let r = a.call("fx__pid", json!({})).await;
    text(&r)
        .parse()
        .unwrap_or_else(|_| panic!("not a pid: {r}"))
}

/// Waits until an instance has listed `fx`'s tools (agents see them from then on).
pub async fn tools_listed(d: &Daemon) {
    eventually("an instance listed fx's tools", WAIT, || async {
        let mut a = d.initialized_agent().await;
        let names = a.tool_names().await;
        names.contains(&"fx__cwd".to_owned()).then_some(())
    })
    .await;
}

/// The slot name of `fx`'s instance for `dir`.
pub fn instance(dir: &Path) -> String {
    format!("fx@{}", dir.display())
}

/// The status row named `name`, if any.
pub fn row<'a>(status: &'a Value, name: &str) -> Option<&'a Value> {
    status["servers"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["name"] == name))
}

/// Waits until `fx`'s instance for `dir` is ready with a process; returns its row.
pub async fn instance_ready(d: &Daemon, dir: &Path) -> Value {
    let name = instance(dir);
    let s = d
        .wait_status(&format!("{name} is ready"), |s| {
            row(s, &name).is_some_and(|r| r["state"] == "ready" && r["pid"].is_u64())
        })
        .await;
    row(&s, &name).cloned().expect("the row")
}

/// Reads the agent's lines until mcpd asks it for `roots/list`; returns that request.
pub async fn roots_request(a: &mut Agent) -> Value {
    if let Some(i) = a
        .notifications
        .iter()
        .position(|m| m["method"] == "roots/list")
    {
        return a.notifications.remove(i);
    }
    loop {
        let m = a.recv().await.expect("mcpd closed the connection");
        match m["method"].as_str() {
            Some("roots/list") => return m,
            Some(_) => a.notifications.push(m),
            None => a.stray.push(m),
        }
    }
}

/// Answers a `roots/list` request with these roots (URIs).
pub async fn answer_roots(a: &mut Agent, ask: &Value, uris: &[String]) {
    let roots: Vec<Value> = uris
        .iter()
        .map(|u| json!({"uri": u, "name": "r"}))
        .collect();
    a.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": roots}}))
        .await;
}

pub fn file_uri(p: &Path) -> String {
    format!("file://{}", p.display())
}

/// A legacy agent that declares `roots`, after `before` (a claim, a profile choice).
pub async fn roots_agent(d: &Daemon, before: impl AsyncFnOnce(&mut Agent)) -> Agent {
    let mut a = d.agent().await;
    before(&mut a).await;
    let caps = json!({"roots": {"listChanged": true}});
    let r = a
        .request(
            "initialize",
            Some(json!({"protocolVersion": "2025-06-18", "capabilities": caps, "clientInfo": {"name": "it", "version": "1"}})),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
    a.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    a
}

async fn check_config(text: &str) -> (i32, String) {
    let dir = tempfile::Builder::new()
        .prefix("mcpd-cfg")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let path = dir.path().join("mcpd.toml");
    std::fs::write(&path, text).expect("write config");
    let (code, _, err) = run_mcpd(
        &["check-config", "--config", path.to_str().expect("utf-8")],
        None,
    )
    .await;
    (code, err)
}

#[tokio::test]
async fn check_config_refuses_misplaced_project_settings_and_accepts_a_project_server() {
    let fx = serde_json::to_string(fixture_bin()).expect("json");
    let local = |body: &str| format!("[servers.fx]\ncommand = {fx}\n{body}\n");
    let refused = [
        (
            local("share = \"project\"\nargs = [\"--tools\", \"echo\"]"),
            "servers.fx.share",
        ),
        (
            local("args = [\"--label\", \"${PROJECT}\"]"),
            "servers.fx.args[1]",
        ),
        (
            local("share = \"agent\"\ncwd = \"${PROJECT}\""),
            "servers.fx.cwd",
        ),
        (
            local("env = { ROOT = \"${PROJECT_NAME}\" }"),
            "servers.fx.env.ROOT",
        ),
        (local("max_projects = 2"), "servers.fx.max_projects"),
        (
            local("share = \"project\"\ncwd = \"${PROJECT}\"\nmax_projects = 0"),
            "servers.fx.max_projects",
        ),
        (
            local("share = \"project\"\ncwd = \"${PROJECT}\"\nmax_projects = 65"),
            "servers.fx.max_projects",
        ),
        (
            "[servers.r]\nurl = \"http://127.0.0.1:9/${PROJECT_NAME}\"\n".to_owned(),
            "servers.r.url",
        ),
        (
            "[servers.r]\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = { X-Dir = \"${PROJECT}\" }\n"
                .to_owned(),
            "servers.r.headers",
        ),
        (
            local("share = \"project\"\ncwd = \"${PROJECT}\"")
                + "[profiles.p]\nproject = \"relative/dir\"\n",
            "profiles.p.project",
        ),
    ];
    for (config, key) in refused {
        let (code, err) = check_config(&config).await;
        assert_eq!(code, 78, "refused with exit 78:\n{config}\n{err}");
        assert!(
            err.contains(key),
            "the message names {key}:\n{config}\n{err}"
        );
    }
    let good = local(
        "share = \"project\"\nargs = [\"--label\", \"${PROJECT_NAME}\"]\ncwd = \"${PROJECT}\"\nenv = { ROOT = \"${PROJECT}\" }\nmax_projects = 64",
    ) + "[profiles.p]\nproject = \"/srv/app\"\n";
    let (code, err) = check_config(&good).await;
    assert_eq!(
        code, 0,
        "a valid project config is accepted:\n{good}\n{err}"
    );
}

#[tokio::test]
async fn agents_in_two_projects_get_two_instances_and_a_third_shares_the_first() {
    let p = projects(2);
    let d = project_daemon("")
        .fixture("plain", &["--tools", "echo"])
        .start()
        .await;
    let mut a = agent_in(&d, &p.dirs[0]).await;
    let mut b = agent_in(&d, &p.dirs[1]).await;
    tools_listed(&d).await;
    assert_eq!(cwd(&mut a).await, show(&p.dirs[0]));
    assert_eq!(cwd(&mut b).await, show(&p.dirs[1]));
    let (pa, pb) = (pid(&mut a).await, pid(&mut b).await);
    assert_ne!(pa, pb, "two projects, two processes");
    // A third agent names the first project through a symlink: the same canonical project.
    let link = p.root().join("link-to-p0");
    std::os::unix::fs::symlink(&p.dirs[0], &link).expect("symlink");
    let mut c = agent_in(&d, &link).await;
    assert_eq!(
        pid(&mut c).await,
        pa,
        "the third agent reuses the first instance"
    );
    assert_eq!(cwd(&mut c).await, show(&p.dirs[0]));

    let (n0, n1) = (instance(&p.dirs[0]), instance(&p.dirs[1]));
    let s = eventually(
        "ctl status counts 2 agents in p0 and 1 in p1",
        WAIT,
        || async {
            let (code, out, err) = d.run_cli(&["ctl", "status", "--json"]).await;
            assert_eq!(code, 0, "{err}");
            let s: Value = serde_json::from_str(&out).expect("status --json prints JSON");
            let counts = (
                row(&s, &n0)?["agents"].as_u64(),
                row(&s, &n1)?["agents"].as_u64(),
            );
            (counts == (Some(2), Some(1))).then_some(s)
        },
    )
    .await;
    for (name, dir, pid) in [(&n0, &p.dirs[0], pa), (&n1, &p.dirs[1], pb)] {
        let r = row(&s, name).expect("instance row");
        assert_eq!(r["project"], show(dir), "{r}");
        assert_eq!(r["share"], "project", "{r}");
        assert_eq!(r["state"], "ready", "{r}");
        assert_eq!(status_pid(r), Some(pid), "{r}");
        assert!(
            r["idle_secs"].is_u64(),
            "an instance row says how long it idles: {r}"
        );
    }
    let t = row(&s, "fx").expect("the template row");
    assert_eq!(t["share"], "project", "{t}");
    assert_eq!(t["instances"], 2, "{t}");
    assert!(t["pid"].is_null(), "the template never runs itself: {t}");
    assert!(t.get("project").is_none_or(Value::is_null), "{t}");
    assert_eq!(row(&s, "plain").expect("plain")["share"], "shared");
    let fx_rows = s["servers"].as_array().expect("rows").iter();
    let count = fx_rows
        .filter(|r| r["name"].as_str().is_some_and(|n| n.starts_with("fx@")))
        .count();
    assert_eq!(count, 2, "{s}");
}

#[tokio::test]
async fn claims_of_root_home_hidden_home_dirs_files_and_missing_paths_give_no_project() {
    let p = projects(1);
    let home = p.root().join("home");
    for d in ["home/.codex", "home/code"] {
        std::fs::create_dir_all(p.root().join(d)).expect("dir");
    }
    let file = p.root().join("file.txt");
    std::fs::write(&file, "x").expect("file");
    let d = project_daemon("").env("HOME", &show(&home)).start().await;
    let _first = agent_in(&d, &p.dirs[0]).await;
    tools_listed(&d).await;
    let refused = [
        PathBuf::from("/"),
        home.clone(),
        home.join(".codex"),
        file,
        p.root().join("missing"),
        PathBuf::from("relative/dir"),
    ];
    for dir in &refused {
        let mut a = agent_in(&d, dir).await;
        let r = a.call("fx__cwd", json!({})).await;
        assert_eq!(error_code(&r), Some(-32023), "{}: {r}", dir.display());
        assert!(error_message(&r).contains("--project"), "{r}");
    }
    // A directory in home that is not hidden is a project.
    let mut a = agent_in(&d, &home.join("code")).await;
    assert_eq!(cwd(&mut a).await, show(&home.join("code")));
    let s = d.status().await;
    assert_eq!(
        row(&s, "fx").expect("fx")["instances"],
        2,
        "no instance for a refused claim: {s}"
    );
}

#[tokio::test]
async fn a_claimed_project_starts_its_instance_before_any_call_and_its_list_reaches_agents() {
    let p = projects(1);
    let d = project_daemon("").start().await;
    // Before any instance has listed, fx lists no tools, and a call of an agent without
    // a project says what it lacks (with a project, it would wait for its instance).
    let mut early = d.initialized_agent().await;
    let names = early.tool_names().await;
    assert!(!names.iter().any(|n| n.starts_with("fx__")), "{names:?}");
    let r = early.call("fx__cwd", json!({})).await;
    assert_eq!(error_code(&r), Some(-32023), "{r}");
    assert!(error_message(&r).contains("no project"), "{r}");
    assert_eq!(d.server_status("fx").await["instances"], 0);

    let _a = agent_in(&d, &p.dirs[0]).await;
    let r = instance_ready(&d, &p.dirs[0]).await;
    let pid = status_pid(&r).expect("pid");
    let dir = std::fs::read_link(format!("/proc/{pid}/cwd")).expect("the instance's cwd");
    assert_eq!(dir, p.dirs[0], "it runs in the project");
    // The agent that connected first hears of the tools.
    let changed = |m: &Value| m["method"] == "notifications/tools/list_changed";
    if !early.notifications.iter().any(changed) {
        // `recv` waits at most WAIT for each line.
        while !changed(&early.recv().await.expect("mcpd closed the connection")) {}
    }
    assert_eq!(early.tool_names().await, ["fx__cwd", "fx__echo", "fx__pid"]);
}

#[tokio::test]
async fn the_tools_an_instance_listed_are_listed_after_a_restart_before_any_instance_runs() {
    let p = projects(1);
    let mut d = project_daemon("").start().await;
    let a = agent_in(&d, &p.dirs[0]).await;
    tools_listed(&d).await;
    drop(a);
    d.restart_daemon().await;
    let mut fresh = d.initialized_agent().await;
    assert_eq!(fresh.tool_names().await, ["fx__cwd", "fx__echo", "fx__pid"]);
    let s = d.status().await;
    assert_eq!(row(&s, "fx").expect("fx")["instances"], 0, "{s}");
    // Listed, so a call without a project says what is missing (not "retry").
    let r = fresh.call("fx__cwd", json!({})).await;
    assert_eq!(error_code(&r), Some(-32023), "{r}");
}
