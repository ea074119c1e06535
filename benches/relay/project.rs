//! Per-project servers (`share = "project"`): the `project` rows' server and its instance,
//! and the first call an agent makes in a new project.
//!
//! The server is the fixture configured as `px` with `share = "project"` and
//! `cwd = "${PROJECT}"`: one instance per project. An agent tells its project with the
//! notification `mcpd connect` sends before anything else; mcpd then starts that project's
//! instance in the background. A call to a ready instance is routed without asking any
//! actor, so the `project` rows should match the `mcpd` rows (the shared `fx`).
//!
//! The first-call measurement times, from connecting to the first call's answer, an agent
//! in a new project (a fresh temp dir each iteration) that (a) lists the tools before its
//! call, so the background start has a head start, (a') also waits, after the listing, for
//! `mcpd/status` to show its instance ready, so the call finds it in the catalog, and (b)
//! calls right after `initialize`; against (c) the same first call to a shared server
//! already running and (d) no mcpd at all: spawning the fixture, `initialize`, the call.
//! Each iteration's instance is stopped after it (untimed) and its directory removed.

use crate::client::{Client, clip};
use crate::daemon::{Daemon, ServerDef, temp_dir};
use crate::options::Opts;
use crate::process::Proc;
use crate::{IDLE_BUF, READY_WAIT, fixture_bin};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The per-project server's name; its tools are `px__echo` and `px__big`.
pub const PX: &str = "px";

/// The fixture's arguments for both the shared and the per-project server of a comparison.
pub fn fixture_args() -> Vec<String> {
    vec!["--tools".into(), "echo,big".into()]
}

/// The per-project server, as the report describes it.
pub fn describe_px() -> String {
    format!(
        "[servers.{PX}] command = {} args = {:?} share = \"project\" cwd = \"${{PROJECT}}\"",
        fixture_bin(),
        fixture_args()
    )
}

/// A fresh project directory under /tmp, and its canonical path (what mcpd keys it by).
pub fn project_dir() -> Result<(tempfile::TempDir, PathBuf), String> {
    let dir = temp_dir()?;
    let path = std::fs::canonicalize(dir.path())
        .map_err(|e| format!("canonicalize {}: {e}", dir.path().display()))?;
    Ok((dir, path))
}

/// Whether a complete `tools/list` has `name`.
async fn lists_tool(client: &mut Client, name: &str) -> Result<bool, String> {
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let params = cursor.take().map(|c| json!({"cursor": c}));
        let page: Value = client.request("tools/list", params).await?;
        let tools = page["tools"].as_array().map_or(&[][..], Vec::as_slice);
        if tools.iter().any(|t| t["name"] == name) {
            return Ok(true);
        }
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return Ok(false),
        }
    }
    Err("tools/list: more than 1000 pages".into())
}

/// Whether `mcpd/status` shows the instance slot `name` (`px@DIR`) ready.
async fn instance_ready(client: &mut Client, name: &str) -> Result<bool, String> {
    let status: Value = client.request("mcpd/status", None).await?;
    let servers = status["servers"].as_array().map_or(&[][..], Vec::as_slice);
    Ok(servers
        .iter()
        .any(|s| s["name"] == name && s["state"] == "ready"))
}

/// One `echo` call through `tool`, its result checked.
async fn echo(client: &mut Client, tool: &str, text: &str) -> Result<(), String> {
    let params = json!({"name": tool, "arguments": {"text": text}});
    let result: Value = client.request("tools/call", Some(params)).await?;
    let got = result["content"][0]["text"].as_str();
    if result["isError"] == true || got != Some(text) {
        return Err(format!(
            "{tool}: unexpected result {}",
            clip(&result.to_string())
        ));
    }
    Ok(())
}

/// Makes `dir`'s instance of `px` ready, with its tools listed (so the template lists
/// them, as a restarted daemon's catalog cache does): how long that took, and the agent
/// connection working in `dir` (while it is open, `max_projects` never evicts that
/// instance).
pub async fn prime(daemon: &Daemon, dir: &Path) -> Result<(Duration, Client), String> {
    let start = Instant::now();
    let mut c = daemon.connect(IDLE_BUF).await?;
    c.project(dir).await?;
    c.initialize().await?;
    let tool = format!("{PX}__echo");
    while !lists_tool(&mut c, &tool).await? {
        if start.elapsed() > READY_WAIT {
            return Err(format!("{tool} was not listed after {READY_WAIT:?}"));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    echo(&mut c, &tool, "prime").await?;
    Ok((start.elapsed(), c))
}

/// The ways an agent's first call is timed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// In a new project: the tools listed (`px__echo` among them), then the call.
    Listed,
    /// As `Listed`, then `mcpd/status` polled until the instance is ready, then the call.
    Ready,
    /// In a new project: the call right after `initialize`.
    AtOnce,
    /// The shared `fx`, already running: the call right after `initialize`.
    Shared,
    /// No mcpd: the client spawns the fixture, initializes it and calls it over stdio.
    Direct,
}

impl Variant {
    pub const ALL: [Variant; 5] = [
        Variant::Listed,
        Variant::Ready,
        Variant::AtOnce,
        Variant::Shared,
        Variant::Direct,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Variant::Listed => "(a) new project: notification, initialize, tools/list, call",
            Variant::Ready => "(a') as (a), the call once mcpd/status shows the instance ready",
            Variant::AtOnce => "(b) new project: notification, initialize, call at once",
            Variant::Shared => "(c) shared fx, running: initialize, call",
            Variant::Direct => "(d) no mcpd: spawn the fixture, initialize, call",
        }
    }
}

/// One iteration of one variant.
struct Sample {
    /// From starting to connect (or to spawn) to the call's answer.
    total: Duration,
    /// From writing the call to its answer.
    call: Duration,
    /// From starting to connect to the listing that had the tool (`Listed` only).
    listed: Option<Duration>,
    /// From starting to connect to the status that showed the instance ready (`Ready`).
    ready: Option<Duration>,
    /// Listings before the one that had the tool.
    relisted: usize,
}

pub struct VariantReport {
    pub variant: Variant,
    pub total_ms: Vec<f64>,
    pub call_ms: Vec<f64>,
    pub listed_ms: Vec<f64>,
    pub ready_ms: Vec<f64>,
    pub relisted: usize,
    pub errors: Vec<String>,
}

pub struct FirstCallReport {
    pub iterations: usize,
    pub primed_in: Duration,
    pub variants: Vec<VariantReport>,
    pub shutdown: Result<(), String>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn once(daemon: &Daemon, v: Variant) -> Result<Sample, String> {
    let text = "first";
    match v {
        Variant::Listed | Variant::Ready | Variant::AtOnce => {
            let (dir, path) = project_dir()?;
            let t0 = Instant::now();
            let mut c = daemon.connect(IDLE_BUF).await?;
            c.project(&path).await?;
            c.initialize().await?;
            let tool = format!("{PX}__echo");
            let (mut listed, mut relisted) = (None, 0);
            let name = format!("{PX}@{}", path.display());
            let mut ready = None;
            if v != Variant::AtOnce {
                while !lists_tool(&mut c, &tool).await? {
                    relisted += 1;
                    if t0.elapsed() > READY_WAIT {
                        return Err(format!("{tool} was not listed after {READY_WAIT:?}"));
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                listed = Some(t0.elapsed());
            }
            if v == Variant::Ready {
                while !instance_ready(&mut c, &name).await? {
                    if t0.elapsed() > READY_WAIT {
                        return Err(format!("{name} was not ready after {READY_WAIT:?}"));
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                ready = Some(t0.elapsed());
            }
            let sent = Instant::now();
            let answer = echo(&mut c, &tool, text).await;
            let (total, call) = (t0.elapsed(), sent.elapsed());
            // Untimed: this project's instance stops, so the next iteration's start is
            // the only one under way.
            let stopped: Result<Value, String> =
                c.request("mcpd/stop", Some(json!({"name": name}))).await;
            drop(c);
            drop(dir);
            answer?;
            stopped.map_err(|e| format!("stopping {name}: {e}"))?;
            Ok(Sample {
                total,
                call,
                listed,
                ready,
                relisted,
            })
        }
        Variant::Shared => {
            let t0 = Instant::now();
            let mut c = daemon.connect(IDLE_BUF).await?;
            c.initialize().await?;
            let sent = Instant::now();
            echo(&mut c, "fx__echo", text).await?;
            Ok(Sample {
                total: t0.elapsed(),
                call: sent.elapsed(),
                listed: None,
                ready: None,
                relisted: 0,
            })
        }
        Variant::Direct => {
            let t0 = Instant::now();
            let mut proc = Proc::fixture(&fixture_args())?;
            let (tx, rx) = proc.take_pipes()?;
            let mut c = Client::new(Box::new(rx), Box::new(tx), IDLE_BUF, Some(proc));
            c.initialize().await?;
            let sent = Instant::now();
            echo(&mut c, "echo", text).await?;
            Ok(Sample {
                total: t0.elapsed(),
                call: sent.elapsed(),
                listed: None,
                ready: None,
                relisted: 0,
            })
        }
    }
}

/// `iterations` rounds of every variant (interleaved), after one uncounted round.
pub async fn measure_first_call(opts: &Opts) -> Result<FirstCallReport, String> {
    let servers = [
        ServerDef::shared("fx", fixture_args()),
        ServerDef::per_project(PX, fixture_args()),
    ];
    let daemon = Daemon::start(&servers, &[])?;
    daemon.wait_ready().await?;
    let (prime_dir, prime_path) = project_dir()?;
    let (primed_in, primed) = prime(&daemon, &prime_path).await?;
    let mut variants: Vec<VariantReport> = Variant::ALL
        .into_iter()
        .map(|variant| VariantReport {
            variant,
            total_ms: Vec::new(),
            call_ms: Vec::new(),
            listed_ms: Vec::new(),
            ready_ms: Vec::new(),
            relisted: 0,
            errors: Vec::new(),
        })
        .collect();
    for round in 0..=opts.first_call {
        for r in &mut variants {
            // Lets the last iteration's stopped instance exit before the next start.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let got = once(&daemon, r.variant).await;
            if round == 0 {
                if let Err(e) = got {
                    r.errors.push(format!("uncounted round: {e}"));
                }
                continue;
            }
            match got {
                Ok(s) => {
                    r.total_ms.push(ms(s.total));
                    r.call_ms.push(ms(s.call));
                    r.listed_ms.extend(s.listed.map(ms));
                    r.ready_ms.extend(s.ready.map(ms));
                    r.relisted += s.relisted;
                }
                Err(e) => r.errors.push(e),
            }
        }
    }
    for r in &mut variants {
        r.total_ms.sort_by(f64::total_cmp);
        r.call_ms.sort_by(f64::total_cmp);
        r.listed_ms.sort_by(f64::total_cmp);
        r.ready_ms.sort_by(f64::total_cmp);
    }
    drop(primed);
    drop(prime_dir);
    let shutdown = daemon.shutdown();
    Ok(FirstCallReport {
        iterations: opts.first_call,
        primed_in,
        variants,
        shutdown,
    })
}
