//! `--spawn N`: what the sandbox adds to starting a server, timed from `mcpd/start` to the
//! first successful call's answer, for the same server confined and not.
//!
//! One daemon with `[daemon] sandbox = true` runs each measured server twice: as `NAME`
//! with `sandbox = false` and as `NAMEsbx`, confined by the default profile. The servers
//! are the fixture (`mcpd-fixture --tools echo`) and, when `.ci/install-peers` has
//! installed them, the published mcp-server-time (Python) and server-everything (Node, as
//! npm installs it). Each iteration, for each server in turn: `mcpd/stop` and a wait until
//! `mcpd/status` shows it stopped (untimed), then, timed, `mcpd/start` and a call repeated
//! (1 ms apart) until one is answered without error. The two copies of a server take
//! turns at going first (a server just started may still be busy after its answer).
//! Before the counted rounds, one uncounted round (the era probe of each server's first
//! start is cached after it). All of it runs twice: in a daemon where user namespaces
//! work (each confined server gets mount and PID namespaces of its own) and in one with
//! `MCPD_USERNS=0` (Landlock and seccomp only), and the report ends with what the
//! namespaces add to each confined variant.
//!
//! mcpd runs with only the variables a confined server keeps (`PATH`, `HOME`, `USER`,
//! `LOGNAME`, `LANG`, `LC_*`, `TERM`, `TZ`), so both copies of a server get the same
//! environment (the confined one also its own `TMPDIR`) and the difference is the
//! confinement. Otherwise the unconfined copy would get every variable of the bench's
//! environment, and some change a start: `NODE_EXTRA_CA_CERTS`, say, has Node read a CA
//! bundle before anything else.

use crate::client::{Client, clip};
use crate::daemon::{Daemon, ServerDef};
use crate::{IDLE_BUF, READY_WAIT, fixture_bin};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The variables of mcpd's environment, besides `LC_*`: those a confined server keeps.
const KEPT: &[&str] = &["PATH", "HOME", "USER", "LOGNAME", "LANG", "TERM", "TZ"];

/// One server measured twice, unconfined and confined.
#[derive(Clone)]
struct Target {
    /// Its name in the config (the confined copy is `{name}sbx`).
    name: &'static str,
    what: String,
    command: String,
    args: Vec<String>,
    /// The tool called, without the server's prefix, and its arguments.
    tool: &'static str,
    arguments: Value,
    /// The confined copy's `sandbox` value, when it is not `true` (the default profile).
    profile: Option<&'static str>,
    /// Its `env` table, when it has one.
    env: Option<&'static str>,
}

pub struct Variant {
    pub server: String,
    pub what: String,
    pub confined: bool,
    /// How it is confined, as printed.
    pub label: &'static str,
    /// Sorted, ms: `mcpd/start` sent → first successful answer.
    pub ms: Vec<f64>,
    /// Calls answered with an error (the server not ready yet) and repeated.
    pub retried: usize,
    pub errors: Vec<String>,
}

pub struct SpawnReport {
    pub iterations: usize,
    /// Whether the daemon could use user namespaces (else it ran with `MCPD_USERNS=0`):
    /// a confined server then gets mount and PID namespaces of its own.
    pub userns: bool,
    pub variants: Vec<Variant>,
    /// Why published servers were left out, if they were.
    pub skipped: Option<String>,
    pub shutdown: Result<(), String>,
}

/// Where `.ci/install-peers` put the published servers (as the interop tests find them).
fn peers_dir() -> PathBuf {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    match std::env::var_os("MCPD_PEERS_DIR") {
        Some(d) if !d.is_empty() => repo.join(d),
        _ => repo.join("target/peers"),
    }
}

/// The fixture, and the published servers that are installed (or why they are not).
fn targets() -> (Vec<Target>, Option<String>) {
    let mut out = vec![Target {
        name: "fx",
        what: format!("{} --tools echo", fixture_bin()),
        command: fixture_bin().to_owned(),
        args: vec!["--tools".into(), "echo".into()],
        tool: "echo",
        arguments: json!({"text": "spawn"}),
        profile: None,
        env: None,
    }];
    // The same, confined with a host list: its own user and network namespace, and the
    // proxy's listener sent back to mcpd before exec.
    out.push(Target {
        name: "fxhosts",
        profile: Some(r#"{ network = ["127.0.0.1:9"] }"#),
        ..out[0].clone()
    });
    // The fixture with a `${secret:…}` in its environment, looked up at each start (a
    // systemd credential, the first store; no session bus, as under most services).
    out.push(Target {
        name: "fxsecret",
        what: format!("{} --tools echo, env from ${{secret:…}}", fixture_bin()),
        env: Some(r#"{ BENCH_TOKEN = "${secret:bench-token}" }"#),
        ..out[0].clone()
    });
    let peers = peers_dir();
    let time = peers.join("venv/bin/mcp-server-time");
    let everything = peers.join("node/node_modules/.bin/mcp-server-everything");
    let missing: Vec<String> = [&time, &everything]
        .into_iter()
        .filter(|p| !p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if !missing.is_empty() {
        return (
            out,
            Some(format!(
                "published servers missing ({}); run .ci/install-peers",
                missing.join(", ")
            )),
        );
    }
    let shown = |p: &PathBuf, args: &str| format!("{} {args}", p.display());
    out.push(Target {
        name: "time",
        what: shown(&time, "--local-timezone UTC"),
        command: time.display().to_string(),
        args: vec!["--local-timezone".into(), "UTC".into()],
        tool: "get_current_time",
        arguments: json!({"timezone": "UTC"}),
        profile: None,
        env: None,
    });
    out.push(Target {
        name: "everything",
        what: shown(&everything, "stdio"),
        command: everything.display().to_string(),
        args: vec!["stdio".into()],
        tool: "echo",
        arguments: json!({"message": "spawn"}),
        profile: None,
        env: None,
    });
    (out, None)
}

/// The state of `server` in `mcpd/status`, and its pid.
async fn state(c: &mut Client, server: &str) -> Result<(String, Option<u64>), String> {
    let status: Value = c.request("mcpd/status", None).await?;
    let row = status["servers"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == server))
        .ok_or_else(|| format!("no {server} in mcpd/status"))?;
    Ok((
        row["state"].as_str().unwrap_or_default().to_owned(),
        row["pid"].as_u64(),
    ))
}

/// Stops `server` and waits until it is stopped (untimed).
async fn stop(c: &mut Client, server: &str) -> Result<(), String> {
    let _: Value = c
        .request("mcpd/stop", Some(json!({"name": server})))
        .await?;
    let start = Instant::now();
    loop {
        let (s, pid) = state(c, server).await?;
        if s == "stopped" && pid.is_none() {
            return Ok(());
        }
        if start.elapsed() > READY_WAIT {
            return Err(format!("{server} not stopped after {READY_WAIT:?}: {s}"));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Timed: `mcpd/start`, then the call until it is answered without error. Returns the
/// time and how many calls were repeated.
async fn start_and_call(
    c: &mut Client,
    server: &str,
    tool: &str,
    arguments: &Value,
) -> Result<(Duration, usize), String> {
    let params = json!({"name": format!("{server}__{tool}"), "arguments": arguments});
    let t0 = Instant::now();
    let _: Value = c
        .request("mcpd/start", Some(json!({"name": server})))
        .await?;
    let mut retried = 0;
    loop {
        let last = match c.request::<Value>("tools/call", Some(params.clone())).await {
            Ok(r) if r["isError"] != true => return Ok((t0.elapsed(), retried)),
            Ok(r) => clip(&r.to_string()),
            Err(e) => e,
        };
        if t0.elapsed() > READY_WAIT {
            return Err(format!("{server}: no answer after {READY_WAIT:?}: {last}"));
        }
        retried += 1;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// `iterations` rounds, each starting every variant once (interleaved), after one
/// uncounted round; with `userns` false, in a daemon told user namespaces do not work
/// (`MCPD_USERNS=0`), so that confined servers get no namespaces of their own.
pub async fn measure_spawn(iterations: usize, userns: bool) -> Result<SpawnReport, String> {
    let (targets, skipped) = targets();
    let mut servers = Vec::new();
    let mut variants = Vec::new();
    for t in &targets {
        for confined in [false, true] {
            let name = if confined {
                format!("{}sbx", t.name)
            } else {
                t.name.to_owned()
            };
            let mut def = ServerDef::command(&name, &t.command, t.args.clone());
            if let Some(env) = t.env {
                def.lines.push(format!("env = {env}"));
            }
            if !confined {
                def.lines.push("sandbox = false".into());
            } else if let Some(profile) = t.profile {
                def.lines.push(format!("sandbox = {profile}"));
            }
            servers.push(def);
            variants.push(Variant {
                server: name,
                what: t.what.clone(),
                confined,
                label: match (confined, t.profile) {
                    (false, _) => "off",
                    (true, None) => "landlock",
                    (true, Some(_)) => "+netns",
                },
                ms: Vec::new(),
                retried: 0,
                errors: Vec::new(),
            });
        }
    }
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| KEPT.contains(&k.as_str()) || k.starts_with("LC_"))
        .collect();
    let credentials = tempfile::tempdir().map_err(|e| format!("a credentials directory: {e}"))?;
    std::fs::write(credentials.path().join("bench-token"), "bench-value")
        .map_err(|e| format!("a credential: {e}"))?;
    env.push((
        "CREDENTIALS_DIRECTORY".into(),
        credentials.path().display().to_string(),
    ));
    if !userns {
        env.push(("MCPD_USERNS".into(), "0".into()));
    }
    let lines = ["sandbox = true".to_owned()];
    let daemon = Daemon::start_with_env(&servers, &lines, Some(&env))?;
    daemon.wait_ready().await?;
    let mut c = daemon.connect(IDLE_BUF).await?;
    c.initialize().await?;
    // Each runs as its name says: confined (its status row shows the sandbox) or not.
    let status: Value = c.request("mcpd/status", None).await?;
    for v in &variants {
        let row = status["servers"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["name"] == v.server.as_str()));
        let sandbox = row.map(|r| &r["sandbox"]);
        if sandbox.is_some_and(Value::is_object) != v.confined {
            return Err(format!(
                "{}: expected confined={}, status says sandbox {sandbox:?}",
                v.server, v.confined
            ));
        }
    }
    for round in 0..=iterations {
        // A server just started may still be busy after its first answer: each copy
        // follows its sibling's start every other round, the confined copy first in odd
        // rounds.
        for k in 0..variants.len() {
            let i = if round % 2 == 1 { k ^ 1 } else { k };
            let (t, v) = (&targets[i / 2], &mut variants[i]);
            let got = match stop(&mut c, &v.server).await {
                Ok(()) => start_and_call(&mut c, &v.server, t.tool, &t.arguments).await,
                Err(e) => Err(e),
            };
            match got {
                Ok(_) if round == 0 => {}
                Ok((took, retried)) => {
                    v.ms.push(took.as_secs_f64() * 1000.0);
                    v.retried += retried;
                }
                Err(e) if round == 0 => v.errors.push(format!("uncounted round: {e}")),
                Err(e) => v.errors.push(e),
            }
        }
    }
    for v in &mut variants {
        v.ms.sort_by(f64::total_cmp);
    }
    drop(c);
    let shutdown = daemon.shutdown();
    Ok(SpawnReport {
        iterations,
        userns,
        variants,
        skipped,
        shutdown,
    })
}

/// The value at percentile `p` of sorted samples.
fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Prints the report; false when anything failed.
pub fn print_spawn(r: &Result<SpawnReport, String>) -> bool {
    println!();
    let r = match r {
        Ok(r) => r,
        Err(e) => {
            println!("spawn cost of the sandbox: FAILED: {e}");
            return false;
        }
    };
    let mut ok = true;
    println!(
        "spawn cost of the sandbox ({}): mcpd/start → first successful call's answer, {} \
         iterations of each variant, interleaved, after one uncounted round; ms",
        if r.userns {
            "user namespaces: confined servers get their own mounts and processes"
        } else {
            "MCPD_USERNS=0: no namespaces"
        },
        r.iterations
    );
    println!(
        "  mcpd (and so each unconfined copy) runs with only {} and LC_*: the confined copy \
         differs by its confinement and its own TMPDIR",
        KEPT.join(", ")
    );
    if let Some(why) = &r.skipped {
        println!("  note: fixture only: {why}");
        if std::env::var("MCPD_REQUIRE_PEERS").as_deref() == Ok("1") {
            println!("  ERROR: MCPD_REQUIRE_PEERS=1 makes missing peers a failure");
            ok = false;
        }
    }
    println!(
        "  {:<14} {:<10} {:>9} {:>9} {:>9} {:>9}",
        "server", "sandbox", "median", "p90", "min", "retried"
    );
    for v in &r.variants {
        println!(
            "  {:<14} {:<10} {:>9.1} {:>9.1} {:>9.1} {:>9}",
            v.server,
            v.label,
            pct(&v.ms, 0.5),
            pct(&v.ms, 0.9),
            pct(&v.ms, 0.0),
            v.retried
        );
        for e in &v.errors {
            ok = false;
            println!("      ERROR: {e}");
        }
    }
    for pair in r.variants.chunks(2) {
        if let [off, on] = pair {
            println!(
                "  {}: the sandbox adds {:+.1} ms at the median, {:+.1} ms at p90  ({})",
                off.server,
                pct(&on.ms, 0.5) - pct(&off.ms, 0.5),
                pct(&on.ms, 0.9) - pct(&off.ms, 0.9),
                off.what
            );
        }
    }
    let median = |name: &str| {
        r.variants
            .iter()
            .find(|v| v.server == name)
            .map(|v| pct(&v.ms, 0.5))
    };
    if let (Some(plain), Some(secret)) = (median("fx"), median("fxsecret")) {
        println!(
            "  fxsecret: looking its secret up adds {:+.1} ms at the median (unconfined, against fx)",
            secret - plain
        );
    }
    if let Err(e) = &r.shutdown {
        ok = false;
        println!("  ERROR at shutdown: {e}");
    }
    ok
}

/// Prints what the namespaces add to a confined start: each confined variant's median and
/// p90 with user namespaces against the same without (`MCPD_USERNS=0`).
pub fn print_namespaces(with: &Result<SpawnReport, String>, without: &Result<SpawnReport, String>) {
    let (Ok(with), Ok(without)) = (with, without) else {
        return;
    };
    println!();
    println!(
        "what the namespaces add (own user, mount and PID namespaces, a private /dev/shm and /proc, \
         an init): confined starts with user namespaces against MCPD_USERNS=0, ms"
    );
    println!(
        "  {:<14} {:>16} {:>16} {:>10} {:>10}",
        "server", "with (med/p90)", "without", "+median", "+p90"
    );
    for on in with.variants.iter().filter(|v| v.confined) {
        let Some(off) = without.variants.iter().find(|v| v.server == on.server) else {
            continue;
        };
        println!(
            "  {:<14} {:>7.1} / {:>6.1} {:>7.1} / {:>6.1} {:>+10.1} {:>+10.1}",
            on.server,
            pct(&on.ms, 0.5),
            pct(&on.ms, 0.9),
            pct(&off.ms, 0.5),
            pct(&off.ms, 0.9),
            pct(&on.ms, 0.5) - pct(&off.ms, 0.5),
            pct(&on.ms, 0.9) - pct(&off.ms, 0.9)
        );
    }
}
