//! The tidy checks, over the source tree as files: every `src/` file says what it is for in a `//!` line and stays short, the codemap names every module, and no two modules import each other (directly or round a loop).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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

/// A module's path (`agent::conn`) from its file (`agent/conn.rs`); None for the roots.
fn module_of(rel: &str) -> Option<Vec<String>> {
    let trimmed = rel.strip_suffix(".rs")?;
    let mut parts: Vec<String> = trimmed.split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] {
        return None;
    }
    Some(parts)
}

/// The code of a file without its unit tests (which may import what they like).
fn without_tests(text: &str) -> &str {
    match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    }
}

/// Every path the code names that starts at the crate root, `super` or a child module:
/// `crate::a::b`, `super::c`, and each item of `use crate::{x::y, z}`; as segments from
/// the crate root.
fn referenced(module: &[String], children: &BTreeSet<String>, text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes: Vec<char> = text.chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < bytes.len() {
        let at_word = i == 0 || !ident(bytes[i - 1]) && bytes[i - 1] != ':';
        let rest: String = bytes[i..bytes.len().min(i + 7)].iter().collect();
        let start = if at_word && rest.starts_with("crate::") {
            Some((Vec::new(), i + 7))
        } else if at_word && rest.starts_with("super::") {
            let mut base = module.to_vec();
            base.pop();
            let mut j = i + 7;
            // super::super::…
            while bytes[j..].iter().collect::<String>().starts_with("super::") {
                base.pop();
                j += 7;
            }
            Some((base, j))
        } else {
            None
        };
        let Some((base, mut j)) = start else {
            i += 1;
            continue;
        };
        let mut segs = base.clone();
        loop {
            let s = j;
            while j < bytes.len() && ident(bytes[j]) {
                j += 1;
            }
            if s == j {
                break;
            }
            segs.push(bytes[s..j].iter().collect());
            if bytes[j..].iter().take(2).collect::<String>() == "::" {
                j += 2;
                if bytes.get(j) == Some(&'{') {
                    // One level of braces: each item is a path of its own.
                    let end = bytes[j..]
                        .iter()
                        .position(|c| *c == '}')
                        .map_or(j, |p| j + p);
                    let inner: String = bytes[j + 1..end].iter().collect();
                    for item in inner.split(',') {
                        let mut p = segs.clone();
                        p.extend(
                            item.trim()
                                .split("::")
                                .map(|x| x.trim().to_owned())
                                .filter(|x| !x.is_empty() && x != "self" && !x.contains(' ')),
                        );
                        out.push(p);
                    }
                    j = end;
                    segs.clear();
                    break;
                }
                continue;
            }
            break;
        }
        if !segs.is_empty() {
            out.push(segs);
        }
        i = j.max(i + 1);
    }
    // `use child::…` in a module file names its own children.
    for line in text.lines() {
        let l = line.trim_start();
        let Some(path) = l
            .strip_prefix("pub use ")
            .or_else(|| l.strip_prefix("use "))
        else {
            continue;
        };
        let first = path.split("::").next().unwrap_or("");
        if children.contains(first) {
            let mut p = module.to_vec();
            p.extend(
                path.trim_end_matches(';')
                    .split("::")
                    .map(|s| s.trim().to_owned()),
            );
            out.push(p);
        }
    }
    out
}

#[test]
fn no_modules_import_each_other_round_a_loop() {
    let modules: BTreeMap<Vec<String>, String> = sources()
        .into_iter()
        .filter_map(|rel| module_of(&rel).map(|m| (m, rel)))
        .collect();
    let known: BTreeSet<&Vec<String>> = modules.keys().collect();
    let mut edges: BTreeMap<&Vec<String>, BTreeSet<&Vec<String>>> = BTreeMap::new();
    for (module, rel) in &modules {
        let children: BTreeSet<String> = modules
            .keys()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
            .filter_map(|m| m.last().cloned())
            .collect();
        let text = read(rel);
        for path in referenced(module, &children, without_tests(&text)) {
            // The longest prefix of the path that is a module is what it names.
            let target = (1..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| known.contains(p));
            let Some(target) = target else { continue };
            let Some((target, _)) = modules.get_key_value(&target) else {
                continue;
            };
            // A module may use what its ancestors define (the parent's context types,
            // the `impl` blocks a parent split into files).
            if target == module || module.starts_with(target) {
                continue;
            }
            edges.entry(module).or_default().insert(target);
        }
    }
    // Tarjan's strongly connected components: any of more than one module is a loop.
    struct Walk<'a> {
        edges: &'a BTreeMap<&'a Vec<String>, BTreeSet<&'a Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on_stack: BTreeSet<&'a Vec<String>>,
        loops: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a Vec<String>) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            let next: Vec<&'a Vec<String>> = self
                .edges
                .get(v)
                .map(|s| s.iter().copied().collect())
                .unwrap_or_default();
            for w in next {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low[v];
                    self.low.insert(v, lv.min(lw));
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low[v];
                    self.low.insert(v, lv.min(iw));
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.join("::"));
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.loops.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges: &edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        loops: Vec::new(),
    };
    for m in modules.keys() {
        if !walk.index.contains_key(m) {
            walk.visit(m);
        }
    }
    let described: Vec<String> = walk
        .loops
        .iter()
        .map(|c| {
            let inner: Vec<String> = c
                .iter()
                .map(|m| {
                    let to: Vec<String> = edges
                        .iter()
                        .find(|(k, _)| k.join("::") == *m)
                        .map(|(_, t)| {
                            t.iter()
                                .map(|x| x.join("::"))
                                .filter(|x| c.contains(x))
                                .collect()
                        })
                        .unwrap_or_default();
                    format!("{m} -> {}", to.join(", "))
                })
                .collect();
            inner.join("; ")
        })
        .collect();
    assert!(
        described.is_empty(),
        "modules that import each other:\n{}",
        described.join("\n")
    );
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
