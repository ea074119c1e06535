//! Secrets through the real daemon.
//!
//! `${secret:NAME}` in a server's env put in at each start from the first store that has
//! it (systemd credentials, then mcpd's file store here; the keyring in
//! `keyring/secrets.rs`), `mcpd ctl secret` storing from standard input, a missing secret
//! keeping that server alone down, no Secret Service meaning the file store and never a
//! hang, and the value in none of mcpd's outputs.

use crate::support::*;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use tokio::io::AsyncWriteExt;

/// `mcpd ctl ARGS` against `socket`, with `input` on its standard input (a pipe, as
/// `mcpd ctl secret set NAME < file` gives it); (code, stdout, stderr).
pub async fn ctl_with_input(socket: &Path, args: &[&str], input: &str) -> (i32, String, String) {
    let mut cmd = tokio::process::Command::new(mcpd_bin());
    cmd.arg("ctl")
        .args(args)
        .arg("--socket")
        .arg(socket)
        .env_remove("MCPD_SOCKET")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run mcpd ctl");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(input.as_bytes())
        .await
        .expect("write stdin");
    drop(stdin);
    let out = within("mcpd ctl", child.wait_with_output())
        .await
        .expect("mcpd ctl output");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The fixture's environment as the server sees it.
pub async fn server_env(d: &Daemon, server: &str) -> Value {
    let mut agent = d.initialized_agent().await;
    let r = agent.call(&format!("{server}__env_json"), json!({})).await;
    serde_json::from_str(text(&r)).unwrap_or_else(|e| panic!("{e}: {r}"))
}

/// A daemon with one fixture server `s` whose `TOKEN` is `pre-${secret:api-token}`.
fn with_secret_env() -> DaemonBuilder {
    DaemonBuilder::new()
        .daemon("secrets = \"file\"")
        // No Secret Service here: the tests own every store they use.
        .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .fixture_with(
            "s",
            &["--tools", "env_json"],
            "env = { TOKEN = \"pre-${secret:api-token}\" }",
        )
}

#[tokio::test]
async fn a_missing_secret_stops_its_server_alone_until_ctl_secret_set_gives_it() {
    let d = with_secret_env().fixture("other", &[]).start().await;
    let s = d
        .wait_server("s", "s failed for want of its secret", |s| {
            s["state"] == "failed"
        })
        .await;
    let why = s["last_error"].as_str().unwrap_or_default();
    assert!(
        why.contains("secret \"api-token\" is not set")
            && why.contains("mcpd ctl secret set api-token")
            && why.contains("LoadCredential=api-token:"),
        "{s}"
    );
    assert_eq!(s["secrets"], json!(["api-token"]), "{s}");
    d.wait_server("other", "the other server runs", |s| s["state"] == "ready")
        .await;
    let config = d.config.to_string_lossy().into_owned();
    let (code, out, _) = run_mcpd(&["check-config", "--config", &config], None).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("warning: will not start: secret \"api-token\" is not set"),
        "{out}"
    );
    // A disabled server's secrets are not looked for.
    assert!(!out.contains("never-set"), "{out}");

    let value = "s3cr3t-from-stdin";
    let (code, out, err) = ctl_with_input(
        &d.socket,
        &["secret", "set", "api-token"],
        &format!("{value}\n"),
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("stored secret api-token in mcpd's file store"),
        "{err}"
    );
    assert!(err.contains("starting s, which waited for it"), "{err}");
    d.wait_server("s", "s starts once the secret is set", |s| {
        s["state"] == "ready"
    })
    .await;
    assert_eq!(server_env(&d, "s").await["TOKEN"], format!("pre-{value}"));
    let (_, out, _) = run_mcpd(&["check-config", "--config", &config], None).await;
    assert!(
        out.contains("secret api-token: in mcpd's file store"),
        "{out}"
    );

    // Kept privately, by name, in the state directory.
    let file = d.dir().join("state/secrets/api-token.json");
    let mode = std::fs::metadata(&file)
        .expect("the file store's file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // A new value reaches the server at its next start, as ctl says.
    let (code, _, err) =
        ctl_with_input(&d.socket, &["secret", "set", "api-token"], "second-value").await;
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("s is running with the value it started with"),
        "{err}"
    );
    assert_eq!(server_env(&d, "s").await["TOKEN"], format!("pre-{value}"));
    let (code, _, err) = d.run_cli(&["ctl", "restart", "s"]).await;
    assert_eq!(code, 0, "{err}");
    d.wait_server("s", "s restarted", |s| {
        s["state"] == "ready" && s["restarts"] == 1
    })
    .await;
    assert_eq!(server_env(&d, "s").await["TOKEN"], "pre-second-value");

    // Listed by name and store, never by value; removed on request.
    let (code, out, err) = d.run_cli(&["ctl", "secret", "list"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("api-token") && out.contains("file"), "{out}");
    assert!(
        !out.contains("second-value") && !out.contains(value),
        "{out}"
    );
    let (code, _, err) = d.run_cli(&["ctl", "secret", "rm", "api-token"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(!file.exists());
    let (code, _, err) = d.run_cli(&["ctl", "secret", "rm", "api-token"]).await;
    assert_ne!(code, 0);
    assert!(err.contains("no secret \"api-token\""), "{err}");
}

#[tokio::test]
async fn systemd_credentials_come_before_the_file_store() {
    let b = with_secret_env();
    let creds = b.dir().join("creds");
    std::fs::create_dir(&creds).unwrap();
    std::fs::write(creds.join("api-token"), "from-credentials").unwrap();
    let d = b
        .env("CREDENTIALS_DIRECTORY", &creds.to_string_lossy())
        .start()
        .await;
    d.wait_ready().await;
    assert_eq!(server_env(&d, "s").await["TOKEN"], "pre-from-credentials");
    // The file store has one too: the credential still wins.
    let (code, _, err) =
        ctl_with_input(&d.socket, &["secret", "set", "api-token"], "from-file").await;
    assert_eq!(code, 0, "{err}");
    d.run_cli(&["ctl", "restart", "s"]).await;
    d.wait_server("s", "s restarted", |s| {
        s["state"] == "ready" && s["restarts"] == 1
    })
    .await;
    assert_eq!(server_env(&d, "s").await["TOKEN"], "pre-from-credentials");
    let (_, out, _) = d.run_cli(&["ctl", "secret", "list"]).await;
    assert!(out.contains("credentials") && out.contains("file"), "{out}");
    // Without the credential, the next start finds the file store's.
    std::fs::remove_file(creds.join("api-token")).unwrap();
    d.run_cli(&["ctl", "restart", "s"]).await;
    d.wait_server("s", "s restarted again", |s| {
        s["state"] == "ready" && s["restarts"] == 2
    })
    .await;
    assert_eq!(server_env(&d, "s").await["TOKEN"], "pre-from-file");
}

/// A Unix socket that accepts connections and never answers: a session bus that hangs.
fn hanging_bus(dir: &Path) -> (String, tokio::task::JoinHandle<()>) {
    let path = dir.join("hanging-bus");
    let listener = tokio::net::UnixListener::bind(&path).expect("bind the hanging bus");
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            held.push(conn);
        }
    });
    (format!("unix:path={}", path.display()), task)
}

#[tokio::test]
async fn a_session_bus_that_never_answers_costs_a_bounded_wait_then_the_file_store() {
    let b = DaemonBuilder::new().fixture_with(
        "s",
        &["--tools", "env_json"],
        "env = { TOKEN = \"${secret:api-token}\" }",
    );
    let (address, _bus) = hanging_bus(b.dir());
    let d = b.env("DBUS_SESSION_BUS_ADDRESS", &address).start().await;
    d.wait_server("s", "s failed for want of its secret", |s| {
        s["state"] == "failed"
    })
    .await;
    // "auto" settles on the file store once the probe's deadline passes.
    let (code, out, err) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("new secrets go to mcpd's file store ([daemon] secrets = \"auto\")"),
        "{out}"
    );
    let (code, _, err) = ctl_with_input(&d.socket, &["secret", "set", "api-token"], "v").await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("in mcpd's file store"), "{err}");
    // The start waits for the keyring's deadline, then finds the file store's value.
    d.wait_server("s", "s starts from the file store", |s| {
        s["state"] == "ready"
    })
    .await;
    assert_eq!(server_env(&d, "s").await["TOKEN"], "v");
}

#[tokio::test]
async fn a_configured_keyring_that_cannot_be_reached_is_an_error_that_says_what_to_do() {
    let d = DaemonBuilder::new()
        .daemon("secrets = \"keyring\"")
        .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .fixture("other", &[])
        .start()
        .await;
    let (code, _, err) = ctl_with_input(&d.socket, &["secret", "set", "tok"], "v").await;
    assert_ne!(code, 0);
    assert!(
        err.contains("the keyring: cannot connect to the session bus")
            && err.contains("set [daemon] secrets = \"file\"")
            && err.contains("-32025"),
        "{err}"
    );
    // Bad input is refused the same way, and the daemon runs on.
    let (code, _, err) = ctl_with_input(&d.socket, &["secret", "set", "a/b"], "v").await;
    assert_ne!(code, 0);
    assert!(err.contains("secret name \"a/b\" has '/'"), "{err}");
    let (code, _, err) = ctl_with_input(&d.socket, &["secret", "set", "tok"], "").await;
    assert_ne!(code, 0);
    assert!(err.contains("no value given for secret tok"), "{err}");
    d.wait_ready().await;
}

#[tokio::test]
async fn a_value_typed_at_a_terminal_is_not_echoed() {
    let d = with_secret_env().start().await;
    d.wait_server("s", "s waits for its secret", |s| s["state"] == "failed")
        .await;
    // `script` gives `mcpd ctl` a terminal (a pseudo-terminal whose input is this pipe):
    // what the terminal shows comes back on script's output.
    let command = format!(
        "{} ctl --socket {} secret set api-token",
        mcpd_bin(),
        d.socket.display()
    );
    let mut child = tokio::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env_remove("MCPD_SOCKET")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run script (bsdutils)");
    let mut stdin = child.stdin.take().expect("stdin");
    // Typed once the prompt is up: the terminal's echo is off by then.
    let mut out = child.stdout.take().expect("stdout");
    let mut shown = Vec::new();
    within("the prompt", async {
        let mut buf = [0u8; 256];
        while !String::from_utf8_lossy(&shown).contains("(not shown): ") {
            let n = tokio::io::AsyncReadExt::read(&mut out, &mut buf)
                .await
                .expect("read the terminal");
            assert!(n > 0, "the terminal closed before the prompt: {shown:?}");
            shown.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    stdin.write_all(b"typed-VALUE-9\n").await.expect("type");
    let status = within("mcpd ctl secret set", child.wait())
        .await
        .expect("wait");
    let mut rest = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(&mut out, &mut rest)
        .await
        .expect("the rest of the terminal");
    shown.extend_from_slice(&rest);
    let shown = String::from_utf8_lossy(&shown);
    assert!(status.success(), "{shown}");
    assert!(shown.contains("stored secret api-token"), "{shown}");
    assert!(
        !shown.contains("typed-VALUE-9"),
        "the value was echoed: {shown}"
    );
    d.wait_server("s", "s starts", |s| s["state"] == "ready")
        .await;
    assert_eq!(server_env(&d, "s").await["TOKEN"], "pre-typed-VALUE-9");
}

/// A confined server gets its secrets as an unconfined one does: its environment is made
/// from the launch with the values put in, not from the config's text.
#[tokio::test]
async fn a_confined_server_gets_its_secret_like_an_unconfined_one() {
    let table = "env = { TOKEN = \"pre-${secret:api-token}\" }";
    let d = DaemonBuilder::new()
        .daemon("secrets = \"file\"")
        .daemon("sandbox = true")
        .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .fixture_with("boxed", &["--tools", "env_json"], table)
        .fixture_with(
            "open",
            &["--tools", "env_json"],
            &format!("{table}\nsandbox = false"),
        )
        .start()
        .await;
    let (code, out, err) =
        ctl_with_input(&d.socket, &["secret", "set", "api-token"], "v4lue\n").await;
    assert_eq!(code, 0, "{out}{err}");
    for name in ["boxed", "open"] {
        let s = d
            .wait_server(name, "ready once the secret is set", |s| {
                s["state"] == "ready"
            })
            .await;
        assert!(name == "open" || s["sandbox"].is_object(), "{s}");
        // "secret … is not set" was its error until the secret came: not any more.
        assert!(s["last_error"].is_null(), "{s}");
        let env = server_env(&d, name).await;
        assert_eq!(env["TOKEN"], "pre-v4lue", "{name}: {env}");
    }
}
