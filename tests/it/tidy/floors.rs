//! The floors' manifests.
//!
//! Each crate under `crates/` depends only on the floors below it, and the wire floor on
//! no runtime or IO crate.
//!
//! Cargo refuses a cycle between crates but not a floor that reaches sideways or takes
//! a runtime it should not have; this reads each `crates/*/Cargo.toml` and says so.

use std::path::Path;

/// Each floor, lowest first, with the mcpd crates it may depend on and the outside
/// crates it may not. A crate under `crates/` missing here is an error: a new floor
/// takes its place in this list (and in ARCHITECTURE.md) when it is made.
const FLOORS: &[(&str, &[&str], &[&str])] = &[
    (
        "mcpd-wire",
        &[],
        &[
            "tokio",
            "tokio-util",
            "futures",
            "nix",
            "reqwest",
            "hyper",
            "axum",
        ],
    ),
    (
        "mcpd-runtime",
        &["mcpd-wire"],
        &["reqwest", "hyper", "axum"],
    ),
    ("mcpd-ctl", &["mcpd-wire"], &["reqwest", "hyper", "axum"]),
];

/// What is wrong with the manifests of `crates/*` under `root`.
pub fn check(root: &Path) -> Vec<String> {
    let mut manifests = Vec::new();
    for entry in std::fs::read_dir(root.join("crates")).expect("read crates/") {
        let path = entry.expect("entry").path().join("Cargo.toml");
        if path.is_file() {
            let text = std::fs::read_to_string(&path).expect("read a manifest");
            manifests.push((path.display().to_string(), text));
        }
    }
    manifests.sort();
    check_manifests(&manifests)
}

/// What is wrong with these manifests (path, text).
pub fn check_manifests(manifests: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (path, text) in manifests {
        let manifest: toml::Table = match toml::from_str(text) {
            Ok(t) => t,
            Err(e) => {
                found.push(format!("{path}: {e}"));
                continue;
            }
        };
        let name = manifest
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(toml::Value::as_str)
            .unwrap_or_default();
        let Some((_, below, banned)) = FLOORS.iter().find(|(n, _, _)| *n == name) else {
            found.push(format!(
                "{path}: `{name}` is not a floor in tests/it/tidy/floors.rs; give it its place"
            ));
            continue;
        };
        let deps = manifest
            .get("dependencies")
            .and_then(toml::Value::as_table)
            .cloned()
            .unwrap_or_default();
        for dep in deps.keys() {
            if dep.starts_with("mcpd") && !below.contains(&dep.as_str()) {
                found.push(format!(
                    "{path}: `{name}` depends on `{dep}`, not a floor below it ({below:?})"
                ));
            }
            if banned.contains(&dep.as_str()) {
                found.push(format!("{path}: `{name}` may not depend on `{dep}`"));
            }
        }
    }
    found
}

fn manifest(name: &str, deps: &str) -> Vec<(String, String)> {
    vec![(
        format!("crates/{name}/Cargo.toml"),
        format!("[package]\nname = \"{name}\"\n\n[dependencies]\n{deps}\n"),
    )]
}

#[test]
fn a_wire_floor_that_takes_a_runtime_is_found() {
    assert_eq!(
        check_manifests(&manifest("mcpd-wire", "serde = \"1\"\ntokio = \"1\"")),
        ["crates/mcpd-wire/Cargo.toml: `mcpd-wire` may not depend on `tokio`"]
    );
    assert!(check_manifests(&manifest("mcpd-wire", "serde = \"1\"")).is_empty());
}

#[test]
fn a_floor_that_reaches_sideways_or_up_and_a_crate_with_no_place_are_found() {
    assert_eq!(
        check_manifests(&manifest("mcpd-ctl", "mcpd-runtime.workspace = true")),
        [
            "crates/mcpd-ctl/Cargo.toml: `mcpd-ctl` depends on `mcpd-runtime`, not a floor below it ([\"mcpd-wire\"])"
        ]
    );
    assert_eq!(
        check_manifests(&manifest("mcpd-new", "")),
        [
            "crates/mcpd-new/Cargo.toml: `mcpd-new` is not a floor in tests/it/tidy/floors.rs; give it its place"
        ]
    );
}
