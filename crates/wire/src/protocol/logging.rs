//! MCP logging levels (RFC 5424 names) and their order. No IO.

/// The levels from least to most severe.
pub const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// A level's rank (0 = debug), or None for a name that is not a level.
pub fn rank(level: &str) -> Option<usize> {
    LEVELS.iter().position(|l| *l == level)
}

/// Whether a message at `level` passes a threshold. Unknown message levels pass (the
/// agent decides), and no threshold lets everything through.
pub fn passes(level: Option<&str>, threshold: Option<&str>) -> bool {
    match (level.and_then(rank), threshold.and_then(rank)) {
        (Some(l), Some(t)) => l >= t,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_and_thresholds_filter() {
        assert_eq!(rank("debug"), Some(0));
        assert_eq!(rank("emergency"), Some(7));
        assert_eq!(rank("loud"), None);
        assert!(passes(Some("error"), Some("warning")));
        assert!(!passes(Some("info"), Some("warning")));
        assert!(passes(Some("info"), None));
        assert!(passes(None, Some("error")));
    }
}
