//! Server-qualified tool names: `SERVER__tool`, with a stable mapping for names that are too long or use other characters.
//!
//! The mapping, documented in README ("Tool names"):
//! 1. `SERVER__TOOL` when TOOL uses only `[A-Za-z0-9_-]` and the whole fits the limit.
//! 2. Otherwise every other character becomes `_`, the result is cut to fit, and
//!    `_` plus eight hex digits of the FNV-1a hash of the original TOOL is appended, so two
//!    tools that differ only in the removed part still get different names.
//!
//! The reverse direction is a table lookup in the registry, never string surgery.

/// The separator between the server name and the tool name.
pub const SEPARATOR: &str = "__";

/// Length of the `_xxxxxxxx` suffix added to mapped names.
const SUFFIX_LEN: usize = 9;

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// The name agents see for `tool` of `server`. `limit` is at least 48 (config enforces it)
/// and server names at most 32 bytes, so there is always room for part of the tool name.
pub fn qualify(server: &str, tool: &str, limit: usize) -> String {
    let plain_len = server.len() + SEPARATOR.len() + tool.len();
    if plain_len <= limit && !tool.is_empty() && tool.chars().all(allowed) {
        return format!("{server}{SEPARATOR}{tool}");
    }
    let room = limit.saturating_sub(server.len() + SEPARATOR.len() + SUFFIX_LEN);
    let kept: String = tool
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .take(room)
        .collect();
    format!("{server}{SEPARATOR}{kept}_{:08x}", fnv1a32(tool.as_bytes()))
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
    fn names_differing_only_past_the_cut_stay_distinct() {
        let a = qualify("s", &format!("{}x", "t".repeat(80)), 48);
        let b = qualify("s", &format!("{}y", "t".repeat(80)), 48);
        assert_ne!(a, b);
        assert_eq!(a.len(), 48);
    }
}
