//! Where an agent's project comes from, for servers run per project.
//!
//! A profile's `project` outranks MCP roots, which outrank the directory `mcpd connect`
//! reports (where it started, `--project DIR`, or none with `--no-project`).

use crate::projects::instances::*;
use crate::support::*;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// `mcpd connect` as a stdio client runs it: JSON lines on its stdin and stdout.
struct Shim {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Shim {
    async fn start(socket: &Path, dir: &Path, args: &[&str]) -> Shim {
        let mut child = tokio::process::Command::new(mcpd_bin())
            .arg("connect")
            .args(args)
            .arg("--socket")
            .arg(socket)
            .current_dir(dir)
            .env_remove("MCPD_SOCKET")
            .env_remove("MCPD_CONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start mcpd connect");
        let stdin = child.stdin.take().expect("stdin");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut shim = Shim {
            _child: child,
            stdin,
            lines,
        };
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
        let r = shim.request(1, "initialize", init).await;
        assert!(r.get("result").is_some(), "{r}");
        shim.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        shim
    }

    async fn send(&mut self, msg: Value) {
        let line = format!("{msg}\n");
        self.stdin
            .write_all(line.as_bytes())
            .await
            .expect("write to mcpd connect");
    }

    async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        within("mcpd connect answers", async {
            loop {
                let line = self.lines.next_line().await.expect("read").expect("a line");
                let v: Value = serde_json::from_str(&line).expect("json");
                if v["id"] == id {
                    return v;
                }
            }
        })
        .await
    }

    async fn call(&mut self, id: u64, tool: &str) -> Value {
        self.request(id, "tools/call", json!({"name": tool, "arguments": {}}))
            .await
    }
}

#[tokio::test]
async fn mcpd_connect_gives_the_directory_it_started_in_unless_told_otherwise() {
    let p = projects(2);
    let d = project_daemon("").start().await;
    let _first = agent_in(&d, &p.dirs[0]).await;
    tools_listed(&d).await;
    let mut here = Shim::start(&d.socket, &p.dirs[1], &[]).await;
    assert_eq!(text(&here.call(2, "fx__cwd").await), show(&p.dirs[1]));
    // --project wins over the directory (a relative one is taken from there).
    let mut there = Shim::start(&d.socket, &p.dirs[1], &["--project", "../p0"]).await;
    assert_eq!(text(&there.call(2, "fx__cwd").await), show(&p.dirs[0]));
    let mut none = Shim::start(&d.socket, &p.dirs[1], &["--no-project"]).await;
    let r = none.call(2, "fx__cwd").await;
    assert_eq!(error_code(&r), Some(-32023), "{r}");
    assert!(
        error_message(&r).contains("--project") && error_message(&r).contains("fx"),
        "{r}"
    );
}

#[tokio::test]
async fn mcp_roots_outrank_the_shim_directory_and_follow_list_changed() {
    let p = projects(3);
    let d = project_daemon("").start().await;
    let shim_dir = p.dirs[0].clone();
    let mut a = roots_agent(&d, async |a: &mut Agent| a.send(claim(&shim_dir)).await).await;
    let ask = roots_request(&mut a).await;
    assert!(
        ask["id"].as_str().is_some_and(|i| i.starts_with("mcpd-")),
        "{ask}"
    );
    // The first file:// root counts.
    let uris = [
        "https://example.com/x".to_owned(),
        file_uri(&p.dirs[1]),
        file_uri(&p.dirs[2]),
    ];
    answer_roots(&mut a, &ask, &uris).await;
    tools_listed(&d).await;
    assert_eq!(
        cwd(&mut a).await,
        show(&p.dirs[1]),
        "the roots outrank the shim's directory"
    );
    a.send(json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}))
        .await;
    let again = roots_request(&mut a).await;
    assert_ne!(again["id"], ask["id"], "a new request");
    answer_roots(&mut a, &again, &[file_uri(&p.dirs[2])]).await;
    assert_eq!(
        cwd(&mut a).await,
        show(&p.dirs[2]),
        "the new root is the project now"
    );
    let n2 = instance(&p.dirs[2]);
    let n1 = instance(&p.dirs[1]);
    d.wait_status("the agent counts in p2, no more in p1", |s| {
        row(s, &n2).is_some_and(|r| r["agents"] == 1)
            && row(s, &n1).is_some_and(|r| r["agents"] == 0)
    })
    .await;
    // Roots without a file:// one give no project: the shim's directory counts again.
    a.send(json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}))
        .await;
    let last = roots_request(&mut a).await;
    answer_roots(&mut a, &last, &["https://example.com/x".to_owned()]).await;
    assert_eq!(
        cwd(&mut a).await,
        show(&p.dirs[0]),
        "back to the shim's directory"
    );
}

#[tokio::test]
async fn a_profiles_project_outranks_roots_and_the_shim_directory() {
    let p = projects(3);
    let fixed = serde_json::to_string(&show(&p.dirs[1])).expect("json");
    let d = project_daemon("")
        .profile("here", &format!("project = {fixed}"))
        .start()
        .await;
    let shim_dir = p.dirs[0].clone();
    let mut a = roots_agent(&d, async |a: &mut Agent| {
        a.send(claim(&shim_dir)).await;
        let r = a
            .request("mcpd/profile", Some(json!({"name": "here"})))
            .await;
        assert!(r.get("result").is_some(), "{r}");
    })
    .await;
    let ask = roots_request(&mut a).await;
    answer_roots(&mut a, &ask, &[file_uri(&p.dirs[2])]).await;
    tools_listed(&d).await;
    assert_eq!(
        cwd(&mut a).await,
        show(&p.dirs[1]),
        "the profile's project wins"
    );
}
