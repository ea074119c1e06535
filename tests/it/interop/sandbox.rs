//! Interop under the sandbox (`[daemon] sandbox = true`, issue #41).
//!
//! The published servers the interop tests use start confined by Landlock and answer
//! representative calls, and `ctl status --json` shows each one's sandbox.
//!
//! server-everything and mcp-server-time run shared; server-filesystem and mcp-server-git
//! run per project (`share = "project"`, `${PROJECT}` in their arguments), reached through
//! `mcpd connect` started in a git repository. Each is configured as in `sdks.rs` and
//! `projects.rs`, except server-everything, which runs as npm installs it
//! (`node_modules/.bin/mcp-server-everything`, a `#!` script): the default profile grants
//! the `node_modules` a script lives in, and nothing of a script given to `node` as an
//! argument (`command = "node"`, `args = [".../dist/index.js"]`), which then cannot be read.
//!
//! The peers come from `.ci/install-peers` (see `tests/interop/README.md`). When they are
//! missing, the tests skip with a note on stderr, or fail when `MCPD_REQUIRE_PEERS=1` (CI).

use crate::interop::projects::{
    FS_SERVER, FS_TOOL, GIT_SERVER, GIT_TOOL, GitRepo, START_WAIT, Shim, ctl_status, git_repo,
    project_peers, row, wait_instance,
};
use crate::interop::sdks::{Peers, path_str};
use crate::support::*;
use serde_json::{Value, json};

/// server-everything as npm installs it, in the peers directory.
const EVERYTHING_SERVER: &str = "node/node_modules/.bin/mcp-server-everything";

/// The peers of `project_peers`, and server-everything's npm launcher. Missing: skips, or
/// fails with `MCPD_REQUIRE_PEERS=1`, as `peers()` does.
fn sandbox_peers(test: &str) -> Option<Peers> {
    let peers = project_peers(test)?;
    let launcher = peers.dir.join(EVERYTHING_SERVER);
    if launcher.exists() {
        return Some(peers);
    }
    let what = format!(
        "interop peer missing: {}; run .ci/install-peers",
        launcher.display()
    );
    if std::env::var("MCPD_REQUIRE_PEERS").as_deref() == Ok("1") {
        panic!("{test}: {what} (MCPD_REQUIRE_PEERS=1 makes this a failure)");
    }
    eprintln!("skipped: {test}: {what}");
    None
}

/// A daemon that confines every local server: the two published servers run shared, or
/// (`projects`) server-filesystem and mcp-server-git run per project.
async fn confined_daemon(peers: &Peers, projects: bool) -> Daemon {
    let b = DaemonBuilder::new().daemon("sandbox = true");
    let b = if projects {
        b.server(
            "fs",
            path_str(&peers.dir.join(FS_SERVER)),
            &["${PROJECT}"],
            "share = \"project\"",
        )
        .server(
            "git",
            path_str(&peers.dir.join(GIT_SERVER)),
            &["--repository", "${PROJECT}"],
            "cwd = \"${PROJECT}\"\nshare = \"project\"",
        )
    } else {
        b.server(
            "time",
            path_str(&peers.time_server()),
            &["--local-timezone", "UTC"],
            "",
        )
        .server(
            "everything",
            path_str(&peers.dir.join(EVERYTHING_SERVER)),
            &["stdio"],
            "",
        )
    };
    b.start().await
}

/// The row `name` once it is ready; fails at once, with its stderr tail, when the server
/// exited or failed on the way (a confined server denied what it needs dies at start).
async fn confined_ready(d: &Daemon, name: &str) -> Value {
    eventually(&format!("{name} ready"), START_WAIT, || async {
        let s = ctl_status(d).await;
        let r = row(&s, name)?.clone();
        let exited = r["restarts"].as_u64() != Some(0)
            || !r["last_exit"].is_null()
            || r["state"] == "failed";
        assert!(
            !exited,
            "{name} did not start under the sandbox: state {}, last error {}, last exit {}\n\
             --- its stderr tail ---\n{}",
            r["state"],
            r["last_error"],
            r["last_exit"],
            stderr_tail(&r)
        );
        (r["state"] == "ready").then_some(r)
    })
    .await
}

fn stderr_tail(row: &Value) -> String {
    row["stderr_tail"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// A status row's `sandbox`: Landlock at ABI 6 or later, some paths readable and some
/// writable, any network (the default).
fn assert_confined(r: &Value) {
    let b = &r["sandbox"];
    assert_eq!(b["mechanism"], "landlock", "{} is confined: {r}", r["name"]);
    assert!(b["abi"].as_u64().is_some_and(|a| a >= 6), "{r}");
    assert!(b["read"].as_u64().is_some_and(|n| n > 0), "{r}");
    assert!(b["write"].as_u64().is_some_and(|n| n > 0), "{r}");
    assert_eq!(b["network"], "all", "{r}");
}

/// A call through a raw agent that must succeed; the text of its first block.
async fn call_ok(agent: &mut Agent, tool: &str, args: Value) -> String {
    let r = agent.call(tool, args).await;
    assert!(
        r.get("error").is_none() && r["result"]["isError"] != json!(true),
        "{tool} failed under the sandbox: {r}"
    );
    text(&r).to_owned()
}

#[tokio::test]
async fn published_shared_servers_answer_their_calls_confined_by_the_sandbox() {
    let test = "published_shared_servers_answer_their_calls_confined_by_the_sandbox";
    let Some(peers) = sandbox_peers(test) else {
        return;
    };
    let d = confined_daemon(&peers, false).await;
    for name in ["time", "everything"] {
        assert_confined(&confined_ready(&d, name).await);
    }
    let mut agent = d.initialized_agent().await;
    let echo = call_ok(&mut agent, "everything__echo", json!({ "message": "hi" })).await;
    assert_eq!(echo, "Echo: hi");
    let sum = call_ok(&mut agent, "everything__get-sum", json!({ "a": 2, "b": 3 })).await;
    assert!(sum.contains('5'), "get-sum 2 + 3: {sum}");
    let now = call_ok(
        &mut agent,
        "time__get_current_time",
        json!({ "timezone": "UTC" }),
    )
    .await;
    let now: Value = serde_json::from_str(&now).unwrap_or_else(|e| panic!("not JSON ({e}): {now}"));
    assert_eq!(now["timezone"], "UTC", "{now}");
    assert!(
        now["datetime"]
            .as_str()
            .is_some_and(|t| t.ends_with("+00:00")),
        "{now}"
    );
    // Still the processes that started: nothing died on the way.
    let s = ctl_status(&d).await;
    for name in ["time", "everything"] {
        let r = row(&s, name).unwrap_or_else(|| panic!("no {name} row in {s}"));
        assert_eq!(
            (r["state"].as_str(), r["restarts"].as_u64()),
            (Some("ready"), Some(0)),
            "{r}"
        );
        assert_confined(r);
    }
}

/// The project server rows, ready and confined, for `repo`.
async fn project_rows_confined(d: &Daemon, repo: &GitRepo) {
    for server in ["fs", "git"] {
        let r = wait_instance(d, server, repo, 1).await;
        assert_eq!(r["restarts"], 0, "{r}");
        assert_confined(&r);
    }
}

#[tokio::test]
async fn published_project_servers_work_in_their_project_confined_by_the_sandbox() {
    let test = "published_project_servers_work_in_their_project_confined_by_the_sandbox";
    let Some(peers) = sandbox_peers(test) else {
        return;
    };
    let repo = git_repo("sbx");
    let d = confined_daemon(&peers, true).await;
    let mut shim = Shim::start(&d, &repo.path).await;
    let write = "fs__write_file";
    let read = "fs__read_text_file";
    shim.wait_tools(&[FS_TOOL, write, read, GIT_TOOL]).await;

    let allowed = shim.call_text(FS_TOOL, json!({})).await;
    assert_eq!(
        allowed,
        format!("Allowed directories:\n{}", repo.path.display())
    );
    // Written and read back by the confined server, inside its project.
    let note = repo.path.join("note-sbx.txt");
    let body = "written by server-filesystem under the sandbox\n";
    let args = json!({ "path": path_str(&note), "content": body });
    shim.call_text(write, args).await;
    assert_eq!(std::fs::read_to_string(&note).expect("note-sbx.txt"), body);
    let back = shim
        .call_text(read, json!({ "path": path_str(&note) }))
        .await;
    assert_eq!(back, body);

    let status = shim
        .call_text(GIT_TOOL, json!({ "repo_path": path_str(&repo.path) }))
        .await;
    assert!(
        status.starts_with("Repository status:\nOn branch "),
        "git status: {status}"
    );
    for file in ["only-in-sbx.txt", "note-sbx.txt"] {
        assert!(status.contains(file), "git status shows {file}: {status}");
    }

    project_rows_confined(&d, &repo).await;
    shim.close().await;
}
