//! Whether text is one JSON value, accepting exactly what serde_json accepts.
//!
//! Long strings are checked many bytes a step.
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

use super::scan::{Members, bytes_below, first_flagged, is_byte, key_text};

/// A string at least this long is listed in [`Checked::long_strings`]: a later scan of
/// the text jumps over it instead of searching it for its end again.
const LONG_STRING: usize = 1024;
/// At most this many are listed (16 bytes each); the ones after are searched again.
const MAX_LONG_STRINGS: usize = 256;

/// What [`object_members`] finds in the pass that checks the text.
#[derive(Debug, PartialEq)]
pub struct Checked<'a> {
    /// The object's top-level members.
    pub members: Members<'a>,
    /// The long strings anywhere in it, as [`super::scan::Known`] lists them: the byte
    /// offsets of each one's opening quote and of the byte past its closing one, in order.
    pub long_strings: Vec<(usize, usize)>,
}

/// Whether `text` is exactly one JSON value, with whitespace allowed around it.
pub fn is_value(text: &str) -> bool {
    Check::new(text, false).document().is_some()
}

/// The members of the object that is all of `text` (whitespace around it allowed), and
/// its long strings, found in the same pass that checks it: None when `text` is not one
/// JSON value, is not an object, or has a key serde_json cannot read as a string. Keys are
/// unescaped as [`super::scan::members`] does.
pub fn object_members(text: &str) -> Option<Checked<'_>> {
    object_members_listing(text, LONG_STRING)
}

/// [`object_members`] listing every string of at least `long` bytes, quotes included
/// (the tests and the fuzz target list short ones too, so scans jump often).
pub fn object_members_listing(text: &str, long: usize) -> Option<Checked<'_>> {
    let mut c = Check::new(text, true);
    c.long_string = long;
    c.document()?;
    let members = c.members.filter(|_| c.keys_readable)?;
    Some(Checked {
        members,
        long_strings: c.long_strings,
    })
}

/// A byte that ends the plain part of a string: its closing quote, an escape, or a
/// control byte (which JSON does not allow in strings).
#[inline(always)]
fn special(b: u8) -> bool {
    (b == b'"') | (b == b'\\') | (b < 0x20)
}

/// How many bytes at the start of `b` are plain string bytes. Most strings of a
/// JSON-RPC envelope are a few bytes long, so the first [`HEAD`] bytes are looked at
/// here, a word at a time, and only a string longer than that goes on to the block
/// search: with AVX2 where the CPU has it (checked once, then cached by std), else with
/// SSE2, which every x86-64 has.
#[inline(always)]
fn plain_len(b: &[u8]) -> usize {
    let mut at = 0;
    while at < HEAD {
        let Some(word) = b.get(at..).and_then(<[u8]>::first_chunk::<8>) else {
            let rest = b.get(at..).unwrap_or_default();
            return at + rest.iter().position(|&c| special(c)).unwrap_or(rest.len());
        };
        if let Some(i) = first_special(u64::from_le_bytes(*word)) {
            return at + i;
        }
        at += 8;
    }
    at + plain_len_blocks(b.get(at..).unwrap_or_default())
}

/// Bytes of a string looked at a word at a time before the block search.
const HEAD: usize = 16;

/// The index of the first special byte among the eight of `w` (little-endian): a quote,
/// a backslash or a control byte.
#[inline(always)]
fn first_special(w: u64) -> Option<usize> {
    first_flagged(is_byte(w, b'"') | is_byte(w, b'\\') | bytes_below(w, 0x20))
}

/// [`plain_len`] for the rest of a long string, a block at a time.
fn plain_len_blocks(b: &[u8]) -> usize {
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
    open: smallvec::SmallVec<[u8; 32]>,
    /// Collecting the members of the outermost object: None when not asked for, or when
    /// the outermost value is not an object.
    members: Option<Members<'a>>,
    keys_readable: bool,
    /// The key of the outermost object's member being read, and where its value starts.
    key: &'a str,
    value_start: usize,
    /// Listed only while members are collected, from this length on.
    long_strings: Vec<(usize, usize)>,
    long_string: usize,
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
            open: smallvec::SmallVec::new(),
            members: collect.then(Members::new),
            keys_readable: true,
            key: "",
            value_start: 0,
            long_strings: Vec::new(),
            long_string: LONG_STRING,
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
        let start = self.at.wrapping_sub(1);
        loop {
            self.at += plain_len(self.b.get(self.at..)?);
            match self.next()? {
                b'"' => {
                    if self.at - start >= self.long_string
                        && self.members.is_some()
                        && self.long_strings.len() < MAX_LONG_STRINGS
                    {
                        self.long_strings.push((start, self.at));
                    }
                    return Some(());
                }
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
mod tests;
