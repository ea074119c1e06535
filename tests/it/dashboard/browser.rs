//! A real Chromium for the browser tests, driven through WebDriver (fantoccini).
//!
//! `Browser::start` runs Debian's chromedriver on a loopback port it picks itself, opens
//! a headless Chromium session with a fresh profile, and kills both (chromedriver's
//! process group) when dropped. Without chromium or chromedriver the tests print
//! `skipped: …`, or fail when `MCPD_REQUIRE_BROWSER=1` (CI).

#![allow(dead_code)]

use crate::support::eventually;
use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};

/// Debian's `chromium` (a launcher script that execs /usr/lib/chromium/chromium).
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Debian's `chromium-driver`.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// How long chromedriver, then a new Chromium session, may take to start: the first start
/// of Chromium on a loaded 2-core machine takes seconds, not milliseconds.
const START: Duration = Duration::from_secs(60);
/// How long one WebDriver command (navigate, find, click, read) may take.
pub const STEP: Duration = Duration::from_secs(30);
/// The page load timeout given to the session, under `STEP`, so a page that never finishes
/// loading fails as a WebDriver error rather than as our timeout.
const PAGE_LOAD_MS: u64 = 20_000;
/// Sessions tried before giving up: Chromium's first start can crash on a starved machine
/// ("DevToolsActivePort file doesn't exist"); each failure is printed, never hidden.
const SESSION_TRIES: usize = 3;

/// Chromium's flags for every test. Headless, no sandbox (CI runs as root), and nothing
/// that reaches the network by itself: without the background-networking flags Chromium
/// tries the network at start and fails. No proxy either: a proxy from the environment
/// would carry names mapped by `--host-resolver-rules` past the mapping.
const ARGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-proxy-server",
];

/// Why the browser tests cannot run here, if they cannot.
fn missing() -> Option<String> {
    [("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER)]
        .iter()
        .filter(|(_, path)| !Path::new(path).exists())
        .map(|(what, path)| format!("{what} not found at {path}"))
        .reduce(|a, b| format!("{a}, {b}"))
        .map(|m| {
            format!("{m} (.ci/install-browser installs Debian's chromium and chromium-driver)")
        })
}

/// A headless Chromium session behind its own chromedriver. Dropping it kills both.
pub struct Browser {
    /// The WebDriver session. Declared first so it is dropped before the driver it talks to.
    client: Client,
    /// chromedriver, leader of the process group that Chromium's processes join.
    driver: Driver,
    /// The profile (`--user-data-dir`) and chromedriver's logs; removed last.
    dir: tempfile::TempDir,
}

impl Browser {
    /// Starts a browser with the usual flags, or returns None when `test` must skip.
    pub async fn start(test: &str) -> Option<Browser> {
        Self::start_with_args(test, &[]).await
    }

    /// Starts a browser with `extra` Chromium flags after the usual ones (for example
    /// `--host-resolver-rules=MAP evil.test 127.0.0.1`), or returns None when `test` must
    /// skip (chromium or chromedriver missing and `MCPD_REQUIRE_BROWSER` is not `1`).
    pub async fn start_with_args(test: &str, extra: &[&str]) -> Option<Browser> {
        if let Some(why) = missing() {
            if std::env::var("MCPD_REQUIRE_BROWSER").as_deref() == Ok("1") {
                panic!("{test}: {why} (MCPD_REQUIRE_BROWSER=1 makes this a failure)");
            }
            eprintln!("skipped: {test}: {why}");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("mcpd-browser-")
            .tempdir()
            .expect("temp dir");
        let driver = Driver::start(dir.path())
            .await
            .unwrap_or_else(|e| panic!("{test}: {e}"));
        let mut failures = Vec::new();
        for attempt in 1..=SESSION_TRIES {
            let profile = dir.path().join(format!("profile-{attempt}"));
            match driver.session(&profile, extra).await {
                Ok(client) => {
                    return Some(Browser {
                        client,
                        driver,
                        dir,
                    });
                }
                Err(e) => {
                    eprintln!("{test}: Chromium session {attempt} of {SESSION_TRIES}: {e}");
                    failures.push(e);
                }
            }
        }
        panic!(
            "{test}: no Chromium session after {SESSION_TRIES} tries: {}\n{}",
            failures.join("; "),
            driver.log_tail()
        );
    }

    /// The WebDriver client, for what the helpers here do not cover.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// chromedriver's process id (the process group's id too), for tests of the harness.
    pub fn driver_pid(&self) -> u32 {
        self.driver.pid
    }

    /// The directory holding the profile, HOME and chromedriver's log while the browser runs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Opens `url` and waits for it to load.
    pub async fn goto(&self, url: &str) {
        step(&format!("open {url}"), self.client.goto(url)).await;
    }

    /// Waits until an element matches `css` and returns it.
    pub async fn wait_for(&self, css: &str) -> Element {
        self.wait_until(&format!("an element matching {css}"), STEP, |c| {
            let css = css.to_owned();
            async move { c.find(Locator::Css(&css)).await.ok() }
        })
        .await
    }

    /// Waits until the first element matching `css` has the text `want`.
    pub async fn wait_for_text(&self, css: &str, want: &str) {
        self.wait_until(&format!("{css} to read {want:?}"), STEP, |c| {
            let css = css.to_owned();
            async move {
                let text = c.find(Locator::Css(&css)).await.ok()?.text().await.ok()?;
                (text == want).then_some(())
            }
        })
        .await;
    }

    /// Waits until the first element matching `css` has a text `ok` accepts; returns it.
    pub async fn wait_for_text_like(
        &self,
        css: &str,
        what: &str,
        ok: impl Fn(&str) -> bool + Clone,
    ) -> String {
        self.wait_until(&format!("{css} to read {what}"), STEP, |c| {
            let (css, ok) = (css.to_owned(), ok.clone());
            async move {
                let text = c.find(Locator::Css(&css)).await.ok()?.text().await.ok()?;
                ok(&text).then_some(text)
            }
        })
        .await
    }

    /// Polls `check` with a clone of the client until it returns Some, for up to
    /// `deadline`; each poll is bounded by `STEP` too, so a hung command cannot outlast it.
    pub async fn wait_until<T, F, Fut>(&self, what: &str, deadline: Duration, mut check: F) -> T
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        eventually(what, deadline, || {
            let poll = check(self.client.clone());
            async move { tokio::time::timeout(STEP, poll).await.ok().flatten() }
        })
        .await
    }

    /// Ends the session the polite way (Chromium quits), then kills what is left.
    pub async fn close(self) {
        // Chromium may already be gone; the drop below kills whatever is left either way.
        let _ = tokio::time::timeout(STEP, self.client.clone().close()).await;
    }
}

/// A running chromedriver, leading its own process group.
struct Driver {
    child: Child,
    pid: u32,
    port: u16,
    /// chromedriver's log (`--log-path`), kept for error messages.
    log: PathBuf,
}

impl Driver {
    /// Starts chromedriver with `--port=0`: it binds a free port on 127.0.0.1 and ::1
    /// itself and says which on stdout, so there is no window in which another process
    /// can take a port we picked. Then waits for `/status` to say it is ready.
    async fn start(dir: &Path) -> Result<Driver, String> {
        let log = dir.join("chromedriver.log");
        let stderr = std::fs::File::create(dir.join("chromedriver.stderr"))
            .map_err(|e| format!("chromedriver's stderr file: {e}"))?;
        // Chromium writes crash reports and caches under HOME and the XDG directories:
        // point them into the test's directory, never at the user's own.
        let home = dir.join("home");
        std::fs::create_dir(&home).map_err(|e| format!("{}: {e}", home.display()))?;
        let mut cmd = Command::new(CHROMEDRIVER);
        cmd.arg("--port=0")
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .arg(format!("--log-path={}", log.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .process_group(0)
            .kill_on_drop(true);
        // SAFETY: prctl is async-signal-safe; it runs in the child before exec. If the test
        // process dies without unwinding, chromedriver is killed with it.
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                    .map_err(std::io::Error::from)
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {CHROMEDRIVER}: {e}"))?;
        let pid = child.id().ok_or("chromedriver exited at once")?;
        let stdout = child.stdout.take().ok_or("chromedriver's stdout")?;
        let mut driver = Driver {
            child,
            pid,
            port: 0,
            log,
        };
        driver.port = match tokio::time::timeout(START, announced_port(stdout)).await {
            Ok(Ok(port)) => port,
            Ok(Err(e)) => return Err(format!("{e}\n{}", driver.log_tail())),
            Err(_) => {
                return Err(format!(
                    "chromedriver did not say its port within {START:?}\n{}",
                    driver.log_tail()
                ));
            }
        };
        driver.ready().await?;
        Ok(driver)
    }

    /// Waits for `/status` to answer `ready: true`.
    async fn ready(&self) -> Result<(), String> {
        let url = format!("http://127.0.0.1:{}/status", self.port);
        let http = crate::support::http_client();
        let ready = tokio::time::timeout(START, async {
            loop {
                if let Ok(resp) = http.get(&url).send().await
                    && let Ok(bytes) = resp.bytes().await
                    && let Ok(body) = serde_json::from_slice::<Value>(&bytes)
                    && body["value"]["ready"] == json!(true)
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        ready.map_err(|_| {
            format!(
                "chromedriver's {url} did not say ready within {START:?}\n{}",
                self.log_tail()
            )
        })
    }

    /// A new session: headless Chromium with the profile `profile` and the usual flags,
    /// then `extra`.
    async fn session(&self, profile: &Path, extra: &[&str]) -> Result<Client, String> {
        let mut args: Vec<String> = ARGS.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        args.extend(extra.iter().map(|a| a.to_string()));
        let caps = json!({
            "browserName": "chrome",
            "timeouts": { "pageLoad": PAGE_LOAD_MS },
            "goog:chromeOptions": { "binary": CHROMIUM, "args": args },
        });
        let Value::Object(caps) = caps else {
            unreachable!("a JSON object literal")
        };
        let url = format!("http://127.0.0.1:{}", self.port);
        let mut builder = ClientBuilder::new(HttpConnector::new());
        builder.capabilities(caps);
        match tokio::time::timeout(START, builder.connect(&url)).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no session within {START:?}")),
        }
    }

    /// The end of chromedriver's log, for error messages.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(30)..].join("\n");
        format!("--- chromedriver log ({}) ---\n{tail}", self.log.display())
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The group is chromedriver and every Chromium process it started; some may have
        // exited already, and ESRCH then is no failure.
        let pgid = nix::unistd::Pid::from_raw(self.pid as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        // Reap chromedriver now when it is already gone; otherwise kill_on_drop's reaper does.
        let _ = self.child.try_wait();
    }
}

/// Reads chromedriver's stdout until "ChromeDriver was started successfully on port N.",
/// then keeps draining it in the background so chromedriver never blocks on a full pipe.
async fn announced_port(stdout: ChildStdout) -> Result<u16, String> {
    const MARK: &str = "started successfully on port ";
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => {
                return Err(format!(
                    "chromedriver exited before saying its port; it said:\n{}",
                    seen.join("\n")
                ));
            }
            Err(e) => return Err(format!("reading chromedriver's stdout: {e}")),
        };
        if let Some(rest) = line.split(MARK).nth(1) {
            let port = rest.trim_end_matches('.').trim().parse::<u16>();
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            return port.map_err(|e| format!("chromedriver's port in {line:?}: {e}"));
        }
        seen.push(line);
    }
}

/// Runs one WebDriver command within `STEP`, panicking with `what` on an error or a timeout.
pub async fn step<T, E: std::fmt::Display>(what: &str, f: impl Future<Output = Result<T, E>>) -> T {
    match tokio::time::timeout(STEP, f).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => panic!("{what}: {e}"),
        Err(_) => panic!("{what}: no answer within {STEP:?}"),
    }
}
