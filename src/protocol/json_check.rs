//! Whether text is one JSON value, accepting exactly what serde_json accepts, with long strings checked many bytes a step.
//!
//! Why by hand: every call's answer is checked before its text is passed on, and for a
//! large result that check is nearly all of mcpd's work. serde_json checks a string eight
//! bytes at a time (its `skip_to_escape`), which was 62 % of the instructions mcpd spent on
//! a 1 MiB result. Here the plain part of a string is checked a block at a time, written
//! so the compiler turns each block into a few vector compares with no branch inside
//! (`plain_len`); the rest of the grammar is a small loop with an explicit stack, so depth
//! costs no recursion. SIMD JSON crates would do the check as fast, but they parse into
//! values or tapes and bring much target-specific unsafe code for a check this small.
//!
//! What is accepted is serde_json's own rule for skipping a value (`IgnoredAny`): RFC 8259
//! grammar with the four whitespace bytes, any `\u` escape (lone surrogates included), no
//! control bytes in strings, no trailing commas, no depth limit. The unit tests, a property
//! test and the `json_scan` fuzz target compare the two on generated and arbitrary text.

use super::scan::{Member, key_text};

/// Whether `text` is exactly one JSON value, with whitespace allowed around it.
pub fn is_value(text: &str) -> bool {
    Check::new(text, false).document().is_some()
}

/// The members of the object that is all of `text` (whitespace around it allowed), found
/// in the same pass that checks it: None when `text` is not one JSON value, is not an
/// object, or has a key serde_json cannot read as a string. Keys are unescaped as
/// [`super::scan::members`] does.
pub fn object_members(text: &str) -> Option<Vec<Member<'_>>> {
    let mut c = Check::new(text, true);
    c.document()?;
    c.members.filter(|_| c.keys_readable)
}

/// A byte that ends the plain part of a string: its closing quote, an escape, or a
/// control byte (which JSON does not allow in strings).
#[inline(always)]
fn special(b: u8) -> bool {
    (b == b'"') | (b == b'\\') | (b < 0x20)
}

/// How many bytes at the start of `b` are plain string bytes: with AVX2 where the CPU
/// has it (checked once, then cached by std), else with SSE2, which every x86-64 has.
fn plain_len(b: &[u8]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above), the one requirement of a
        // `#[target_feature(enable = "avx2")]` function; its body is safe code.
        return unsafe { plain_len_avx2(b) };
    }
    plain_len_in::<64>(b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn plain_len_avx2(b: &[u8]) -> usize {
    plain_len_in::<128>(b)
}

/// [`plain_len`] in blocks of `BLOCK` bytes. A block is plain when no byte in it is
/// special, computed as one minimum over the whole block (zero: a special byte), which
/// the compiler turns into vector XORs, saturating subtractions and minimums.
#[inline(always)]
fn plain_len_in<const BLOCK: usize>(b: &[u8]) -> usize {
    let mut skipped = 0;
    for block in b.chunks_exact(BLOCK) {
        let least = block.iter().fold(u8::MAX, |least, &c| {
            // Each is zero exactly when `c` is a quote, a backslash, or below 0x20.
            least
                .min(c ^ b'"')
                .min(c ^ b'\\')
                .min(c.saturating_sub(0x1f))
        });
        if least == 0 {
            break;
        }
        skipped += BLOCK;
    }
    let rest = b.get(skipped..).unwrap_or_default();
    skipped + rest.iter().position(|&c| special(c)).unwrap_or(rest.len())
}

struct Check<'a> {
    text: &'a str,
    b: &'a [u8],
    at: usize,
    /// The closing byte of each container the cursor is inside, innermost last.
    open: Vec<u8>,
    /// Collecting the members of the outermost object: None when not asked for, or when
    /// the outermost value is not an object.
    members: Option<Vec<Member<'a>>>,
    keys_readable: bool,
    /// The key of the outermost object's member being read, and where its value starts.
    key: &'a str,
    value_start: usize,
}

impl<'a> Check<'a> {
    fn new(text: &'a str, collect: bool) -> Self {
        let collect = collect
            && text
                .trim_start_matches([' ', '\t', '\n', '\r'])
                .starts_with('{');
        Check {
            text,
            b: text.as_bytes(),
            at: 0,
            open: Vec::new(),
            members: collect.then(Vec::new),
            keys_readable: true,
            key: "",
            value_start: 0,
        }
    }

    /// A value of the outermost object ends here: its member is recorded.
    fn member_ends(&mut self) {
        let (Some(members), Some(value)) =
            (&mut self.members, self.text.get(self.value_start..self.at))
        else {
            return;
        };
        match key_text(self.key) {
            Some(key) => members.push((key, value)),
            None => self.keys_readable = false,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    fn eat(&mut self, want: u8) -> bool {
        let here = self.peek() == Some(want);
        if here {
            self.at += 1;
        }
        here
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn document(&mut self) -> Option<()> {
        self.ws();
        self.value()?;
        self.ws();
        (self.at == self.b.len()).then_some(())
    }

    /// Past the value that starts here, nested values included.
    fn value(&mut self) -> Option<()> {
        loop {
            self.ws();
            if self.open.len() == 1 {
                self.value_start = self.at;
            }
            match self.next()? {
                b'{' => {
                    self.ws();
                    if !self.eat(b'}') {
                        self.open.push(b'}');
                        self.key()?;
                        continue;
                    }
                }
                b'[' => {
                    self.ws();
                    if !self.eat(b']') {
                        self.open.push(b']');
                        continue;
                    }
                }
                b'"' => self.string()?,
                b'-' => self.number(None)?,
                d @ b'0'..=b'9' => self.number(Some(d))?,
                b't' => self.literal(b"rue")?,
                b'f' => self.literal(b"alse")?,
                b'n' => self.literal(b"ull")?,
                _ => return None,
            }
            // A value ended: close the containers it ends, or go on to the next element.
            loop {
                let Some(&close) = self.open.last() else {
                    return Some(());
                };
                if self.open.len() == 1 && close == b'}' {
                    self.member_ends();
                }
                self.ws();
                match self.next()? {
                    b',' => {
                        if close == b'}' {
                            self.ws();
                            self.key()?;
                        }
                        break;
                    }
                    b if b == close => {
                        self.open.pop();
                    }
                    _ => return None,
                }
            }
        }
    }

    /// A member's key and its colon.
    fn key(&mut self) -> Option<()> {
        let start = self.at;
        if !self.eat(b'"') {
            return None;
        }
        self.string()?;
        if self.open.len() == 1 {
            self.key = self.text.get(start..self.at)?;
        }
        self.ws();
        self.eat(b':').then_some(())
    }

    /// The rest of a string whose opening quote has been read.
    fn string(&mut self) -> Option<()> {
        loop {
            self.at += plain_len(self.b.get(self.at..)?);
            match self.next()? {
                b'"' => return Some(()),
                b'\\' => match self.next()? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                    b'u' => {
                        for _ in 0..4 {
                            if !self.next()?.is_ascii_hexdigit() {
                                return None;
                            }
                        }
                    }
                    _ => return None,
                },
                _ => return None, // a control byte
            }
        }
    }

    /// The rest of a number: `first` is its first digit, or None after a minus sign.
    fn number(&mut self, first: Option<u8>) -> Option<()> {
        let first = match first {
            Some(d) => d,
            None => self.next()?,
        };
        match first {
            b'0' if matches!(self.peek(), Some(b'0'..=b'9')) => return None,
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.eat(b'.') {
            self.some_digits()?;
        }
        if self.eat(b'e') || self.eat(b'E') {
            let _ = self.eat(b'+') || self.eat(b'-');
            self.some_digits()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }

    fn literal(&mut self, rest: &[u8]) -> Option<()> {
        let end = self.at.checked_add(rest.len())?;
        (self.b.get(self.at..end)? == rest).then(|| self.at = end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn serde_accepts(text: &str) -> bool {
        serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
    }

    #[test]
    fn accepts_and_refuses_what_serde_json_does() {
        let cases = [
            "",
            " ",
            "0",
            "-0",
            "01",
            "-",
            "1.",
            "1.5",
            ".5",
            "1e",
            "1e+",
            "1E-7",
            "1e5x",
            "-01",
            "123456789012345678901234567890",
            "true",
            "tru",
            "truex",
            "null",
            "nul",
            "false",
            "\"\"",
            "\"a",
            "\"\\u12\"",
            "\"\\u12g4\"",
            "\"\\uD800\"",
            "\"\\x\"",
            "\"\\/\\b\\f\\n\\r\\t\\\\\\\"\"",
            "\"\u{1}\"",
            "\"\t\"",
            "\"\u{7f}\u{e9}\u{1f600}\"",
            "[]",
            "[ ]",
            "[1,]",
            "[,1]",
            "[1 2]",
            "[1,[2,[3]]]",
            "[[[[[[[[[[]]]]]]]]]]",
            "[",
            "]",
            "[}",
            "{}",
            "{ }",
            "{\"a\":1}",
            "{\"a\" : [ 1 , { } ] , \"b\":null}",
            "{\"a\":1,}",
            "{,}",
            "{\"a\"}",
            "{\"a\":}",
            "{1:1}",
            "{\"a\":1 \"b\":2}",
            "{]",
            " {\"a\":1} ",
            "{\"a\":1} x",
            "1 2",
            "\u{c}1",
            "1\u{c}",
            "\r\n\t 1 \r\n\t",
        ];
        for text in cases {
            assert_eq!(is_value(text), serde_accepts(text), "{text:?}");
        }
        assert_eq!(
            object_members(r#" { "a" : [1,{"b":2}] , "c\u0064":"}" , "e":{} } "#),
            Some(vec![
                ("a".into(), r#"[1,{"b":2}]"#),
                ("cd".into(), r#""}""#),
                ("e".into(), "{}"),
            ])
        );
        assert_eq!(object_members("{}"), Some(vec![]));
        assert_eq!(object_members("[1]"), None);
        assert_eq!(object_members(r#"{"\ud800":1}"#), None);
        assert_eq!(object_members(r#"{"a":1,}"#), None);
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        assert!(is_value(&deep));
        assert!(!is_value(&deep[1..]));
    }

    #[test]
    fn long_strings_are_checked_in_every_block_and_at_their_end() {
        for len in [0, 1, 31, 32, 33, 63, 64, 65, 1000, 4096] {
            let plain = "x".repeat(len);
            assert!(is_value(&format!("\"{plain}\"")), "{len}");
            for at in [0, len / 2, len.saturating_sub(1)] {
                if at >= len {
                    continue;
                }
                for bad in ["\u{0}", "\n", "\u{1f}"] {
                    let mut s = plain.clone();
                    s.replace_range(at..at + 1, bad);
                    assert!(!is_value(&format!("\"{s}\"")), "{len} {at} {bad:?}");
                }
                let mut s = plain.clone();
                s.replace_range(at..at + 1, "\\n");
                assert!(is_value(&format!("\"{s}\"")), "{len} {at}");
                let mut s = plain.clone();
                s.replace_range(at..at + 1, "\"");
                assert!(!is_value(&format!("\"{s}\"")), "{len} {at}");
            }
        }
    }

    #[test]
    fn every_block_width_finds_the_same_first_special_byte() {
        let mut text = vec![b'x'; 1000];
        for at in [0, 1, 31, 63, 64, 65, 127, 128, 129, 500, 999] {
            for special in [b'"', b'\\', 0, 0x1f] {
                text[at] = special;
                assert_eq!(plain_len_in::<64>(&text), at);
                assert_eq!(plain_len_in::<128>(&text), at);
                assert_eq!(plain_len(&text), at);
                text[at] = 0x20;
                assert_eq!(plain_len_in::<64>(&text), 1000);
                assert_eq!(plain_len(&text), 1000);
                text[at] = b'x';
            }
        }
    }

    /// Text made of JSON's own pieces, valid or not, so most cases get deep into the grammar.
    fn pieces() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("{"),
            Just("}"),
            Just("["),
            Just("]"),
            Just(","),
            Just(":"),
            Just(" "),
            Just("\""),
            Just("\"k\":"),
            Just("\"s\\\"x\""),
            Just("\\u00e9"),
            Just("\\"),
            Just("0"),
            Just("-1.5e+3"),
            Just("12"),
            Just("."),
            Just("e"),
            Just("true"),
            Just("null"),
            Just("fals"),
            Just("\t"),
            Just("\u{1}"),
            Just("é"),
            Just("\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""),
        ];
        proptest::collection::vec(piece, 0..24).prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn agrees_with_serde_json_on_text_made_of_json_pieces(text in pieces()) {
            let valid = is_value(&text);
            prop_assert_eq!(valid, serde_accepts(&text), "{:?}", text);
            let members = object_members(&text);
            if valid {
                prop_assert_eq!(members, super::super::scan::members(&text), "{:?}", text);
            } else {
                prop_assert!(members.is_none(), "{:?}", text);
            }
        }

        #[test]
        fn accepts_every_value_serde_json_writes(v in json_value()) {
            let text = serde_json::to_string(&v).unwrap();
            prop_assert!(is_value(&text), "{}", text);
            let pretty = serde_json::to_string_pretty(&v).unwrap();
            prop_assert!(is_value(&pretty), "{}", pretty);
            for text in [&text, &pretty] {
                prop_assert_eq!(object_members(text), super::super::scan::members(text));
            }
        }
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                proptest::collection::btree_map(any::<String>(), inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
