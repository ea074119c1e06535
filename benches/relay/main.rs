//! Relay benchmark: what the mcpd hop costs, against a direct stdio client and a bare byte relay.
//!
//! `cargo bench --bench relay [-- --duration SECS --concurrency LIST --quick]`
//!
//! One run measures, on the same machine, the same small MCP client (raw JSON lines:
//! `initialize`, `notifications/initialized`, then `tools/call`) in these set-ups (rows;
//! `--paths` picks some):
//!
//! - **direct**: the client spawns `mcpd-fixture` and talks to it over stdio;
//! - **bare-hop**: the client connects to a Unix socket served by a byte relay running in
//!   this process (its own runtime on its own thread). The relay spawns one fixture per
//!   connection and copies bytes both ways without parsing: the floor for any socket daemon;
//! - **mcpd**: the client connects to a real `mcpd serve` with the fixture configured as
//!   server `fx` and calls `fx__echo` / `fx__big`;
//! - **project**: as mcpd, to the fixture configured again as `px` with `share = "project"`
//!   and `cwd = "${PROJECT}"`; each connection first sends the project notification (one
//!   temp dir for all), so the calls go to that project's one instance, made ready before
//!   the rows (`project.rs`). It should cost what the shared `fx` costs;
//! - **call-tool**: as mcpd, each call made through the meta-tool `mcpd__call_tool`;
//! - **shim**: the client spawns `mcpd connect` and talks to that mcpd over the shim's
//!   stdin and stdout, as every stdio MCP client does;
//! - **socat-mcpd** and **socat-hop**: the client spawns `socat - UNIX-CONNECT:SOCKET` into
//!   mcpd's socket or into the bare relay's: the shim's yardstick, and a stdio client's
//!   floor for any socket daemon. Where socat is not installed the bench binary re-runs
//!   itself as a socat-like pump (`socat_pump.rs`); the report says which one ran.
//!
//! Load model: closed loop. Concurrency `c` means `c` requests in flight at all times, over
//! `min(c, 8)` connections with `c / conns` requests pipelined on each (the remainder goes
//! to the first connections); a connection sends its next request as soon as a response
//! arrives. In direct and bare-hop each connection has its own fixture process; under mcpd
//! all connections share the one `fx` process, which is the point of mcpd. Each measurement
//! opens fresh connections, runs a warm-up (`duration / 5`, at most 1 s) that is not
//! counted, then counts the responses that arrive during `duration`. Latency is from
//! writing a request to reading its response line. Every response is checked: its id must
//! be one in flight on that connection, an echo must return exactly the text sent (unique
//! per request, so crossed responses are caught) and `big` exactly 1 MiB. JSON-RPC errors,
//! wrong or unknown responses and read timeouts are counted and printed, never dropped.
//!
//! It also measures the daemon's resident memory (idle with 10 fixture servers, then with
//! many idle agent connections), `tools/list` latency with 20 servers × 100 tools, and the
//! time from starting `mcpd serve` to the first complete listing of those 2,000 tools, and
//! how soon the daemon's memory comes back after a burst of 64 concurrent 1 MiB results,
//! and (`--first-call N`) the time from connecting to the first call's answer of an agent
//! in a new project, whose per-project instance mcpd starts in the background.
//! The summary ends with each target of issue 19 that the run measured, PASS or FAIL.
//! `--spawn N` runs only what the sandbox adds to a server's start (`spawn.rs`).
//!
//! Every wait is bounded; every process it starts is stopped and reaped by a guard, also on
//! panic. It exits 1 when anything failed or any error was counted. Run without `--bench`
//! (as `cargo test --benches` does) it runs the `--quick` smoke mode. Linux only (/proc).

// Test code: a panic here is a failed test or a broken fixture, never the daemon's.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::disallowed_methods,
    clippy::disallowed_macros
)]

mod bare_hop;
mod burst;
mod calls;
mod client;
mod daemon;
mod hop;
mod listing;
mod machine;
mod markdown;
mod memory;
mod nofile;
mod options;
mod process;
mod project;
mod report;
mod socat_pump;
mod spawn;
mod targets;

use crate::bare_hop::Relay;
use crate::burst::measure_burst;
use crate::calls::{Mode, Paths, Row, measure};
use crate::daemon::{Daemon, ServerDef};
use crate::hop::Hops;
use crate::listing::measure_listing;
use crate::machine::{loadavg, machine_facts};
use crate::memory::measure_memory;
use crate::options::{Opts, Parsed, USAGE, parse_args};
use crate::report::{
    mib, print_burst, print_first_call, print_listing, print_memory, print_relay, us,
};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Bound on any single read, write, connect or process exit the bench waits for.
const WAIT: Duration = Duration::from_secs(20);
/// Bound on every configured server of a daemon becoming ready.
const READY_WAIT: Duration = Duration::from_secs(60);
/// How long mcpd gets to shut down after SIGTERM before it is killed.
const DAEMON_GRACE: Duration = Duration::from_secs(10);
/// The size of the large result.
const BIG: usize = 1 << 20;
/// Most connections a relay measurement opens; more concurrency is pipelined on them.
const MAX_CONNS: usize = 8;
/// Fixture servers of the idle-memory daemon.
const IDLE_SERVERS: usize = 10;
/// Servers and tools per server of the tools/list daemon.
const LIST_SERVERS: usize = 20;
const TOOLS_PER_SERVER: usize = 100;
/// Read buffer of a load connection (a 1 MiB result arrives in 64 KiB pipe-sized pieces).
const LOAD_BUF: usize = 64 * 1024;
/// Read buffer of an idle connection.
const IDLE_BUF: usize = 4 * 1024;
/// Concurrent connection attempts while opening the idle agents.
const OPEN_PARALLEL: usize = 32;

/// The daemon measured: this build's, or another build's given in `MCPD_BENCH_MCPD` (so
/// two builds are compared with the same harness and fixture).
fn mcpd_bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var("MCPD_BENCH_MCPD").unwrap_or_else(|_| env!("CARGO_BIN_EXE_mcpd").to_owned())
    })
}

fn fixture_bin() -> &'static str {
    env!("CARGO_BIN_EXE_mcpd-fixture")
}

fn command_line(args: &[String]) -> String {
    let mut shown: Vec<&str> = Vec::new();
    let mut skip_next = false;
    for a in args {
        if std::mem::take(&mut skip_next) || a == "--bench" || a.starts_with("--table=") {
            continue;
        }
        // Where the table goes says nothing about what was measured.
        if a == "--table" {
            skip_next = true;
            continue;
        }
        shown.push(a);
    }
    if shown.is_empty() {
        "cargo bench --bench relay".into()
    } else {
        format!("cargo bench --bench relay -- {}", shown.join(" "))
    }
}

/// `--spawn N`: the spawn cost of a confined server, with and without user namespaces.
async fn run_spawn(opts: &Opts, began: Instant) -> bool {
    println!("note: numbers are from one run on a shared machine; other work on it adds noise");
    eprintln!(
        "[relay-bench] spawn: {} iterations of each variant",
        opts.spawn
    );
    // Twice: with user namespaces (each confined server in mount and PID namespaces
    // of its own) and without (`MCPD_USERNS=0`), to show what they add.
    let with = spawn::measure_spawn(opts.spawn, true).await;
    let without = spawn::measure_spawn(opts.spawn, false).await;
    let ok = spawn::print_spawn(&with) & spawn::print_spawn(&without);
    spawn::print_namespaces(&with, &without);
    println!();
    println!(
        "loadavg at end: {}; bench wall time {:.1} s; result: {}",
        loadavg(),
        began.elapsed().as_secs_f64(),
        if ok { "ok" } else { "ERRORS (see above)" }
    );
    ok
}

/// The settings line of a relay run.
fn print_settings(opts: &Opts) {
    println!(
        "settings: {} mode; {:.2} s counted per measurement after {:.2} s warm-up; concurrency {:?}; \
         {} listings; {} idle agents{}",
        if opts.quick { "quick" } else { "full" },
        opts.duration.as_secs_f64(),
        opts.warmup.as_secs_f64(),
        opts.concurrency,
        opts.listings,
        opts.idle_agents,
        if opts.paths.len() < Mode::ALL.len() {
            let names: Vec<&str> = opts.paths.iter().map(|m| m.name()).collect();
            format!("; paths {}", names.join(","))
        } else {
            String::new()
        }
    );
}

/// Every row of the relay table: each payload, concurrency and path in turn.
async fn measure_rows(opts: &Opts, to: &Paths<'_>, ok: &mut bool) -> Vec<Row> {
    let mut rows = Vec::new();
    for &payload in &opts.payloads {
        for &c in &opts.concurrency {
            for &mode in &opts.paths {
                let row = measure(mode, payload, c, opts, to).await;
                eprintln!(
                    "[relay-bench] {:<5} c={:<3} {:<10} {:>8.0} calls/s  p50 {} µs  p99 {} µs  errors {}{}{}{}",
                    payload.name(),
                    c,
                    mode.name(),
                    row.calls_per_s,
                    us(row.p50_us),
                    us(row.p99_us),
                    row.tally.errors() + u64::from(row.failure.is_some()),
                    row.hop_cpu_us
                        .map_or(String::new(), |u| format!("  hop CPU {u:.1} µs/call")),
                    row.mcpd_cpu_us
                        .map_or(String::new(), |u| format!("  mcpd CPU {u:.1} µs/call")),
                    match (row.mcpd_syscalls, row.mcpd_faults) {
                        (Some(s), Some(f)) => format!(" ({s:.1} reads+writes, {f:.1} faults)"),
                        _ => String::new(),
                    }
                );
                *ok &= row.failure.is_none() && row.tally.errors() == 0;
                rows.push(row);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    rows
}

/// What the relay rows run against: the bare relay, mcpd (with the project rows' instance
/// ready when they run) and the hops to it.
struct SetUp {
    relay: Relay,
    proj: Option<(tempfile::TempDir, std::path::PathBuf)>,
    daemon: Daemon,
    primed: Option<client::Client>,
    hops: Hops,
}

/// Starts what the relay rows run against, saying what failed if anything does.
async fn set_up(opts: &Opts, with_project: bool) -> Option<SetUp> {
    let relay = match Relay::start() {
        Ok(r) => r,
        Err(e) => {
            println!("FAILED to start the relay: {e}");
            return None;
        }
    };
    let mut servers = vec![ServerDef::shared("fx", Vec::new())];
    if with_project {
        servers.push(ServerDef::per_project(project::PX, project::fixture_args()));
    }
    let proj = match with_project.then(project::project_dir).transpose() {
        Ok(p) => p,
        Err(e) => {
            println!("FAILED: {e}");
            return None;
        }
    };
    let daemon = match Daemon::start(&servers, &[]) {
        Ok(d) => d,
        Err(e) => {
            println!("FAILED to start mcpd: {e}");
            return None;
        }
    };
    if let Err(e) = daemon.wait_ready().await {
        println!("FAILED: mcpd never got ready: {e}");
        return None;
    }
    // The project's instance is ready (and the shim rows' agents work in that project
    // too) before any row is measured.
    let mut primed = None;
    if let Some((_, dir)) = &proj {
        match project::prime(&daemon, dir).await {
            Ok((took, client)) => {
                println!(
                    "project rows: {}; the agents tell project {}; its instance ready and \
                     listed {:.1} ms after the first agent told it",
                    project::describe_px(),
                    dir.display(),
                    took.as_secs_f64() * 1000.0
                );
                primed = Some(client);
            }
            Err(e) => {
                println!("FAILED: the project rows' instance never got ready: {e}");
                return None;
            }
        }
    }
    let hops = match Hops::find(opts.shim.clone()) {
        Ok(h) => match &proj {
            Some((_, dir)) => h.shim_in(dir),
            None => h,
        },
        Err(e) => {
            println!("FAILED: {e}");
            return None;
        }
    };
    println!("{}", hops.describe());
    Some(SetUp {
        relay,
        proj,
        daemon,
        primed,
        hops,
    })
}

async fn run(opts: Opts, args: Vec<String>) -> bool {
    let began = Instant::now();
    let argv0 = std::env::args().next().unwrap_or_default();
    println!("mcpd relay benchmark");
    println!(
        "command: {}   (binary: {argv0} {})",
        command_line(&args),
        args.join(" ")
    );
    println!("{}", machine_facts());
    let load_at_start = loadavg();
    println!("loadavg at start: {load_at_start}");
    if let Some(why) = opts.smoke_reason {
        println!("note: {why}");
    }
    if opts.spawn > 0 {
        return run_spawn(&opts, began).await;
    }
    print_settings(&opts);
    println!("note: numbers are from one run on a shared machine; other work on it adds noise");

    let mut ok = true;
    // Enough descriptors for the idle agents here and in mcpd, which inherits the limit.
    let want_fds = (2 * opts.idle_agents + 512) as u64;
    let bench_fds = match nofile::raise(want_fds) {
        Ok((cur, max)) => format!("{cur}/{max}"),
        Err(e) => {
            println!("warning: {e}; the idle-agent measurement may fail");
            nofile::get().map_or("?".into(), |(c, m)| format!("{c}/{m}"))
        }
    };

    eprintln!(
        "[relay-bench] memory: {IDLE_SERVERS} servers, {} idle agents",
        opts.idle_agents
    );
    let (mem, list, burst) = if opts.relay_only {
        (None, None, None)
    } else {
        let mem = measure_memory(&opts).await;
        eprintln!("[relay-bench] tools/list: {LIST_SERVERS} x {TOOLS_PER_SERVER} tools");
        let list = measure_listing(&opts).await;
        eprintln!("[relay-bench] memory after a burst of 1 MiB results");
        let burst = measure_burst().await;
        (Some(mem), Some(list), Some(burst))
    };

    // The project rows' server, only when they run: otherwise the daemon is as it was.
    let with_project = opts.paths.contains(&Mode::Project);
    let Some(SetUp {
        relay,
        proj,
        daemon,
        primed,
        hops,
    }) = set_up(&opts, with_project).await
    else {
        return false;
    };
    let to = Paths {
        relay: &relay,
        daemon: &daemon,
        hops: &hops,
        project: proj.as_ref().map(|(_, p)| p.as_path()),
    };
    let rows = measure_rows(&opts, &to, &mut ok).await;
    let relay_rss = daemon.rss();
    let relay_hwm = daemon.hwm_kib();
    drop(primed);
    let relay_shutdown = daemon.shutdown();
    drop(proj);
    drop(relay);
    let first_call = if opts.first_call > 0 {
        eprintln!(
            "[relay-bench] first call in a new project: {} iterations",
            opts.first_call
        );
        Some(project::measure_first_call(&opts).await)
    } else {
        None
    };

    print_relay(&rows, &opts);
    println!();
    println!(
        "mcpd with the one fx server{} after the runs above: RssAnon {}, VmRSS {}, peak VmHWM {}",
        if with_project {
            " (and px's one instance)"
        } else {
            ""
        },
        mib(relay_rss.map(|r| r.anon)),
        mib(relay_rss.map(|r| r.vm)),
        mib(relay_hwm)
    );
    if let Err(e) = &relay_shutdown {
        ok = false;
        println!("  ERROR at shutdown: {e}");
    }
    if let Some(mem) = &mem {
        ok &= print_memory(mem, &bench_fds);
    }
    if let Some(list) = &list {
        ok &= print_listing(list);
    }
    if let Some(burst) = &burst {
        ok &= print_burst(burst);
    }
    if let Some(first_call) = &first_call {
        ok &= print_first_call(first_call);
    }
    let targets = targets::collect(&rows, &mem, &burst);
    targets::print(&targets, &opts);
    if let Some(path) = &opts.table {
        let heading = format!(
            "`{}` on one machine ({}); load average {} at the start.",
            command_line(&args),
            machine_facts().trim_start_matches("machine: "),
            load_at_start
        );
        let md = markdown::render(&heading, &rows, &opts.concurrency, &mem, &targets);
        match std::fs::write(path, md) {
            Ok(()) => println!("wrote the Markdown table to {}", path.display()),
            Err(e) => {
                ok = false;
                println!("ERROR: cannot write {}: {e}", path.display());
            }
        }
    }
    println!();
    println!(
        "loadavg at end: {}; bench wall time {:.1} s; result: {}",
        loadavg(),
        began.elapsed().as_secs_f64(),
        if ok { "ok" } else { "ERRORS (see above)" }
    );
    ok
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, socket] = args.as_slice()
        && flag == "--socat-pump"
    {
        return socat_pump::run(socket);
    }
    let opts = match parse_args(&args) {
        Ok(Parsed::Run(o)) => *o,
        Ok(Parsed::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n{USAGE}");
            return ExitCode::from(64);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("the bench's tokio runtime");
    let ok = rt.block_on(run(opts, args));
    // Connection tasks still holding fixtures are dropped here, which reaps them.
    rt.shutdown_timeout(Duration::from_secs(5));
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
