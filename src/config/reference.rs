//! Keeps docs/configuration.md true to the parser.
//!
//! Every key the raw config accepts is in its tables, and every key its tables list is
//! accepted.

use super::raw::RawDaemon;
use super::*;
use serde::de::{self, DeserializeOwned, Visitor};
use std::collections::BTreeSet;

/// The reference, read from the source tree.
const REFERENCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");

/// Every table of the file and the raw struct that reads it. A struct field that is a
/// table of its own (`restart`, `servers`) is documented by that table's heading rather
/// than by a row, so it must be listed here; a new nested struct left out of this list
/// fails `every_accepted_key_is_in_the_reference`.
fn tables() -> Vec<(&'static str, &'static [&'static str])> {
    vec![
        ("", fields_of::<RawFile>()),
        ("daemon", fields_of::<RawDaemon>()),
        ("daemon.restart", fields_of::<RawRestart>()),
        ("daemon.health", fields_of::<RawHealth>()),
        ("servers.NAME", fields_of::<RawServer>()),
        ("servers.NAME.tools", fields_of::<filter::RawToolFilter>()),
        ("servers.NAME.prompts", fields_of::<naming::RawPrompts>()),
        ("servers.NAME.restart", fields_of::<RawRestart>()),
        ("servers.NAME.health", fields_of::<RawHealth>()),
        (
            "servers.NAME.oauth",
            fields_of::<super::oauth::RawOAuthTable>(),
        ),
        (
            "servers.NAME.oauth.identity_provider",
            fields_of::<super::oauth::RawIdentityProvider>(),
        ),
        (
            "servers.NAME.sandbox",
            fields_of::<sandbox::RawSandboxTable>(),
        ),
        ("profiles.NAME", fields_of::<filter::RawProfile>()),
    ]
}

/// The field names serde accepts for `T`: its derived `Deserialize` hands them to
/// `deserialize_struct` (they are what `deny_unknown_fields` checks against), which this
/// deserializer records before refusing to go on.
fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut names = FieldNames(None);
    let _ = T::deserialize(&mut names); // always an error: the names are all we want
    names
        .0
        .expect("a raw config table is a plain struct (no flatten): serde lists its fields")
}

struct FieldNames(Option<&'static [&'static str]>);

impl<'de> de::Deserializer<'de> for &mut FieldNames {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("only structs are read"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0 = Some(fields);
        Err(de::Error::custom("field names recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
        identifier ignored_any
    }
}

/// The keys each table of the reference lists, by table path. A table belongs to the
/// paths written as `` `[path]` `` in the heading above it (`[servers.NAME.restart]` and
/// `[daemon.restart]` share one); only tables whose first column is `key` count.
fn documented(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut tables: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut paths: Vec<String> = Vec::new();
    let mut heading = String::new();
    let (mut in_code, mut in_table) = (false, false);
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if in_code {
            continue;
        }
        if line.starts_with('#') {
            heading = line.to_owned();
            paths = line
                .split('`')
                .skip(1)
                .step_by(2)
                .filter_map(|code| code.strip_prefix('[')?.strip_suffix(']'))
                .map(str::to_owned)
                .collect();
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if !line.starts_with('|') {
            in_table = false;
        } else if cells.get(1) == Some(&"key") {
            assert!(
                !paths.is_empty(),
                "{REFERENCE}: the key table under {heading:?} names no `[table]` in its heading"
            );
            in_table = true;
        } else if in_table && !line.starts_with("|---") {
            let key = cells
                .get(1)
                .map(|c| c.trim_matches('`'))
                .unwrap_or_default();
            for path in &paths {
                tables
                    .entry(path.clone())
                    .or_default()
                    .insert(key.to_owned());
            }
        }
    }
    tables
}

fn reference() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(REFERENCE).expect("docs/configuration.md");
    documented(&text)
}

/// Whether `key` of the table at `path` is a table of its own in `tables()`.
fn is_table(path: &str, key: &str) -> bool {
    let prefix = if path.is_empty() {
        String::new()
    } else {
        format!("{path}.")
    };
    tables()
        .iter()
        .any(|(p, _)| *p == format!("{prefix}{key}") || *p == format!("{prefix}{key}.NAME"))
}

#[test]
fn every_accepted_key_is_in_the_reference() {
    let docs = reference();
    let mut missing = Vec::new();
    for (path, fields) in tables() {
        if !path.is_empty() && !docs.contains_key(path) {
            missing.push(format!("the table [{path}]"));
        }
        let rows = docs.get(path).cloned().unwrap_or_default();
        for field in fields {
            if !rows.contains(*field) && !is_table(path, field) {
                missing.push(format!("{path}.{field}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "the config accepts these, but {REFERENCE} does not document them: {missing:?}"
    );
}

#[test]
fn every_key_in_the_reference_is_accepted() {
    let known: BTreeMap<&str, &[&str]> = tables().into_iter().collect();
    let probe = |table: &str, key: &str| {
        let text = format!("[{table}]\n{key} = 1979-05-27T07:32:00Z\n");
        let err = Config::parse(&text, Path::new("/probe.toml")).err();
        err.map(|e| e.to_string()).unwrap_or_default()
    };
    // The parser words a key it does not know this way; the probes below rely on it.
    assert!(probe("daemon", "no_such_key").contains("unknown field"));
    for (path, keys) in reference() {
        let fields = known
            .get(path.as_str())
            .unwrap_or_else(|| panic!("{REFERENCE} documents [{path}], which the config does not have (or this test's `tables()` lacks)"));
        for key in keys {
            assert!(
                fields.contains(&key.as_str()),
                "{REFERENCE} documents {path}.{key}, which the config does not accept"
            );
            // The real parser, at the real path: a known key with a value no key takes
            // (a datetime) fails as a type error, an unknown one as "unknown field". A
            // setting that is a boolean or a table (`oauth`, `sandbox`) reads the datetime
            // as the table the toml crate makes of it, whose one key is its own marker.
            let err = probe(&path.replace("NAME", "x"), &key);
            assert!(
                !err.contains("unknown field")
                    || err.contains("unknown field `$__toml_private_datetime`"),
                "{path}.{key} is refused as unknown: {err}"
            );
        }
    }
}

fn check(markdown: &str, expected: &[(&str, &[&str])]) {
    let got = documented(markdown);
    let want: BTreeMap<String, BTreeSet<String>> = expected
        .iter()
        .map(|(p, keys)| (p.to_string(), keys.iter().map(|k| k.to_string()).collect()))
        .collect();
    assert_eq!(got, want, "{markdown}");
}

#[test]
fn the_reference_reader_finds_each_tables_keys_under_its_headings_paths() {
    let table = "| key | default | meaning |\n|---|---|---|\n| `a` | 1 | x |\n| `b` | 2 | y |\n";
    check(
        &format!("## `[daemon]`\n\n{table}"),
        &[("daemon", &["a", "b"])],
    );
    check(
        &format!(
            "### `[servers.NAME.restart]` and `[daemon.restart]`\n\ntext `[other]`\n\n{table}"
        ),
        &[
            ("daemon.restart", &["a", "b"]),
            ("servers.NAME.restart", &["a", "b"]),
        ],
    );
    // Other tables, and tables in code blocks, are not key tables.
    check(
        "## `[daemon]`\n\n| code | meaning |\n|---|---|\n| 1 | x |\n\n```\n| key | d |\n| `z` | 1 |\n```\n",
        &[],
    );
}
