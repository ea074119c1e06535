//! Server names for imported entries.
//!
//! A client's name made valid for mcpd, and a free one when it is taken.

use crate::config::valid_server_name;
use std::collections::BTreeSet;

/// Makes a client's server name valid for mcpd: lowercase, other characters to `-`, runs
/// of `-` collapsed, trimmed, at most 32 characters.
pub fn sanitize_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() {
            c.to_ascii_lowercase()
        } else {
            '-'
        };
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    out.truncate(32);
    let out = out.trim_matches('-').to_owned();
    if out.is_empty() {
        "server".to_owned()
    } else {
        out
    }
}

/// `base`, or `base-2`, `base-3`… (shortened to fit 32 characters) when it is taken;
/// None when no such name is free (a config with thousands of copies of one name).
pub(super) fn unique_name(base: &str, taken: &BTreeSet<String>) -> Option<String> {
    if !taken.contains(base) {
        return Some(base.to_owned());
    }
    (2..100_000)
        .map(|n| {
            let suffix = format!("-{n}");
            let mut b = base.to_owned();
            b.truncate(32usize.saturating_sub(suffix.len()));
            format!("{}{suffix}", b.trim_end_matches('-'))
        })
        .find(|n| !taken.contains(n) && valid_server_name(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitized() {
        assert_eq!(sanitize_name("My Server!"), "my-server");
        assert_eq!(sanitize_name("github_tools"), "github-tools");
        assert_eq!(sanitize_name("__x__"), "x");
        assert_eq!(sanitize_name("!!!"), "server");
        let long = sanitize_name(&"a".repeat(40));
        assert_eq!(long.len(), 32);
        assert!(valid_server_name(&long));
        let taken: BTreeSet<String> = [long.clone()].into();
        let next = unique_name(&long, &taken).unwrap();
        assert_eq!(next.len(), 32);
        assert!(next.ends_with("-2"));
    }
}
