//! The tool-discovery benchmark.
//!
//! Ranking quality (recall@1, recall@5, MRR) of mcpd's search over the real tool lists of
//! published servers and hand-written tasks, then the same with synthetic tools up to
//! 10,000, the query time at that size and the index's memory.
//!
//! Data: `benches/discovery/` (README there says how it was made). Run with
//! `cargo bench --bench discovery` (add `-- --quick` for a smoke run with fewer timed
//! queries). Prints one summary with each target and PASS/FAIL.

// Benchmark code: a panic here is broken data or a broken benchmark, never the daemon's.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::disallowed_methods,
    clippy::disallowed_macros
)]

use mcpd::discovery::{Index, Segment};
use serde_json::Value;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Counts live heap bytes, for the index's memory.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator, which upholds
// GlobalAlloc's contract; the counter only observes sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded to the system allocator with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

type Tools = BTreeMap<Arc<str>, Vec<(String, Value)>>;

fn data() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/discovery")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The real catalog: server → (qualified name, definition).
fn catalog() -> Tools {
    let mut tools = Tools::new();
    let mut files: Vec<_> = std::fs::read_dir(data().join("catalog"))
        .expect("catalog dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    for f in files {
        let v = read_json(&f);
        let server: Arc<str> = v["server"].as_str().expect("server").into();
        let list = v["tools"].as_array().cloned().unwrap_or_default();
        let entries = list
            .into_iter()
            .filter_map(|mut t| {
                let name = format!("{server}__{}", t["name"].as_str()?);
                t["name"] = Value::String(name.clone());
                Some((name, t))
            })
            .collect();
        tools.insert(server, entries);
    }
    tools
}

/// Deterministic synthetic tools from `synthetic.json`, `count` of them, on servers of
/// their own (`syn-DOMAIN-N`): every (verb, object) pair of every domain, named by the
/// file's name patterns and described by its templates, in rounds until `count`.
fn synthetic(count: usize) -> Tools {
    let v = read_json(&data().join("synthetic.json"));
    let domains = v["domains"].as_array().cloned().unwrap_or_default();
    let patterns: Vec<String> = v["name_patterns"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str().map(str::to_owned))
        .collect();
    let templates = &v["description_templates"];
    let verb_text = &v["verb_text"];
    let mut tools = Tools::new();
    let mut made = 0;
    for round in 0.. {
        for d in &domains {
            let domain = d["domain"].as_str().unwrap_or("svc");
            let service = d["service"].as_str().unwrap_or(domain);
            let server: Arc<str> = format!("syn-{domain}-{round}").into();
            let verbs = d["verbs"].as_array().cloned().unwrap_or_default();
            let objects = d["objects"].as_array().cloned().unwrap_or_default();
            for (vi, verb) in verbs.iter().filter_map(Value::as_str).enumerate() {
                for (oi, object) in objects.iter().filter_map(Value::as_str).enumerate() {
                    if made >= count {
                        return tools;
                    }
                    let snake = object.replace(' ', "_");
                    let verb_snake = verb.replace(' ', "_");
                    let pick = |n: usize| (vi * 7 + oi * 3 + round) % n.max(1);
                    let pattern = patterns
                        .get(pick(patterns.len()))
                        .map_or("{verb}_{object}", String::as_str);
                    let mut cap = snake.clone();
                    if let Some(f) = cap.get_mut(0..1) {
                        f.make_ascii_uppercase();
                    }
                    let name = pattern
                        .replace("{domain}", domain)
                        .replace("{verb}", &verb_snake)
                        .replace("{object}", &snake)
                        .replace("{Object}", &cap);
                    let vt = verb_text[verb].as_str().unwrap_or(verb);
                    let list = templates[verb]
                        .as_array()
                        .or(templates["default"].as_array())
                        .cloned()
                        .unwrap_or_default();
                    let template = list
                        .get(pick(list.len()))
                        .and_then(Value::as_str)
                        .unwrap_or("{verb_text} a {object} in {service}.");
                    let description = template
                        .replace("{verb_text}", vt)
                        .replace("{verb_lower}", &vt.to_lowercase())
                        .replace("{objects}", &format!("{object}s"))
                        .replace("{object}", object)
                        .replace("{service}", service);
                    let qualified = format!("{server}__{name}");
                    let def = serde_json::json!({
                        "name": qualified,
                        "description": description,
                        "inputSchema": {"type": "object", "properties": {
                            format!("{snake}_id"): {"type": "string", "description": format!("ID of the {object}")},
                            "limit": {"type": "integer", "description": "maximum number of results to return"},
                        }},
                    });
                    tools
                        .entry(server.clone())
                        .or_default()
                        .push((qualified, def));
                    made += 1;
                }
            }
        }
        if domains.is_empty() {
            return tools;
        }
    }
    tools
}

fn build(tools: &Tools) -> Index {
    Index::of(
        tools
            .iter()
            .map(|(s, list)| {
                let seg = Segment::build(list.iter().map(|(q, d)| (q.as_str(), d)));
                (s.clone(), Arc::new(seg))
            })
            .collect(),
    )
}

struct Quality {
    r1: f64,
    r5: f64,
    mrr: f64,
    n: usize,
}

fn quality(index: &Index, queries: &[Value]) -> Quality {
    let (mut r1, mut r5, mut rr) = (0usize, 0usize, 0.0f64);
    for q in queries {
        let text = q["query"].as_str().unwrap_or("");
        let mut right = vec![q["expect"].as_str().unwrap_or("")];
        right.extend(
            q["also"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str),
        );
        let hits = index.search(text, 50, |_, _| true);
        if std::env::var_os("DISCOVERY_MISSES").is_some()
            && !hits.iter().take(5).any(|h| right.contains(&h.qualified))
        {
            let top: Vec<&str> = hits.iter().take(5).map(|h| h.qualified).collect();
            eprintln!("miss: {text:?} want {right:?} got {top:?}");
        }
        if let Some(rank) = hits.iter().position(|h| right.contains(&h.qualified)) {
            r1 += usize::from(rank == 0);
            r5 += usize::from(rank < 5);
            rr += 1.0 / (rank as f64 + 1.0);
        }
    }
    let n = queries.len().max(1) as f64;
    Quality {
        r1: r1 as f64 / n,
        r5: r5 as f64 / n,
        mrr: rr / n,
        n: queries.len(),
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let queries = read_json(&data().join("queries.json"))
        .as_array()
        .cloned()
        .unwrap_or_default();
    let real = catalog();
    let real_count: usize = real.values().map(Vec::len).sum();
    let index = build(&real);
    let q = quality(&index, &queries);
    println!(
        "discovery: {} servers, {real_count} real tools, {} queries",
        real.len(),
        q.n
    );
    println!(
        "  real catalog:           recall@1 {:.3}  recall@5 {:.3}  MRR {:.3}",
        q.r1, q.r5, q.mrr
    );
    // The two halves apart: weights chosen on one half show on the other how much of
    // the result is the choice.
    let half = |odd: usize| -> Vec<Value> {
        queries
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == odd)
            .map(|(_, q)| q.clone())
            .collect()
    };
    let (even, odd) = (quality(&index, &half(0)), quality(&index, &half(1)));
    println!(
        "    even-numbered queries: recall@5 {:.3}; odd-numbered: recall@5 {:.3}",
        even.r5, odd.r5
    );

    let mut big = real.clone();
    let bulk = synthetic(10_000usize.saturating_sub(real_count));
    big.extend(bulk);
    let total: usize = big.values().map(Vec::len).sum();
    let before = LIVE.load(Ordering::Relaxed);
    let started = Instant::now();
    let big_index = build(&big);
    let build_time = started.elapsed();
    let index_bytes = LIVE.load(Ordering::Relaxed).saturating_sub(before);
    let qb = quality(&big_index, &queries);
    println!(
        "  with synthetic, {total} tools: recall@1 {:.3}  recall@5 {:.3}  MRR {:.3}",
        qb.r1, qb.r5, qb.mrr
    );
    // Incremental: one server's list changes; only its segment is built again.
    let (server, list) = big
        .iter()
        .next()
        .map(|(s, l)| (s.clone(), l.clone()))
        .expect("a server");
    let started = Instant::now();
    let mut segments: BTreeMap<Arc<str>, Arc<Segment>> = big
        .keys()
        .filter_map(|s| Some((s.clone(), big_index.segment(s)?.clone())))
        .collect();
    segments.insert(
        server.clone(),
        Arc::new(Segment::build(list.iter().map(|(q, d)| (q.as_str(), d)))),
    );
    let rebuilt = Index::of(segments);
    let incremental = started.elapsed();
    assert_eq!(rebuilt.len(), big_index.len());

    let rounds = if quick { 3 } else { 40 };
    let mut times = Vec::new();
    for _ in 0..rounds {
        for qv in &queries {
            let text = qv["query"].as_str().unwrap_or("");
            let t = Instant::now();
            let hits = big_index.search(text, 8, |_, _| true);
            times.push(t.elapsed());
            std::hint::black_box(hits);
        }
    }
    times.sort();
    let p50 = times[times.len() / 2];
    let p99 = times[times.len() * 99 / 100];
    println!(
        "  index of {total} tools: {:.1} MiB heap, built in {:.0} ms; one server's list changed ({} tools): {:.2} ms",
        index_bytes as f64 / (1024.0 * 1024.0),
        build_time.as_secs_f64() * 1e3,
        list.len(),
        incremental.as_secs_f64() * 1e3
    );
    println!(
        "  find over {total} tools ({} queries): p50 {:.3} ms, p99 {:.3} ms",
        times.len(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    println!("targets:");
    if cfg!(debug_assertions) {
        println!("  (an unoptimised build, as CI's smoke run is: its times say nothing of mcpd's)");
    }
    let verdict = |ok: bool| if ok { "PASS" } else { "FAIL" };
    println!(
        "  recall@5 >= 0.90 on the real catalog: {:.3} {}",
        q.r5,
        verdict(q.r5 >= 0.9)
    );
    println!(
        "  find_tools p50 <= 1 ms over {total} tools: {:.3} ms {}",
        p50.as_secs_f64() * 1e3,
        verdict(p50.as_secs_f64() <= 1e-3)
    );
}
