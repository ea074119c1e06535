//! Cutting the bridge's byte streams into lines, and reading a line's head (id, method).
//!
//! The pump moves bytes as they come; what the bridge must know of the session is read
//! from whole lines. A line inside one read is looked at where it lies; only the part of
//! a line that a read cut off is copied, and a line longer than [`MAX_LINE`] is passed on
//! without being looked at.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use std::borrow::Cow;

/// The longest line the bridge reads: the daemon's default `max_message_bytes`. A longer
/// line passes untracked (the daemon refuses it unless its limit was raised).
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// The start of a line cut off by the end of a read, kept until its end comes.
#[derive(Clone, Default)]
pub struct LineBuf {
    partial: Vec<u8>,
    /// The partial line grew past [`MAX_LINE`]: its bytes are dropped until its end.
    skipping: bool,
    /// Lines ended so far, skipped ones included.
    lines: u64,
}

impl LineBuf {
    /// Calls `each` with every line `bytes` completes (without its newline) and its
    /// number (from 1, counting skipped lines too); keeps the rest for the next call.
    pub fn feed(&mut self, mut bytes: &[u8], mut each: impl FnMut(u64, &[u8])) {
        while let Some(nl) = memchr::memchr(b'\n', bytes) {
            let (line, rest) = bytes.split_at(nl);
            self.lines += 1;
            if self.skipping {
                self.skipping = false;
            } else if self.partial.is_empty() {
                each(self.lines, line);
            } else {
                self.partial.extend_from_slice(line);
                each(self.lines, &self.partial);
                self.partial.clear();
            }
            bytes = rest.get(1..).unwrap_or_default();
        }
        if bytes.is_empty() || self.skipping {
            return;
        }
        if self.partial.len() + bytes.len() > MAX_LINE {
            self.partial = Vec::new();
            self.skipping = true;
        } else {
            self.partial.extend_from_slice(bytes);
        }
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
    #[serde(default)]
    id: Option<Value>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

/// The head of any line: the whole line is read, its other members skipped. None when
/// it is not a JSON object.
pub fn head(line: &[u8]) -> Option<Head> {
    let p: Parsed<'_> = serde_json::from_slice(line).ok()?;
    Some(Head {
        id: p.id.as_ref().and_then(canonical_id),
        method: p.method.map(Cow::into_owned),
        error: p.error.is_some(),
    })
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
    let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<Value>();
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
        id: canonical_id(&id),
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
