//! Servers run per project, over time.
//!
//! `max_projects`, `idle_timeout`, a deleted project, `ctl restart/stop/start`, and no
//! instance outliving a killed daemon.

use crate::projects::instances::*;
use crate::support::*;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// The pid of `fx`'s instance for `dir` in a status, if it has a row with one.
fn instance_pid(s: &Value, dir: &Path) -> Option<u32> {
    row(s, &instance(dir)).and_then(status_pid)
}

fn fixtures(pids: &[u32]) -> KillOnDrop {
    KillOnDrop(pids.iter().map(|p| (*p, "mcpd-fixture")).collect())
}

#[tokio::test]
async fn past_max_projects_a_call_is_refused_while_each_instance_has_agents_then_evicts_an_idle_one()
 {
    let p = projects(3);
    let d = project_daemon("max_projects = 2").start().await;
    let mut a0 = agent_in(&d, &p.dirs[0]).await;
    let mut a1 = agent_in(&d, &p.dirs[1]).await;
    tools_listed(&d).await;
    let pid0 = pid(&mut a0).await;
    let pid1 = pid(&mut a1).await;
    let _cleanup = fixtures(&[pid0, pid1]);
    let mut a2 = agent_in(&d, &p.dirs[2]).await;
    let r = a2.call("fx__cwd", json!({})).await;
    assert_eq!(error_code(&r), Some(-32013), "{r}");
    assert!(error_message(&r).contains("max_projects"), "{r}");
    let s = d.status().await;
    assert_eq!(row(&s, "fx").expect("fx")["instances"], 2, "{s}");
    assert!(row(&s, &instance(&p.dirs[2])).is_none(), "{s}");

    drop(a1);
    let n1 = instance(&p.dirs[1]);
    d.wait_status("no agent works in p1 any more", |s| {
        row(s, &n1).is_some_and(|r| r["agents"] == 0)
    })
    .await;
    assert_eq!(
        cwd(&mut a2).await,
        show(&p.dirs[2]),
        "the call goes through now"
    );
    eventually("the evicted instance exits", WAIT, || async {
        (!alive(pid1)).then_some(())
    })
    .await;
    assert!(alive(pid0), "the instance with an agent stays");
    let s = d
        .wait_status("p1's row goes", |s| row(s, &n1).is_none())
        .await;
    assert_eq!(instance_pid(&s, &p.dirs[0]), Some(pid0), "{s}");
    assert_eq!(row(&s, "fx").expect("fx")["instances"], 2, "{s}");
}

#[tokio::test]
async fn an_idle_instance_stops_and_its_row_goes_then_a_call_makes_a_new_one() {
    let p = projects(1);
    let d = project_daemon("idle_timeout = \"1s\"").start().await;
    let mut a = agent_in(&d, &p.dirs[0]).await;
    let first = status_pid(&instance_ready(&d, &p.dirs[0]).await).expect("pid");
    let _cleanup = fixtures(&[first]);
    tools_listed(&d).await;
    let name = instance(&p.dirs[0]);
    d.wait_status("the idle instance's row goes", |s| row(s, &name).is_none())
        .await;
    eventually("the idle instance exits", WAIT, || async {
        (!alive(first)).then_some(())
    })
    .await;
    assert_eq!(d.server_status("fx").await["instances"], 0);
    let again = pid(&mut a).await;
    let _cleanup2 = fixtures(&[again]);
    assert_ne!(again, first, "a new process");
    let s = d.status().await;
    let r = row(&s, &name).expect("a new row");
    assert_eq!(status_pid(r), Some(again), "{r}");
    assert_eq!(r["project"], show(&p.dirs[0]), "{r}");
}

#[tokio::test]
async fn deleting_a_project_directory_stops_its_instance() {
    let p = projects(2);
    let d = project_daemon("").start().await;
    let mut a0 = agent_in(&d, &p.dirs[0]).await;
    let _a1 = agent_in(&d, &p.dirs[1]).await;
    let pid0 = status_pid(&instance_ready(&d, &p.dirs[0]).await).expect("pid");
    let pid1 = status_pid(&instance_ready(&d, &p.dirs[1]).await).expect("pid");
    let _cleanup = fixtures(&[pid0, pid1]);
    std::fs::remove_dir_all(&p.dirs[0]).expect("remove the project");
    // The check runs every 30 s.
    let n0 = instance(&p.dirs[0]);
    eventually(
        "the instance of the deleted project stops",
        Duration::from_secs(45),
        || async {
            let s = d.status().await;
            (!alive(pid0) && row(&s, &n0).is_none()).then_some(())
        },
    )
    .await;
    assert!(alive(pid1), "the other project's instance runs on");
    assert_eq!(instance_pid(&d.status().await, &p.dirs[1]), Some(pid1));
    let r = a0.call("fx__cwd", json!({})).await;
    assert_eq!(error_code(&r), Some(-32023), "{r}");
    assert!(error_message(&r).contains("does not exist"), "{r}");
}

#[tokio::test]
async fn sigkill_of_the_daemon_leaves_no_instance_or_grandchild_running() {
    let p = projects(2);
    let b = DaemonBuilder::new();
    let rec = b.dir().join("rec");
    let rec_arg = rec.to_str().expect("utf-8").to_owned();
    // Instances that outlive their stdin and SIGTERM, each with a `sleep` in its group:
    // only the sentinel's kill of their process groups ends them all.
    let args = [
        "--tools",
        "cwd,pid,echo",
        "--ignore-sigterm",
        "--spawn-grandchild",
        "--record",
        &rec_arg,
    ];
    let mut d = b.fixture_with("fx", &args, IN_PROJECT).start().await;
    let _a0 = agent_in(&d, &p.dirs[0]).await;
    let _a1 = agent_in(&d, &p.dirs[1]).await;
    let mut pids = Vec::new();
    for dir in &p.dirs {
        let pid = status_pid(&instance_ready(&d, dir).await).expect("pid");
        let gc = eventually("the grandchild pid is recorded", WAIT, || {
            let rec = rec.clone();
            async move { recorded_grandchild(&rec, pid) }
        })
        .await;
        pids.extend([pid, gc]);
    }
    let _cleanup = KillOnDrop(
        pids.iter()
            .enumerate()
            .map(|(i, p)| (*p, if i % 2 == 0 { "mcpd-fixture" } else { "sleep" }))
            .collect(),
    );
    assert!(pids.iter().all(|p| alive(*p)), "{pids:?}");
    d.signal(nix::sys::signal::Signal::SIGKILL);
    assert_eq!(d.wait_exit().await, None, "killed by a signal");
    // Nobody may reap them now: a zombie is accepted, a running process is not.
    eventually(
        "every instance and grandchild exits after the daemon is killed",
        WAIT,
        || async { pids.iter().all(|p| !alive(*p)).then_some(()) },
    )
    .await;
}

/// Waits until the instances of `dirs` are ready with pids other than `old`; their pids.
async fn new_pids(d: &Daemon, dirs: &[&Path], old: &[u32]) -> Vec<u32> {
    let s = d
        .wait_status("the instances run again with new processes", |s| {
            dirs.iter().all(|dir| {
                row(s, &instance(dir)).is_some_and(|r| {
                    r["state"] == "ready" && status_pid(r).is_some_and(|p| !old.contains(&p))
                })
            })
        })
        .await;
    dirs.iter()
        .map(|dir| instance_pid(&s, dir).expect("pid"))
        .collect()
}

#[tokio::test]
async fn ctl_restart_and_stop_act_on_every_instance_and_start_is_refused() {
    let p = projects(2);
    let d = project_daemon("").start().await;
    let mut a0 = agent_in(&d, &p.dirs[0]).await;
    let _a1 = agent_in(&d, &p.dirs[1]).await;
    let (d0, d1) = (p.dirs[0].as_path(), p.dirs[1].as_path());
    let old = [
        status_pid(&instance_ready(&d, d0).await).expect("pid"),
        status_pid(&instance_ready(&d, d1).await).expect("pid"),
    ];
    let _cleanup = fixtures(&old);

    let (code, out, err) = d.run_cli(&["ctl", "start", "fx"]).await;
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("per agent or per project"), "{err}");

    let (code, _, err) = d.run_cli(&["ctl", "restart", "fx"]).await;
    assert_eq!(code, 0, "{err}");
    let now = new_pids(&d, &[d0, d1], &old).await;
    let _cleanup2 = fixtures(&now);
    eventually("the old processes exit", WAIT, || async {
        old.iter().all(|p| !alive(*p)).then_some(())
    })
    .await;

    // One instance by its name.
    let one = instance(d0);
    let (code, _, err) = d.run_cli(&["ctl", "restart", &one]).await;
    assert_eq!(code, 0, "{err}");
    let p0 = new_pids(&d, &[d0], &now).await[0];
    let _cleanup3 = fixtures(&[p0]);
    assert_eq!(
        instance_pid(&d.status().await, d1),
        Some(now[1]),
        "the other one is untouched"
    );
    assert!(alive(now[1]));

    let (code, _, err) = d.run_cli(&["ctl", "stop", "fx"]).await;
    assert_eq!(code, 0, "{err}");
    eventually("every instance stops", WAIT, || async {
        (!alive(p0) && !alive(now[1])).then_some(())
    })
    .await;
    // The next call makes its project's instance run again.
    tools_listed(&d).await;
    let back = pid(&mut a0).await;
    let _cleanup4 = fixtures(&[back]);
    assert!(![p0, now[1]].contains(&back), "a new process: {back}");
    assert_eq!(cwd(&mut a0).await, show(d0));
}

#[tokio::test]
async fn past_max_projects_the_instance_out_of_use_longest_is_the_one_evicted() {
    let p = projects(3);
    let d = project_daemon("max_projects = 2").start().await;
    let mut a0 = agent_in(&d, &p.dirs[0]).await;
    tools_listed(&d).await;
    let pid0 = pid(&mut a0).await;
    let mut a1 = agent_in(&d, &p.dirs[1]).await;
    let pid1 = pid(&mut a1).await;
    let _cleanup = fixtures(&[pid0, pid1]);
    let (n0, n1) = (instance(&p.dirs[0]), instance(&p.dirs[1]));
    // p1's agent leaves first, though p0's instance was called first: p1's has been out
    // of use longest.
    drop(a1);
    d.wait_status("no agent works in p1", |s| {
        row(s, &n1).is_some_and(|r| r["agents"] == 0)
    })
    .await;
    assert_eq!(pid(&mut a0).await, pid0);
    drop(a0);
    d.wait_status("no agent works in p0", |s| {
        row(s, &n0).is_some_and(|r| r["agents"] == 0)
    })
    .await;
    let mut a2 = agent_in(&d, &p.dirs[2]).await;
    assert_eq!(cwd(&mut a2).await, show(&p.dirs[2]));
    let s = d
        .wait_status("one instance was evicted", |s| {
            row(s, &n0).is_none() || row(s, &n1).is_none()
        })
        .await;
    assert!(
        row(&s, &n1).is_none() && row(&s, &n0).is_some(),
        "p1's instance (its agent left first) goes, p0's stays: {s}"
    );
}

/// `config` with the `[servers.fx]` table (a project server) replaced by one with `args`.
fn with_fx(config: &str, args: &[&str]) -> String {
    let kept = config
        .split("[servers.fx]")
        .next()
        .expect("text")
        .to_owned();
    let args = serde_json::to_string(args).expect("json");
    let cmd = serde_json::to_string(fixture_bin()).expect("json");
    format!("{kept}[servers.fx]\ncommand = {cmd}\nargs = {args}\n{IN_PROJECT}\n")
}

#[tokio::test]
async fn reload_adding_a_project_server_never_runs_its_template() {
    let p = projects(1);
    let d = DaemonBuilder::new()
        .fixture("plain", &["--tools", "echo"])
        .start()
        .await;
    d.wait_ready().await;
    let base = std::fs::read_to_string(&d.config).expect("config");
    let tools = ["--tools", "cwd,pid,echo", "--label", "${PROJECT}"];
    std::fs::write(&d.config, with_fx(&base, &tools)).expect("write config");
    let (code, out, err) = d.run_cli(&["ctl", "reload"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("added fx"), "{out}");
    let mut a = agent_in(&d, &p.dirs[0]).await;
    tools_listed(&d).await;
    assert_eq!(cwd(&mut a).await, show(&p.dirs[0]));
    let t = d.server_status("fx").await;
    let never_ran = t["pid"].is_null() && t["state"] == "idle" && t["last_error"].is_null();
    assert!(
        never_ran,
        "an added project server's template never runs: {t}"
    );
}

#[tokio::test]
async fn reload_changing_a_project_server_restarts_its_instances_on_the_new_config() {
    let p = projects(1);
    let d = project_daemon("").start().await;
    let base = std::fs::read_to_string(&d.config).expect("config");
    let mut a = agent_in(&d, &p.dirs[0]).await;
    tools_listed(&d).await;
    let before = pid(&mut a).await;
    let _cleanup = fixtures(&[before]);
    let relabeled = ["--tools", "cwd,pid,echo", "--label", "new-${PROJECT_NAME}"];
    std::fs::write(&d.config, with_fx(&base, &relabeled)).expect("write config");
    let (code, out, err) = d.run_cli(&["ctl", "reload"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("changed fx"), "{out}");
    let row0 = instance(&p.dirs[0]);
    let s = d
        .wait_status("the instance runs again on the new config", |s| {
            row(s, &row0).is_some_and(|r| {
                r["state"] == "ready" && status_pid(r).is_some_and(|p| p != before)
            })
        })
        .await;
    let _cleanup2 = fixtures(&[instance_pid(&s, &p.dirs[0]).expect("pid")]);
    let greet = json!({"name": "fx__greet", "arguments": {"name": "x"}});
    let r = a.request("prompts/get", Some(greet)).await;
    let text = &r["result"]["messages"][0]["content"]["text"];
    assert_eq!(text, "Hello, x! (from new-p0)", "{r}");
    let t = d.server_status("fx").await;
    let never_ran = t["pid"].is_null() && t["last_error"].is_null();
    assert!(
        never_ran,
        "a changed project server's template never runs: {t}"
    );
}

#[tokio::test]
async fn reload_removing_a_project_server_stops_its_instances() {
    let p = projects(1);
    let d = project_daemon("")
        .fixture("plain", &["--tools", "echo"])
        .start()
        .await;
    let base = std::fs::read_to_string(&d.config).expect("config");
    let _a = agent_in(&d, &p.dirs[0]).await;
    let old = status_pid(&instance_ready(&d, &p.dirs[0]).await).expect("pid");
    let _cleanup = fixtures(&[old]);
    let start = base.find("[servers.fx]").expect("fx table");
    let end = base.find("[servers.plain]").expect("plain table");
    std::fs::write(&d.config, format!("{}{}", &base[..start], &base[end..])).expect("write");
    let (code, out, err) = d.run_cli(&["ctl", "reload"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("removed fx"), "{out}");
    eventually("the instance stops", WAIT, || async {
        (!alive(old)).then_some(())
    })
    .await;
    let s = d
        .wait_status("no fx row is left", |s| {
            s["servers"].as_array().is_some_and(|rows| {
                rows.iter()
                    .all(|r| r["name"].as_str().is_some_and(|n| !n.starts_with("fx")))
            })
        })
        .await;
    assert!(row(&s, "plain").is_some(), "{s}");
}
