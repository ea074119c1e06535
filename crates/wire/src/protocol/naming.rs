//! Names agents see for servers' tools and prompts.
//!
//! `PREFIX__name` (the prefix defaults to the server's name), renames, and a stable
//! mapping for names that are too long or use other characters.
//!
//! The mapping, documented in docs/naming.md:
//! 1. A renamed tool or prompt is `PREFIX__TARGET` (just `TARGET` with an empty prefix);
//!    the config checked at load that it fits the limit and uses only `[A-Za-z0-9_-]`.
//! 2. Otherwise `PREFIX__NAME` when NAME uses only `[A-Za-z0-9_-]` and the whole fits.
//! 3. Otherwise every other character becomes `_`, the result is cut to fit, and
//!    `_` plus eight hex digits of the FNV-1a hash of the original NAME is appended, so two
//!    names that differ only in the removed part still get different names.
//!
//! The reverse direction is a table lookup in the registry, never string surgery.

use std::collections::BTreeMap;

/// The separator between the prefix and the name; absent when the prefix is empty.
pub const SEPARATOR: &str = "__";

/// The longest prefix, the same as the longest server name.
pub const MAX_PREFIX: usize = 32;

/// Length of the `_xxxxxxxx` suffix added to mapped names.
const SUFFIX_LEN: usize = 9;

/// Whether `c` may appear in a name agents see.
pub fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// How one server's tools and prompts are presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Naming {
    /// Put before every name, followed by the separator; empty shows names as they are.
    pub prefix: String,
    /// The server's tool name → the name after the prefix.
    pub tools: BTreeMap<String, String>,
    /// The server's prompt name → the name after the prefix.
    pub prompts: BTreeMap<String, String>,
}

impl Naming {
    /// Names under `prefix`, nothing renamed.
    pub fn prefixed(prefix: &str) -> Naming {
        Naming {
            prefix: prefix.to_owned(),
            tools: BTreeMap::new(),
            prompts: BTreeMap::new(),
        }
    }

    /// The name agents see for the server's tool `original`.
    pub fn tool(&self, original: &str, limit: usize) -> String {
        match self.tools.get(original) {
            Some(target) => join(&self.prefix, target),
            None => qualify(&self.prefix, original, limit),
        }
    }

    /// The name agents see for the server's prompt `original`.
    pub fn prompt(&self, original: &str, limit: usize) -> String {
        match self.prompts.get(original) {
            Some(target) => join(&self.prefix, target),
            None => qualify(&self.prefix, original, limit),
        }
    }
}

/// `PREFIX__name`, or `name` alone when the prefix is empty.
pub fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}{SEPARATOR}{name}")
    }
}

/// The length of `join(prefix, name)` without building it.
pub fn joined_len(prefix: &str, name: &str) -> usize {
    let sep = if prefix.is_empty() {
        0
    } else {
        SEPARATOR.len()
    };
    prefix.len() + sep + name.len()
}

/// Whether `prefix` can be a prefix: at most 32 characters of `[A-Za-z0-9_-]`, or empty.
pub fn valid_prefix(prefix: &str) -> bool {
    prefix.len() <= MAX_PREFIX && prefix.chars().all(allowed)
}

/// The name agents see for `name` under `prefix`. `limit` is at least 48 (config enforces
/// it) and prefixes at most 32 bytes, so there is always room for part of the name.
pub fn qualify(prefix: &str, name: &str, limit: usize) -> String {
    if joined_len(prefix, name) <= limit && !name.is_empty() && name.chars().all(allowed) {
        return join(prefix, name);
    }
    let room = limit.saturating_sub(joined_len(prefix, "") + SUFFIX_LEN);
    let kept: String = name
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .take(room)
        .collect();
    join(prefix, &format!("{kept}_{:08x}", fnv1a32(name.as_bytes())))
}

/// FNV-1a, 32 bits. Written out here because the mapping must stay the same across
/// releases and platforms, which `std`'s hasher does not promise; it is five lines.
fn fnv1a32(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(server: &str, tool: &str, limit: usize, expected: &str) {
        let got = qualify(server, tool, limit);
        assert_eq!(got, expected, "qualify({server:?}, {tool:?}, {limit})");
        assert!(got.len() <= limit, "{got} exceeds {limit}");
        assert!(got.chars().all(allowed), "{got}");
    }

    #[test]
    fn names_are_qualified_and_mapped_stably() {
        check("fs", "read_file", 64, "fs__read_file");
        check("fs", "read-file-2", 64, "fs__read-file-2");
        check("fs", "read.file", 64, "fs__read_file_2d6f0437");
        check("fs", "read file", 64, "fs__read_file_93f6e711");
        check("fs", "", 64, "fs___811c9dc5");
        check("fs", "ünï", 64, "fs___n__1b521a56");
        let long = "a".repeat(100);
        check(
            "srv",
            &long,
            64,
            &format!("srv__{}_0a0bb1d9", "a".repeat(50)),
        );
    }

    #[test]
    fn empty_prefixes_drop_the_separator() {
        check("", "read_file", 64, "read_file");
        check("", "read.file", 64, "read_file_2d6f0437");
        let long = "b".repeat(100);
        check(
            "",
            &long,
            48,
            &format!("{}_{:08x}", "b".repeat(39), fnv1a32(long.as_bytes())),
        );
    }

    #[test]
    fn renames_take_the_place_of_the_name_after_the_prefix() {
        let mut n = Naming::prefixed("gh");
        n.tools
            .insert("search_repositories".into(), "search".into());
        n.prompts.insert("summarize".into(), "sum".into());
        assert_eq!(n.tool("search_repositories", 64), "gh__search");
        assert_eq!(n.tool("summarize", 64), "gh__summarize");
        assert_eq!(n.prompt("summarize", 64), "gh__sum");
        n.prefix.clear();
        assert_eq!(n.tool("search_repositories", 64), "search");
        assert_eq!(n.tool("other", 64), "other");
    }

    #[test]
    fn prefixes_are_checked() {
        for (p, ok) in [
            ("gh", true),
            ("", true),
            ("My_Srv-2", true),
            ("a.b", false),
            ("ü", false),
        ] {
            assert_eq!(valid_prefix(p), ok, "{p:?}");
        }
        assert!(valid_prefix(&"x".repeat(32)));
        assert!(!valid_prefix(&"x".repeat(33)));
    }

    proptest::proptest! {
        /// Whatever a server calls its tools, every presented name fits the limit, uses
        /// only the allowed characters, and two different tools never share one. (Names
        /// crafted to match another's mapped form, `a.b` and `a_b_<its hash>`, can still
        /// meet; the registry refuses such a list as a duplicate.)
        #[test]
        fn presented_names_fit_use_the_charset_and_stay_distinct(
            prefix in "[A-Za-z0-9_-]{0,32}",
            names in proptest::collection::btree_set(
                proptest::prop_oneof![
                    "[a-z_]{0,12}",
                    "[a-z_.]{0,70}",
                    "\\PC{0,80}",
                    proptest::prelude::any::<String>(),
                ],
                0..24,
            ),
            limit in 48usize..=128,
        ) {
            let naming = Naming::prefixed(&prefix);
            let mut seen = BTreeMap::new();
            for name in &names {
                let presented = naming.tool(name, limit);
                proptest::prop_assert_eq!(&presented, &qualify(&prefix, name, limit));
                proptest::prop_assert!(presented.len() <= limit, "{} exceeds {}", presented, limit);
                proptest::prop_assert!(!presented.is_empty());
                proptest::prop_assert!(presented.chars().all(allowed), "{}", presented);
                if !prefix.is_empty() {
                    let head = join(&prefix, "");
                    proptest::prop_assert!(presented.starts_with(&head), "{}", presented);
                }
                if let Some(other) = seen.insert(presented.clone(), name) {
                    proptest::prop_assert!(false, "{:?} and {:?} both became {}", other, name, presented);
                }
            }
        }

        /// A renamed tool is the prefix and its new name, whatever it was called.
        #[test]
        fn renamed_tools_are_the_prefix_and_the_new_name(
            prefix in "[A-Za-z0-9_-]{0,32}",
            name in "\\PC{0,80}",
            target in "[A-Za-z0-9_-]{1,16}",
        ) {
            let mut naming = Naming::prefixed(&prefix);
            naming.tools.insert(name.clone(), target.clone());
            proptest::prop_assert_eq!(naming.tool(&name, 64), join(&prefix, &target));
            proptest::prop_assert_eq!(naming.prompt(&name, 64), qualify(&prefix, &name, 64));
        }
    }

    #[test]
    fn names_differing_only_past_the_cut_stay_distinct() {
        let a = qualify("s", &format!("{}x", "t".repeat(80)), 48);
        let b = qualify("s", &format!("{}y", "t".repeat(80)), 48);
        assert_ne!(a, b);
        assert_eq!(a.len(), 48);
    }
}
