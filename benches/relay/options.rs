//! Command-line options of the bench: `--duration`, `--concurrency`, `--payload`, `--paths`,
//! `--relay-only`, `--first-call`, `--spawn`, `--quick`, `--shim`, `--table`, `--help`.

use crate::calls::{Mode, Payload};
use std::time::Duration;

pub struct Opts {
    pub duration: Duration,
    pub warmup: Duration,
    pub concurrency: Vec<usize>,
    pub quick: bool,
    /// Why quick mode was chosen without `--quick`, if it was.
    pub smoke_reason: Option<&'static str>,
    pub listings: usize,
    pub idle_agents: usize,
    /// The `mcpd` binary whose `connect` the shim rows run, if not this build's.
    pub shim: Option<std::path::PathBuf>,
    /// The payloads the relay rows run.
    pub payloads: Vec<Payload>,
    /// The paths the relay rows run, in the table's order.
    pub paths: Vec<Mode>,
    /// Iterations of each variant of the first-call measurement (0: not run).
    pub first_call: usize,
    /// Iterations of each variant of the spawn measurement; when non-zero, it is the only
    /// one run.
    pub spawn: usize,
    /// Skip the memory and `tools/list` measurements (for profiling the relay alone).
    pub relay_only: bool,
    /// Where to write the summary table in Markdown, if anywhere.
    pub table: Option<std::path::PathBuf>,
}

pub const USAGE: &str = "\
usage: cargo bench --bench relay [-- OPTIONS]
  --duration SECS      counted time per measurement (default 3; --quick 0.25)
  --concurrency LIST   requests in flight, comma-separated (default 1,8,64; --quick 1,8)
  --quick              CI smoke mode: tiny durations, concurrency 1 and 8, 20 listings,
                       100 idle agents instead of 1000
  --payload LIST       relay payloads, comma-separated: echo, 1MiB (default both)
  --paths LIST         relay rows, comma-separated (default all): direct, bare-hop,
                       socat-hop, mcpd, project, call-tool, shim, socat-mcpd
  --relay-only         skip the memory, tools/list, burst and first-call measurements
  --first-call N       first call in a new project, N iterations of each variant
                       (default 10; --quick 3; 0 skips it); with --relay-only it runs
                       only when given
  --spawn [N]          only this: mcpd/start to the first call's answer of the fixture
                       and published servers, with and without the sandbox, N
                       iterations of each (default 10)
  --shim PATH          run the shim rows with PATH's `connect` (another build's mcpd)
  --table PATH         also write the relay table and the targets as Markdown to PATH
  --help               this text
environment:
  MCPD_BENCH_MCPD=PATH measure PATH's daemon instead of this build's (the same
                       harness and fixture, for comparing two builds)";

pub enum Parsed {
    Run(Box<Opts>),
    Help,
}

pub fn parse_args(args: &[String]) -> Result<Parsed, String> {
    let mut quick = false;
    let mut bench_flag = false;
    let mut duration: Option<Duration> = None;
    let mut concurrency: Option<Vec<usize>> = None;
    let mut shim = None;
    let mut payloads = None;
    let mut relay_only = false;
    let mut table = None;
    let mut paths: Option<Vec<Mode>> = None;
    let mut first_call: Option<usize> = None;
    let mut spawn = 0;
    let mut it = args.iter().peekable();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => it.next().cloned().ok_or(format!("{name} needs a value")),
            }
        };
        match flag {
            "--bench" => bench_flag = true,
            "--quick" => quick = true,
            "--help" | "-h" => return Ok(Parsed::Help),
            "--duration" => {
                let v = value("--duration")?;
                let secs: f64 = v
                    .parse()
                    .map_err(|e| format!("--duration {v:?}: not a number of seconds ({e})"))?;
                if !(secs.is_finite() && secs > 0.0 && secs <= 3600.0) {
                    return Err(format!("--duration {v}: must be in (0, 3600] seconds"));
                }
                duration = Some(Duration::from_secs_f64(secs));
            }
            "--concurrency" => {
                let v = value("--concurrency")?;
                let list = v
                    .split(',')
                    .map(|s| match s.trim().parse::<usize>() {
                        Ok(n) if (1..=512).contains(&n) => Ok(n),
                        _ => Err(format!(
                            "--concurrency {v:?}: {s:?} is not an integer in 1..=512"
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                concurrency = Some(list);
            }
            "--shim" => shim = Some(std::path::PathBuf::from(value("--shim")?)),
            "--table" => table = Some(std::path::PathBuf::from(value("--table")?)),
            "--relay-only" => relay_only = true,
            "--paths" => {
                let v = value("--paths")?;
                let mut list = Vec::new();
                for s in v.split(',') {
                    let m = Mode::named(s.trim()).ok_or_else(|| {
                        let all: Vec<&str> = Mode::ALL.iter().map(|m| m.name()).collect();
                        format!("--paths {v:?}: {s:?} is not one of {}", all.join(", "))
                    })?;
                    if !list.contains(&m) {
                        list.push(m);
                    }
                }
                // Always in the table's order, whatever the order given.
                paths = Some(Mode::ALL.into_iter().filter(|m| list.contains(m)).collect());
            }
            "--first-call" => {
                let v = value("--first-call")?;
                let n = match v.trim().parse::<usize>() {
                    Ok(n) if n <= 1000 => n,
                    _ => return Err(format!("--first-call {v:?}: not an integer in 0..=1000")),
                };
                first_call = Some(n);
            }
            "--spawn" => {
                // The count is optional: `--spawn` alone, or before another flag, is 10.
                let v = match inline.clone() {
                    Some(v) => v,
                    None => match it.next_if(|a| !a.starts_with("--")) {
                        Some(v) => v.clone(),
                        None => "10".to_owned(),
                    },
                };
                spawn = match v.trim().parse::<usize>() {
                    Ok(n) if (1..=1000).contains(&n) => n,
                    _ => return Err(format!("--spawn {v:?}: not an integer in 1..=1000")),
                };
            }
            "--payload" => {
                let v = value("--payload")?;
                let list = v
                    .split(',')
                    .map(|s| match s.trim() {
                        "echo" => Ok(Payload::Echo),
                        "1MiB" | "big" => Ok(Payload::Big),
                        other => Err(format!(
                            "--payload {v:?}: {other:?} is not one of echo, 1MiB"
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                payloads = Some(list);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let mut smoke_reason = None;
    if !bench_flag && !quick {
        quick = true;
        smoke_reason = Some("run without --bench (as `cargo test --benches` does): smoke mode");
    }
    let duration = duration.unwrap_or(if quick {
        Duration::from_millis(250)
    } else {
        Duration::from_secs(3)
    });
    Ok(Parsed::Run(Box::new(Opts {
        duration,
        warmup: (duration / 5).min(Duration::from_secs(1)),
        concurrency: concurrency.unwrap_or(if quick { vec![1, 8] } else { vec![1, 8, 64] }),
        quick,
        smoke_reason,
        listings: if quick { 20 } else { 200 },
        idle_agents: if quick { 100 } else { 1000 },
        shim,
        payloads: payloads.unwrap_or(vec![Payload::Echo, Payload::Big]),
        paths: paths.unwrap_or(Mode::ALL.to_vec()),
        first_call: match (first_call, relay_only) {
            (Some(n), _) => n,
            (None, true) => 0,
            (None, false) if quick => 3,
            (None, false) => 10,
        },
        spawn,
        relay_only,
        table,
    })))
}
