//! The run's relay rows, memory and targets as Markdown (`--table PATH`), for the table in
//! docs/performance.md: `benches/perf-table.sh` runs the bench and puts this file in place.

use crate::calls::{Mode, Payload, Row};
use crate::memory::MemReport;
use crate::report::us;
use crate::targets::Target;
use std::fmt::Write;

/// The paths as columns, in the order a reader compares them: the floors first. A path
/// the run did not measure (`--paths`) has no column.
const COLUMNS: [(Mode, &str); 8] = [
    (Mode::Direct, "direct (stdio)"),
    (Mode::BareHop, "bare hop (socket)"),
    (Mode::Mcpd, "mcpd (socket)"),
    (Mode::Project, "mcpd, per-project server"),
    (Mode::CallTool, "mcpd `mcpd__call_tool`"),
    (Mode::SocatHop, "socat → bare hop"),
    (Mode::SocatMcpd, "socat → mcpd"),
    (Mode::Shim, "`mcpd connect` → mcpd"),
];

fn cell(rows: &[Row], p: Payload, c: usize, m: Mode, f: impl Fn(&Row) -> String) -> String {
    rows.iter()
        .find(|r| r.payload == p && r.concurrency == c && r.mode == m && r.failure.is_none())
        .map_or("-".into(), f)
}

fn thousands(v: f64) -> String {
    let n = v.round() as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn table(
    out: &mut String,
    rows: &[Row],
    concurrency: &[usize],
    title: &str,
    f: &dyn Fn(&Row) -> String,
) {
    let columns: Vec<(Mode, &str)> = COLUMNS
        .into_iter()
        .filter(|(m, _)| rows.iter().any(|r| r.mode == *m))
        .collect();
    let _ = write!(out, "| {title} |");
    for (_, name) in &columns {
        let _ = write!(out, " {name} |");
    }
    out.push_str("\n|---|");
    for _ in &columns {
        out.push_str("---|");
    }
    out.push('\n');
    for p in [Payload::Echo, Payload::Big] {
        for &c in concurrency {
            if !rows.iter().any(|r| r.payload == p && r.concurrency == c) {
                continue;
            }
            let _ = write!(out, "| {} c={c} |", p.name());
            for &(m, _) in &columns {
                let _ = write!(out, " {} |", cell(rows, p, c, m, f));
            }
            out.push('\n');
        }
    }
}

/// The whole block: what ran, two tables (calls/s, p50), memory, and the targets.
pub fn render(
    heading: &str,
    rows: &[Row],
    concurrency: &[usize],
    mem: &Option<Result<MemReport, String>>,
    targets: &[Target],
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{heading}\n");
    table(&mut out, rows, concurrency, "calls/s", &|r| {
        thousands(r.calls_per_s)
    });
    out.push('\n');
    table(&mut out, rows, concurrency, "p50 latency µs", &|r| {
        us(r.p50_us)
    });
    if let Some(Ok(m)) = mem {
        let mib =
            |k: Option<u64>| k.map_or("-".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
        let kib = |k: Option<f64>| k.map_or("-".into(), |k| format!("{k:.1} KiB"));
        let _ = writeln!(
            out,
            "\nmcpd's memory idle with 10 servers, when ready: RssAnon {} (what the daemon \
             owns: heap, stacks), RssFile {} (pages of its code and libraries), VmRSS {}. Per \
             idle agent ({} agents): RssAnon {}, VmRSS {}. The memory targets' verdicts read \
             RssAnon.",
            mib(m.idle.map(|r| r.anon)),
            mib(m.idle.map(|r| r.file)),
            mib(m.idle.map(|r| r.vm)),
            m.agents_opened,
            kib(m.per_agent_kib(|r| r.anon)),
            kib(m.per_agent_kib(|r| r.vm)),
        );
    }
    out.push_str("\n| target | measured | verdict |\n|---|---|---|\n");
    for t in targets {
        let _ = writeln!(out, "| {} | {} | {} |", t.what, t.value, t.verdict());
    }
    out
}
