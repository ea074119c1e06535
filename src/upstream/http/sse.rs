//! A bounded Server-Sent Events decoder (the WHATWG `text/event-stream` format) for HTTP upstreams.
//!
//! Written here rather than taken from a crate because mcpd must bound what a remote
//! server can make it buffer: the SSE crates we looked at grow an event's data without
//! limit. This one discards an over-long event (and reports it) and caps line length.
//! Its cost is linear in the bytes received however they are split: each byte is
//! searched for a line end once, not again with every chunk that follows it.

use bytes::{Buf, BytesMut};
use tokio_util::codec::Decoder;

/// One dispatched event.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Event {
    /// The `event:` field; empty means the default type, `message`.
    pub event: String,
    /// The `data:` lines joined with newlines.
    pub data: String,
    /// The `id:` field, when the event set one.
    pub id: Option<String>,
    /// The `retry:` field in milliseconds, when the event set one.
    pub retry: Option<u64>,
    /// The event was longer than the limit; its data was discarded.
    pub too_long: bool,
}

impl Event {
    /// Whether this is a JSON-RPC message event (the default type or `message`).
    pub fn is_message(&self) -> bool {
        self.event.is_empty() || self.event == "message"
    }
}

/// Decodes a byte stream into events, holding at most about `max` bytes of one event.
///
/// As `Decoder` provides, each call's buffer is the previous one's unconsumed bytes with
/// new ones appended; the decoder remembers how far it searched them.
pub struct SseDecoder {
    max: usize,
    /// Bytes at the front of the buffer already searched for a line end: an incomplete
    /// line's start (or a final '\r' waiting for the byte after it). Zero after a line.
    scanned: usize,
    current: Event,
    /// Whether any field was seen since the last dispatch.
    pending: bool,
    /// Bytes of the current event so far.
    size: usize,
    /// Skipping the rest of an over-long line.
    skipping_line: bool,
    /// The stream started (a leading byte-order mark is dropped once).
    started: bool,
}

impl SseDecoder {
    pub fn new(max: usize) -> SseDecoder {
        SseDecoder {
            max,
            scanned: 0,
            current: Event::default(),
            pending: false,
            size: 0,
            skipping_line: false,
            started: false,
        }
    }

    fn field(&mut self, line: &[u8]) {
        if line.first().is_none_or(|b| *b == b':') {
            return; // blank lines are handled by the caller; ':' starts a comment
        }
        let (name, value) = match line.iter().position(|b| *b == b':') {
            Some(i) => {
                let (name, rest) = line.split_at(i);
                let v = rest.get(1..).unwrap_or_default();
                (name, v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &[][..]),
        };
        let value = String::from_utf8_lossy(value);
        self.pending = true;
        match name {
            b"data" => {
                self.size += value.len() + 1;
                if self.size > self.max {
                    self.current.too_long = true;
                    self.current.data = String::new();
                } else if !self.current.too_long {
                    if !self.current.data.is_empty() || self.size > value.len() + 1 {
                        self.current.data.push('\n');
                    }
                    self.current.data.push_str(&value);
                }
            }
            b"event" => self.current.event = value.into_owned(),
            b"id" if !value.contains('\0') => self.current.id = Some(value.into_owned()),
            b"retry" => {
                if let Ok(ms) = value.parse::<u64>() {
                    self.current.retry = Some(ms);
                }
            }
            _ => {} // unknown fields are ignored, as the format says
        }
    }

    /// The current event is over the limit because of a line too long to keep: like
    /// an event whose data adds up past the limit, it keeps none and is still reported.
    fn over_long(&mut self) {
        self.current.too_long = true;
        self.current.data = String::new();
        self.pending = true;
    }

    fn dispatch(&mut self) -> Option<Event> {
        if !std::mem::take(&mut self.pending) {
            return None;
        }
        self.size = 0;
        Some(std::mem::take(&mut self.current))
    }
}

impl Decoder for SseDecoder {
    type Item = Event;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Event>, Self::Error> {
        if !self.started {
            if buf.len() < 3 && b"\xEF\xBB\xBF".starts_with(&buf[..]) {
                return Ok(None);
            }
            self.started = true;
            if buf.starts_with(b"\xEF\xBB\xBF") {
                buf.advance(3);
            }
        }
        loop {
            // Only the bytes not searched before; a buffer that shrank is searched anew.
            let from = if self.scanned <= buf.len() {
                self.scanned
            } else {
                0
            };
            let found = buf
                .iter()
                .skip(from)
                .position(|b| *b == b'\n' || *b == b'\r')
                .map(|i| from + i);
            let Some(end) = found else {
                self.scanned = buf.len();
                if self.skipping_line || buf.len() > self.max {
                    // A line longer than any event may be: drop what we have and the
                    // rest of the line as it comes.
                    self.skipping_line = true;
                    self.over_long();
                    buf.clear();
                    self.scanned = 0;
                }
                return Ok(None);
            };
            // "\r\n" is one terminator; wait for the byte after a final '\r'.
            let crlf = buf.get(end) == Some(&b'\r');
            if crlf && end + 1 == buf.len() {
                self.scanned = end;
                return Ok(None);
            }
            let skip = if crlf && buf.get(end + 1) == Some(&b'\n') {
                2
            } else {
                1
            };
            let line = buf.split_to(end);
            buf.advance(skip);
            self.scanned = 0;
            if std::mem::take(&mut self.skipping_line) {
                continue;
            }
            if line.len() > self.max {
                // Dropped as it is when it arrives in pieces (above), so what is decoded
                // does not depend on how the bytes were split into reads.
                self.over_long();
                continue;
            }
            if line.is_empty() {
                if let Some(event) = self.dispatch() {
                    return Ok(Some(event));
                }
                continue;
            }
            self.field(&line);
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Event>, Self::Error> {
        // A final '\r' is a line end: no '\n' can follow it any more.
        if buf.last() == Some(&b'\r') {
            buf.extend_from_slice(b"\n");
        }
        if let Some(event) = self.decode(buf)? {
            return Ok(Some(event));
        }
        // An event is dispatched only at a blank line; a stream that ends without one
        // leaves an incomplete event, which the format says to discard.
        buf.clear();
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(input: &[u8], max: usize) -> Vec<Event> {
        let mut d = SseDecoder::new(max);
        let mut out = Vec::new();
        // Feed one byte at a time: every split point must work.
        let mut buf = BytesMut::new();
        for b in input {
            buf.extend_from_slice(&[*b]);
            while let Some(e) = d.decode(&mut buf).unwrap() {
                out.push(e);
            }
        }
        while let Some(e) = d.decode_eof(&mut buf).unwrap() {
            out.push(e);
        }
        out
    }

    /// Decodes `input` fed in chunks of `chunk` bytes.
    fn events_in_chunks(input: &[u8], max: usize, chunk: usize) -> Vec<Event> {
        let mut d = SseDecoder::new(max);
        let mut out = Vec::new();
        let mut buf = BytesMut::new();
        for piece in input.chunks(chunk) {
            buf.extend_from_slice(piece);
            while let Some(e) = d.decode(&mut buf).unwrap() {
                out.push(e);
            }
        }
        while let Some(e) = d.decode_eof(&mut buf).unwrap() {
            out.push(e);
        }
        out
    }

    fn ev(event: &str, data: &str, id: Option<&str>) -> Event {
        Event {
            event: event.into(),
            data: data.into(),
            id: id.map(Into::into),
            ..Event::default()
        }
    }

    #[test]
    fn events_are_split_on_blank_lines_with_any_line_ending() {
        assert_eq!(
            events(b"data: {\"a\":1}\n\n", 100),
            vec![ev("", "{\"a\":1}", None)]
        );
        assert_eq!(
            events(
                b"event: endpoint\r\ndata: /m?s=1\r\n\r\nid: 7\rdata:x\r\r",
                100
            ),
            vec![ev("endpoint", "/m?s=1", None), ev("", "x", Some("7"))]
        );
        assert_eq!(
            events(b"data: a\ndata: b\n\n", 100),
            vec![ev("", "a\nb", None)]
        );
        // Comments are skipped; an unterminated event at the end is discarded.
        assert_eq!(
            events(b": keepalive\n\ndata: 1\n\ndata: 2", 100),
            vec![ev("", "1", None)]
        );
        // A BOM at the start is dropped.
        assert_eq!(
            events(b"\xEF\xBB\xBFdata: 1\n\n", 100),
            vec![ev("", "1", None)]
        );
    }

    /// Decodes `input` handed over in one read.
    fn whole(input: &[u8], max: usize) -> Vec<Event> {
        let mut d = SseDecoder::new(max);
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(e) = d.decode(&mut buf).unwrap() {
            out.push(e);
        }
        while let Some(e) = d.decode_eof(&mut buf).unwrap() {
            out.push(e);
        }
        out
    }

    #[test]
    fn over_long_lines_are_dropped_whether_they_arrive_whole_or_in_pieces() {
        // Found by the `sse` fuzz target: a line longer than the limit that came in one
        // read was taken as a field, but dropped as over-long when it came in pieces.
        // Then it was found to keep the data lines before the long line.
        for (input, max) in [
            (&b"[)\n\n"[..], 1),
            (b"id: 1234567\ndata: x\n\n", 8),
            (b"data: x\nevent: 1234567\n\n", 8),
        ] {
            let got = whole(input, max);
            assert_eq!(got, events(input, max), "{input:?}");
            assert_eq!(got.len(), 1, "{got:?}");
            assert!(got[0].too_long && got[0].id.is_none() && got[0].data.is_empty());
        }
    }

    #[test]
    fn priming_events_and_retry_are_reported() {
        let got = events(b"id: 42\nretry: 1500\ndata:\n\n", 100);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].id.as_deref(), Some("42"));
        assert_eq!(got[0].retry, Some(1500));
        assert_eq!(got[0].data, "");
    }

    #[test]
    fn over_long_events_are_discarded_and_reading_goes_on() {
        let mut input = b"data: ".to_vec();
        input.extend(std::iter::repeat_n(b'x', 500));
        input.extend_from_slice(b"\n\ndata: ok\n\n");
        let got = events(&input, 64);
        assert_eq!(got.len(), 2);
        assert!(got[0].too_long);
        assert_eq!(got[0].data, "");
        assert_eq!(got[1], ev("", "ok", None));
        // Many data lines adding up past the limit also count as too long.
        let many = "data: 0123456789\n".repeat(20) + "\n";
        let got = events(many.as_bytes(), 64);
        assert!(got[0].too_long);
    }

    #[test]
    fn a_large_event_in_small_chunks_decodes_whole_at_every_split() {
        let big = "x".repeat(4 * 1024 * 1024);
        let mut input = format!("id: 1\r\ndata: {big}\r\ndata: tail\r\n\r\n").into_bytes();
        input.extend_from_slice(b"data: next\r\r");
        let want = vec![
            Event {
                data: format!("{big}\ntail"),
                id: Some("1".into()),
                ..Event::default()
            },
            ev("", "next", None),
        ];
        // Each byte is searched once, so even single bytes finish quickly; the odd sizes
        // put chunk ends inside "\r\n" and inside field names.
        for chunk in [1, 2, 3, 7, 1000, 4096, 65_537] {
            let got = events_in_chunks(&input, 16 * 1024 * 1024, chunk);
            assert_eq!(got.len(), want.len(), "chunk {chunk}");
            assert!(got == want, "chunk {chunk}: the events differ");
        }
    }

    #[test]
    fn over_long_lines_in_small_chunks_are_dropped_and_reading_goes_on() {
        let mut input = b"data: ".to_vec();
        input.extend(std::iter::repeat_n(b'y', 100_000));
        input.extend_from_slice(b"\r\n\r\ndata: ok\n\n");
        for chunk in [1, 5, 4096] {
            let got = events_in_chunks(&input, 1024, chunk);
            assert_eq!(got.len(), 2, "chunk {chunk}");
            assert!(got[0].too_long && got[0].data.is_empty(), "chunk {chunk}");
            assert_eq!(got[1], ev("", "ok", None), "chunk {chunk}");
        }
    }
}
