//! The tidy checks, over the source tree: every `src/` file says what it is for in a `//!` line and stays short, the codemap names every module, no two modules (files, or top-level modules) import each other, directly or round a loop, and `ctl` imports nothing of the daemon's. The imports are read with a Rust parser (`tidy/imports.rs`); `tidy/loop_cases.rs` holds what those checks must fail.

use std::path::{Path, PathBuf};

mod imports;
mod loop_cases;

/// Lines a source file may have.
const MAX_LINES: usize = 500;

/// Files over `MAX_LINES` today, each with the length it may not exceed. The list only
/// shrinks: a file listed here that is back under the limit must leave it, and no file
/// of the agent side may be on it.
const LONG_FILES: &[(&str, usize)] = &[];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `src/`, as paths relative to it, sorted.
fn sources() -> Vec<String> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, base, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(base).expect("under src");
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(&src(), &src(), &mut out);
    out.sort();
    out
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(src().join(rel)).expect("read source")
}

#[test]
fn every_source_file_says_what_it_is_for_and_stays_short() {
    let mut problems = Vec::new();
    for rel in sources() {
        let text = read(&rel);
        if !text.starts_with("//! ") {
            problems.push(format!(
                "{rel}: does not start with a `//!` line saying what it is for"
            ));
        }
        let lines = text.lines().count();
        let limit = LONG_FILES
            .iter()
            .find(|(f, _)| *f == rel)
            .map_or(MAX_LINES, |(_, n)| *n);
        if lines > limit {
            problems.push(format!(
                "{rel}: {lines} lines, over {limit}; split it by subject"
            ));
        }
        if limit > MAX_LINES && lines <= MAX_LINES {
            problems.push(format!(
                "{rel}: {lines} lines now; take it off LONG_FILES in tests/it/tidy.rs"
            ));
        }
        if rel.starts_with("agent/") && limit > MAX_LINES {
            problems.push(format!("{rel}: the agent side has no long files"));
        }
    }
    for (f, _) in LONG_FILES {
        if !src().join(f).exists() {
            problems.push(format!("{f}: listed in LONG_FILES but gone"));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn every_task_is_spawned_on_the_tracker() {
    // `clippy.toml` forbids the untracked spawns too; a module-level allow (for blocking
    // file IO, say) would let one through there, so this looks at the text.
    let mut problems = Vec::new();
    for rel in sources() {
        if rel == "tasks.rs" {
            continue;
        }
        for (n, line) in read(&rel).lines().enumerate() {
            let code = line
                .split("//")
                .next()
                .unwrap_or_default()
                .replace("crate::tasks::spawn", "");
            if ["tokio::spawn(", "task::spawn(", "spawn_blocking("]
                .iter()
                .any(|p| code.contains(p))
            {
                problems.push(format!("{rel}:{}: spawn through crate::tasks", n + 1));
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_codemap_names_every_module() {
    let arch =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .expect("ARCHITECTURE.md");
    let mut missing = Vec::new();
    for rel in sources() {
        // Unit tests split out of a module are part of it.
        if rel.ends_with("/tests.rs") {
            continue;
        }
        let named = if let Some(dir) = rel.strip_suffix("/mod.rs") {
            let last = dir.rsplit('/').next().unwrap_or(dir);
            arch.contains(&format!("`{dir}/`"))
                || arch.contains(&format!("`{last}/`"))
                || arch.contains(&format!("{dir}/mod.rs"))
        } else {
            let file = rel.rsplit('/').next().unwrap_or(&rel);
            arch.contains(&rel) || arch.contains(&format!("`{file}`"))
        };
        if !named {
            missing.push(rel);
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's codemap does not name: {}",
        missing.join(", ")
    );
}

/// Every `src/` file with its text.
fn all_sources() -> Vec<(String, String)> {
    sources()
        .into_iter()
        .map(|rel| {
            let text = read(&rel);
            (rel, text)
        })
        .collect()
}

#[test]
fn no_modules_import_each_other_round_a_loop() {
    let found = imports::file_loops(&all_sources());
    assert!(
        found.is_empty(),
        "modules that import each other:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_top_level_modules_import_each_other_round_a_loop() {
    // A file-level check cannot see `agent::a` -> `ctl::b` -> `agent::c`: every top-level
    // module is a layer, and layers form a directed graph too.
    let found = imports::top_level_loops(&all_sources());
    assert!(
        found.is_empty(),
        "top-level modules that import each other:\n{}",
        found.join("\n")
    );
}

#[test]
fn ctl_imports_nothing_of_the_daemon_but_control_api() {
    // `mcpd ctl` speaks to the daemon over the socket: it shares shapes and names
    // (`control_api.rs`) and the wire's models, never the daemon's internals.
    let shared = [
        "control_api",
        "json",
        "jsonrpc",
        "paths",
        "protocol",
        "stdout",
    ];
    let found = imports::uses_outside(&all_sources(), "ctl", &shared);
    assert!(found.is_empty(), "\n{}", found.join("\n"));
}

/// README is the front door: what, install, quick start, clients, and a line per topic
/// with a link. The reference lives in docs/.
#[test]
fn readme_stays_a_front_door() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines, over 200: move reference material to docs/"
    );
}
