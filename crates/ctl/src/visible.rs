//! Text shown to a person with its control, bidi and invisible characters made visible.
//!
//! Such characters are written as escapes (`\u001b`, `\u202e`): what a server writes can
//! then neither rewrite the terminal (cursor moves, concealed text, OSC 52 into the
//! clipboard) nor make two different lines look alike.
//!
//! The escapes are JSON's (`\uXXXX`, a surrogate pair beyond the first plane), so JSON
//! output stays valid JSON that means the same, and plain text shows the code point.
//! Newlines and tabs are kept: every caller prints lines.

use std::fmt::Write;

/// Whether `c` is shown as its escape: C0 and C1 controls but newline and tab, DEL, the
/// bidirectional controls, and characters that print nothing (zero-width, invisible
/// separators and fillers, the tag block).
pub fn hidden(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        // Bidirectional controls.
        | '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        // Zero-width and invisible characters.
        | '\u{ad}' | '\u{34f}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}' | '\u{180e}'
        | '\u{200b}'..='\u{200d}' | '\u{2028}' | '\u{2029}' | '\u{2060}'..='\u{2064}'
        | '\u{3164}' | '\u{feff}' | '\u{ffa0}' | '\u{fff9}'..='\u{fffb}'
        // Tags (text hidden in plain sight) and the variation selectors beyond emoji's.
        | '\u{e0000}'..='\u{e007f}' | '\u{e0100}'..='\u{e01ef}')
}

/// `text` with every [`hidden`] character replaced by its escape; borrowed when there is
/// none (the usual case, found without a copy).
pub fn escape(text: &str) -> std::borrow::Cow<'_, str> {
    let Some(first) = text.char_indices().find(|(_, c)| hidden(*c)) else {
        return std::borrow::Cow::Borrowed(text);
    };
    let (head, rest) = text.split_at(first.0);
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(head);
    for c in rest.chars() {
        if !hidden(c) {
            out.push(c);
        } else {
            // Beyond the first plane as a surrogate pair, as JSON writes it.
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}"); // writing to a String cannot fail
            }
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A `Display` of a string with its hidden characters made visible.
pub struct Visible<'a>(pub &'a str);

impl std::fmt::Display for Visible<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&escape(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: &str) {
        assert_eq!(escape(input), expected, "{input:?}");
    }

    #[test]
    fn controls_bidi_and_invisible_characters_are_shown_as_escapes() {
        check("plain text\twith a tab\n", "plain text\twith a tab\n");
        check("caf\u{e9} \u{1f600}", "caf\u{e9} \u{1f600}");
        check("\u{1b}[8mhidden\u{1b}[0m", "\\u001b[8mhidden\\u001b[0m");
        check("a\rb", "a\\u000db");
        check("\u{1b}]52;c;ZXZpbA==\u{7}", "\\u001b]52;c;ZXZpbA==\\u0007");
        check("\u{9b}2J", "\\u009b2J");
        check("read\u{202e}etirw", "read\\u202eetirw");
        check("zero\u{200b}width", "zero\\u200bwidth");
        check("tag\u{e0041}", "tag\\udb40\\udc41");
        check("\u{feff}bom", "\\ufeffbom");
    }

    #[test]
    fn escaped_json_is_still_the_same_json() {
        let value = serde_json::json!({"d": "x\u{202e}y\u{200b}z\u{85}"});
        let text = serde_json::to_string(&value).unwrap();
        let shown = escape(&text);
        assert!(!shown.chars().any(hidden), "{shown}");
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back, value);
    }
}
