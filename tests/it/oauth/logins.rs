//! OAuth logins to remote servers through the real daemon and `mcpd ctl login`.
//!
//! They run against the in-process OAuth fixture: needs-login, the loopback and pasted
//! redirects, refresh for many agents, restarts, revocation, step-up and logout.

use crate::oauth::fixture::{OAuthFixture, OAuthHandle};
use crate::support::*;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// `mcpd ctl login NAME --no-browser EXTRA…` running, and the authorization URL it printed.
async fn start_login(d: &Daemon, name: &str, extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(mcpd_bin())
        .args(["ctl", "--socket"])
        .arg(&d.socket)
        .args(["login", name, "--no-browser"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn ctl login");
    let url = printed_url(&mut child).await;
    (child, url)
}

/// The authorization URL a running `mcpd ctl login` printed (its stdout is taken).
pub(crate) async fn printed_url(child: &mut Child) -> String {
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    within("the authorization URL", async {
        loop {
            match lines.next_line().await.expect("read ctl login") {
                Some(l) if l.starts_with("http") => break l,
                Some(_) => continue,
                None => panic!("ctl login printed no URL"),
            }
        }
    })
    .await
}

/// What a browser does with the fixture's auto-approving authorization server: GET the
/// URL and find where it redirects (without following).
pub(crate) async fn authorize(url: &str) -> String {
    let _ = rustls::crypto::ring::default_provider().install_default(); // once per process
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let resp = client.get(url).send().await.expect("GET authorization URL");
    assert_eq!(resp.status().as_u16(), 302, "the AS approves at once");
    resp.headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .expect("a Location")
        .to_owned()
}

/// The whole login through the loopback listener: exit 0, and the page says so.
pub(crate) async fn log_in(d: &Daemon, name: &str) {
    let (child, url) = start_login(d, name, &[]).await;
    let location = authorize(&url).await;
    assert!(
        location.starts_with("http://127.0.0.1:"),
        "the redirect comes to mcpd's loopback listener: {location}"
    );
    let page = http_client().get(&location).send().await.expect("callback");
    assert_eq!(page.status().as_u16(), 200);
    assert!(page.text().await.unwrap_or_default().contains("logged in"));
    let out = within("ctl login to end", child.wait_with_output())
        .await
        .expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(&format!("logged in to {name}")), "{stderr}");
}

fn builder(fx: &OAuthFixture, extra: &str) -> DaemonBuilder {
    DaemonBuilder::new()
        .fixture("local", &["--tools", "echo"])
        .remote("r", &fx.mcp_url(), extra)
}

async fn daemon(fx: &OAuthFixture, extra: &str) -> Daemon {
    builder(fx, extra).start().await
}

/// A restart after the default first backoff (250 ms with equal jitter, so under 250 ms)
/// would have come by three of the clock's 250 ms periods (each at least 125 ms).
const RETRY_WINDOW: u64 = 3;

fn credentials(d: &Daemon) -> std::path::PathBuf {
    d.dir().join("state/credentials/r.json")
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777
}

async fn wait_state(d: &Daemon, state: &str) -> Value {
    d.wait_server("r", &format!("r is {state}"), |s| s["state"] == state)
        .await
}

#[tokio::test]
async fn a_server_that_asks_for_a_login_waits_for_ctl_login_then_serves_every_agent() {
    let fx = OAuthFixture::builder().start().await;
    let d = builder(&fx, "").clock("250ms").start().await;
    let s = wait_state(&d, "needs-login").await;
    assert!(
        s["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("run `mcpd ctl login r`"),
        "{s}"
    );
    assert_eq!(s["auth"]["state"], "needs-login", "{s}");
    // Other servers are unaffected; a call under the prefix (no tool list known yet)
    // gets the hint, not "unknown tool".
    d.wait_server("local", "local is ready", |s| s["state"] == "ready")
        .await;
    let mut a = d.initialized_agent().await;
    let r = a.call("r__echo", json!({"text": "x"})).await;
    assert_eq!(error_code(&r), Some(-32010), "{r}");
    assert!(error_message(&r).contains("mcpd ctl login r"), "{r}");
    let r = a.call("local__echo", json!({"text": "x"})).await;
    assert_eq!(text(&r), "x", "{r}");
    // Not retried in a loop.
    let posts = fx.http().stats().posts;
    d.clock_ticks(RETRY_WINDOW).await;
    assert_eq!(
        fx.http().stats().posts,
        posts,
        "a needs-login server is not retried"
    );
    assert_eq!(d.server_status("r").await["restarts"], 0);

    log_in(&d, "r").await;
    wait_state(&d, "ready").await;
    let r = a.call("r__echo", json!({"text": "hello"})).await;
    assert_eq!(text(&r), "hello", "{r}");
    let mut b = d.initialized_agent().await;
    let r = b.call("r__echo", json!({"text": "again"})).await;
    assert_eq!(text(&r), "again", "{r}");

    let s = d.server_status("r").await;
    assert_eq!(s["auth"]["state"], "logged-in", "{s}");
    assert_eq!(s["auth"]["issuer"], fx.issuer(), "{s}");
    let file = credentials(&d);
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().expect("dir")), 0o700);
    // Tokens are in the store and nowhere else: not in status, not in the log.
    let (code, status_text, _) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0);
    assert!(
        status_text.contains("auth: logged in (expires in"),
        "{status_text}"
    );
    let (_, status_json, _) = d.run_cli(&["ctl", "status", "--json"]).await;
    let log = d.log_text();
    let stored = std::fs::read_to_string(&file).expect("credentials");
    let tokens = fx.handle().valid_access_tokens();
    assert!(!tokens.is_empty());
    for t in tokens.iter().chain(&fx.handle().valid_refresh_tokens()) {
        assert!(stored.contains(t.as_str()), "the store keeps the tokens");
        assert!(!log.contains(t.as_str()), "a token reached the log");
        assert!(!status_json.contains(t.as_str()), "a token reached status");
        assert!(!status_text.contains(t.as_str()), "a token reached status");
    }
}

#[tokio::test]
async fn without_a_prefix_a_call_to_a_server_waiting_for_a_login_says_so() {
    // With `prefix = ""` the name does not say its server; a server that waits for a
    // login has listed nothing, so the call is taken to be for it.
    let fx = OAuthFixture::builder().start().await;
    let d = daemon(&fx, "prefix = \"\"").await;
    wait_state(&d, "needs-login").await;
    d.wait_server("local", "local is ready", |s| s["state"] == "ready")
        .await;
    let mut a = d.initialized_agent().await;
    let r = a.call("echo", json!({"text": "x"})).await;
    assert_eq!(error_code(&r), Some(-32010), "{r}");
    assert!(error_message(&r).contains("mcpd ctl login r"), "{r}");
    let (code, _, err) = d.run_cli(&["ctl", "call", "echo", "{}"]).await;
    assert_ne!(code, 0);
    assert!(err.contains("mcpd ctl login r"), "{err}");
    // Once it has listed its tools, the names are its own again.
    log_in(&d, "r").await;
    wait_state(&d, "ready").await;
    let r = a.call("echo", json!({"text": "hello"})).await;
    assert_eq!(text(&r), "hello", "{r}");
    let r = a.call("nothing_like_it", json!({})).await;
    assert!(error_message(&r).contains("unknown tool"), "{r}");
}

#[tokio::test]
async fn a_pasted_redirect_logs_in_and_a_restarted_daemon_needs_no_new_login() {
    let fx = OAuthFixture::builder().start().await;
    let mut d = builder(&fx, "").clock("250ms").start().await;
    wait_state(&d, "needs-login").await;
    let (mut child, url) = start_login(&d, "r", &["--paste"]).await;
    // The browser could not reach this host's loopback: the person pastes the address.
    let location = authorize(&url).await;
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(format!("{location}\n").as_bytes())
        .await
        .expect("paste");
    let out = within("ctl login --paste to end", child.wait_with_output())
        .await
        .expect("wait");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_state(&d, "ready").await;
    let mut a = d.initialized_agent().await;
    assert_eq!(text(&a.call("r__echo", json!({"text": "p"})).await), "p");

    // A second paste of the same redirect cannot redeem the code again.
    let (code, _, err) = d
        .run_cli(&["ctl", "login", "r", "--no-browser", "--paste"])
        .await;
    assert_ne!(code, 0, "{err}");

    d.restart_daemon().await;
    wait_state(&d, "ready").await;
    let mut a = d.initialized_agent().await;
    assert_eq!(text(&a.call("r__echo", json!({"text": "q"})).await), "q");
    assert_eq!(
        fx.handle().token_requests("authorization_code"),
        1,
        "the stored login was used"
    );

    // The server's side forgets every token: the refresh is refused, and the server
    // needs a login, with the hint, not a retry storm.
    fx.handle().revoke_all();
    let r = a.call("r__echo", json!({"text": "z"})).await;
    assert!(error_message(&r).contains("mcpd ctl login r"), "{r}");
    let s = wait_state(&d, "needs-login").await;
    assert!(
        s["auth"]["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("invalid_grant"),
        "{s}"
    );
    let refreshes = fx.handle().token_requests("refresh_token");
    d.clock_ticks(RETRY_WINDOW).await;
    assert_eq!(fx.handle().token_requests("refresh_token"), refreshes);
    assert!(!credentials(&d).exists(), "spent credentials are removed");
}

/// Every refresh token was presented once at most, and no family was revoked.
fn one_refresh_each(h: &OAuthHandle) {
    let stats = h.stats();
    for (token, n) in &stats.refreshes {
        assert!(*n <= 1, "refresh token {token} was presented {n} times");
    }
    assert!(!h.any_family_revoked(), "{:?}", stats.families_revoked);
}

#[tokio::test]
async fn sixteen_agents_share_one_refresh_per_expiry_and_never_fail() {
    let fx = OAuthFixture::builder()
        .access_ttl(Duration::from_secs(2))
        .start()
        .await;
    let d = daemon(&fx, "").await;
    wait_state(&d, "needs-login").await;
    log_in(&d, "r").await;
    wait_state(&d, "ready").await;
    // The agents call until the authorization server has seen this many refreshes (about
    // 30 s of two-second tokens): the run is counted in refreshes, not timed.
    const REFRESHES: usize = 16;
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let mut agents = Vec::new();
    for i in 0..16 {
        let mut a = d.initialized_agent().await;
        let stop = stop.clone();
        agents.push(tokio::spawn(async move {
            let (mut ok, mut failed) = (0u32, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let r = a.call("r__echo", json!({"text": format!("a{i}")})).await;
                if text(&r) == format!("a{i}") {
                    ok += 1;
                } else {
                    failed.push(r);
                }
            }
            (ok, failed)
        }));
    }
    // One refresh per lifetime reaches the count in about 16 x 1.8 s. Past this deadline
    // the bounds below fail whatever the count, so a timeout is left for them to judge.
    let deadline = Duration::from_secs_f64(1.8 * (REFRESHES as f64 + 3.0) + 2.0);
    let _ = tokio::time::timeout(deadline, async {
        while fx.handle().token_requests("refresh_token") < REFRESHES {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for a in agents {
        let (ok, failed) = a.await.expect("agent");
        assert!(failed.is_empty(), "failed calls: {failed:?}");
        total += ok;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let refreshes = fx.handle().token_requests("refresh_token");
    println!("{total} calls by 16 agents in {elapsed:.1}s; {refreshes} refreshes");
    assert!(total > 16, "the agents made calls");
    one_refresh_each(fx.handle());
    // Refreshed about 0.2 s before each 2 s expiry: one refresh per lifetime, not one
    // per agent or per call.
    let lifetimes = elapsed / 1.8;
    assert!(
        (refreshes as f64) <= lifetimes + 2.0,
        "{refreshes} refreshes in {elapsed:.1}s"
    );
    assert!(
        (refreshes as f64) >= lifetimes - 3.0,
        "{refreshes} refreshes in {elapsed:.1}s: the token was not kept fresh"
    );
}

#[tokio::test]
async fn a_step_up_asks_again_with_the_union_of_scopes_and_logout_revokes() {
    let fx = OAuthFixture::builder()
        .challenge_scope("mcp:basic")
        .step_up("echo", &["mcp:basic", "mcp:write"])
        .start()
        .await;
    let d = daemon(&fx, "").await;
    wait_state(&d, "needs-login").await;
    log_in(&d, "r").await;
    wait_state(&d, "ready").await;
    let mut a = d.initialized_agent().await;
    let r = a.call("r__echo", json!({"text": "x"})).await;
    assert_eq!(error_code(&r), Some(-32019), "{r}");
    assert!(error_message(&r).contains("mcpd ctl login r"), "{r}");
    let s = d.server_status("r").await;
    assert_eq!(s["state"], "ready", "other tools still work: {s}");
    assert_eq!(
        s["auth"]["more_scope"],
        json!(["mcp:basic", "mcp:write"]),
        "{s}"
    );

    log_in(&d, "r").await;
    let scopes: Vec<String> = fx
        .handle()
        .stats()
        .authorizations
        .iter()
        .map(|a| {
            a.params
                .iter()
                .find(|(k, _)| k == "scope")
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(scopes.len(), 2, "{scopes:?}");
    assert_eq!(scopes[0], "mcp:basic");
    let second: Vec<&str> = scopes[1].split(' ').collect();
    assert!(
        second.contains(&"mcp:basic") && second.contains(&"mcp:write"),
        "{scopes:?}"
    );
    let r = a.call("r__echo", json!({"text": "wider"})).await;
    assert_eq!(text(&r), "wider", "{r}");

    let (code, _, err) = d.run_cli(&["ctl", "logout", "r"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("revoked"), "{err}");
    assert!(!fx.handle().stats().revocations.is_empty());
    // The login the second replaced was revoked too (in the background, after it).
    eventually(
        "every refresh token revoked",
        Duration::from_secs(10),
        || async { fx.handle().valid_refresh_tokens().is_empty().then_some(()) },
    )
    .await;
    wait_state(&d, "needs-login").await;
    assert!(!credentials(&d).exists());
    let r = a.call("r__echo", json!({"text": "x"})).await;
    assert!(error_message(&r).contains("mcpd ctl login r"), "{r}");
}

#[tokio::test]
async fn logins_are_refused_for_servers_that_cannot_have_one() {
    let fx = OAuthFixture::builder().start().await;
    let d = DaemonBuilder::new()
        .fixture("local", &["--tools", "echo"])
        .env("TOKEN", "static")
        .remote("r", &fx.mcp_url(), "bearer_token_env = \"TOKEN\"")
        .start()
        .await;
    let (code, _, err) = d.run_cli(&["ctl", "login", "local", "--no-browser"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("local server"), "{err}");
    let (code, _, err) = d.run_cli(&["ctl", "login", "r", "--no-browser"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("static credential"), "{err}");
    let (code, _, err) = d.run_cli(&["ctl", "login", "nope", "--no-browser"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no server named 'nope'"), "{err}");
}
