//! The tools/call measurement: a closed loop through each path (direct, the bare hop, mcpd,
//! and the stdio hops in front of them), with every response checked.

use crate::bare_hop::Relay;
use crate::client::{Client, clip};
use crate::daemon::Daemon;
use crate::hop::Hops;
use crate::options::Opts;
use crate::{BIG, LOAD_BUF, MAX_CONNS, WAIT};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Instant;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The client spawns the fixture and talks to it over stdio.
    Direct,
    /// The client connects to the bare relay's socket.
    BareHop,
    /// The client spawns socat (or its stand-in) into the bare relay's socket: a stdio
    /// client's floor for any socket daemon.
    SocatHop,
    /// The client connects to mcpd's socket.
    Mcpd,
    /// The client spawns `mcpd connect` and talks to mcpd through it, as stdio clients do.
    Shim,
    /// The client spawns socat (or its stand-in) into mcpd's socket: the shim's yardstick.
    SocatMcpd,
    /// As `Mcpd`, each call made through the discovery meta-tool `mcpd__call_tool`.
    CallTool,
    /// As `Mcpd`, to the fixture configured a second time as `px` with `share = "project"`:
    /// each connection first tells its project (one temp dir for all), so every call goes
    /// to that project's one instance, ready before the measurement starts.
    Project,
}

impl Mode {
    pub const ALL: [Mode; 8] = [
        Mode::Direct,
        Mode::BareHop,
        Mode::SocatHop,
        Mode::Mcpd,
        Mode::Project,
        Mode::CallTool,
        Mode::Shim,
        Mode::SocatMcpd,
    ];

    /// The mode of a row's name, as `--paths` takes it.
    pub fn named(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether the row's calls go through mcpd.
    pub fn through_mcpd(self) -> bool {
        matches!(
            self,
            Mode::Mcpd | Mode::Project | Mode::CallTool | Mode::Shim | Mode::SocatMcpd
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Direct => "direct",
            Mode::BareHop => "bare-hop",
            Mode::SocatHop => "socat-hop",
            Mode::Mcpd => "mcpd",
            Mode::Shim => "shim",
            Mode::SocatMcpd => "socat-mcpd",
            Mode::CallTool => "call-tool",
            Mode::Project => "project",
        }
    }

    fn tool_prefix(self) -> &'static str {
        match self {
            Mode::Mcpd | Mode::Shim | Mode::SocatMcpd | Mode::CallTool => "fx__",
            Mode::Project => "px__",
            Mode::Direct | Mode::BareHop | Mode::SocatHop => "",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    Echo,
    Big,
}

impl Payload {
    pub fn name(self) -> &'static str {
        match self {
            Payload::Echo => "echo",
            Payload::Big => "1MiB",
        }
    }
}

fn call_line(id: u64, conn: usize, prefix: &str, payload: Payload, meta: bool) -> Vec<u8> {
    if meta {
        // The same call, as the arguments of mcpd__call_tool.
        let args = match payload {
            Payload::Echo => {
                format!("{{\"name\":\"{prefix}echo\",\"arguments\":{{\"text\":\"c{conn}-{id}\"}}}}")
            }
            Payload::Big => {
                format!("{{\"name\":\"{prefix}big\",\"arguments\":{{\"bytes\":{BIG}}}}}")
            }
        };
        return format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"mcpd__call_tool\",\"arguments\":{args}}}}}\n"
        )
        .into_bytes();
    }
    let line = match payload {
        Payload::Echo => format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"{prefix}echo\",\"arguments\":{{\"text\":\"c{conn}-{id}\"}}}}}}\n"
        ),
        Payload::Big => format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"{prefix}big\",\"arguments\":{{\"bytes\":{BIG}}}}}}}\n"
        ),
    };
    line.into_bytes()
}

#[derive(Deserialize)]
struct CallResponse<'a> {
    id: Option<Value>,
    method: Option<IgnoredAny>,
    #[serde(borrow)]
    result: Option<CallResult<'a>>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct CallResult<'a> {
    #[serde(borrow, default)]
    content: Vec<Content<'a>>,
    #[serde(rename = "isError", default)]
    is_error: bool,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
}

/// What one connection saw.
#[derive(Default)]
pub struct Tally {
    /// Latencies (ns) of the correct responses that arrived inside the counted window.
    lat_ns: Vec<u64>,
    /// JSON-RPC errors and `isError` results.
    pub rpc_errors: u64,
    /// Results with the wrong content (a crossed or corrupted response).
    pub wrong: u64,
    /// Lines that are not a response to a request in flight (unknown id, unparsable).
    pub stray: u64,
    /// The connection failed (closed, read timeout) with requests still in flight.
    pub broken: u64,
    /// Correct responses in all, warm-up and the calls in flight at the end included:
    /// the calls the hop process carried while it lived.
    answered: u64,
    pub samples: Vec<String>,
}

impl Tally {
    fn note(&mut self, s: String) {
        if self.samples.len() < 3 {
            self.samples.push(s);
        }
    }

    pub fn errors(&self) -> u64 {
        self.rpc_errors + self.wrong + self.stray + self.broken
    }

    fn merge(&mut self, other: Tally) {
        self.lat_ns.extend(other.lat_ns);
        self.rpc_errors += other.rpc_errors;
        self.wrong += other.wrong;
        self.stray += other.stray;
        self.broken += other.broken;
        self.answered += other.answered;
        for s in other.samples {
            self.note(s);
        }
    }
}

#[derive(Clone, Copy)]
struct Window {
    from: Instant,
    to: Instant,
}

enum Verdict {
    Ok,
    RpcError(String),
    Wrong(String),
}

fn judge(resp: &CallResponse<'_>, payload: Payload, conn: usize, id: u64) -> Verdict {
    if let Some(e) = &resp.error {
        return Verdict::RpcError(format!("id {id}: error {}", clip(&e.to_string())));
    }
    let Some(result) = &resp.result else {
        return Verdict::Wrong(format!("id {id}: neither result nor error"));
    };
    let text = result.content.first().and_then(|c| c.text.as_deref());
    if result.is_error {
        return Verdict::RpcError(format!(
            "id {id}: isError result: {}",
            clip(text.unwrap_or(""))
        ));
    }
    match (payload, text) {
        (Payload::Echo, Some(t)) if t == format!("c{conn}-{id}") => Verdict::Ok,
        (Payload::Big, Some(t)) if t.len() == BIG && t.starts_with('x') && t.ends_with('x') => {
            Verdict::Ok
        }
        (_, t) => Verdict::Wrong(format!(
            "id {id} on connection {conn}: unexpected text {}",
            clip(t.unwrap_or("<none>"))
        )),
    }
}

/// Runs one connection's closed loop: `depth` requests in flight until the window ends,
/// then waits for the rest.
async fn drive(
    mut client: Client,
    conn: usize,
    depth: usize,
    mode: Mode,
    payload: Payload,
    win: Window,
) -> (Client, Tally) {
    let mut t = Tally::default();
    let mut sent: HashMap<u64, Instant> = HashMap::with_capacity(depth * 2);
    let mut next_id = 1_000_000u64;
    let prefix = mode.tool_prefix();
    for _ in 0..depth {
        next_id += 1;
        let line = call_line(next_id, conn, prefix, payload, mode == Mode::CallTool);
        sent.insert(next_id, Instant::now());
        if let Err(e) = client.send(&line).await {
            t.broken += sent.len() as u64;
            t.note(format!("connection {conn}: {e}"));
            return (client, t);
        }
    }
    while !sent.is_empty() {
        let raw = match client.recv().await {
            Ok(raw) => raw,
            Err(e) => {
                t.broken += sent.len() as u64;
                t.note(format!(
                    "connection {conn}: {e} with {} requests in flight",
                    sent.len()
                ));
                break;
            }
        };
        let now = Instant::now();
        let resp: CallResponse<'_> = match serde_json::from_slice(raw) {
            Ok(r) => r,
            Err(e) => {
                t.stray += 1;
                let shown = clip(&String::from_utf8_lossy(raw));
                t.note(format!("connection {conn}: unparsable line ({e}): {shown}"));
                continue;
            }
        };
        if resp.method.is_some() && resp.id.is_none() {
            continue; // a notification
        }
        let id = resp.id.as_ref().and_then(Value::as_u64);
        let Some(started) = id.and_then(|id| sent.remove(&id)) else {
            t.stray += 1;
            let shown = clip(&String::from_utf8_lossy(raw));
            t.note(format!(
                "connection {conn}: response to no request in flight: {shown}"
            ));
            continue;
        };
        let id = id.unwrap_or_default();
        match judge(&resp, payload, conn, id) {
            Verdict::Ok => {
                t.answered += 1;
                if now >= win.from && now <= win.to {
                    t.lat_ns.push((now - started).as_nanos() as u64);
                }
            }
            Verdict::RpcError(m) => {
                t.rpc_errors += 1;
                t.note(m);
            }
            Verdict::Wrong(m) => {
                t.wrong += 1;
                t.note(m);
            }
        }
        if now < win.to {
            next_id += 1;
            let line = call_line(next_id, conn, prefix, payload, mode == Mode::CallTool);
            sent.insert(next_id, Instant::now());
            if let Err(e) = client.send(&line).await {
                t.broken += sent.len() as u64;
                t.note(format!("connection {conn}: {e}"));
                break;
            }
        }
    }
    (client, t)
}

pub struct Row {
    pub payload: Payload,
    pub concurrency: usize,
    pub layout: String,
    pub mode: Mode,
    pub calls_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub counted: usize,
    pub tally: Tally,
    pub failure: Option<String>,
    /// The stdio hop's own CPU time (user and system, every thread) per call it carried,
    /// in µs: the shim's or socat's cost, which unlike calls/s barely depends on what
    /// else the machine runs.
    pub hop_cpu_us: Option<f64>,
    /// The daemon's CPU time per call over the measurement, in µs, for the paths through
    /// it (its background work, idle here, is counted too).
    pub mcpd_cpu_us: Option<f64>,
    /// The daemon's read and write syscalls and minor page faults per call, over the same
    /// span as `mcpd_cpu_us`: what its CPU per call went on when that figure jumps.
    pub mcpd_syscalls: Option<f64>,
    pub mcpd_faults: Option<f64>,
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1000.0
}

/// Where a measurement's connections go: the bare relay, mcpd, and the stdio hops.
pub struct Paths<'a> {
    pub relay: &'a Relay,
    pub daemon: &'a Daemon,
    pub hops: &'a Hops,
    /// The project the `project` rows' agents tell mcpd, when those rows run.
    pub project: Option<&'a std::path::Path>,
}

async fn open_clients(mode: Mode, n: usize, to: &Paths<'_>) -> Result<Vec<Client>, String> {
    let mut clients = Vec::with_capacity(n);
    for _ in 0..n {
        let mut c = match mode {
            Mode::Direct => Client::over_stdio(LOAD_BUF)?,
            Mode::BareHop => Client::connect(&to.relay.socket, LOAD_BUF).await?,
            Mode::SocatHop => to.hops.socat(&to.relay.socket, LOAD_BUF)?,
            Mode::Mcpd | Mode::CallTool => to.daemon.connect(LOAD_BUF).await?,
            Mode::Project => {
                let dir = to.project.ok_or("project: no project directory")?;
                let mut c = to.daemon.connect(LOAD_BUF).await?;
                c.project(dir).await?;
                c
            }
            Mode::Shim => to.hops.shim(&to.daemon.socket, LOAD_BUF)?,
            Mode::SocatMcpd => to.hops.socat(&to.daemon.socket, LOAD_BUF)?,
        };
        c.initialize()
            .await
            .map_err(|e| format!("{}: initialize: {e}", mode.name()))?;
        clients.push(c);
    }
    Ok(clients)
}

pub async fn measure(mode: Mode, payload: Payload, c: usize, opts: &Opts, to: &Paths<'_>) -> Row {
    let conns = c.min(MAX_CONNS);
    let depths: Vec<usize> = (0..conns)
        .map(|i| c / conns + usize::from(i < c % conns))
        .collect();
    let layout = if c.is_multiple_of(conns) {
        format!("{conns}x{}", c / conns)
    } else {
        format!("{conns}x{}+", c / conns)
    };
    let mut row = Row {
        payload,
        concurrency: c,
        layout,
        mode,
        calls_per_s: 0.0,
        p50_us: f64::NAN,
        p99_us: f64::NAN,
        counted: 0,
        tally: Tally::default(),
        failure: None,
        hop_cpu_us: None,
        mcpd_cpu_us: None,
        mcpd_syscalls: None,
        mcpd_faults: None,
    };
    let through_mcpd = mode.through_mcpd();
    let daemon_cpu_before = through_mcpd
        .then(|| crate::machine::cpu_ns(to.daemon.pid()))
        .flatten();
    let daemon_work_before = through_mcpd
        .then(|| crate::machine::syscalls_and_faults(to.daemon.pid()))
        .flatten();
    let clients = match open_clients(mode, conns, to).await {
        Ok(c) => c,
        Err(e) => {
            row.failure = Some(e);
            return row;
        }
    };
    let start = Instant::now();
    let win = Window {
        from: start + opts.warmup,
        to: start + opts.warmup + opts.duration,
    };
    let handles: Vec<_> = clients
        .into_iter()
        .zip(depths)
        .enumerate()
        .map(|(i, (client, depth))| tokio::spawn(drive(client, i, depth, mode, payload, win)))
        .collect();
    let aborts: Vec<_> = handles.iter().map(|h| h.abort_handle()).collect();
    let limit = opts.warmup + opts.duration + 2 * WAIT;
    let mut finished = Vec::new();
    match tokio::time::timeout(limit, futures::future::join_all(handles)).await {
        Ok(results) => {
            for r in results {
                match r {
                    Ok((client, tally)) => {
                        row.tally.merge(tally);
                        finished.push(client);
                    }
                    Err(e) => row.failure = Some(format!("a connection task failed: {e}")),
                }
            }
        }
        Err(_) => {
            for a in aborts {
                a.abort();
            }
            row.failure = Some(format!("the measurement did not end within {limit:?}"));
        }
    }
    if let (Some(before), Some(after)) =
        (daemon_cpu_before, crate::machine::cpu_ns(to.daemon.pid()))
        && row.tally.answered > 0
    {
        let ns = after.saturating_sub(before);
        row.mcpd_cpu_us = Some(ns as f64 / 1000.0 / row.tally.answered as f64);
    }
    if let (Some((calls0, faults0)), Some((calls1, faults1))) = (
        daemon_work_before,
        crate::machine::syscalls_and_faults(to.daemon.pid()),
    ) && row.tally.answered > 0
    {
        let per_call = |n: u64| n as f64 / row.tally.answered as f64;
        row.mcpd_syscalls = Some(per_call(calls1.saturating_sub(calls0)));
        row.mcpd_faults = Some(per_call(faults1.saturating_sub(faults0)));
    }
    if matches!(mode, Mode::Shim | Mode::SocatMcpd | Mode::SocatHop) && row.tally.answered > 0 {
        let ns: Option<u64> = finished.iter().map(|c| c.process_cpu_ns()).sum();
        row.hop_cpu_us = ns.map(|ns| ns as f64 / 1000.0 / row.tally.answered as f64);
    }
    drop(finished); // closes the connections; direct fixtures are stopped and reaped
    row.tally.lat_ns.sort_unstable();
    let lat = &row.tally.lat_ns;
    row.counted = lat.len();
    row.calls_per_s = lat.len() as f64 / opts.duration.as_secs_f64();
    row.p50_us = percentile(lat, 0.50);
    row.p99_us = percentile(lat, 0.99);
    row
}
