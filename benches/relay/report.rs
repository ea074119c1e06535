//! The printed report: the tables of the tools/call runs, the memory and the listing sections.

use crate::burst::{BURST, BurstReport};
use crate::calls::{Mode, Payload, Row};
use crate::listing::ListReport;
use crate::machine::Rss;
use crate::memory::MemReport;
use crate::options::Opts;
use crate::project::{FirstCallReport, describe_px};
use crate::{IDLE_SERVERS, LIST_SERVERS, TOOLS_PER_SERVER};
use std::time::Duration;

pub fn mib(kib: Option<u64>) -> String {
    kib.map_or("?".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
}

pub fn us(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else {
        format!("{v:.0}")
    }
}

pub fn ratio(a: f64, b: f64) -> String {
    if a.is_finite() && b.is_finite() && b > 0.0 {
        format!("{:.2}", a / b)
    } else {
        "-".into()
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

pub fn print_relay(rows: &[Row], opts: &Opts) {
    println!();
    println!(
        "tools/call through each path: closed loop, {:.2} s counted after {:.2} s warm-up; \
         conns x depth = connections x requests pipelined on each; latency in µs",
        opts.duration.as_secs_f64(),
        opts.warmup.as_secs_f64()
    );
    println!(
        "{:<7} {:>4} {:>6}  {:<10} {:>10} {:>9} {:>9} {:>8} {:>6}",
        "payload", "c", "conns", "path", "calls/s", "p50 µs", "p99 µs", "counted", "errors"
    );
    for r in rows {
        let errors = r.tally.errors() + u64::from(r.failure.is_some());
        println!(
            "{:<7} {:>4} {:>6}  {:<10} {:>10.0} {:>9} {:>9} {:>8} {:>6}",
            r.payload.name(),
            r.concurrency,
            r.layout,
            r.mode.name(),
            r.calls_per_s,
            us(r.p50_us),
            us(r.p99_us),
            r.counted,
            errors
        );
    }
    println!();
    println!(
        "ratios (mcpd ÷ baseline): throughput below 1 and p50 above 1 are what the mcpd hop costs"
    );
    println!(
        "{:<7} {:>4}  {:>16} {:>16} {:>16} {:>16}",
        "payload", "c", "thr mcpd/direct", "thr mcpd/bare", "p50 mcpd/direct", "p50 mcpd/bare"
    );
    let find = |p: Payload, c: usize, m: Mode| {
        rows.iter()
            .find(|r| r.payload == p && r.concurrency == c && r.mode == m)
    };
    for r in rows.iter().filter(|r| r.mode == Mode::Mcpd) {
        let (Some(d), Some(b)) = (
            find(r.payload, r.concurrency, Mode::Direct),
            find(r.payload, r.concurrency, Mode::BareHop),
        ) else {
            continue;
        };
        println!(
            "{:<7} {:>4}  {:>16} {:>16} {:>16} {:>16}",
            r.payload.name(),
            r.concurrency,
            ratio(r.calls_per_s, d.calls_per_s),
            ratio(r.calls_per_s, b.calls_per_s),
            ratio(r.p50_us, d.p50_us),
            ratio(r.p50_us, b.p50_us),
        );
    }
    println!(
        "note: at c > 1, direct and bare-hop run one fixture process per connection while all \
         of mcpd's connections share its one fx process, so those ratios include that fan-in \
         onto a single server, not only the hop"
    );
    if rows.iter().any(|r| r.mode == Mode::Project) {
        println!();
        println!(
            "per-project server ÷ shared server (project row ÷ mcpd row): the same fixture binary, the \
             same calls; 1.00 is no cost for routing to the agent's project instance; mcpd's \
             CPU µs per call, which moves less with the machine's other work, beside them"
        );
        println!(
            "{:<7} {:>4}  {:>16} {:>16} {:>10} {:>10} {:>12} {:>12}",
            "payload",
            "c",
            "calls/s project",
            "calls/s mcpd",
            "thr ratio",
            "p50 ratio",
            "CPU project",
            "CPU mcpd"
        );
        for r in rows.iter().filter(|r| r.mode == Mode::Project) {
            let Some(m) = find(r.payload, r.concurrency, Mode::Mcpd) else {
                continue;
            };
            let cpu = |row: &Row| row.mcpd_cpu_us.map_or("-".into(), |u| format!("{u:.1}"));
            println!(
                "{:<7} {:>4}  {:>16.0} {:>16.0} {:>10} {:>10} {:>12} {:>12}",
                r.payload.name(),
                r.concurrency,
                r.calls_per_s,
                m.calls_per_s,
                ratio(r.calls_per_s, m.calls_per_s),
                ratio(r.p50_us, m.p50_us),
                cpu(r),
                cpu(m),
            );
        }
    }
    let troubled: Vec<&Row> = rows
        .iter()
        .filter(|r| r.tally.errors() > 0 || r.failure.is_some())
        .collect();
    if !troubled.is_empty() {
        println!();
        println!("errors:");
        for r in troubled {
            let t = &r.tally;
            println!(
                "  {} c={} {}: {} JSON-RPC errors, {} wrong results, {} stray lines, {} lost to a broken connection{}",
                r.payload.name(),
                r.concurrency,
                r.mode.name(),
                t.rpc_errors,
                t.wrong,
                t.stray,
                t.broken,
                r.failure
                    .as_ref()
                    .map(|f| format!("; FAILED: {f}"))
                    .unwrap_or_default()
            );
            for s in &t.samples {
                println!("      e.g. {s}");
            }
        }
    }
}

pub fn print_memory(m: &Result<MemReport, String>, bench_fds: &str) -> bool {
    println!();
    let m = match m {
        Ok(m) => m,
        Err(e) => {
            println!("daemon memory: FAILED: {e}");
            return false;
        }
    };
    let mut ok = true;
    println!(
        "daemon memory (the mcpd process; the servers and the sentinel are other processes): \
         RssAnon is what it owns (heap, stacks; the targets read it), RssFile the pages of its \
         code and libraries, VmRSS both"
    );
    println!(
        "  {:<54} {:>10} {:>10} {:>10}",
        "", "RssAnon", "RssFile", "VmRSS"
    );
    let three = |r: &Option<Rss>| match r {
        Some(r) => [r.anon, r.file, r.vm].map(|k| mib(Some(k))),
        None => ["?".to_owned(), "?".to_owned(), "?".to_owned()],
    };
    let per_agent = [
        m.per_agent_kib(|r| r.anon),
        m.per_agent_kib(|r| r.file),
        m.per_agent_kib(|r| r.vm),
    ]
    .map(|k| k.map_or("?".into(), |k| format!("{k:.1} KiB")));
    let rows = [
        (
            format!(
                "idle, {IDLE_SERVERS} fixture servers ready ({} after start)",
                ms(m.servers_ready_in)
            ),
            three(&m.idle),
        ),
        (
            format!(
                "with {} idle initialized agent connections",
                m.agents_opened
            ),
            three(&m.with_agents),
        ),
        ("  more per agent connection".into(), per_agent),
        ("after closing them".into(), three(&m.after_close)),
    ];
    for (label, [anon, file, vm]) in rows {
        println!(
            "  {:<54} {anon:>10} {file:>10} {vm:>10}",
            format!("{label}:")
        );
    }
    println!(
        "  RLIMIT_NOFILE soft/hard: bench {bench_fds}, mcpd {}; daemon.max_agents = {}",
        m.daemon_fd_limit,
        m.agents + 64
    );
    if !m.agent_failures.is_empty() {
        ok = false;
        println!(
            "  ERROR: {} of {} agent connections failed, e.g. {}",
            m.agent_failures.len(),
            m.agents,
            m.agent_failures[0]
        );
    }
    if let Err(e) = &m.still_answers {
        ok = false;
        println!("  ERROR: mcpd/status failed with the agents connected: {e}");
    }
    if let Err(e) = &m.shutdown {
        ok = false;
        println!("  ERROR at shutdown: {e}");
    }
    ok
}

pub fn print_listing(l: &Result<ListReport, String>) -> bool {
    println!();
    let l = match l {
        Ok(l) => l,
        Err(e) => {
            println!("tools/list: FAILED: {e}");
            return false;
        }
    };
    let mut ok = true;
    let want = LIST_SERVERS * TOOLS_PER_SERVER;
    println!(
        "tools/list with {LIST_SERVERS} servers x {TOOLS_PER_SERVER} tools = {want} tools ({} pages per listing):",
        l.pages
    );
    println!(
        "  mcpd serve start -> first complete listing of {want} tools, nothing cached: {} \
         (pin = \"off\": {}; the difference is pinning's first hash of every definition)",
        ms(l.cold_full_list),
        ms(l.cold_unpinned)
    );
    println!(
        "  mcpd serve start -> first complete listing of {want} tools, from the catalog cache: {} \
         (socket accepting after {}, {} incomplete listings before it)",
        ms(l.first_full_list),
        ms(l.socket_after),
        l.partial_listings,
    );
    println!(
        "  full listing latency over {} listings: p50 {} µs, p99 {} µs",
        l.lat_us.len(),
        us(pct_f(&l.lat_us, 0.50)),
        us(pct_f(&l.lat_us, 0.99))
    );
    for f in &l.failures {
        ok = false;
        println!("  ERROR: {f}");
    }
    if let Err(e) = &l.shutdown {
        ok = false;
        println!("  ERROR at shutdown: {e}");
    }
    ok
}

fn pct_f(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn print_burst(b: &Result<BurstReport, String>) -> bool {
    println!();
    match b {
        Ok(b) => {
            println!(
                "memory after a burst ({BURST} agents, one 1 MiB call each, all in flight at once): \
                 RssAnon {} before, peak {}, {} {} (VmRSS {}, {}, {})",
                mib(Some(b.before.anon)),
                mib(Some(b.peak.anon)),
                mib(Some(b.last.anon)),
                match b.back_after {
                    Some(t) => format!("{} ms after the last result", t.as_millis()),
                    None => "10 s after the last result (not back)".into(),
                },
                mib(Some(b.before.vm)),
                mib(Some(b.peak.vm)),
                mib(Some(b.last.vm)),
            );
            if let Err(e) = &b.shutdown {
                println!("  ERROR at shutdown: {e}");
                return false;
            }
            true
        }
        Err(e) => {
            println!("memory after a burst: FAILED: {e}");
            false
        }
    }
}

/// Nearest-rank percentile of sorted milliseconds, for the first-call table.
fn pct_ms(sorted: &[f64], p: f64) -> String {
    let v = pct_f(sorted, p);
    if v.is_nan() {
        "-".into()
    } else {
        format!("{v:.1}")
    }
}

pub fn print_first_call(f: &Result<FirstCallReport, String>) -> bool {
    println!();
    let f = match f {
        Ok(f) => f,
        Err(e) => {
            println!("first call in a new project: FAILED: {e}");
            return false;
        }
    };
    let mut ok = true;
    println!(
        "first call in a new project (a fresh temp dir each iteration), {} iterations of each \
         variant, interleaved, after one uncounted round; ms, median / p90",
        f.iterations
    );
    println!("  server: {}", describe_px());
    println!(
        "  (c) calls fx, the same fixture and args shared by every agent; before the rounds \
         one project's instance was made ready in {:.1} ms (its tools listed since, as a \
         restarted daemon's catalog cache lists them); each project instance is stopped \
         after its iteration, untimed",
        f.primed_in.as_secs_f64() * 1000.0
    );
    println!(
        "  {:<66} {:>15} {:>15} {:>15} {:>15}",
        "", "connect→answer", "the call alone", "connect→listed", "connect→ready"
    );
    for v in &f.variants {
        let both = |s: &[f64]| {
            if s.is_empty() {
                "-".to_owned()
            } else {
                format!("{} / {}", pct_ms(s, 0.5), pct_ms(s, 0.9))
            }
        };
        println!(
            "  {:<66} {:>15} {:>15} {:>15} {:>15}",
            v.variant.label(),
            both(&v.total_ms),
            both(&v.call_ms),
            both(&v.listed_ms),
            both(&v.ready_ms)
        );
        if v.relisted > 0 {
            println!(
                "      {} listings did not have the tool yet and were repeated",
                v.relisted
            );
        }
        for e in &v.errors {
            ok = false;
            println!("      ERROR: {e}");
        }
    }
    if let Err(e) = &f.shutdown {
        ok = false;
        println!("  ERROR at shutdown: {e}");
    }
    ok
}
