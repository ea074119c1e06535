//! A confined server's own mount and PID namespaces.
//!
//! The VCS files of a tree it may write stay read-only, `/dev/shm` is its own, and
//! `/proc` shows its own processes only; each checked against a daemon without user
//! namespaces (`MCPD_USERNS=0`), where the attack works.

use crate::sandbox::escapes::{ESCAPE, attempt};
use crate::support::*;
use serde_json::json;
use std::os::unix::process::CommandExt;
use std::path::Path;

/// The escape tools and the rename attempt.
fn tools() -> String {
    format!("{ESCAPE},try_rename")
}

/// A daemon confining every server, with user namespaces (`userns`) or as if they did not
/// work: `boxed` and `boxed2` may write `repo` (and `repo2`), `open` is unconfined.
async fn daemon(userns: bool, repo: &Path, repo2: &Path) -> Daemon {
    let tools = tools();
    let grant = |r: &Path| format!("sandbox = {{ write = [\"{}\"] }}", r.display());
    let mut b = DaemonBuilder::new()
        .daemon("sandbox = true")
        .fixture_with("boxed", &["--tools", &tools], &grant(repo))
        .fixture_with("boxed2", &["--tools", &tools], &grant(repo2))
        .fixture_with("open", &["--tools", &tools], "sandbox = false");
    if !userns {
        b = b.env("MCPD_USERNS", "0");
    }
    let d = b.start().await;
    d.wait_ready().await;
    d
}

/// A directory holding a repository's `.git` with its config and a hooks directory.
fn repository(under: &Path, name: &str) -> std::path::PathBuf {
    let repo = under.join(name);
    std::fs::create_dir_all(repo.join(".git/hooks")).unwrap();
    std::fs::write(repo.join(".git/config"), "[core]\n").unwrap();
    repo
}

/// The note of `name`'s sandbox in `mcpd/status`.
async fn note(d: &Daemon, name: &str) -> String {
    let status = d.status().await;
    status["servers"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == name))
        .and_then(|s| s["sandbox"]["note"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_confined_server_cannot_change_the_git_config_or_hooks_of_a_tree_it_may_write_nor_move_git_away()
 {
    let dir = tempfile::tempdir().unwrap();
    for userns in [true, false] {
        let repo = repository(dir.path(), &format!("repo-{userns}"));
        let repo2 = repository(dir.path(), &format!("other-{userns}"));
        let d = daemon(userns, &repo, &repo2).await;
        let mut a = d.initialized_agent().await;
        let git = repo.join(".git");
        // Work in the tree, and git's own files besides these, stays possible.
        for path in [repo.join("notes.txt"), git.join("index")] {
            let r = attempt(&mut a, "boxed", "try_write", json!({"path": path})).await;
            assert!(
                r.starts_with("ok"),
                "userns={userns}: {}: {r}",
                path.display()
            );
        }
        let attacks = [
            (
                "setting core.fsmonitor in .git/config",
                "try_write",
                json!({"path": git.join("config"), "text": "[core]\n\tfsmonitor = sh -c 'cat ~/.ssh/id_ed25519'\n"}),
            ),
            (
                "adding a pre-commit hook",
                "try_write",
                json!({"path": git.join("hooks/pre-commit"), "text": "#!/bin/sh\nid\n"}),
            ),
            (
                "moving .git away to put another in its place",
                "try_rename",
                json!({"from": git, "to": repo.join("git-moved")}),
            ),
        ];
        for (what, tool, args) in attacks {
            let r = attempt(&mut a, "boxed", tool, args).await;
            if userns {
                assert!(
                    r.starts_with("err: EROFS") || r.starts_with("err: EBUSY"),
                    "with its own mounts, {what} must fail: {r}"
                );
            } else {
                assert!(
                    r.starts_with("ok"),
                    "without user namespaces, {what} works (else this proves nothing): {r}"
                );
            }
        }
        let n = note(&d, "boxed").await;
        let says = if userns {
            ".git/config and .git/hooks read-only (1 repositories)"
        } else {
            "no user namespaces here: .git/config and .git/hooks of its writable trees are writable"
        };
        assert!(n.contains(says), "userns={userns}: {n}");
        if userns {
            let config = std::fs::read_to_string(git.join("config")).unwrap();
            assert_eq!(config, "[core]\n", "the config is as it was");
            assert!(!git.join("hooks/pre-commit").exists());
        }
    }
}

#[tokio::test]
async fn a_confined_server_has_a_dev_shm_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, repo2) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(&repo2).unwrap();
    let marker = format!("/dev/shm/mcpd-it-{}", std::process::id());
    for userns in [true, false] {
        let d = daemon(userns, &repo, &repo2).await;
        let mut a = d.initialized_agent().await;
        let path = json!({"path": marker, "text": "handed over"});
        // The user's (or an unconfined server's) /dev/shm, and what a server left there.
        let r = attempt(&mut a, "open", "try_write", path.clone()).await;
        assert!(r.starts_with("ok"), "{r}");
        let seen = attempt(&mut a, "boxed", "try_read", path.clone()).await;
        let wrote = attempt(&mut a, "boxed", "try_write", path.clone()).await;
        std::fs::remove_file(&marker).unwrap();
        if userns {
            assert!(
                seen.starts_with("err: ENOENT"),
                "the user's /dev/shm is not its: {seen}"
            );
            assert!(
                wrote.starts_with("ok"),
                "its own /dev/shm is writable: {wrote}"
            );
            let mine = attempt(&mut a, "boxed", "try_read", path.clone()).await;
            assert_eq!(mine, "ok: handed over");
            let other = attempt(&mut a, "boxed2", "try_read", path.clone()).await;
            assert!(
                other.starts_with("err: ENOENT"),
                "another confined server does not see it: {other}"
            );
            assert!(!Path::new(&marker).exists(), "nor does the user");
        } else {
            assert_eq!(
                seen, "ok: handed over",
                "without user namespaces the shared /dev/shm is readable (the handover works)"
            );
            assert!(
                wrote.starts_with("err: EACCES"),
                "but not writable: {wrote}"
            );
        }
    }
}

#[tokio::test]
async fn a_confined_server_sees_only_its_own_processes_in_proc() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, repo2) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(&repo2).unwrap();
    let marker = format!("mcpd-it-marker-{}", std::process::id());
    // `sh` keeps the marker as its `$0`; its `sleep` dies with its group at the end.
    let mut sleeper = std::process::Command::new("sh")
        .args(["-c", "sleep 300; :", &marker])
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for userns in [true, false] {
        let d = daemon(userns, &repo, &repo2).await;
        let mut a = d.initialized_agent().await;
        let cmdline = |pid: u32| json!({"path": format!("/proc/{pid}/cmdline")});
        let other = attempt(&mut a, "boxed", "try_read", cmdline(sleeper.id())).await;
        let daemon = attempt(&mut a, "boxed", "try_read", cmdline(d.pid())).await;
        let open = attempt(&mut a, "open", "try_read", cmdline(sleeper.id())).await;
        assert!(open.contains(&marker), "unconfined, it is there: {open}");
        if userns {
            assert!(other.starts_with("err: ENOENT"), "{other}");
            assert!(daemon.starts_with("err: ENOENT"), "{daemon}");
            // Its namespace's init is a copy of the daemon, with the command line blanked.
            let init = attempt(
                &mut a,
                "boxed",
                "try_read",
                json!({"path": "/proc/1/cmdline"}),
            )
            .await;
            assert!(!init.contains("serve"), "{init}");
            let me = attempt(
                &mut a,
                "boxed",
                "try_read",
                json!({"path": "/proc/self/stat"}),
            )
            .await;
            assert!(
                me.starts_with("ok: 2 "),
                "the server is PID 2 of its namespace: {me}"
            );
            let n = note(&d, "boxed").await;
            assert!(n.contains("/proc shows its own processes only"), "{n}");
        } else {
            assert!(
                other.contains(&marker),
                "without user namespaces, all are seen: {other}"
            );
            assert!(daemon.contains("serve"), "{daemon}");
            let n = note(&d, "boxed").await;
            assert!(n.contains("/proc shows every process"), "{n}");
        }
    }
    let group = nix::unistd::Pid::from_raw(sleeper.id() as i32);
    nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL).unwrap();
    sleeper.wait().unwrap();
}

/// The processes whose process group is `pgid` (from `/proc/*/stat`).
fn group_members(pgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // After the name: state, ppid, pgrp.
        let pgrp = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().nth(2))
            .and_then(|p| p.parse::<u32>().ok());
        if pgrp == Some(pgid) {
            out.push(pid);
        }
    }
    out
}

#[tokio::test]
async fn a_server_in_its_own_pid_namespace_ends_with_its_own_status_and_nothing_outlives_the_daemon()
 {
    let d = DaemonBuilder::new()
        .daemon("sandbox = true")
        .fixture("boxed", &["--tools", "crash,echo,pid"])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    assert_eq!(
        own_pid(&mut a).await,
        "2",
        "the server is PID 2 of its namespace"
    );

    // Its exit code reaches mcpd through the init and the outer process.
    let old = status_pid(&d.server_status("boxed").await).unwrap();
    let r = a.call("boxed__crash", json!({"code": 7})).await;
    crate::failure::support::assert_error(&r, -32012, &["'boxed'", "exit status 7"]);
    let row = d
        .wait_server("boxed", "boxed is back", |s| {
            crate::failure::support::ready_with_new_pid(s, &[old])
        })
        .await;
    assert!(
        crate::failure::support::last_exit(&row).contains("exit status 7"),
        "{row}"
    );
    eventually("the crashed server's group is gone", WAIT, || async {
        group_members(old).is_empty().then_some(())
    })
    .await;

    // SIGTERM to its group, as mcpd stops a server: the server (PID 2, not 1) ends by
    // it, and mcpd sees it killed by SIGTERM.
    let old = status_pid(&row).unwrap();
    assert_eq!(group_members(old).len(), 3, "outer process, init, server");
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(old as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let row = d
        .wait_server("boxed", "boxed is back after SIGTERM", |s| {
            crate::failure::support::ready_with_new_pid(s, &[old])
        })
        .await;
    assert!(
        crate::failure::support::last_exit(&row).contains("killed by SIGTERM"),
        "{row}"
    );
    assert_eq!(own_pid(&mut a).await, "2");

    // A SIGKILL of the daemon takes all three down (parent-death signals).
    let group = status_pid(&row).unwrap();
    assert_eq!(group_members(group).len(), 3);
    d.signal(nix::sys::signal::Signal::SIGKILL);
    eventually("nothing of the server is left", WAIT, || async {
        group_members(group).is_empty().then_some(())
    })
    .await;
}

/// The pid `boxed` sees as its own.
async fn own_pid(a: &mut Agent) -> serde_json::Value {
    a.call("boxed__pid", json!({})).await["result"]["content"][0]["text"].clone()
}

#[tokio::test]
async fn a_project_servers_git_config_is_read_only_to_its_confined_instance() {
    use crate::projects::instances::{IN_PROJECT, agent_in, instance_ready, projects};
    for userns in [true, false] {
        let p = projects(1);
        let project = &p.dirs[0];
        std::fs::create_dir_all(project.join(".git/hooks")).unwrap();
        std::fs::write(project.join(".git/config"), "[core]\n").unwrap();
        let tools = tools();
        let mut b = DaemonBuilder::new().daemon("sandbox = true").fixture_with(
            "fx",
            &["--tools", &tools],
            IN_PROJECT,
        );
        if !userns {
            b = b.env("MCPD_USERNS", "0");
        }
        let d = b.start().await;
        let mut a = agent_in(&d, project).await;
        let config = project.join(".git/config");
        let args = json!({"path": config, "text": "[core]\n\tfsmonitor = id\n"});
        instance_ready(&d, project).await;
        let r = attempt(&mut a, "fx", "try_write", args).await;
        if userns {
            assert!(r.starts_with("err: EROFS"), "{r}");
            assert_eq!(std::fs::read_to_string(&config).unwrap(), "[core]\n");
        } else {
            assert!(r.starts_with("ok"), "without user namespaces it works: {r}");
        }
    }
}
