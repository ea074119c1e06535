//! What a server gets from mcpd, seen from inside the fixture.
//!
//! No control of the daemon from its processes, none of mcpd's own or systemd's
//! variables, the open-files limit mcpd started with, no descriptor mcpd inherited. Each
//! test also shows the daemon side, so a harness that never set anything up cannot pass.

use crate::support::*;
use serde_json::{Value, json};

/// The fixture's tools these tests use.
const TOOLS: &str = "pid,env_json,rlimit_nofile,fd_table,call_socket,exec";

/// A tool's text result, parsed as the JSON it holds.
fn json_text(response: &Value) -> Value {
    serde_json::from_str(text(response)).unwrap_or_else(|e| panic!("{e}: {response}"))
}

fn request(method: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method})
}

#[tokio::test]
async fn a_servers_processes_are_refused_control_methods_that_a_person_on_the_socket_gets() {
    let d = DaemonBuilder::new()
        .fixture("s", &["--tools", TOOLS])
        .start()
        .await;
    d.wait_ready().await;
    let socket = d.socket.display().to_string();
    let mut agent = d.initialized_agent().await;
    // The test is no descendant of the daemon: the same request is answered.
    let status = agent.request("mcpd/status", None).await;
    assert!(status["result"]["servers"].is_array(), "{status}");
    let (code, out, err) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0, "{out}{err}");

    // The server's own process (the daemon's child) is refused every control method.
    for method in [
        "mcpd/status",
        "mcpd/http-token",
        "mcpd/agents",
        "mcpd/reload",
    ] {
        let r = agent
            .call(
                "s__call_socket",
                json!({"socket": socket, "request": request(method)}),
            )
            .await;
        let answer = json_text(&r);
        assert_eq!(answer["error"]["code"], -32018, "{method}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("comes from a process of a server mcpd started"),
            "{method}: {message}"
        );
    }
    let r = agent
        .call(
            "s__call_socket",
            json!({"socket": socket, "request": {
                "jsonrpc": "2.0", "id": 1, "method": "mcpd/stop", "params": {"name": "s"}
            }}),
        )
        .await;
    assert_eq!(json_text(&r)["error"]["code"], -32018, "{r}");
    // So is a process the server started: `mcpd ctl status` as its child.
    let r = agent
        .call(
            "s__exec",
            json!({"command": mcpd_bin(), "args": ["ctl", "status", "--socket", socket]}),
        )
        .await;
    let run = json_text(&r);
    assert_ne!(run["code"], 0, "{run}");
    assert!(
        run["stderr"]
            .as_str()
            .is_some_and(|e| e.contains("servers may not control the daemon")),
        "{run}"
    );
    assert!(
        !run["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains("fixture"),
        "no status reached it: {run}"
    );
    // A method that is not a control method still answers it.
    let r = agent
        .call(
            "s__call_socket",
            json!({"socket": socket, "request": request("tools/list")}),
        )
        .await;
    assert!(json_text(&r)["result"]["tools"].is_array(), "{r}");
    // The server was not stopped by the refused `mcpd/stop`.
    let r = agent.call("s__pid", json!({})).await;
    assert!(text(&r).parse::<u32>().is_ok(), "{r}");
}

#[tokio::test]
async fn ctl_agents_shows_the_server_a_connection_comes_from() {
    let d = DaemonBuilder::new()
        .fixture("s", &["--tools", TOOLS])
        .start()
        .await;
    d.wait_ready().await;
    let socket = d.socket.display().to_string();
    let mut agent = d.initialized_agent().await;
    let server: u32 = text(&agent.call("s__pid", json!({})).await)
        .parse()
        .expect("the server's pid");
    // The server connects and stays a while: an agent from a server's process.
    let call = agent
        .start_call(
            "s__call_socket",
            json!({"socket": socket, "request": request("tools/list"), "linger_ms": 5000}),
        )
        .await;
    let listed = eventually("ctl agents lists the server's connection", WAIT, || async {
        let (code, out, _) = d.run_cli(&["ctl", "agents", "--json"]).await;
        let v: Value = serde_json::from_str(&out).ok()?;
        (code == 0)
            .then(|| v["agents"].as_array().cloned())
            .flatten()?
            .into_iter()
            .find(|a| a["pid"] == json!(server))
    })
    .await;
    assert_eq!(listed["server_pid"], json!(server), "{listed}");
    let (code, out, err) = d.run_cli(&["ctl", "agents"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("(of server pid {server})")), "{out}");
    // The test's own connection is no server's.
    let me = std::process::id();
    let (_, out, _) = d.run_cli(&["ctl", "agents", "--json"]).await;
    let v: Value = serde_json::from_str(&out).expect("json");
    let mine = v["agents"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["pid"] == json!(me)).cloned())
        .expect("the test's agent is listed");
    assert!(mine.get("server_pid").is_none(), "{mine}");
    let r = agent.response(&call).await;
    assert!(json_text(&r)["result"].is_object(), "{r}");
}

#[tokio::test]
async fn a_server_gets_none_of_mcpds_own_or_systemds_variables_but_its_own_table() {
    let d = DaemonBuilder::new()
        .env("MCPD_CANARY", "the daemon's own")
        .env("NOTIFY_SOCKET", "/nonexistent/mcpd-it-notify.sock")
        .env("CREDENTIALS_DIRECTORY", "/nonexistent/credentials")
        .env("INVOCATION_ID", "0123456789abcdef0123456789abcdef")
        .env("SHARED_WITH_SERVERS", "yes")
        .fixture_with(
            "s",
            &["--tools", TOOLS],
            r#"env = { MCPD_CHOSEN = "in the server's table", TABLE_ONLY = "1" }"#,
        )
        .start()
        .await;
    d.wait_ready().await;
    // The daemon has them all.
    let environ = std::fs::read(format!("/proc/{}/environ", d.pid())).expect("environ");
    let daemon: Vec<String> = environ
        .split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    for set in [
        "MCPD_CANARY=the daemon's own",
        "NOTIFY_SOCKET=/nonexistent/mcpd-it-notify.sock",
        "CREDENTIALS_DIRECTORY=/nonexistent/credentials",
        "SHARED_WITH_SERVERS=yes",
    ] {
        assert!(daemon.iter().any(|v| v == set), "the daemon has {set}");
    }
    let mut agent = d.initialized_agent().await;
    let env = json_text(&agent.call("s__env_json", json!({})).await);
    let env = env.as_object().expect("an object");
    let mcpds: Vec<&String> = env
        .keys()
        .filter(|k| k.starts_with("MCPD_") && *k != "MCPD_CHOSEN")
        .collect();
    assert!(
        mcpds.is_empty(),
        "mcpd's own variables reached the server: {mcpds:?}"
    );
    for private in ["NOTIFY_SOCKET", "CREDENTIALS_DIRECTORY", "INVOCATION_ID"] {
        assert!(!env.contains_key(private), "{private} reached the server");
    }
    assert_eq!(env["MCPD_CHOSEN"], "in the server's table");
    assert_eq!(env["TABLE_ONLY"], "1");
    assert_eq!(env["SHARED_WITH_SERVERS"], "yes", "the rest passes");
    assert!(env.contains_key("PATH"), "PATH passes");
}

#[tokio::test]
async fn a_server_gets_the_open_files_limit_the_daemon_started_with_not_the_raised_one() {
    let d = DaemonBuilder::new()
        .open_files(256)
        .fixture("s", &["--tools", TOOLS])
        .start()
        .await;
    d.wait_ready().await;
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", d.pid())).expect("limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("an open files line");
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (soft, hard) = (fields[3], fields[4]);
    assert_eq!(soft, hard, "the daemon raised its own: {line}");
    assert_ne!(soft, "256", "the hard limit is above 256 here: {line}");
    let mut agent = d.initialized_agent().await;
    let server = json_text(&agent.call("s__rlimit_nofile", json!({})).await);
    assert_eq!(server["soft"], 256, "{server}");
    assert_eq!(
        server["hard"].to_string(),
        hard,
        "the hard limit stays: {server}"
    );
}

#[tokio::test]
async fn a_descriptor_the_daemon_inherited_does_not_reach_a_server() {
    use std::os::fd::AsRawFd;
    let b = DaemonBuilder::new();
    let canary = b.dir().join("inherited-canary");
    let file = std::fs::File::create(&canary).expect("canary");
    let d = b
        .inherit_fd(file.as_raw_fd())
        .fixture("s", &["--tools", TOOLS])
        .start()
        .await;
    d.wait_ready().await;
    let canary = canary.display().to_string();
    let links = |pid: u32| -> Vec<String> {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .expect("fds")
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .map(|t| t.display().to_string())
            .collect()
    };
    assert!(
        links(d.pid()).contains(&canary),
        "the daemon inherited it: {:?}",
        links(d.pid())
    );
    let mut agent = d.initialized_agent().await;
    let fds = json_text(&agent.call("s__fd_table", json!({})).await);
    let fds = fds.as_object().expect("an object");
    assert!(
        !fds.values().any(|t| t == canary.as_str()),
        "the server has the daemon's inherited descriptor: {fds:?}"
    );
    // Its stdio are the pipes from mcpd.
    assert!(fds.contains_key("0") && fds.contains_key("1") && fds.contains_key("2"));
    drop(file);
}
