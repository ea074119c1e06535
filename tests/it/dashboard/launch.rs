//! Logins kept from servers.
//!
//! A process of a server mcpd started gets 403 from the dashboard whatever cookie or
//! token it holds (the same request from outside the daemon's tree is served); `mcpd ctl
//! ui` and `mcpd ctl login` hand the browser a launch page's path, never the token or the
//! OAuth state, on the command line; the page logs a real Chromium in (or sends the
//! browser to the authorization server) and is removed once read.

use crate::dashboard::browser::Browser;
use crate::dashboard::login::{cookie_for, launch_url, origin, plain};
use crate::sandbox::escapes::attempt;
use crate::support::{Daemon, DaemonBuilder, WAIT, http_client, mcpd_bin, within};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn port_of(origin: &str) -> u16 {
    origin
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port")
}

#[tokio::test]
async fn a_servers_process_with_a_valid_cookie_or_token_gets_403_and_the_same_request_from_outside_is_served()
 {
    let d = DaemonBuilder::new()
        .fixture("probe", &["--tools", "try_http"])
        .start()
        .await;
    d.wait_ready().await;
    let origin = origin(&d).await;
    let port = port_of(&origin);
    let cookie = cookie_for(&launch_url(&d).await).await;
    let mut a = d.agent().await;

    // The server (unconfined, so only its descent from mcpd tells it apart) with the
    // user's own session cookie: refused.
    let seen = attempt(
        &mut a,
        "probe",
        "try_http",
        json!({"port": port, "path": "/", "cookie": cookie}),
    )
    .await;
    assert!(seen.starts_with("ok: HTTP/1.1 403"), "{seen}");
    // The same request from the test, which mcpd did not start: the overview.
    let r = plain()
        .get(format!("{origin}/"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("get /");
    assert_eq!(r.status(), reqwest::StatusCode::OK);

    // A fresh launch token the server got hold of: refused, and not used up by it.
    let url = launch_url(&d).await;
    let path = url.strip_prefix(&origin).expect("the token's path");
    let seen = attempt(
        &mut a,
        "probe",
        "try_http",
        json!({"port": port, "path": path}),
    )
    .await;
    assert!(seen.starts_with("ok: HTTP/1.1 403"), "{seen}");
    let r = plain().get(&url).send().await.expect("login");
    assert_eq!(
        r.status(),
        reqwest::StatusCode::SEE_OTHER,
        "the token still works"
    );
    assert!(
        d.log_text()
            .contains("refused a dashboard request from a process of a server mcpd started")
    );
}

/// A stand-in `xdg-open` in a directory of its own: it writes its arguments, one per
/// line, to `args` beside it (what any process could read in `/proc/PID/cmdline`).
fn fake_opener(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("xdg-open");
    let args = dir.join("args");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done > {0}.tmp && mv {0}.tmp {0}\n",
            args.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

async fn wait_for_file(path: &Path) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `mcpd ctl ui` as a user with a display would, with the stand-in opener first on
/// the PATH.
fn ctl_ui(d: &Daemon, bin: &Path) -> tokio::process::Child {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    tokio::process::Command::new(mcpd_bin())
        .args(["ctl", "ui", "--socket"])
        .arg(&d.socket)
        .env("DISPLAY", ":99")
        .env("PATH", path)
        .env_remove("MCPD_SOCKET")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("mcpd ctl ui")
}

#[tokio::test]
async fn ctl_ui_puts_no_token_on_a_command_line_and_its_launch_page_logs_a_browser_in() {
    let d = DaemonBuilder::new().fixture("alpha", &[]).start().await;
    d.wait_ready().await;
    let origin = origin(&d).await;
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_opener(dir.path());
    let ctl = ctl_ui(&d, &bin);

    let args = wait_for_file(&dir.path().join("args")).await;
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(args.len(), 1, "one argument: {args:?}");
    let page = PathBuf::from(args[0]);
    // A path beside the socket, holding no token (64 hex digits) and no address.
    assert_eq!(
        page.parent().and_then(Path::parent),
        d.socket.parent(),
        "{page:?}"
    );
    assert!(
        !args[0].contains("token") && !args[0].contains("http"),
        "{args:?}"
    );
    let hex_run = args[0]
        .split(|c: char| !c.is_ascii_hexdigit())
        .map(str::len)
        .max()
        .unwrap_or(0);
    assert!(hex_run < 64, "no token in {args:?}");
    let meta = std::fs::metadata(&page).expect("the launch page");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let dir_mode = std::fs::metadata(page.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700);
    // Not read here: the first read is the browser's, after which the page goes.

    let Some(browser) = Browser::start("dashboard::launch::page").await else {
        return;
    };
    browser.goto(&format!("file://{}", page.display())).await;
    browser
        .wait_for_text("tr[data-server=alpha] td.state", "ready")
        .await;
    let now = crate::dashboard::browser::step("current URL", browser.client().current_url()).await;
    assert_eq!(now.as_str(), format!("{origin}/"));
    browser.close().await;

    // The page was read, so ctl removed it and ended; the address it printed is used up.
    let out = within("mcpd ctl ui", ctl.wait_with_output())
        .await
        .expect("ctl ui");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("no browser read"), "{stderr}");
    assert!(!page.exists(), "the launch page was removed");
    let url = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let r = plain().get(&url).send().await.expect("reuse");
    assert_eq!(
        r.status(),
        reqwest::StatusCode::FORBIDDEN,
        "the page used it"
    );
}

#[tokio::test]
async fn ctl_login_puts_no_oauth_state_on_a_command_line_and_its_launch_page_sends_the_browser_on()
{
    let fx = crate::oauth::fixture::OAuthFixture::builder().start().await;
    let d = DaemonBuilder::new()
        .remote("r", &fx.mcp_url(), "")
        .start()
        .await;
    d.wait_server("r", "r needs a login", |s| s["state"] == "needs-login")
        .await;
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_opener(dir.path());
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ctl = tokio::process::Command::new(mcpd_bin())
        .args(["ctl", "--socket"])
        .arg(&d.socket)
        .args(["login", "r"])
        .env("DISPLAY", ":99")
        .env("PATH", path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("mcpd ctl login");
    let url = crate::oauth::logins::printed_url(&mut ctl).await;
    assert!(
        url.contains("state=") && url.contains("code_challenge="),
        "{url}"
    );

    // xdg-open was given a page's path: no state, no challenge, no address.
    let args = wait_for_file(&dir.path().join("args")).await;
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(args.len(), 1, "one argument: {args:?}");
    assert!(
        !args[0].contains("state") && !args[0].contains("http"),
        "{args:?}"
    );
    let page = PathBuf::from(args[0]);
    assert_eq!(page.parent().and_then(Path::parent), d.socket.parent());
    assert_eq!(
        std::fs::metadata(&page).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // Read as a browser would: the page sends it to the authorization URL; once read,
    // the page goes.
    let html = std::fs::read_to_string(&page).unwrap();
    let js = serde_json::to_string(&url).unwrap();
    assert!(html.contains(&format!("location.replace({js})")), "{html}");
    let deadline = tokio::time::Instant::now() + WAIT;
    while page.exists() {
        assert!(tokio::time::Instant::now() < deadline, "the page stayed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The browser goes on: the login completes as before.
    let location = crate::oauth::logins::authorize(&url).await;
    let r = http_client().get(&location).send().await.expect("callback");
    assert_eq!(r.status().as_u16(), 200);
    let out = within("ctl login", ctl.wait_with_output())
        .await
        .expect("ctl login");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("logged in to r"), "{stderr}");
}
