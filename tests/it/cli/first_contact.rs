//! First contact: how clients and a person first meet the daemon.
//!
//! Clients that start `mcpd connect` with a short environment find the daemon, output
//! channels that close early never make mcpd panic, and the command line speaks to a
//! person.

use crate::interop::sdks::{path_str, peers};
use crate::support::*;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `script` with bash in a mount namespace of its own (as root of a user namespace
/// of its own when not root already), with a private tmpfs on `/run/user`: there the
/// daemon can listen at `/run/user/$UID`, where systemd puts a user's runtime directory,
/// without touching the machine's. Returns (exit code, stdout, stderr).
pub(crate) async fn in_namespace(script: &str, env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = tokio::process::Command::new("unshare");
    cmd.args(["--mount", "--map-root-user", "--propagation", "private"])
        .args(["bash", "-c", script])
        .envs(env.iter().copied())
        .env_remove("MCPD_SOCKET")
        .env_remove("MCPD_CONFIG")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("XDG_CONFIG_HOME")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), cmd.output())
        .await
        .expect("the namespace script ends within 120 s")
        .expect("unshare runs (util-linux)");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The part of every namespace script that starts the daemon as a desktop session or a
/// user service would: `XDG_RUNTIME_DIR=/run/user/$UID`, the config in `$HOME/.config`.
/// `short` runs a command with exactly the environment the official SDKs give a server.
const START_DAEMON: &str = r#"
set -u
mount -t tmpfs -o mode=755 tmpfs /run/user || { echo "SETUP: cannot mount /run/user"; exit 90; }
uid=$(id -u)
mkdir -m 700 "/run/user/$uid"
XDG_RUNTIME_DIR="/run/user/$uid" "$MCPD" serve >"$HOME/daemon.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null' EXIT
sock="/run/user/$uid/mcpd/mcpd.sock"
# Waits for the socket with a deadline (30 s), checking every 50 ms.
for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || { echo "SETUP: no socket at $sock"; cat "$HOME/daemon.log"; exit 91; }
short() { env -i HOME="$HOME" LOGNAME=me PATH="$PATH" SHELL=/bin/sh TERM=dumb USER=me "$@"; }
"#;

/// A HOME whose `.config/mcpd/mcpd.toml` runs the fixture as `fx`.
fn home_with_fixture() -> tempfile::TempDir {
    let home = tempfile::Builder::new()
        .prefix("mcpd-fc")
        .tempdir_in("/tmp")
        .unwrap();
    let dir = home.path().join(".config/mcpd");
    std::fs::create_dir_all(&dir).unwrap();
    let config = format!(
        "[daemon]\nstate_dir = {:?}\n[servers.fx]\ncommand = {:?}\n",
        home.path().join("state"),
        fixture_bin()
    );
    std::fs::write(dir.join("mcpd.toml"), config).unwrap();
    home
}

#[tokio::test]
async fn connect_and_ctl_find_a_daemon_under_run_user_without_xdg_runtime_dir() {
    let home = home_with_fixture();
    let script = format!(
        r#"{START_DAEMON}
echo "== ctl"
short "$MCPD" ctl status --json
echo "== ctl rc=$?"
echo "== connect"
printf '%s\n' '{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}' | short "$MCPD" connect
echo "== connect rc=$?"
"#
    );
    let (code, out, err) = in_namespace(
        &script,
        &[("MCPD", mcpd_bin()), ("HOME", path_str(home.path()))],
    )
    .await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("== ctl rc=0"),
        "ctl found the daemon:\n{out}\n{err}"
    );
    assert!(
        out.contains("\"name\": \"fx\""),
        "ctl status lists fx:\n{out}"
    );
    assert!(
        out.contains("== connect rc=0") && out.contains("\"serverInfo\""),
        "connect reached the daemon and it answered initialize:\n{out}\n{err}"
    );
}

#[tokio::test]
async fn sdk_clients_with_their_default_environment_reach_the_daemon() {
    let Some(peers) = peers("sdk_clients_with_their_default_environment_reach_the_daemon") else {
        return;
    };
    let home = home_with_fixture();
    let interop = repo().join("tests/interop");
    // The clients run with the whole environment of a desktop session (XDG_RUNTIME_DIR
    // included); the SDKs pass their servers only HOME, LOGNAME, PATH, SHELL, TERM, USER.
    let script = format!(
        r#"{START_DAEMON}
export XDG_RUNTIME_DIR="/run/user/$uid" MCPD_INTEROP_DEFAULT_ENV=1
for client in "$PY $INTEROP/py_client.py" "node $INTEROP/ts_client.mjs"; do
  echo "== $client"
  $client --timeout 30 --call fx__echo --args '{{"text": "first try"}}' -- "$MCPD" connect
  echo "== rc=$?"
done
"#
    );
    let (code, out, err) = in_namespace(
        &script,
        &[
            ("MCPD", mcpd_bin()),
            ("HOME", path_str(home.path())),
            ("PY", path_str(&peers.python())),
            ("INTEROP", path_str(&interop)),
            ("MCPD_PEERS_DIR", path_str(&peers.dir)),
        ],
    )
    .await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let answers: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    assert_eq!(
        out.matches("== rc=0").count(),
        2,
        "both SDK clients succeeded:\n{out}\n{err}"
    );
    assert_eq!(answers.len(), 2, "{out}");
    for a in answers {
        assert!(
            a["call"].to_string().contains("first try"),
            "the call went through: {a}"
        );
    }
}

#[tokio::test]
async fn without_a_daemon_connect_names_every_place_it_looked() {
    let home = tempfile::tempdir().unwrap();
    let script = r#"
set -u
mount -t tmpfs -o mode=755 tmpfs /run/user || exit 90
uid=$(id -u)
env -i HOME="$HOME" PATH="$PATH" XDG_RUNTIME_DIR=/nowhere "$MCPD" connect </dev/null
echo "rc=$?"
echo "uid=$uid"
"#;
    let (_, out, err) = in_namespace(
        script,
        &[("MCPD", mcpd_bin()), ("HOME", path_str(home.path()))],
    )
    .await;
    assert!(
        out.contains("rc=69"),
        "exit 69 (unavailable):\n{out}\n{err}"
    );
    let uid = out
        .lines()
        .find_map(|l| l.strip_prefix("uid="))
        .expect("the uid line");
    for place in [
        "/nowhere/mcpd/mcpd.sock".to_owned(),
        format!("/run/user/{uid}/mcpd/mcpd.sock"),
        format!("/tmp/mcpd-{uid}/mcpd.sock"),
    ] {
        assert!(err.contains(&place), "the error names {place}:\n{err}");
    }
    assert!(err.contains("mcpd is not running"), "{err}");
}

/// `mcpd check-config` accepts `config` (the daemon would start) and warns `warning`.
async fn check_config_warns(config: &Path, warning: &str) {
    let (code, out, err) = run_mcpd(&["check-config", "--config", path_str(config)], None).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains(&format!("warning: {warning}")), "{out}");
}

/// Runs `mcpd ARGS` with stdout and stderr on a pipe whose reader has already gone.
async fn with_closed_output(args: &[&str], env: &[(&str, &str)]) -> i32 {
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    let out = std::process::Stdio::from(write.try_clone().unwrap());
    let err = std::process::Stdio::from(write);
    let status = tokio::process::Command::new(mcpd_bin())
        .args(args)
        .envs(env.iter().copied())
        .env_remove("MCPD_SOCKET")
        .env_remove("MCPD_CONFIG")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status();
    within("mcpd with closed output", status)
        .await
        .unwrap()
        .code()
        .unwrap_or(-1)
}

#[tokio::test]
async fn a_closed_output_pipe_never_turns_an_exit_code_into_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[servers.x]\nnonsense = 1\n").unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(&good, "[servers.x]\ncommand = \"true\"\n").unwrap();
    let empty = dir.path().to_str().unwrap();
    // Each several times: a panic while printing used to win the race 4 times in 5.
    for _ in 0..3 {
        let bad = bad.to_str().unwrap();
        assert_eq!(
            with_closed_output(&["serve", "--config", bad], &[]).await,
            78
        );
        assert_eq!(
            with_closed_output(&["check-config", "--config", bad], &[]).await,
            78
        );
        let good = good.to_str().unwrap();
        assert_eq!(
            with_closed_output(&["check-config", "--config", good], &[]).await,
            0
        );
        let none = dir.path().join("none.sock");
        let none = none.to_str().unwrap();
        assert_eq!(
            with_closed_output(&["ctl", "status", "--socket", none], &[]).await,
            69
        );
        let code = with_closed_output(
            &[
                "import",
                "--dry-run",
                "--from",
                "claude-code",
                "--config",
                good,
            ],
            &[("HOME", empty)],
        )
        .await;
        assert!(
            code == 0 || code == 78,
            "import exits by its own rule, not 101: {code}"
        );
        assert_eq!(with_closed_output(&["completions", "bash"], &[]).await, 0);
    }
}

#[tokio::test]
async fn one_server_with_an_unset_variable_fails_alone_and_says_what_to_set() {
    let d = DaemonBuilder::new()
        .fixture("fx", &[])
        .remote(
            "gh",
            "http://127.0.0.1:9/mcp",
            "headers = { Authorization = \"${IMPORTED_GH_AUTHORIZATION}\" }",
        )
        .start()
        .await;
    let row = d
        .wait_server("gh", "gh fails with the reason", |r| r["state"] == "failed")
        .await;
    let why = row["last_error"].as_str().unwrap_or_default();
    assert!(
        why.contains("IMPORTED_GH_AUTHORIZATION is not set")
            && why.contains("headers.Authorization"),
        "{row}"
    );
    d.wait_server("fx", "fx is ready", |r| r["state"] == "ready")
        .await;
    let mut a = d.initialized_agent().await;
    assert_eq!(text(&a.call("fx__echo", json!({"text": "ok"})).await), "ok");
    let (code, out, err) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("IMPORTED_GH_AUTHORIZATION is not set"),
        "{out}"
    );
    // check-config accepts the file (the daemon starts) and warns about the server.
    check_config_warns(
        &d.config,
        "will not start: IMPORTED_GH_AUTHORIZATION is not set",
    )
    .await;
}

#[tokio::test]
async fn ctl_agents_shows_the_client_behind_connect_and_not_itself() {
    let d = DaemonBuilder::new().fixture("fx", &[]).start().await;
    d.wait_ready().await;
    let mut shim = tokio::process::Command::new(mcpd_bin())
        .args(["connect", "--socket"])
        .arg(&d.socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let shim_pid = shim.id().unwrap();
    let mut stdin = shim.stdin.take().unwrap();
    let stdout = shim.stdout.take().unwrap();
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "first-contact-client", "version": "9.9"}}});
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    within("the initialize answer", lines.next_line())
        .await
        .unwrap();
    let listed = eventually("ctl agents lists the client", WAIT, || async {
        let (code, out, _) = d.run_cli(&["ctl", "agents", "--json"]).await;
        let v: Value = serde_json::from_str(&out).ok()?;
        (code == 0 && v["agents"][0]["client"] == "first-contact-client").then_some(v)
    })
    .await;
    let agents = listed["agents"].as_array().unwrap();
    assert_eq!(
        agents.len(),
        1,
        "ctl's own connection is no agent: {listed}"
    );
    let me = std::env::current_exe().unwrap();
    let a = &agents[0];
    assert_eq!(a["via"], "mcpd connect", "{a}");
    assert_eq!(a["bridge_pid"], shim_pid, "{a}");
    assert_eq!(a["pid"], std::process::id(), "the client is this test: {a}");
    assert_eq!(a["exe"], me.to_str().unwrap(), "{a}");
    let (code, table, err) = d.run_cli(&["ctl", "agents"]).await;
    assert_eq!(code, 0, "{err}");
    let name = me.file_name().unwrap().to_str().unwrap();
    assert!(
        table.contains(&format!("{name} (via mcpd connect)")),
        "the table shows the client's executable whole:\n{table}"
    );
    assert_eq!(table.lines().count(), 2, "a header and one agent:\n{table}");
    drop(stdin);
    let _ = within("the shim exits", shim.wait()).await;
}

#[tokio::test]
async fn the_command_line_speaks_to_a_person() {
    let long = "a_tool_name_long_enough_to_push_columns";
    let d = DaemonBuilder::new()
        .fixture_with(
            "fx",
            &[],
            &format!("[servers.fx.tools.rename]\necho = \"{long}\""),
        )
        .fixture_with("off", &[], "enabled = false")
        .server("gone", "/no/such/mcpd-test-server", &[], "")
        .start()
        .await;
    d.wait_server("fx", "fx is ready", |r| r["state"] == "ready")
        .await;
    // A disabled server says so.
    let off = d.server_status("off").await;
    assert_eq!(off["state"], "disabled", "{off}");
    // Long names move the description column instead of running into it.
    let (code, out, err) = d.run_cli(&["ctl", "tools", "fx"]).await;
    assert_eq!(code, 0, "{err}");
    let at = format!("fx__{long}  ").len();
    assert!(out.contains(&format!("fx__{long}  ")), "{out}");
    for line in out.lines().filter(|l| l.len() > at) {
        assert!(
            line[..at].ends_with("  ") && !line[at..].starts_with(' '),
            "every description starts in one column:\n{out}"
        );
    }
    // Bad JSON for `ctl call` says where.
    let (code, _, err) = d.run_cli(&["ctl", "call", "fx__add", "{\"a\": 1,}"]).await;
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("line 1, column"), "{err}");
    // An unknown tool is explained for a person, not an agent.
    let (code, _, err) = d.run_cli(&["ctl", "call", "fx__nope", "{}"]).await;
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("`mcpd ctl tools` lists") && !err.contains("tools/list"),
        "{err}"
    );
    // A fatal error prints its cause once.
    let (code, _, err) = run_mcpd(&["serve", "--config", "/no/such/mcpd.toml"], None).await;
    assert_eq!(code, 78, "{err}");
    let lines: Vec<&str> = err.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if let Some(cause) = l.strip_prefix("caused by: ") {
            assert!(
                !lines[..i].iter().any(|earlier| earlier.contains(cause)),
                "the cause is printed twice:\n{err}"
            );
        }
    }
    // check-config warns about a command the daemon will not find.
    check_config_warns(
        &d.config,
        "command /no/such/mcpd-test-server is not an executable file",
    )
    .await;
}

#[tokio::test]
async fn a_config_file_created_after_the_daemon_started_is_read_by_ctl_reload() {
    let home = tempfile::Builder::new()
        .prefix("mcpd-fc")
        .tempdir_in("/tmp")
        .unwrap();
    let config_home = home.path().join("config");
    let socket = home.path().join("s.sock");
    let mut daemon = serve(
        &["--socket", path_str(&socket)],
        &home.path().join("log"),
        &[("XDG_CONFIG_HOME", path_str(&config_home))],
    );
    eventually("the socket is there", WAIT, || async {
        socket.exists().then_some(())
    })
    .await;
    let said = std::fs::read_to_string(home.path().join("log")).unwrap();
    assert!(said.contains("mcpd ctl reload"), "{said}");
    std::fs::create_dir_all(config_home.join("mcpd")).unwrap();
    std::fs::write(
        config_home.join("mcpd/mcpd.toml"),
        format!("[servers.fx]\ncommand = {:?}\n", fixture_bin()),
    )
    .unwrap();
    let (code, out, err) = run_mcpd(&["ctl", "reload"], Some(&socket)).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("fx"), "the reload added fx: {out}");
    let _ = daemon.start_kill();
    let _ = daemon.wait().await;
}

/// `mcpd serve ARGS` with `env` set and stderr in `log`, without the variables the
/// harness clears, and without a session bus: no test reaches the user's keyring.
fn serve(args: &[&str], log: &Path, env: &[(&str, &str)]) -> tokio::process::Child {
    let log = std::fs::File::create(log).unwrap();
    tokio::process::Command::new(mcpd_bin())
        .arg("serve")
        .args(args)
        .envs(env.iter().copied())
        .env_remove("MCPD_CONFIG")
        .env_remove("MCPD_SOCKET")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Writes `text` at `home/rel`, creating the folders.
fn put(home: &Path, rel: &str, text: &str) {
    let path = home.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[tokio::test]
async fn import_from_every_client_then_serve_runs_every_server_and_the_unresolvable_one_fails_alone()
 {
    let home = tempfile::Builder::new()
        .prefix("mcpd-fc")
        .tempdir_in("/tmp")
        .unwrap();
    let h = home.path();
    let fx = serde_json::to_string(fixture_bin()).unwrap();
    // One server per client, each in the shape that client writes; an env value tells
    // them apart (import skips a server it has already imported from another client).
    let stdio =
        |who: &str| format!(r#"{{"command": {fx}, "args": [], "env": {{"WHO": "{who}"}}}}"#);
    put(
        h,
        ".claude.json",
        &format!(
            r#"{{"numStartups": 3, "mcpServers": {{"cc": {}, "gh-remote": {{"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {{"Authorization": "Bearer literal-secret"}}}}}},
               "projects": {{"/work/p": {{"mcpServers": {{"cc-project": {}}}}}}}}}"#,
            stdio("claude-code"),
            stdio("claude-code-project")
        ),
    );
    put(
        h,
        "config/Claude/claude_desktop_config.json",
        &format!(
            r#"{{"mcpServers": {{"desktop": {}}}}}"#,
            stdio("claude-desktop")
        ),
    );
    put(
        h,
        ".cursor/mcp.json",
        &format!(r#"{{"mcpServers": {{"cur": {}}}}}"#, stdio("cursor")),
    );
    put(
        h,
        "config/Code/User/mcp.json",
        &format!(
            r#"{{"servers": {{"vs": {{"type": "stdio", "command": {fx}, "env": {{"WHO": "vscode"}}}}}}, "inputs": []}}"#
        ),
    );
    put(
        h,
        ".gemini/settings.json",
        &format!(
            r#"{{"mcpServers": {{"gem": {}}}, "security": {{"auth": {{"selectedType": "oauth-personal"}}}}}}"#,
            stdio("gemini")
        ),
    );
    put(
        h,
        ".codex/config.toml",
        &format!(
            "model = \"o3\"\n\n[mcp_servers.cdx]\ncommand = {fx}\nargs = []\n\n[mcp_servers.cdx.env]\nWHO = \"codex\"\n"
        ),
    );
    let config = h.join("mcpd.toml");
    let project = h.join("elsewhere");
    std::fs::create_dir_all(&project).unwrap();
    let imported = tokio::process::Command::new(mcpd_bin())
        .args(["import", "--config"])
        .arg(&config)
        .current_dir(&project)
        .env("HOME", h)
        .env("XDG_CONFIG_HOME", h.join("config"))
        .env_remove("CODEX_HOME")
        .env_remove("GEMINI_CLI_HOME")
        .env_remove("MCPD_CONFIG")
        // The literal token goes to the file store under h, never to the user's stores.
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env_remove("CREDENTIALS_DIRECTORY")
        .env("XDG_RUNTIME_DIR", h)
        .env("XDG_STATE_HOME", h.join("state"))
        .output();
    let imported = within("mcpd import", imported).await.unwrap();
    let said = String::from_utf8_lossy(&imported.stdout).into_owned()
        + &String::from_utf8_lossy(&imported.stderr);
    assert!(imported.status.success(), "{said}");
    assert!(
        said.contains("[servers.gh-remote] header Authorization: secret gh-remote-Authorization in the file store"),
        "import says where the token went:\n{said}"
    );
    assert!(!said.contains("literal-secret"), "{said}");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(!text.contains("literal-secret"), "{text}");
    // Its secret taken away again, gh-remote is the one server that cannot start.
    let stored = h.join("state/mcpd/secrets/gh-remote-Authorization.json");
    std::fs::remove_file(&stored).unwrap_or_else(|e| panic!("{}: {e}", stored.display()));
    let socket = h.join("s.sock");
    let state = h.join("state");
    let mut daemon = serve(
        &["--config", path_str(&config), "--socket", path_str(&socket)],
        &h.join("daemon.log"),
        &[
            ("XDG_STATE_HOME", path_str(&state)),
            ("XDG_RUNTIME_DIR", path_str(h)),
        ],
    );
    let servers = ["cc", "cc-project", "desktop", "cur", "vs", "gem", "cdx"];
    let rows = eventually("every imported stdio server is ready", WAIT, || async {
        let (code, out, _) = run_mcpd(&["ctl", "status", "--json"], Some(&socket)).await;
        let v: Value = serde_json::from_str(&out).ok()?;
        let rows = v["servers"].as_array()?.clone();
        let ready = |name: &str| {
            rows.iter()
                .any(|r| r["name"] == name && r["state"] == "ready")
        };
        (code == 0 && servers.iter().all(|s| ready(s))).then_some(rows)
    })
    .await;
    assert_eq!(rows.len(), servers.len() + 1, "{rows:#?}");
    // Not started without its secret, which the error names with how to set it.
    let gh = eventually("gh-remote failed for want of its secret", WAIT, || async {
        let (_, out, _) = run_mcpd(&["ctl", "status", "--json"], Some(&socket)).await;
        let v: Value = serde_json::from_str(&out).ok()?;
        let gh = v["servers"]
            .as_array()?
            .iter()
            .find(|r| r["name"] == "gh-remote")?
            .clone();
        (gh["state"] == "failed").then_some(gh)
    })
    .await;
    let why = gh["last_error"].as_str().unwrap_or_default();
    assert!(
        why.contains("secret \"gh-remote-Authorization\" is not set")
            && why.contains("mcpd ctl secret set gh-remote-Authorization"),
        "{gh}"
    );
    let _ = daemon.start_kill();
    let _ = daemon.wait().await;
}
