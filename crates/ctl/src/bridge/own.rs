//! The daemon's line meant for the bridge itself, taken out of what the client gets.
//!
//! The one such line is the daemon's closing note (`CLOSING_NOTIFICATION`, sent only to a
//! connection that said it is a bridge), which says how many of the bridge's lines the
//! daemon took. It is the last line the daemon sends before it shuts its side, so it ends
//! the last read: only the end of each read is looked at (at most [`WINDOW`] bytes, the
//! note being shorter), never the bytes that pass. A read that ends inside a line that
//! may be the note keeps that line back until its end comes.

/// How the daemon's closing note starts (`mcpd_wire::jsonrpc::notification_line`).
pub const NOTE_START: &[u8] = br#"{"jsonrpc":"2.0","method":"notifications/mcpd/closing""#;
/// How far back from a read's end the note is looked for: it is under 128 bytes.
const WINDOW: usize = 256;

/// The filter's state between reads.
#[derive(Default)]
pub struct OwnLines {
    /// The start of a line kept back: it may be the note.
    carry: Vec<u8>,
    /// The last read ended inside a line (so the next one does not start a line).
    mid_line: bool,
}

impl OwnLines {
    /// Looks at the end of the `len` bytes just read into `buf`: a closing note there is
    /// taken out (its `taken` returned), and a trailing part of a line that may be the
    /// note is kept back for the next read. Returns the count of bytes for the client
    /// (at the front of `buf`, which holds bytes kept back from the last read first).
    pub fn filter(&mut self, buf: &mut Vec<u8>, mut len: usize) -> (Option<u64>, usize) {
        let mut starts_line = !self.mid_line;
        if !self.carry.is_empty() {
            let mut joined = std::mem::take(&mut self.carry);
            joined.extend_from_slice(buf.get(..len).unwrap_or_default());
            len = joined.len();
            *buf = joined;
            starts_line = true;
        }
        let bytes = buf.get(..len).unwrap_or_default();
        let ends_line = bytes.last() == Some(&b'\n');
        if !bytes.is_empty() {
            self.mid_line = !ends_line;
        }
        let body_end = if ends_line { len - 1 } else { len };
        let low = body_end.saturating_sub(WINDOW);
        let last_start = match memchr::memrchr(b'\n', bytes.get(low..body_end).unwrap_or_default())
        {
            Some(i) => low + i + 1,
            None if low == 0 && starts_line => 0,
            None => return (None, len), // a long line: not the note
        };
        let last = bytes.get(last_start..body_end).unwrap_or_default();
        if ends_line {
            if last.starts_with(NOTE_START) {
                self.mid_line = false;
                return (taken_of(last), last_start);
            }
        } else {
            let n = last.len().min(NOTE_START.len());
            if !last.is_empty() && last.get(..n) == NOTE_START.get(..n) {
                self.carry = bytes.get(last_start..).unwrap_or_default().to_vec();
                self.mid_line = false;
                return (None, last_start);
            }
        }
        (None, len)
    }
}

fn taken_of(line: &[u8]) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    v.pointer("/params/taken")?.as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOTE: &str = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/mcpd/closing\",\"params\":{\"taken\":7}}\n";

    /// Runs the filter on one read; returns what the client gets and the note's count.
    fn read(f: &mut OwnLines, bytes: &[u8]) -> (Vec<u8>, Option<u64>) {
        let mut buf = bytes.to_vec();
        buf.resize(bytes.len() + 64, 0); // a read buffer is longer than what was read
        let (taken, n) = f.filter(&mut buf, bytes.len());
        buf.truncate(n);
        (buf, taken)
    }

    #[test]
    fn the_note_is_taken_out_whole_or_across_reads() {
        let mut f = OwnLines::default();
        let (out, taken) = read(&mut f, format!("{{\"a\":1}}\n{NOTE}").as_bytes());
        assert_eq!((out.as_slice(), taken), (&b"{\"a\":1}\n"[..], Some(7)));
        for cut in [1, 10, 40, NOTE.len() - 1] {
            let mut f = OwnLines::default();
            let text = format!("x\n{NOTE}");
            let (one, two) = text.split_at(2 + cut);
            let (out, taken) = read(&mut f, one.as_bytes());
            assert_eq!((out.as_slice(), taken), (&b"x\n"[..], None), "cut at {cut}");
            let (out, taken) = read(&mut f, two.as_bytes());
            assert_eq!((out.as_slice(), taken), (&b""[..], Some(7)), "cut at {cut}");
        }
    }

    #[test]
    fn the_same_bytes_inside_a_line_are_not_the_note() {
        let mut f = OwnLines::default();
        let inner = NOTE.trim_end();
        let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{inner}}}\n");
        let (out, taken) = read(&mut f, line.as_bytes());
        assert_eq!((out, taken), (line.into_bytes(), None));
    }

    #[test]
    fn other_lines_pass_even_when_cut() {
        let mut f = OwnLines::default();
        let first = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n{\"jsonrpc\":\"2.0\",\"id\"";
        let (out, taken) = read(&mut f, first);
        assert_eq!(
            (out.as_slice(), taken),
            (&first[..], None),
            "cannot be the note: passed on"
        );
        // Inside a line (no line starts in this read): passed on.
        let (out, taken) = read(&mut f, b":2}\n");
        assert_eq!((out.as_slice(), taken), (&b":2}\n"[..], None));
    }
}
