//! Cutting the bridge's byte streams into lines, and reading a line's head (id, method).
//!
//! The pump moves bytes as they come; what the bridge must know of the session is read
//! from whole lines. A line inside one read is looked at where it lies; only the part of
//! a line that a read cut off is copied, and a line longer than [`MAX_LINE`] is passed on
//! without being looked at.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// The longest line the bridge reads: the daemon's default `max_message_bytes`. A longer
/// line passes untracked (the daemon refuses it unless its limit was raised).
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// The most of a daemon line cut off by a read that is kept: its head, enough for
/// [`daemon_head`], so a megabyte result is not copied.
pub const HEAD: usize = 4096;

/// The start of a line cut off by the end of a read, kept until its end comes.
#[derive(Clone, Default)]
pub struct LineBuf {
    partial: Vec<u8>,
    /// The partial line grew past [`MAX_LINE`]: its bytes are dropped until its end.
    skipping: bool,
    /// Keep only the first [`HEAD`] bytes of a cut-off line (the daemon's side).
    head_only: bool,
    /// Lines ended so far, skipped ones included.
    lines: u64,
}

impl LineBuf {
    /// A buffer that hands on only the first [`HEAD`] bytes of a line that spans reads.
    pub fn heads() -> LineBuf {
        LineBuf {
            head_only: true,
            ..LineBuf::default()
        }
    }

    /// Calls `each` with every line `bytes` completes (without its newline) and its
    /// number (from 1, counting skipped lines too); keeps the rest for the next call. In
    /// [`LineBuf::heads`] mode a line that spanned reads is handed on as its head.
    pub fn feed(&mut self, mut bytes: &[u8], mut each: impl FnMut(u64, &[u8])) {
        while let Some(nl) = memchr::memchr(b'\n', bytes) {
            let (line, rest) = bytes.split_at(nl);
            self.lines += 1;
            if self.skipping {
                self.skipping = false;
            } else if self.partial.is_empty() {
                each(self.lines, line);
            } else {
                self.keep(line);
                each(self.lines, &self.partial);
                self.partial.clear();
            }
            bytes = rest.get(1..).unwrap_or_default();
        }
        if bytes.is_empty() || self.skipping {
            return;
        }
        if !self.head_only && self.partial.len() + bytes.len() > MAX_LINE {
            self.partial = Vec::new();
            self.skipping = true;
        } else {
            self.keep(bytes);
        }
    }

    /// Adds `bytes` to the partial line (in heads mode, up to [`HEAD`] bytes of it).
    fn keep(&mut self, bytes: &[u8]) {
        let room = if self.head_only {
            HEAD.saturating_sub(self.partial.len()).min(bytes.len())
        } else {
            bytes.len()
        };
        self.partial
            .extend_from_slice(bytes.get(..room).unwrap_or_default());
    }

    /// The cut-off line's bytes seen so far (empty when the stream is at a line's end).
    pub fn partial(&self) -> &[u8] {
        &self.partial
    }

    /// Whether the stream stopped inside a line.
    pub fn mid_line(&self) -> bool {
        !self.partial.is_empty() || self.skipping
    }

    /// Starts over, as on a new connection that has already carried `lines` lines.
    pub fn restart(&mut self, lines: u64) {
        *self = LineBuf {
            lines,
            head_only: self.head_only,
            ..LineBuf::default()
        };
    }
}

/// What the bridge reads of a message: its id (as canonical JSON text, so `1` and `"1"`
/// differ and an escaped string equals its plain spelling) and method, and whether it
/// is an error.
#[derive(Debug, Default, PartialEq)]
pub struct Head {
    pub id: Option<String>,
    pub method: Option<String>,
    pub error: bool,
}

impl Head {
    pub fn is_request(&self) -> bool {
        self.id.is_some() && self.method.is_some()
    }

    pub fn is_response(&self) -> bool {
        self.id.is_some() && self.method.is_none()
    }
}

#[derive(Deserialize)]
struct Parsed<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

/// The head of any line: the whole line is read, its other members skipped (nothing is
/// built but the id's and the method's text). None when it is not a JSON object.
pub fn head(line: &[u8]) -> Option<Head> {
    let p: Parsed<'_> = serde_json::from_slice(line).ok()?;
    Some(Head {
        id: p.id.and_then(|raw| canonical_raw(raw.get())),
        method: p.method.map(Cow::into_owned),
        error: p.error.is_some(),
    })
}

/// [`canonical_id`] of an id's JSON text, without building a value when the text is
/// already canonical (plain digits, or a string without escapes).
fn canonical_raw(raw: &str) -> Option<String> {
    let plain = match raw.as_bytes().first() {
        Some(b'"') => !raw.contains('\\'),
        Some(b'-' | b'0'..=b'9') => raw.bytes().all(|b| b.is_ascii_digit() || b == b'-'),
        _ => return None,
    };
    if plain {
        Some(raw.to_owned())
    } else {
        serde_json::from_str::<Value>(raw)
            .ok()
            .as_ref()
            .and_then(canonical_id)
    }
}

/// The envelope every daemon line starts with: `mcpd_wire::jsonrpc` writes `jsonrpc`,
/// then `id`, then `method`, `result` or `error`, so the head of a daemon line is read
/// from its first bytes and a megabyte result is not scanned. A line that does not start
/// so is read whole by [`head`].
const RESPONSE_START: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
const NOTIFICATION_START: &[u8] = br#"{"jsonrpc":"2.0","method":"#;

/// The head of a line the daemon wrote.
pub fn daemon_head(line: &[u8]) -> Option<Head> {
    if line.starts_with(NOTIFICATION_START) {
        // Only requests and responses matter to the bridge: the method is not read.
        return Some(Head {
            method: Some(String::new()),
            ..Head::default()
        });
    }
    let Some(rest) = line.strip_prefix(RESPONSE_START) else {
        return head(line);
    };
    let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<&RawValue>();
    let Some(Ok(id)) = values.next() else {
        return head(line);
    };
    let after = rest.get(values.byte_offset()..).unwrap_or_default();
    let (method, error) = if after.starts_with(br#","method":"#) {
        (Some(String::new()), false)
    } else if after.starts_with(br#","result":"#) {
        (None, false)
    } else if after.starts_with(br#","error":"#) {
        (None, true)
    } else {
        return head(line);
    };
    Some(Head {
        id: canonical_raw(id.get()),
        method,
        error,
    })
}

/// An id's canonical JSON text; None for null or anything JSON-RPC does not allow.
pub fn canonical_id(v: &Value) -> Option<String> {
    match v {
        Value::Number(_) | Value::String(_) => serde_json::to_string(v).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(chunks: &[&[u8]]) -> Vec<String> {
        let mut buf = LineBuf::default();
        let mut out = Vec::new();
        for c in chunks {
            buf.feed(c, |_, l| out.push(String::from_utf8_lossy(l).into_owned()));
        }
        out
    }

    #[test]
    fn lines_are_whole_across_reads() {
        assert_eq!(lines_of(&[b"a\nb", b"c\n", b"d"]), ["a", "bc"]);
        assert_eq!(lines_of(&[b"\n\n"]), ["", ""]);
        let mut buf = LineBuf::default();
        buf.feed(b"xy", |_, _| {});
        assert!(buf.mid_line());
        assert_eq!(buf.partial(), b"xy");
    }

    #[test]
    fn heads_mode_keeps_only_a_head_of_a_long_line() {
        let mut buf = LineBuf::heads();
        let mut seen = Vec::new();
        buf.feed(b"{\"a\":", |_, l| seen.push(l.len()));
        buf.feed(&vec![b'x'; 3 * HEAD], |_, l| seen.push(l.len()));
        buf.feed(b"}\nshort\n", |_, l| seen.push(l.len()));
        assert_eq!(seen, [HEAD, 5]);
    }

    #[test]
    fn an_overlong_line_is_skipped_to_its_end() {
        let mut buf = LineBuf::default();
        let big = vec![b'x'; MAX_LINE + 1];
        let mut seen = Vec::new();
        buf.feed(&big, |_, l| seen.push(l.len()));
        assert!(buf.mid_line() && buf.partial().is_empty());
        buf.feed(b"tail\nnext\n", |n, l| {
            seen.push((n, l.len()).1 + n as usize * 100)
        });
        assert_eq!(seen, [204], "the skipped line is counted: `next` is line 2");
    }

    #[test]
    fn heads_of_agent_lines_in_any_order() {
        let h =
            head(br#"{"method":"tools/call","params":{"x":[1,2]},"jsonrpc":"2.0","id":"a\u0062"}"#)
                .unwrap();
        assert_eq!(h.id.as_deref(), Some(r#""ab""#));
        assert_eq!(h.method.as_deref(), Some("tools/call"));
        assert!(h.is_request());
        let n = head(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(n.id.is_none() && !n.is_request());
        assert!(head(b"not json").is_none());
    }

    #[test]
    fn daemon_heads_from_the_envelope() {
        let r = daemon_head(br#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#).unwrap();
        assert_eq!(
            (r.id.as_deref(), r.is_response(), r.error),
            (Some("7"), true, false)
        );
        let e = daemon_head(br#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}"#)
            .unwrap();
        assert_eq!((e.id, e.error), (None, true));
        let q = daemon_head(br#"{"jsonrpc":"2.0","id":"s1","method":"roots/list"}"#).unwrap();
        assert!(q.is_request());
        // Another order is read whole.
        let o = daemon_head(br#"{"id":3,"jsonrpc":"2.0","result":{}}"#).unwrap();
        assert_eq!(o.id.as_deref(), Some("3"));
    }
}
