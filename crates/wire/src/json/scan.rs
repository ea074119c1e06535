//! Finds the members of JSON objects and the elements of arrays in text already found valid.
//!
//! The text was found valid by `json::check` or serde_json; it is not read again as
//! values.
//!
//! Why by hand: a large result passes through mcpd as the server's own text, and before
//! it does, mcpd looks at its top-level members and at the head of each content block.
//! serde_json can give those only by deserializing into borrowed `RawValue`s, which scans
//! every string byte by byte (eight at a time) once per level it is asked about: three
//! scans of a 1 MiB result, a third of the daemon's CPU in the relay benchmark. Text that
//! is already known to be valid JSON needs no second validation, only its structure:
//! strings are skipped with `memchr` (a vector search for the closing quote or a
//! backslash), brackets are counted, and the members come out as slices of the text.
//! The long strings `json::check` found while it checked the line are not even searched
//! again: given their offsets ([`Known`]), a scan jumps from a listed string's opening
//! quote past its closing one.
//!
//! On text that is not valid JSON these functions never panic and never read out of
//! bounds; they return None or slices that mean nothing. So they are only given text
//! already found valid: an upstream `RawResult`'s, which `json::check` accepted.

use std::borrow::Cow;

/// One member of an object: its key (unescaped) and its value's text.
pub type Member<'a> = (Cow<'a, str>, &'a str);

/// An object's members: the few of an envelope or a content block stay inline, without
/// a heap allocation each.
pub type Members<'a> = smallvec::SmallVec<[Member<'a>; 4]>;

/// Strings whose ends are already known, so a scan jumps over them instead of searching
/// them again: each as the byte offsets, in `whole`, of its opening quote and of the byte
/// just past its closing one, in the order of the text. `json::check` lists a line's long
/// strings while it checks the line; a scan of any part of that line may use them.
///
/// A list that does not match its text cannot make a scan panic or read out of bounds,
/// only give slices that mean nothing, as for text that is not JSON.
#[derive(Clone, Copy, Debug, Default)]
pub struct Known<'a> {
    whole: &'a str,
    strings: &'a [(usize, usize)],
}

impl<'a> Known<'a> {
    pub fn new(whole: &'a str, strings: &'a [(usize, usize)]) -> Self {
        Known { whole, strings }
    }

    /// Where `text` starts in `whole`, and the known strings from there on; none when
    /// `text` is not a part of `whole`.
    fn within(self, text: &str) -> (usize, &'a [(usize, usize)]) {
        let whole = self.whole.as_bytes().as_ptr_range();
        let part = text.as_bytes().as_ptr_range();
        if self.strings.is_empty() || part.start < whole.start || part.end > whole.end {
            return (0, &[]);
        }
        let offset = part.start as usize - whole.start as usize;
        let first = self.strings.partition_point(|&(start, _)| start < offset);
        (offset, self.strings.get(first..).unwrap_or_default())
    }
}

/// The members of the object that is all of `text` (whitespace around it allowed).
pub fn members(text: &str) -> Option<Members<'_>> {
    members_in(text, Known::default())
}

/// [`members`], jumping over the strings `known` lists.
pub fn members_in<'a>(text: &'a str, known: Known<'_>) -> Option<Members<'a>> {
    let mut c = Cursor::new(text, known);
    let out = c.object()?;
    c.ws();
    (c.at == text.len()).then_some(out)
}

/// Calls `each` with the members of every element of the array that is all of `text`
/// (an element that is not an object gives None). Stops at the first false, returning
/// it; None when `text` is not an array.
pub fn each_object(text: &str, each: impl FnMut(Option<Members<'_>>) -> bool) -> Option<bool> {
    each_object_in(text, Known::default(), each)
}

/// [`each_object`], jumping over the strings `known` lists.
pub fn each_object_in(
    text: &str,
    known: Known<'_>,
    mut each: impl FnMut(Option<Members<'_>>) -> bool,
) -> Option<bool> {
    let mut c = Cursor::new(text, known);
    c.ws();
    c.eat(b'[')?;
    c.ws();
    if c.eat(b']').is_some() {
        c.ws();
        return (c.at == text.len()).then_some(true);
    }
    loop {
        c.ws();
        let element = if c.peek() == Some(b'{') {
            Some(c.object()?)
        } else {
            c.value()?;
            None
        };
        if !each(element) {
            return Some(false);
        }
        c.ws();
        match c.next()? {
            b',' => {}
            b']' => break,
            _ => return None,
        }
    }
    c.ws();
    (c.at == text.len()).then_some(true)
}

struct Cursor<'a, 'k> {
    text: &'a str,
    at: usize,
    /// Where `text` starts in the text the known strings are listed in, and those not
    /// yet passed (offsets in that text).
    offset: usize,
    known: &'k [(usize, usize)],
}

impl<'a, 'k> Cursor<'a, 'k> {
    fn new(text: &'a str, known: Known<'k>) -> Self {
        let (offset, known) = known.within(text);
        Cursor {
            text,
            at: 0,
            offset,
            known,
        }
    }

    /// Past a known string that starts here, if one does.
    fn jump(&mut self) -> bool {
        let here = self.offset + self.at;
        while let Some((&(start, end), rest)) = self.known.split_first()
            && start <= here
        {
            self.known = rest;
            if start == here && end > here {
                self.at = end - self.offset;
                return true;
            }
        }
        false
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    fn eat(&mut self, want: u8) -> Option<()> {
        (self.peek() == Some(want)).then(|| self.at += 1)
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// Past the string that starts here (at its opening quote).
    fn string(&mut self) -> Option<()> {
        if self.peek() == Some(b'"') && self.jump() {
            return Some(());
        }
        self.eat(b'"')?;
        loop {
            let rest = self.bytes().get(self.at..)?;
            let found = quote_or_backslash(rest)?;
            self.at += found + 1;
            if rest.get(found) == Some(&b'"') {
                return Some(());
            }
            // A backslash: the byte after it is escaped (a `u` escape's hex digits hold
            // no quote or backslash, so they need no care).
            self.at += 1;
        }
    }

    /// Past the value that starts here, nested ones included.
    fn value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string(),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => self.string()?,
                        b'{' | b'[' => {
                            depth += 1;
                            self.at += 1;
                        }
                        b'}' | b']' => {
                            depth -= 1;
                            self.at += 1;
                            if depth == 0 {
                                return Some(());
                            }
                        }
                        _ => self.at += 1,
                    }
                }
            }
            // A number or a literal: up to whatever ends it.
            _ => {
                let start = self.at;
                while !matches!(
                    self.peek(),
                    None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                ) {
                    self.at += 1;
                }
                (self.at > start).then_some(())
            }
        }
    }

    /// The members of the object that starts here (after whitespace), leaving the cursor
    /// past its closing brace.
    fn object(&mut self) -> Option<Members<'a>> {
        self.ws();
        self.eat(b'{')?;
        let mut out = Members::new();
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(out);
        }
        loop {
            self.ws();
            let key_start = self.at;
            self.string()?;
            let key = key_text(self.text.get(key_start..self.at)?)?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            let value_start = self.at;
            self.value()?;
            out.push((key, self.text.get(value_start..self.at)?));
            self.ws();
            match self.next()? {
                b',' => {}
                b'}' => return Some(out),
                _ => return None,
            }
        }
    }
}

/// Where the first quote or backslash of `rest` is. Most strings of an envelope are a few
/// bytes long: the first 16 bytes are looked at here, a word at a time ([`is_byte`]),
/// and only the rest of a longer string
/// goes to `memchr2`, whose vector search costs more to set up than a short string takes.
#[inline(always)]
fn quote_or_backslash(rest: &[u8]) -> Option<usize> {
    let mut at = 0;
    while at < 16 {
        let Some(word) = rest.get(at..).and_then(<[u8]>::first_chunk::<8>) else {
            let tail = rest.get(at..)?;
            return tail
                .iter()
                .position(|&c| c == b'"' || c == b'\\')
                .map(|i| at + i);
        };
        let w = u64::from_le_bytes(*word);
        if let Some(i) = first_flagged(is_byte(w, b'"') | is_byte(w, b'\\')) {
            return Some(at + i);
        }
        at += 8;
    }
    memchr::memchr2(b'"', b'\\', rest.get(at..)?).map(|i| at + i)
}

/// Flags (with its high bit) each byte of the word `w` that is below `n` (at most 0x80),
/// by the borrow of a subtraction in each byte. A borrow can flag a byte above a byte
/// that truly is below `n`, never one beneath it, so the lowest flag of this mask (and of
/// an OR of such masks) is exact.
#[inline(always)]
pub fn bytes_below(w: u64, n: u8) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    w.wrapping_sub(ONES * u64::from(n)) & !w & HIGH
}

/// Flags each byte of `w` that is `b` (as [`bytes_below`] does).
#[inline(always)]
pub fn is_byte(w: u64, b: u8) -> u64 {
    bytes_below(w ^ (0x0101_0101_0101_0101 * u64::from(b)), 1)
}

/// The index, in a little-endian word, of the lowest byte `flags` flags.
#[inline(always)]
pub fn first_flagged(flags: u64) -> Option<usize> {
    (flags != 0).then(|| (flags.trailing_zeros() / 8) as usize)
}

/// A key's text without its quotes; one with an escape is unescaped by serde_json, and
/// one it cannot read as a string (a lone surrogate escape) makes its object None.
pub fn key_text(quoted: &str) -> Option<Cow<'_, str>> {
    if quoted.contains('\\') {
        serde_json::from_str::<String>(quoted).ok().map(Cow::Owned)
    } else {
        quoted
            .get(1..quoted.len().checked_sub(1)?)
            .map(Cow::Borrowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_quote_or_backslash_is_found_at_any_place() {
        for len in 0..40 {
            for at in 0..len {
                for byte in 0..=255u8 {
                    let mut text = vec![b'a'; len];
                    text[at] = byte;
                    if at + 2 < len {
                        text[at + 2] = b'\\';
                    }
                    let want = text.iter().position(|&c| c == b'"' || c == b'\\');
                    assert_eq!(
                        quote_or_backslash(&text),
                        want,
                        "len {len}, {byte:#x} at {at}"
                    );
                }
            }
        }
    }
    use serde_json::Value;

    /// The members as serde_json reads them, for comparison.
    fn by_serde(text: &str) -> Vec<(String, Value)> {
        let v: serde_json::Map<String, Value> = serde_json::from_str(text).unwrap();
        v.into_iter().collect()
    }

    #[test]
    fn members_are_the_ones_serde_json_reads_with_their_own_text() {
        let cases = [
            r#"{}"#,
            r#" { "a" : 1 , "b":[1,{"c":"}"}], "d\"e": "x\\\"]}" , "f":null,"g":-1.5e3} "#,
            r#"{"content":[{"type":"text","text":"a\nb\u0022"}],"isError":false}"#,
            r#"{"k\u0061y":{"nested":{"deep":[[[]]]}},"s":"\\","t":true}"#,
        ];
        for text in cases {
            let got = members(text).unwrap();
            let want = by_serde(text);
            let mut got: Vec<(String, Value)> = got
                .into_iter()
                .map(|(k, v)| (k.into_owned(), serde_json::from_str(v).unwrap()))
                .collect();
            got.sort_by(|a, b| a.0.cmp(&b.0));
            assert_eq!(got, want, "{text}");
        }
    }

    #[test]
    fn each_element_of_an_array_gives_its_members_or_none() {
        let text = r#" [ {"type":"text","text":"[{"} , 3, "s", {"a":{"b":1}} ] "#;
        let mut seen = Vec::new();
        let all = each_object(text, |m| {
            seen.push(m.map(|m| {
                m.into_iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
            }));
            true
        });
        assert_eq!(all, Some(true));
        assert_eq!(
            seen,
            vec![
                Some(vec!["type=\"text\"".to_owned(), "text=\"[{\"".to_owned()]),
                None,
                None,
                Some(vec!["a={\"b\":1}".to_owned()]),
            ]
        );
        assert_eq!(each_object("[]", |_| false), Some(true));
        assert_eq!(each_object("[1,2]", |_| false), Some(false));
        assert_eq!(each_object("{}", |_| true), None);
    }

    #[test]
    fn text_that_is_not_json_gives_none_or_anything_but_never_panics() {
        for text in [
            "",
            "{",
            "{\"a\"",
            "{\"a\":",
            "{\"a\":1",
            "{\"a\" 1}",
            "[",
            "[1",
            "\"",
            "{\"\\",
            "{\"a\":\"\\",
            "}",
            "]]]",
            "{\"a\":}}}",
            "[{]",
            "{,}",
            "\u{e9}",
        ] {
            let _ = members(text);
            let _ = each_object(text, |_| true);
        }
        assert!(members("{\"a\":1").is_none());
        assert!(members("{\"a\":1} x").is_none());
    }
}
