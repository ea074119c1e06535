//! Cases the import-loop checks must fail: small module sets given as text, one for each
//! way a path can name a module, so a hole in the checker shows up here first (the text
//! scanner it replaced missed every `use super::{…}`).

use super::imports::{file_loops, top_level_loops};

fn sources(files: &[(&str, &str)]) -> Vec<(String, String)> {
    files
        .iter()
        .map(|(rel, text)| ((*rel).to_owned(), (*text).to_owned()))
        .collect()
}

/// Asserts the file check finds exactly one loop, through exactly these files.
#[track_caller]
fn loop_through(files: &[(&str, &str)], expected: &[&str]) {
    let found = file_loops(&sources(files));
    let header = format!("loop: {}", expected.join(", "));
    assert!(
        found.len() == 1 && found.iter().all(|l| l.starts_with(&header)),
        "expected one {header}, found:\n{}",
        found.join("\n")
    );
}

#[track_caller]
fn no_loop(files: &[(&str, &str)]) {
    let found = file_loops(&sources(files));
    assert!(
        found.is_empty(),
        "expected none, found:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_use_super_group_is_an_import() {
    loop_through(
        &[
            ("a/mod.rs", "mod c; use super::{b, d};"),
            ("a/c.rs", ""),
            ("b.rs", "use crate::a::X;"),
            ("d.rs", ""),
        ],
        &["a/mod.rs", "b.rs"],
    );
}

#[test]
fn nested_crate_groups_are_imports() {
    loop_through(
        &[
            ("a.rs", "use crate::{b::{c::Y, d}, e};"),
            ("b/mod.rs", "pub mod c; pub mod d;"),
            ("b/c.rs", "use crate::a::X;"),
            ("b/d.rs", ""),
            ("e.rs", ""),
        ],
        &["a.rs", "b/c.rs"],
    );
}

#[test]
fn a_use_self_path_is_an_import() {
    loop_through(
        &[
            ("x/mod.rs", "mod inner; use self::inner::Y;"),
            ("x/inner.rs", "use crate::z::W;"),
            ("z.rs", "fn f() -> crate::x::V { todo!() }"),
        ],
        &["x/inner.rs", "x/mod.rs", "z.rs"],
    );
}

#[test]
fn a_pub_use_is_an_import() {
    loop_through(
        &[
            ("a.rs", "pub use crate::b::Y;"),
            ("b.rs", "pub(crate) use super::a::X as Renamed;"),
        ],
        &["a.rs", "b.rs"],
    );
}

#[test]
fn a_path_in_an_expression_is_an_import() {
    loop_through(
        &[
            ("a.rs", "pub fn f() { crate::b::g(); }"),
            ("b.rs", "pub fn g() { if let crate::a::E::V = x() {} }"),
        ],
        &["a.rs", "b.rs"],
    );
}

#[test]
fn super_super_climbs_twice() {
    loop_through(
        &[
            ("a/mod.rs", "pub mod b; pub mod d;"),
            ("a/b/mod.rs", "pub mod c;"),
            ("a/b/c.rs", "use super::super::d::Y;"),
            ("a/d.rs", "use crate::a::b::c::Z;"),
        ],
        &["a/b/c.rs", "a/d.rs"],
    );
}

#[test]
fn globs_renames_and_names_brought_in_are_followed() {
    // `use crate::b as other;` then `other::c::f()` names b::c, not just b.
    loop_through(
        &[
            ("a.rs", "use crate::b as other; fn f() { other::c::g(); }"),
            ("b/mod.rs", "pub mod c;"),
            ("b/c.rs", "use crate::a::*;"),
        ],
        &["a.rs", "b/c.rs"],
    );
}

#[test]
fn paths_inside_macros_and_types_are_imports() {
    loop_through(
        &[
            ("a.rs", r#"fn f() { tracing::info!("{}", crate::b::N); }"#),
            ("b.rs", "struct S { x: Vec<super::a::T> }"),
        ],
        &["a.rs", "b.rs"],
    );
}

#[test]
fn code_after_a_test_only_helper_still_counts() {
    // The text check stopped reading a file at its first `#[cfg(test)]`.
    loop_through(
        &[
            ("a.rs", "#[cfg(test)] fn helper() {}\nuse crate::b::Y;"),
            ("b.rs", "use crate::a::X;"),
        ],
        &["a.rs", "b.rs"],
    );
}

#[test]
fn test_only_code_imports_nothing() {
    no_loop(&[
        (
            "a.rs",
            "#[cfg(test)] mod tests { use crate::b::Y; }\n#[cfg(test)] use crate::b::Z;",
        ),
        ("b.rs", "use crate::a::X;"),
        ("c/mod.rs", "#[cfg(test)] mod tests;"),
        ("c/tests.rs", "use crate::b::Y;"),
        ("b2.rs", "use crate::c::tests::T;"),
    ]);
}

#[test]
fn a_module_may_use_its_ancestors() {
    no_loop(&[
        ("a/mod.rs", "mod b; use b::Y;"),
        ("a/b.rs", "use super::X; use crate::a::Z;"),
    ]);
}

#[test]
fn the_report_names_the_files_and_the_items_on_each_edge() {
    let found = file_loops(&sources(&[
        ("a/mod.rs", "mod h; mod s;"),
        ("a/h.rs", "use super::s::{list_tools, list_prompts};"),
        ("a/s.rs", "use super::h::{Handled, Step};"),
    ]));
    assert_eq!(
        found,
        ["loop: a/h.rs, a/s.rs\n  \
          a/h.rs -> a/s.rs: list_prompts, list_tools\n  \
          a/s.rs -> a/h.rs: Handled, Step"]
    );
}

#[test]
fn top_level_modules_that_import_each_other_are_a_loop() {
    // No file imports one that imports it back, but `a` and `b` need each other.
    let files = sources(&[
        ("a/mod.rs", "pub mod x; pub mod z;"),
        ("a/x.rs", "use crate::b::y::Y;"),
        ("a/z.rs", ""),
        ("b/mod.rs", "pub mod y;"),
        ("b/y.rs", "use crate::a::z::W;"),
    ]);
    assert!(file_loops(&files).is_empty());
    assert_eq!(
        top_level_loops(&files),
        ["loop: a, b\n  \
          a -> b: b::y::Y (a/x.rs)\n  \
          b -> a: a::z::W (b/y.rs)"]
    );
}

#[test]
fn names_a_glob_brings_in_are_followed() {
    // `use super::*` brings the parent's children and the parent's own imports.
    loop_through(
        &[
            ("a/mod.rs", "mod b; mod c;"),
            ("a/b.rs", "use super::*; fn f() { c::g(); }"),
            ("a/c.rs", "use super::b::X;"),
        ],
        &["a/b.rs", "a/c.rs"],
    );
    loop_through(
        &[
            ("a/mod.rs", "mod b; use crate::z;"),
            ("a/b.rs", "use super::*; fn f() -> z::T { todo!() }"),
            ("z.rs", "use crate::a::b::X;"),
        ],
        &["a/b.rs", "z.rs"],
    );
}
