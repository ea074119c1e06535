//! A new user's first run.
//!
//! A package runner's first start is not killed while it installs, a call and the first
//! list wait for servers still starting, a broken package cache is told with the command
//! that clears it, and status shows only real errors.

use crate::projects::instances::{IN_PROJECT, agent_in, projects};
use crate::support::*;
use serde_json::{Value, json};
use std::path::Path;

/// A stand-in for a package runner: on its first run (per `NAME`) it "installs" for
/// about 3 s, and if it is stopped then it leaves `interrupted-NAME` behind, as a killed
/// `npx -y` leaves a half-written cache; then it runs the fixture server.
fn runner_script(dir: &Path, program: &str) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    let path = bin.join(program);
    let script = format!(
        "#!/bin/sh\n\
         marks={marks}\n\
         if [ ! -e \"$marks/installed-$NAME\" ]; then\n\
           trap 'touch \"$marks/interrupted-$NAME\"; exit 143' TERM\n\
           echo \"installing the package\" >&2\n\
           i=0; while [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done\n\
           touch \"$marks/installed-$NAME\"\n\
         fi\n\
         exec {fixture} \"$@\"\n",
        marks = dir.display(),
        fixture = fixture_bin(),
    );
    std::fs::write(&path, script).expect("write script");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path.to_str().expect("utf-8 path").to_owned()
}

/// A server's table: its marker name and a start timeout far shorter than the install.
fn runner_table(name: &str, health: &str) -> String {
    format!(
        "env = {{ NAME = \"{name}\" }}\n[servers.{name}.health]\nstartup_timeout = \"1s\"\n{health}"
    )
}

#[tokio::test]
async fn a_package_runners_first_start_is_not_killed_while_it_installs() {
    let b = DaemonBuilder::new();
    let npx = runner_script(b.dir(), "npx");
    let dir = b.dir().to_owned();
    // `patient` has the first-start allowance (the default); `hasty` has it cut to the
    // start timeout: the protection off, on the same machine in the same run.
    let d = b
        .server("patient", &npx, &[], &runner_table("patient", ""))
        .server(
            "hasty",
            &npx,
            &[],
            &runner_table("hasty", "first_start_timeout = \"1s\""),
        )
        .start()
        .await;
    eventually("the hasty start was stopped mid-install", WAIT, || async {
        dir.join("interrupted-hasty").exists().then_some(())
    })
    .await;
    let patient = d
        .wait_server("patient", "the patient server is ready", |r| {
            r["state"] == "ready"
        })
        .await;
    assert!(
        !dir.join("interrupted-patient").exists(),
        "the first start was not stopped: {patient}"
    );
    assert_eq!(patient["restarts"], 0, "started once: {patient}");
    assert!(patient["last_error"].is_null(), "{patient}");
}

#[tokio::test]
async fn a_call_to_a_server_still_starting_waits_for_it() {
    // No cached catalog: a first run.
    let d = DaemonBuilder::new()
        .fixture("slow", &["--startup-delay-ms", "4000"])
        .start()
        .await;
    let s = d.server_status("slow").await;
    assert_eq!(s["state"], "starting", "{s}");
    let mut a = d.initialized_agent().await;
    let r = a.call("slow__echo", json!({"text": "waited"})).await;
    assert_eq!(text(&r), "waited", "{r}");
}

#[tokio::test]
async fn a_sessions_first_tool_list_waits_for_servers_still_starting() {
    let d = DaemonBuilder::new()
        .fixture("quick", &[])
        .fixture("slow", &["--startup-delay-ms", "1500"])
        .start()
        .await;
    let s = d.server_status("slow").await;
    assert_eq!(s["state"], "starting", "{s}");
    let mut a = d.initialized_agent().await;
    let names = a.tool_names().await;
    for tool in ["quick__echo", "slow__echo"] {
        assert!(names.contains(&tool.to_owned()), "{tool} in {names:?}");
    }
}

#[tokio::test]
async fn a_first_call_to_a_project_server_waits_for_its_instance() {
    let p = projects(1);
    let d = DaemonBuilder::new()
        .fixture_with(
            "fx",
            &["--tools", "cwd,pid,echo", "--startup-delay-ms", "1500"],
            IN_PROJECT,
        )
        .start()
        .await;
    let mut a = agent_in(&d, &p.dirs[0]).await;
    let r = a.call("fx__cwd", json!({})).await;
    assert_eq!(text(&r), p.dirs[0].display().to_string(), "{r}");
}

#[tokio::test]
async fn a_broken_package_cache_is_told_with_the_command_that_clears_it() {
    let b = DaemonBuilder::new();
    let bin = b.dir().join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    let npx = bin.join("npx");
    std::fs::write(
        &npx,
        "#!/bin/sh\necho \"Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'zod' imported from $HOME/.npm/_npx/9f2/node_modules/x/index.js\" >&2\nexit 1\n",
    )
    .expect("write npx");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&npx, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let d = b
        .server("mem", npx.to_str().expect("utf-8"), &["-y", "x"], "")
        .start()
        .await;
    let s = d
        .wait_server("mem", "the server ended with an error", |r| {
            r["last_error"].is_string()
        })
        .await;
    let e = s["last_error"].as_str().unwrap_or_default();
    assert!(e.contains("rm -rf ~/.npm/_npx"), "{s}");
    assert!(e.contains("mcpd ctl restart mem"), "{s}");
}

/// A ready server has no last error: not its ordinary stderr, not an error of a start
/// that failed before it became ready.
#[tokio::test]
async fn a_ready_server_shows_no_stale_or_ordinary_stderr_as_its_error() {
    let b = DaemonBuilder::new();
    let marks = b.dir().display().to_string();
    let script = b.dir().join("slow-once");
    let text = format!(
        "#!/bin/sh\nif [ ! -e {marks}/started ]; then touch {marks}/started; sleep 5; fi\nexec {} \"$@\"\n",
        fixture_bin()
    );
    std::fs::write(&script, text).expect("write script");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let d = b
        .server(
            "flaky",
            script.to_str().expect("utf-8"),
            &["--stderr-noise", "3"],
            "[servers.flaky.health]\nstartup_timeout = \"1s\"",
        )
        .start()
        .await;
    // The first start is stopped at its 1 s timeout; the next one starts at once.
    let s = d
        .wait_server("flaky", "ready after a failed start", |r| {
            r["state"] == "ready" && r["restarts"].as_u64() >= Some(1)
        })
        .await;
    assert!(s["last_error"].is_null(), "{s}");
    let history: Vec<&str> = s["history"]
        .as_array()
        .map(|h| h.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        history.iter().any(|h| h.contains("startup_timeout")),
        "the failed start stays in the history: {history:?}"
    );
    let (code, out, err) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("last error"), "{out}");
    assert!(!out.contains("startup noise"), "{out}");
}

/// A server that fails to start ends `failed` like any crash loop, and is not taken for a
/// legacy server that quits on `server/discover` (nothing about its era is remembered).
#[tokio::test]
async fn a_server_that_fails_to_start_ends_failed_and_no_era_is_remembered_for_it() {
    let d = DaemonBuilder::new()
        .server("bad", "false", &[], "")
        .fixture("fx", &[])
        .start()
        .await;
    let s = d
        .wait_server("bad", "bad is failed", |r| r["state"] == "failed")
        .await;
    assert!(
        s["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("crashed"),
        "{s}"
    );
    d.wait_server("fx", "fx is ready", |r| r["state"] == "ready")
        .await;
    let (code, out, err) = d.run_cli(&["ctl", "status", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains("answered initialize on its next start"),
        "{out}"
    );
    let eras = std::fs::read_to_string(d.dir().join("state/eras.json")).unwrap_or_default();
    assert!(eras.contains("\"fx\""), "fx's era is remembered: {eras}");
    assert!(!eras.contains("\"bad\""), "bad's is not: {eras}");
}
