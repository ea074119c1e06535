//! Interop for servers run per project (`share = "project"`).
//!
//! The published server-filesystem and mcp-server-git, one instance per project, reached
//! by agents through `mcpd connect` and by the official SDK clients through their MCP
//! roots.
//!
//! The peers come from `.ci/install-peers` (see `tests/interop/README.md`). When they are
//! missing, the tests skip with a note on stderr, or fail when `MCPD_REQUIRE_PEERS=1` (CI).

use crate::interop::sdks::{Peers, path_str, peers};
use crate::support::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// The bound on what the first start of a project's servers may take: a Node and a Python
/// server per project, each probed for its era, on a loaded machine.
pub(crate) const START_WAIT: Duration = Duration::from_secs(120);

/// The SDK clients' own bound on a run (`--timeout`), and ours, above it so theirs speaks.
const CLIENT_TIMEOUT_SECS: u64 = 150;
const CLIENT_WAIT: Duration = Duration::from_secs(180);

pub(crate) const FS_TOOL: &str = "fs__list_allowed_directories";
pub(crate) const GIT_TOOL: &str = "git__git_status";

/// The two published servers, in the peers directory.
pub(crate) const FS_SERVER: &str = "node/node_modules/.bin/mcp-server-filesystem";
pub(crate) const GIT_SERVER: &str = "venv/bin/mcp-server-git";

/// `peers()`, plus the two project servers and `git` (which mcp-server-git and the test's
/// repositories need) on PATH.
pub(crate) fn project_peers(test: &str) -> Option<Peers> {
    let peers = peers(test)?;
    let mut missing: Vec<String> = [FS_SERVER, GIT_SERVER]
        .map(|p| peers.dir.join(p))
        .into_iter()
        .filter(|p| !p.exists())
        .map(|p| p.display().to_string())
        .collect();
    let git_on_path = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join("git").is_file()));
    if !git_on_path {
        missing.push("`git` on PATH".to_owned());
    }
    if missing.is_empty() {
        return Some(peers);
    }
    let what = format!(
        "project peers missing: {}; run .ci/install-peers",
        missing.join(", ")
    );
    if std::env::var("MCPD_REQUIRE_PEERS").as_deref() == Ok("1") {
        panic!("{test}: {what} (MCPD_REQUIRE_PEERS=1 makes this a failure)");
    }
    eprintln!("skipped: {test}: {what}");
    None
}

/// A git repository in a temporary directory with one untracked file, `only-in-TAG.txt`.
pub(crate) struct GitRepo {
    _dir: tempfile::TempDir,
    /// Canonical (the temporary directory may be under a symlink).
    pub(crate) path: PathBuf,
    pub(crate) tag: &'static str,
}

pub(crate) fn git_repo(tag: &'static str) -> GitRepo {
    let dir = tempfile::Builder::new()
        .prefix(&format!("mcpd-proj-{tag}-"))
        .tempdir_in("/tmp")
        .expect("temp dir");
    let path = std::fs::canonicalize(dir.path()).expect("canonical path");
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&path)
        .status();
    assert!(init.expect("git runs").success(), "git init");
    std::fs::write(path.join(format!("only-in-{tag}.txt")), tag).expect("write a file");
    GitRepo {
        _dir: dir,
        path,
        tag,
    }
}

/// A daemon with server-filesystem as `fs` (and, `with_git`, mcp-server-git as `git`), both
/// run per project.
async fn daemon(peers: &Peers, with_git: bool) -> Daemon {
    let mut b = DaemonBuilder::new().server(
        "fs",
        path_str(&peers.dir.join(FS_SERVER)),
        &["${PROJECT}"],
        "share = \"project\"",
    );
    if with_git {
        b = b.server(
            "git",
            path_str(&peers.dir.join(GIT_SERVER)),
            &["--repository", "${PROJECT}"],
            "cwd = \"${PROJECT}\"\nshare = \"project\"",
        );
    }
    b.start().await
}

/// An agent speaking newline-delimited JSON-RPC to a `mcpd connect` child.
pub(crate) struct Shim {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    /// `notifications/tools/list_changed` received so far.
    list_changed: usize,
}

impl Shim {
    /// `mcpd connect --socket SOCK` started in `dir`, initialized.
    pub(crate) async fn start(d: &Daemon, dir: &Path) -> Shim {
        let mut child = tokio::process::Command::new(mcpd_bin())
            .arg("connect")
            .arg("--socket")
            .arg(&d.socket)
            .current_dir(dir)
            .env_remove("MCPD_SOCKET")
            .env_remove("MCPD_CONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start mcpd connect");
        let stdin = child.stdin.take().expect("stdin");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut s = Shim {
            child,
            stdin,
            lines,
            next_id: 0,
            list_changed: 0,
        };
        let init = s
            .request(
                "initialize",
                json!({
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": { "name": "it-projects", "version": "1" },
                }),
                WAIT,
            )
            .await;
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
        s.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .await;
        s
    }

    async fn send(&mut self, msg: Value) {
        let line = format!("{msg}\n");
        within(
            "write to mcpd connect",
            self.stdin.write_all(line.as_bytes()),
        )
        .await
        .expect("write to mcpd connect");
    }

    /// The next message, None when `limit` passes first; panics at EOF.
    async fn next(&mut self, limit: Duration) -> Option<Value> {
        let line = tokio::time::timeout(limit, self.lines.next_line())
            .await
            .ok()?
            .expect("read from mcpd connect")
            .unwrap_or_else(|| panic!("mcpd connect closed its stdout"));
        let msg: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("mcpd connect sent non-JSON {line:?}: {e}"));
        if msg["method"] == "notifications/tools/list_changed" {
            self.list_changed += 1;
        }
        Some(msg)
    }

    /// Sends a request and reads until its response, within `limit`.
    pub(crate) async fn request(&mut self, method: &str, params: Value, limit: Duration) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let msg = self
                .next(left)
                .await
                .unwrap_or_else(|| panic!("no answer to {method} within {limit:?}"));
            if msg.get("method").is_none() && msg["id"] == id {
                return msg;
            }
            assert!(
                msg.get("id").is_none() || msg.get("method").is_none(),
                "mcpd asked an agent that declared no capabilities: {msg}"
            );
        }
    }

    async fn tool_names(&mut self) -> Vec<String> {
        let mut names = Vec::new();
        let mut params = json!({});
        loop {
            let r = self.request("tools/list", params, WAIT).await;
            let tools = r["result"]["tools"]
                .as_array()
                .unwrap_or_else(|| panic!("bad tools/list {r}"));
            names.extend(
                tools
                    .iter()
                    .filter_map(|t| Some(t["name"].as_str()?.to_owned())),
            );
            match r["result"]["nextCursor"].as_str() {
                Some(c) => params = json!({ "cursor": c }),
                None => return names,
            }
        }
    }

    /// Waits until every tool in `wanted` is listed: lists again after each
    /// `notifications/tools/list_changed`, and at least once a second.
    pub(crate) async fn wait_tools(&mut self, wanted: &[&str]) {
        let deadline = tokio::time::Instant::now() + START_WAIT;
        loop {
            let seen = self.list_changed;
            let names = self.tool_names().await;
            if wanted.iter().all(|w| names.iter().any(|n| n == w)) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{wanted:?} not listed within {START_WAIT:?}: {names:?}"
            );
            let tick = tokio::time::Instant::now() + Duration::from_secs(1);
            while self.list_changed == seen {
                let left = tick.saturating_duration_since(tokio::time::Instant::now());
                if self.next(left).await.is_none() {
                    break;
                }
            }
        }
    }

    /// The text of a successful call's first content block.
    pub(crate) async fn call_text(&mut self, tool: &str, args: Value) -> String {
        let params = json!({ "name": tool, "arguments": args });
        let r = self.request("tools/call", params, START_WAIT).await;
        assert!(
            r["result"]["isError"] != json!(true) && r.get("error").is_none(),
            "{tool} failed: {r}"
        );
        text(&r).to_owned()
    }

    /// Calls both servers and checks each answers for `repo` and no other project.
    async fn assert_sees(&mut self, repo: &GitRepo, other: &GitRepo) {
        let fs = self.call_text(FS_TOOL, json!({})).await;
        let listed = format!("Allowed directories:\n{}", repo.path.display());
        assert_eq!(fs, listed, "the fs server of {}'s project", repo.tag);
        let args = json!({ "repo_path": path_str(&repo.path) });
        let git = self.call_text(GIT_TOOL, args).await;
        assert!(
            git.starts_with("Repository status:\nOn branch "),
            "git status of {}: {git}",
            repo.tag
        );
        assert!(
            git.contains(&format!("only-in-{}.txt", repo.tag))
                && !git.contains(&format!("only-in-{}.txt", other.tag)),
            "git status of {} shows its own untracked file only: {git}",
            repo.tag
        );
    }

    /// Ends the agent: stdin EOF, then the shim exits.
    pub(crate) async fn close(mut self) {
        drop(self.stdin);
        let status = within("mcpd connect exits at stdin EOF", self.child.wait())
            .await
            .expect("wait");
        assert!(status.success(), "mcpd connect exited with {status}");
    }
}

/// `mcpd ctl status --json`.
pub(crate) async fn ctl_status(d: &Daemon) -> Value {
    let (code, out, err) = d.run_cli(&["ctl", "status", "--json"]).await;
    assert_eq!(code, 0, "ctl status: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("status --json is not JSON ({e}): {out}"))
}

pub(crate) fn row<'a>(status: &'a Value, name: &str) -> Option<&'a Value> {
    status["servers"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
}

/// The instance row `SERVER@PROJECT` once it is ready with `agents` agents.
pub(crate) async fn wait_instance(d: &Daemon, server: &str, repo: &GitRepo, agents: u64) -> Value {
    let name = format!("{server}@{}", repo.path.display());
    let what = format!("{name} ready with {agents} agent(s)");
    eventually(&what, START_WAIT, || async {
        let s = ctl_status(d).await;
        let r = row(&s, &name)?;
        (r["state"] == "ready" && r["agents"] == agents && r["pid"].is_u64()).then(|| r.clone())
    })
    .await
}

/// Children of the daemon whose command line names `program` and `dir`.
fn processes(daemon: u32, program: &str, dir: &Path) -> Vec<u32> {
    children_of(daemon)
        .into_iter()
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<String> = cmdline
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            args.iter().any(|a| a.ends_with(program)) && args.iter().any(|a| Path::new(a) == dir)
        })
        .collect()
}

#[tokio::test]
async fn agents_in_two_git_repositories_each_get_their_projects_filesystem_and_git_servers() {
    let test = "agents_in_two_git_repositories_each_get_their_projects_filesystem_and_git_servers";
    let Some(peers) = project_peers(test) else {
        return;
    };
    let (a, b) = (git_repo("a"), git_repo("b"));
    let d = daemon(&peers, true).await;

    let mut in_a = Shim::start(&d, &a.path).await;
    let mut in_b = Shim::start(&d, &b.path).await;
    in_a.wait_tools(&[FS_TOOL, GIT_TOOL]).await;
    in_b.wait_tools(&[FS_TOOL, GIT_TOOL]).await;
    in_a.assert_sees(&a, &b).await;
    in_b.assert_sees(&b, &a).await;

    // Two instances of each server, one per project, each with its agent.
    let mut fs_a = Value::Null;
    for (repo, server) in [(&a, "fs"), (&b, "fs"), (&a, "git"), (&b, "git")] {
        let r = wait_instance(&d, server, repo, 1).await;
        assert_eq!(r["project"], path_str(&repo.path), "{r}");
        if (repo.tag, server) == ("a", "fs") {
            fs_a = r;
        }
    }
    let s = ctl_status(&d).await;
    for server in ["fs", "git"] {
        let t = row(&s, server).unwrap_or_else(|| panic!("no {server} row in {s}"));
        assert_eq!(
            (t["share"].as_str(), t["instances"].as_u64()),
            (Some("project"), Some(2)),
            "{t}"
        );
    }
    let fs_a_pid = fs_a["pid"].as_u64().expect("pid") as u32;

    // A third agent in the first repository reuses its instances.
    let mut third = Shim::start(&d, &a.path).await;
    third.wait_tools(&[FS_TOOL, GIT_TOOL]).await;
    third.assert_sees(&a, &b).await;
    let again = wait_instance(&d, "fs", &a, 2).await;
    assert_eq!(again["pid"], fs_a_pid, "the same process: {again}");
    wait_instance(&d, "git", &a, 2).await;
    let s = ctl_status(&d).await;
    let fs = row(&s, "fs").expect("fs row");
    assert_eq!(fs["instances"], 2, "still two fs instances: {fs}");
    let fs_processes = |repo: &GitRepo| processes(d.pid(), "mcp-server-filesystem", &repo.path);
    assert_eq!(
        fs_processes(&a),
        [fs_a_pid],
        "one fs process for the first project"
    );
    assert_eq!(fs_processes(&b).len(), 1, "and one for the second");

    for shim in [in_a, in_b, third] {
        shim.close().await;
    }
}

#[derive(Clone, Copy, Debug)]
enum Sdk {
    Python,
    TypeScript,
}

/// The roots client of `sdk` (`tests/interop/*_roots_client.*`) through `mcpd connect
/// --no-project`, started in a directory that is neither repository: its first root is
/// `first`, then `second`. Returns its one line of JSON.
async fn run_roots_client(
    peers: &Peers,
    sdk: Sdk,
    d: &Daemon,
    first: &Path,
    second: &Path,
) -> Value {
    let interop = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop");
    let (program, script) = match sdk {
        Sdk::Python => (peers.python(), "py_roots_client.py"),
        Sdk::TypeScript => (PathBuf::from("node"), "ts_roots_client.mjs"),
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.arg(interop.join(script))
        .arg("--timeout")
        .arg(CLIENT_TIMEOUT_SECS.to_string())
        .args(["--root", path_str(first), "--then-root", path_str(second)])
        .args(["--call", FS_TOOL, "--"])
        .arg(mcpd_bin())
        .args(["connect", "--no-project", "--socket"])
        .arg(&d.socket)
        .current_dir(d.dir())
        .env("MCPD_PEERS_DIR", &peers.dir)
        .env_remove("MCPD_SOCKET")
        .env_remove("MCPD_CONFIG")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let what = format!("{sdk:?} roots client");
    let out = match tokio::time::timeout(CLIENT_WAIT, cmd.output()).await {
        Ok(out) => out.unwrap_or_else(|e| panic!("{what}: cannot start: {e}")),
        Err(_) => panic!("{what}: timed out after {CLIENT_WAIT:?}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.lines().count() == 1,
        "{what}: exited with {}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        out.status
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{what}: stdout is not JSON ({e}): {stdout}\n{stderr}"))
}

fn file_uri(p: &Path) -> String {
    url::Url::from_file_path(p)
        .expect("absolute path")
        .to_string()
}

async fn sdk_roots_choose_the_project(sdk: Sdk, test: &str) {
    let Some(peers) = project_peers(test) else {
        return;
    };
    let (a, b) = (git_repo("a"), git_repo("b"));
    let d = daemon(&peers, false).await;
    let out = run_roots_client(&peers, sdk, &d, &a.path, &b.path).await;
    let listed = |dir: &str| format!("Allowed directories:\n{dir}");
    assert_eq!(
        out["first"]["content"][0]["text"],
        listed(path_str(&a.path)),
        "{sdk:?}: the first root's project: {out}"
    );
    assert_eq!(
        out["second"]["content"][0]["text"],
        listed(path_str(&b.path)),
        "{sdk:?}: after roots/list_changed, the new root's project: {out}"
    );
    assert_eq!(
        out["rootsAnswered"],
        json!([file_uri(&a.path), file_uri(&b.path)]),
        "{sdk:?}: mcpd asks for roots after initialized and after each list_changed: {out}"
    );
    // Both projects got their instance; none for the directory the client started in.
    let s = ctl_status(&d).await;
    let fs = row(&s, "fs").expect("fs row");
    assert_eq!(fs["instances"], 2, "{sdk:?}: {s}");
    for repo in [&a, &b] {
        let name = format!("fs@{}", repo.path.display());
        assert!(row(&s, &name).is_some(), "{sdk:?}: no {name} in {s}");
    }
}

#[tokio::test]
async fn the_python_sdk_clients_roots_choose_its_project_and_a_roots_change_moves_it() {
    sdk_roots_choose_the_project(
        Sdk::Python,
        "the_python_sdk_clients_roots_choose_its_project_and_a_roots_change_moves_it",
    )
    .await;
}

#[tokio::test]
async fn the_typescript_sdk_clients_roots_choose_its_project_and_a_roots_change_moves_it() {
    sdk_roots_choose_the_project(
        Sdk::TypeScript,
        "the_typescript_sdk_clients_roots_choose_its_project_and_a_roots_change_moves_it",
    )
    .await;
}
