//! The browser harness's own tests.
//!
//! A page served by the test on 127.0.0.1 runs its external script under `default-src
//! 'self'` and not its inline one, a name mapped by `--host-resolver-rules` reaches the
//! loopback listener with that name in `Host`, and a dropped browser leaves no process
//! behind.

use crate::dashboard::browser::{Browser, step};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// The page: a button, a line `app.js` changes on click, and an inline script that the
/// Content-Security-Policy must stop.
const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>harness</title></head>
<body>
<button id="go">Go</button>
<p id="out">not clicked</p>
<p id="inline">inline script did not run</p>
<script>document.getElementById('inline').textContent = 'inline script ran';</script>
<script src="/app.js"></script>
</body></html>
"#;

const APP_JS: &str = "document.getElementById('go').addEventListener('click', () => {
  document.getElementById('out').textContent = 'clicked';
});
";

/// The most a request's head may take; Chromium's are well under 2 KiB.
const MAX_HEAD: usize = 16 * 1024;

/// A tiny HTTP/1.1 site on 127.0.0.1 that records the `Host` of every request.
struct Site {
    port: u16,
    /// Every request's `Host` header, in arrival order.
    hosts: Arc<Mutex<Vec<String>>>,
    /// The accept loop; aborting it aborts every connection (they live in its JoinSet).
    task: JoinHandle<()>,
}

impl Site {
    async fn start() -> Site {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("local addr").port();
        let hosts = Arc::new(Mutex::new(Vec::new()));
        let recorded = hosts.clone();
        let task = tokio::spawn(async move {
            let mut conns = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        conns.spawn(serve(stream, recorded.clone()));
                    }
                    Some(_) = conns.join_next() => {}
                }
            }
        });
        Site { port, hosts, task }
    }

    fn hosts(&self) -> Vec<String> {
        self.hosts.lock().unwrap().clone()
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers one request and closes the connection.
async fn serve(mut stream: TcpStream, hosts: Arc<Mutex<Vec<String>>>) {
    let Ok(Some(head)) =
        tokio::time::timeout(Duration::from_secs(10), read_head(&mut stream)).await
    else {
        return; // no request, or not HTTP (a TLS probe): nothing to answer
    };
    let mut lines = head.lines();
    let path = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("")
        .to_owned();
    if let Some(host) = lines.find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("host")
            .then(|| value.trim().to_owned())
    }) {
        hosts.lock().unwrap().push(host);
    }
    let (status, kind, body) = match path.as_str() {
        "/" => ("200 OK", "text/html; charset=utf-8", PAGE),
        "/app.js" => ("200 OK", "text/javascript; charset=utf-8", APP_JS),
        _ => ("404 Not Found", "text/plain; charset=utf-8", "not found\n"),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         Content-Security-Policy: default-src 'self'\r\nCache-Control: no-store\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    // The browser may have given up on this connection: nothing to do then.
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Reads a request's head (up to the blank line), or None if the peer closes first or
/// sends more than `MAX_HEAD` without one.
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 || buf.len() + n > MAX_HEAD {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8(buf).ok()
}

#[tokio::test]
async fn a_loopback_page_runs_its_own_script_on_click_and_its_policy_stops_inline_script() {
    let site = Site::start().await;
    let Some(browser) = Browser::start("dashboard::browser_smoke::click").await else {
        return;
    };
    browser
        .goto(&format!("http://127.0.0.1:{}/", site.port))
        .await;
    let button = browser.wait_for("#go").await;
    browser.wait_for_text("#out", "not clicked").await;
    step("click #go", button.click()).await;
    browser.wait_for_text("#out", "clicked").await;
    // The inline script came before app.js in the page; app.js has run, so it would have.
    browser
        .wait_for_text("#inline", "inline script did not run")
        .await;
    let hosts = site.hosts();
    let want = format!("127.0.0.1:{}", site.port);
    assert!(hosts.iter().all(|h| *h == want), "{hosts:?}");
    browser.close().await;
}

#[tokio::test]
async fn a_name_mapped_to_loopback_by_host_resolver_rules_arrives_with_that_host() {
    let site = Site::start().await;
    let rule = "--host-resolver-rules=MAP evil.test 127.0.0.1";
    let Some(browser) =
        Browser::start_with_args("dashboard::browser_smoke::rebinding", &[rule]).await
    else {
        return;
    };
    browser
        .goto(&format!("http://evil.test:{}/", site.port))
        .await;
    let button = browser.wait_for("#go").await;
    step("click #go", button.click()).await;
    browser.wait_for_text("#out", "clicked").await;
    let hosts = site.hosts();
    let want = format!("evil.test:{}", site.port);
    assert!(
        !hosts.is_empty() && hosts.iter().all(|h| *h == want),
        "every request should carry Host: {want}, got {hosts:?}"
    );
    browser.close().await;
}

/// The live processes (zombies excluded) in process group `pgid` or whose command line
/// mentions `dir`: the processes a browser started, wherever they put themselves.
fn processes_of(pgid: u32, dir: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for pid in entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue; // gone already
        };
        // After the command name in parentheses: state, ppid, pgrp.
        let Some((name, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let in_group = fields.get(2) == Some(&pgid.to_string().as_str());
        if in_group || String::from_utf8_lossy(&cmdline).contains(dir) {
            found.push(format!("{name})"));
        }
    }
    found
}

#[tokio::test]
async fn a_dropped_browser_leaves_neither_chromedriver_nor_chromium_running() {
    let Some(browser) = Browser::start("dashboard::browser_smoke::cleanup").await else {
        return;
    };
    browser.goto("about:blank").await;
    let pgid = browser.driver_pid();
    let dir = browser.dir().to_string_lossy().into_owned();
    let running = processes_of(pgid, &dir);
    // chromedriver and Chromium's browser, zygote, renderer and crash handler processes.
    assert!(
        running.len() > 2,
        "the check should see Chromium's processes: {running:?}"
    );
    drop(browser);
    crate::support::eventually(
        "no process left of the dropped browser",
        Duration::from_secs(20),
        || async { processes_of(pgid, &dir).is_empty().then_some(()) },
    )
    .await;
}
