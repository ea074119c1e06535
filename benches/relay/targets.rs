//! The summary of issue 19's targets: each one this run measured, its value, PASS or FAIL.

use crate::burst::{BURST, BurstReport, SETTLE, WITHIN_KIB};
use crate::calls::{Mode, Payload, Row};
use crate::memory::MemReport;
use crate::options::Opts;
use crate::report::ratio;

/// One line of the summary.
pub struct Target {
    pub what: String,
    pub value: String,
    /// `None`: not measured in this run (a concurrency it did not run, a failed row).
    pub pass: Option<bool>,
}

impl Target {
    pub fn verdict(&self) -> &'static str {
        match self.pass {
            Some(true) => "PASS",
            Some(false) => "FAIL",
            None => "-",
        }
    }
}

fn find(rows: &[Row], p: Payload, c: usize, m: Mode) -> Option<&Row> {
    rows.iter()
        .find(|r| r.payload == p && r.concurrency == c && r.mode == m && r.failure.is_none())
}

/// `a ÷ b` of calls/s at `c`, against `floor`.
fn throughput(rows: &[Row], p: Payload, c: usize, a: Mode, b: Mode, floor: f64) -> Target {
    let what = format!(
        "{} c={c}: {} ≥ {floor} × {} calls/s",
        p.name(),
        a.name(),
        b.name()
    );
    match (find(rows, p, c, a), find(rows, p, c, b)) {
        (Some(x), Some(y)) if y.calls_per_s > 0.0 => {
            let r = x.calls_per_s / y.calls_per_s;
            Target {
                what,
                value: format!(
                    "{} ({:.0} vs {:.0})",
                    ratio(x.calls_per_s, y.calls_per_s),
                    x.calls_per_s,
                    y.calls_per_s
                ),
                pass: Some(r >= floor),
            }
        }
        _ => Target {
            what,
            value: "not measured".into(),
            pass: None,
        },
    }
}

fn mib(k: u64) -> String {
    format!("{:.1} MiB", k as f64 / 1024.0)
}

/// The memory targets read what the daemon owns (`RssAnon`); `VmRSS` is shown beside it.
fn memory(m: &Option<Result<MemReport, String>>) -> Vec<Target> {
    let m = m.as_ref().and_then(|m| m.as_ref().ok());
    let idle = m.and_then(|m| m.idle);
    let per_agent =
        m.and_then(|m| Some((m.per_agent_kib(|r| r.anon)?, m.per_agent_kib(|r| r.vm)?)));
    vec![
        Target {
            what: "idle RSS with 10 servers ≤ 8 MiB (verdict on RssAnon)".into(),
            value: idle.map_or("not measured".into(), |r| {
                format!("RssAnon {} (VmRSS {})", mib(r.anon), mib(r.vm))
            }),
            pass: idle.map(|r| r.anon <= 8 * 1024),
        },
        Target {
            what: "RSS per idle agent ≤ 16 KiB (verdict on RssAnon)".into(),
            value: per_agent.map_or("not measured".into(), |(anon, vm)| {
                format!("RssAnon {anon:.1} KiB (VmRSS {vm:.1} KiB)")
            }),
            pass: per_agent.map(|(anon, _)| anon <= 16.0),
        },
    ]
}

/// A call through `mcpd__call_tool` against the same call made directly.
fn call_tool_p50(rows: &[Row]) -> Target {
    let what = "echo c=1: call-tool p50 ≤ mcpd p50 + 10 µs".to_owned();
    match (
        find(rows, Payload::Echo, 1, Mode::CallTool),
        find(rows, Payload::Echo, 1, Mode::Mcpd),
    ) {
        (Some(m), Some(d)) if m.p50_us.is_finite() && d.p50_us.is_finite() => Target {
            what,
            value: format!(
                "{:.0} vs {:.0} µs ({:+.0})",
                m.p50_us,
                d.p50_us,
                m.p50_us - d.p50_us
            ),
            pass: Some(m.p50_us <= d.p50_us + 10.0),
        },
        _ => Target {
            what,
            value: "not measured".into(),
            pass: None,
        },
    }
}

fn small_p50(rows: &[Row]) -> Target {
    let what = "echo c=1: mcpd p50 ≤ bare-hop p50 + 15 µs".to_owned();
    match (
        find(rows, Payload::Echo, 1, Mode::Mcpd),
        find(rows, Payload::Echo, 1, Mode::BareHop),
    ) {
        (Some(m), Some(b)) if m.p50_us.is_finite() && b.p50_us.is_finite() => Target {
            what,
            value: format!(
                "{:.0} vs {:.0} µs ({:+.0})",
                m.p50_us,
                b.p50_us,
                m.p50_us - b.p50_us
            ),
            pass: Some(m.p50_us <= b.p50_us + 15.0),
        },
        _ => Target {
            what,
            value: "not measured".into(),
            pass: None,
        },
    }
}

fn burst(b: &Option<Result<BurstReport, String>>) -> Target {
    let what = format!(
        "RSS within {} MiB of before, {} s after {BURST} concurrent 1 MiB calls (verdict on RssAnon)",
        WITHIN_KIB / 1024,
        SETTLE.as_secs()
    );
    let (value, pass) = match b {
        None => ("not measured".to_owned(), None),
        Some(Err(e)) => (format!("FAILED: {e}"), Some(false)),
        Some(Ok(b)) => {
            let when = match b.back_after {
                Some(t) => format!("{} after {} ms", mib(b.last.anon), t.as_millis()),
                None => format!("still {} after {} s", mib(b.last.anon), SETTLE.as_secs()),
            };
            (
                format!(
                    "RssAnon {} before, peak {}, {when} (VmRSS {}, {}, {})",
                    mib(b.before.anon),
                    mib(b.peak.anon),
                    mib(b.before.vm),
                    mib(b.peak.vm),
                    mib(b.last.vm),
                ),
                Some(b.back_after.is_some()),
            )
        }
    };
    Target { what, value, pass }
}

/// Every target of issue 19, with what this run measured of it. Targets that need more
/// than one run (five consecutive runs) say so.
pub fn collect(
    rows: &[Row],
    mem: &Option<Result<MemReport, String>>,
    burst_report: &Option<Result<BurstReport, String>>,
) -> Vec<Target> {
    let mut targets = Vec::new();
    for c in [1, 8, 64] {
        targets.push(throughput(
            rows,
            Payload::Echo,
            c,
            Mode::Shim,
            Mode::SocatMcpd,
            0.95,
        ));
    }
    for c in [1, 8] {
        targets.push(throughput(
            rows,
            Payload::Echo,
            c,
            Mode::Shim,
            Mode::SocatHop,
            0.9,
        ));
    }
    for c in [1, 8, 64] {
        targets.push(throughput(
            rows,
            Payload::Big,
            c,
            Mode::Mcpd,
            Mode::BareHop,
            0.9,
        ));
    }
    targets.push(small_p50(rows));
    targets.push(call_tool_p50(rows));
    let mut c64 = throughput(rows, Payload::Echo, 64, Mode::Mcpd, Mode::BareHop, 0.9);
    c64.what
        .push_str(" (this run; the target asks five in a row)");
    targets.push(c64);
    targets.extend(memory(mem));
    targets.push(burst(burst_report));
    targets
}

/// Prints the targets, one per line.
pub fn print(targets: &[Target], opts: &Opts) {
    println!();
    println!(
        "issue 19 targets ({} mode, one run; each ratio compares rows measured seconds apart):",
        if opts.quick { "quick" } else { "full" }
    );
    if cfg!(debug_assertions) {
        println!("  (an unoptimised build, as CI's smoke run is: its times say nothing of mcpd's)");
    }
    for t in targets {
        println!("  {:<4}  {:<62} {}", t.verdict(), t.what, t.value);
    }
}
