//! Words out of tool names, descriptions and queries.
//!
//! Split on `snake_case`, `kebab-case`, `camelCase` and the `SERVER__` prefix,
//! lowercased, common endings folded, filler words dropped; and the few synonyms agents
//! use for the same action.

/// Words that say nothing about which tool is meant.
const STOP: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "i", "if",
    "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "please", "so", "some",
    "that", "the", "their", "then", "there", "these", "this", "those", "to", "up", "us", "use",
    "used", "using", "want", "was", "we", "what", "when", "which", "will", "with", "you", "your",
    "tool", "tools", "mcp", "should", "would", "could", "need", "let", "give",
];

/// Groups of words agents use for the same thing, in their folded form. A query word in a
/// group also matches the others, at a lower weight ([`SYNONYM_WEIGHT`]). General
/// vocabulary of tool catalogs, not tuned to any one catalog.
const SYNONYMS: &[&[&str]] = &[
    &[
        "get", "fetch", "read", "retrieve", "load", "show", "view", "open", "display",
    ],
    &["list", "enumerate", "all", "browse"],
    &["create", "add", "make", "new", "insert"],
    &["delete", "remove", "erase", "drop", "destroy"],
    &["update", "edit", "modify", "change", "patch"],
    &["search", "find", "query", "lookup", "look", "locate"],
    &["run", "execute", "invoke", "launch", "start"],
    &["stop", "kill", "terminate", "cancel"],
    &["write", "save", "store", "put"],
    &["file", "document"],
    &["directory", "folder", "dir"],
    &["repo", "repository"],
    &["issue", "ticket", "bug"],
    &["message", "post", "chat", "send"],
    &["comment", "reply"],
    &["pull", "pr", "merge"],
    &["image", "picture", "screenshot", "photo"],
    &["web", "page", "site", "website", "url", "link"],
    &["move", "rename"],
    &["copy", "duplicate", "clone"],
    &["time", "clock", "date"],
    &["database", "db", "sql", "table"],
    &["user", "member", "person", "people", "account"],
    &["navigate", "go", "visit"],
    &["click", "press", "tap"],
    &["type", "fill", "enter", "input"],
    &["log", "trace"],
    &["memory", "remember", "knowledge", "entity", "fact"],
    &["commit", "diff"],
];

/// [`SYNONYMS`], folded.
static FOLDED: std::sync::LazyLock<Vec<Vec<String>>> = std::sync::LazyLock::new(|| {
    SYNONYMS
        .iter()
        .map(|g| g.iter().map(|w| fold(w)).collect())
        .collect()
});

/// How much a synonym of a query word counts, against the word itself.
pub const SYNONYM_WEIGHT: f32 = 0.4;

/// The folded words of `text`, in order, filler words dropped.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for piece in split(text) {
        let w = fold(&piece);
        if !w.is_empty() && !STOP.contains(&piece.as_str()) && !STOP.contains(&w.as_str()) {
            out.push(w);
        }
    }
    out
}

/// Splits on anything not a letter or digit, and inside words at lower→upper case
/// changes (`readFile`, `HTTPServer` → `http`, `server`) and letter↔digit changes.
fn split(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            flush(&mut cur, &mut out);
            continue;
        }
        if let Some(&prev) = i.checked_sub(1).and_then(|p| chars.get(p)) {
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary = (prev.is_lowercase() && c.is_uppercase())
                || (prev.is_uppercase() && c.is_uppercase() && next_lower)
                || (prev.is_alphabetic() && c.is_numeric())
                || (prev.is_numeric() && c.is_alphabetic());
            if boundary && prev.is_alphanumeric() {
                flush(&mut cur, &mut out);
            }
        }
        cur.extend(c.to_lowercase());
    }
    flush(&mut cur, &mut out);
    out
}

fn flush(cur: &mut String, out: &mut Vec<String>) {
    if !cur.is_empty() {
        out.push(std::mem::take(cur));
    }
}

/// Folds common English endings, so "files", "filed" and "file" are one word. A small
/// suffix stripper in the spirit of Porter's first steps: tool text is short and
/// technical, and a full stemmer would fold names it should keep apart.
pub fn fold(word: &str) -> String {
    let w = word;
    let n = w.len();
    let strip = |suffix: &str, min: usize| -> Option<&str> {
        (n >= suffix.len() + min && w.ends_with(suffix)).then(|| &w[..n - suffix.len()])
    };
    let base = if let Some(b) = strip("ies", 2) {
        return format!("{b}i");
    } else if let Some(b) = strip("sses", 1) {
        return format!("{b}ss");
    } else if let Some(b) = strip("ing", 3) {
        b
    } else if let Some(b) = strip("ed", 3) {
        b
    } else if let Some(b) = strip("es", 3)
        .filter(|b| b.ends_with('s') || b.ends_with('x') || b.ends_with("ch") || b.ends_with("sh"))
    {
        b
    } else if let Some(b) = strip("s", 2).filter(|b| !b.ends_with('s') && !b.ends_with('u')) {
        b
    } else {
        w
    };
    // A final silent `e` and a final `y` fold too ("delete"/"deleting" → "delet";
    // "query"/"queries" → "queri").
    let base = base
        .strip_suffix('e')
        .filter(|b| b.len() >= 3)
        .unwrap_or(base);
    match base.strip_suffix('y') {
        Some(b) if b.len() >= 2 => format!("{b}i"),
        _ => base.to_owned(),
    }
}

/// The other words of `word`'s synonym groups (folded words in, folded words out).
pub fn synonyms(word: &str) -> impl Iterator<Item = &'static str> + '_ {
    FOLDED
        .iter()
        .filter(move |g| g.iter().any(|w| w == word))
        .flat_map(|g| g.iter().map(String::as_str))
        .filter(move |w| *w != word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_every_way_they_are_written() {
        let folded = |ws: &[&str]| ws.iter().map(|w| fold(w)).collect::<Vec<_>>();
        assert_eq!(words("fs__read_file"), folded(&["fs", "read", "file"]));
        assert_eq!(
            words("list-pull-requests"),
            folded(&["list", "pull", "request"])
        );
        assert_eq!(
            words("getHTTPServerLogs"),
            folded(&["get", "http", "server", "log"])
        );
        assert_eq!(
            words("browser_take_screenshot"),
            folded(&["browser", "take", "screenshot"])
        );
        assert_eq!(
            words("Read the files in a directory"),
            folded(&["read", "file", "directory"])
        );
    }

    #[test]
    fn endings_fold_to_one_word() {
        for (a, b) in [
            ("files", "file"),
            ("deleting", "delete"),
            ("queries", "query"),
            ("created", "create"),
            ("branches", "branch"),
            ("status", "status"),
        ] {
            assert_eq!(fold(a), fold(b), "{a} / {b}");
        }
        assert!(synonyms(&fold("fetch")).any(|w| w == fold("get")));
    }
}
