//! The tidy checks over every crate's source.
//!
//! Each file says what it is for in one short first line and stays short, the codemap
//! names every folder, the floors depend only on floors below, and no modules import each
//! other round a loop.
//!
//! Cargo holds the direction between crates (a crate names only what it depends on);
//! within a crate, the imports are read with a Rust parser (`tidy/imports.rs`), and
//! `tidy/loop_cases.rs` holds what those checks must fail. `tidy/floors.rs` reads the
//! crates' manifests.

use std::path::Path;

mod error_codes;
mod floors;
mod imports;
mod loop_cases;

/// Lines a source file may have.
const MAX_LINES: usize = 500;

/// Characters a source file's first line (its `//!` sentence saying what it is for) may
/// have; detail goes in the paragraphs after it.
const MAX_FIRST_LINE: usize = 100;

/// Files over `MAX_LINES` today, each with the length it may not exceed. The list only
/// shrinks: a file listed here that is back under the limit must leave it, and no file
/// of the agent side may be on it.
const LONG_FILES: &[(&str, usize)] = &[];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Each crate's source folder, relative to the root: the daemon's `src/` and every
/// `crates/*/src/`.
fn crate_sources() -> Vec<String> {
    let mut dirs = vec!["src".to_owned()];
    let mut members: Vec<String> = std::fs::read_dir(root().join("crates"))
        .expect("read crates/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("src").is_dir())
        .map(|p| {
            format!(
                "crates/{}/src",
                p.file_name().unwrap_or_default().to_string_lossy()
            )
        })
        .collect();
    members.sort();
    dirs.extend(members);
    dirs
}

/// Every `.rs` file under `dir` (relative to the root), as paths relative to `dir`, sorted.
fn sources_in(dir: &str) -> Vec<String> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("read source folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, base, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(base).expect("under the folder");
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    let base = root().join(dir);
    let mut out = Vec::new();
    walk(&base, &base, &mut out);
    out.sort();
    out
}

/// Every source file of every crate, as paths relative to the root.
fn sources() -> Vec<String> {
    crate_sources()
        .iter()
        .flat_map(|dir| {
            sources_in(dir)
                .into_iter()
                .map(move |rel| format!("{dir}/{rel}"))
        })
        .collect()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).expect("read source")
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
        let first = text.lines().next().unwrap_or_default();
        let chars = first.chars().count();
        if chars > MAX_FIRST_LINE {
            problems.push(format!(
                "{rel}: first line is {chars} characters, over {MAX_FIRST_LINE}; \
                 say what the file is for in one short sentence and move the rest \
                 to the next paragraph"
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
        if rel.starts_with("src/agent/") && limit > MAX_LINES {
            problems.push(format!("{rel}: the agent side has no long files"));
        }
    }
    for (f, _) in LONG_FILES {
        if !root().join(f).exists() {
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
        if rel == "crates/runtime/src/tracker.rs" {
            continue;
        }
        for (n, line) in read(&rel).lines().enumerate() {
            let code = line
                .split("//")
                .next()
                .unwrap_or_default()
                .replace("crate::tasks::spawn", "")
                .replace("tracker::spawn", "");
            if ["tokio::spawn(", "task::spawn(", "spawn_blocking("]
                .iter()
                .any(|p| code.contains(p))
            {
                problems.push(format!(
                    "{rel}:{}: spawn through mcpd_runtime::tracker",
                    n + 1
                ));
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_codemap_names_every_folder() {
    // Files say what they hold in their own `//!` lines; the map names the crates and
    // their folders (each written `name/` in backquotes, with or without its parents).
    let arch = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut folders = std::collections::BTreeSet::new();
    for dir in crate_sources() {
        folders.insert(dir.trim_end_matches("/src").to_owned());
        for rel in sources_in(&dir) {
            if let Some((folder, _)) = rel.rsplit_once('/') {
                folders.insert(format!("{dir}/{folder}"));
            }
        }
    }
    let missing: Vec<&String> = folders
        .iter()
        .filter(|path| {
            let short = path
                .trim_start_matches("src/")
                .trim_start_matches("crates/");
            let last = path.rsplit('/').next().unwrap_or(path);
            ![path.as_str(), short, last]
                .iter()
                .any(|name| arch.contains(&format!("`{name}/`")))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's codemap does not name these folders: {missing:?}"
    );
}

/// Each crate's files with their text, as paths relative to its `src/`.
fn crate_files() -> Vec<(String, Vec<(String, String)>)> {
    crate_sources()
        .into_iter()
        .map(|dir| {
            let files = sources_in(&dir)
                .into_iter()
                .map(|rel| {
                    let text = read(&format!("{dir}/{rel}"));
                    (rel, text)
                })
                .collect();
            (dir, files)
        })
        .collect()
}

#[test]
fn no_modules_import_each_other_round_a_loop() {
    let mut found = Vec::new();
    for (dir, files) in crate_files() {
        found.extend(
            imports::file_loops(&files)
                .into_iter()
                .map(|l| format!("{dir}: {l}")),
        );
    }
    assert!(
        found.is_empty(),
        "modules that import each other:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_top_level_modules_import_each_other_round_a_loop() {
    // A file-level check cannot see `agent::a` -> `supervisor::b` -> `agent::c`: every
    // top-level module of a crate is a layer, and layers form a directed graph too.
    let mut found = Vec::new();
    for (dir, files) in crate_files() {
        found.extend(
            imports::top_level_loops(&files)
                .into_iter()
                .map(|l| format!("{dir}: {l}")),
        );
    }
    assert!(
        found.is_empty(),
        "top-level modules that import each other:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_floors_depend_only_on_floors_below() {
    let found = floors::check(root());
    assert!(found.is_empty(), "\n{}", found.join("\n"));
}

/// README is the front door: what, install, quick start, clients, and a line per topic
/// with a link. The reference lives in docs/.
/// Only `src/errors/` gives failures their JSON-RPC codes (ARCHITECTURE.md, "Errors"):
/// anywhere else in the daemon an error is built from an `errors` enum.
#[test]
fn only_the_errors_module_gives_errors_their_codes() {
    let mut found = Vec::new();
    for rel in sources_in("src") {
        let path = format!("src/{rel}");
        if rel.starts_with("errors/") || error_codes::ALLOWED.iter().any(|(p, _)| *p == path) {
            continue;
        }
        found.extend(error_codes::literal_codes(&path, &read(&path)));
    }
    assert!(
        found.is_empty(),
        "errors built with a literal code outside src/errors/ (add a variant there):\n{}",
        found.join("\n")
    );
    for (path, _) in error_codes::ALLOWED {
        let left = error_codes::literal_codes(path, &read(path));
        assert!(
            !left.is_empty(),
            "{path} builds no error any more: take it off ALLOWED"
        );
    }
}

#[test]
fn readme_stays_a_front_door() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines, over 200: move reference material to docs/"
    );
}
