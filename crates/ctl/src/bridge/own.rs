//! The daemon's lines meant for the bridge itself, taken out of what the client gets.
//!
//! The one such line is the daemon's closing note (`CLOSING_NOTIFICATION`, sent only to a
//! connection that said it is a bridge), which says how many of the bridge's lines the
//! daemon took. Found with one `memmem` over each read: the daemon writes it as a line
//! of its own, starting with [`NOTE_START`], and a quote inside any JSON string is
//! escaped, so those bytes cannot occur elsewhere. A read that ends inside a line that
//! may be the note keeps that line back until its end comes.

use memchr::memmem;

/// How the daemon's closing note starts (`mcpd_wire::jsonrpc::notification_line`).
pub const NOTE_START: &[u8] = br#"{"jsonrpc":"2.0","method":"notifications/mcpd/closing""#;

/// The filter's state between reads.
#[derive(Default)]
pub struct OwnLines {
    /// The start of a line kept back: it may be the note.
    carry: Vec<u8>,
    /// The last read ended inside a line (so its next bytes do not start one).
    mid_line: bool,
}

impl OwnLines {
    /// Whether the bytes of the next read (after any kept back) begin a line.
    fn carry_started_line(&self) -> bool {
        !self.mid_line
    }

    /// [`OwnLines::filter_vec`] on the first `len` bytes of `buf`, which are left as
    /// they are (no copy) unless they hold or may start the note. The new length.
    pub fn filter(&mut self, buf: &mut Vec<u8>, len: usize) -> (Option<u64>, usize) {
        let bytes = buf.get(..len).unwrap_or_default();
        let busy = !self.carry.is_empty()
            || memmem::find(bytes, NOTE_START).is_some()
            || self.tail_may_be_note(bytes);
        if !busy {
            if let Some(&last) = bytes.last() {
                self.mid_line = last != b'\n';
            }
            return (None, len);
        }
        buf.truncate(len);
        let taken = self.filter_vec(buf);
        (taken, buf.len())
    }

    /// Where the trailing part of a line in `bytes` starts, if it may be the note.
    fn tail_start(&self, bytes: &[u8]) -> Option<usize> {
        let start = match memchr::memrchr(b'\n', bytes) {
            Some(nl) => nl + 1,
            None if !self.mid_line => 0,
            None => return None,
        };
        let tail = bytes.get(start..).unwrap_or_default();
        let n = tail.len().min(NOTE_START.len());
        (!tail.is_empty() && tail.get(..n) == NOTE_START.get(..n)).then_some(start)
    }

    fn tail_may_be_note(&self, bytes: &[u8]) -> bool {
        self.tail_start(bytes).is_some()
    }

    /// Filters `bytes`, just read from the daemon, in place: the note is removed (its
    /// `taken` returned), and a trailing part of a line that may be the note is kept
    /// back for the next read. Bytes kept back from the last read come first.
    pub fn filter_vec(&mut self, bytes: &mut Vec<u8>) -> Option<u64> {
        if !self.carry.is_empty() {
            // What was kept back starts a line.
            self.mid_line = false;
            let mut joined = std::mem::take(&mut self.carry);
            joined.extend_from_slice(bytes);
            *bytes = joined;
        }
        // Whole lines are taken out, so whether the bytes end inside a line is known now.
        let ends_mid = bytes.last().map(|&b| b != b'\n');
        let mut taken = None;
        let finder = memmem::Finder::new(NOTE_START);
        let mut from = 0;
        let starts_line = self.carry_started_line();
        while let Some(at) = finder.find(bytes.get(from..).unwrap_or_default()) {
            let at = from + at;
            // Only at a line's start: the same bytes nested in a result are not the note.
            let line_start = match at.checked_sub(1) {
                None => starts_line,
                Some(before) => bytes.get(before) == Some(&b'\n'),
            };
            if !line_start {
                from = at + 1;
                continue;
            }
            let Some(end) = memchr::memchr(b'\n', bytes.get(at..).unwrap_or_default()) else {
                break; // kept back below
            };
            let line = bytes.get(at..at + end).unwrap_or_default();
            if let Some(n) = taken_of(line) {
                taken = Some(n);
            }
            bytes.drain(at..=at + end);
            from = at;
        }
        // A trailing line that is, or may grow into, the note waits for its end.
        if let Some(start) = self.tail_start(bytes) {
            self.carry = bytes.split_off(start);
        }
        self.mid_line = self.carry.is_empty() && ends_mid.unwrap_or(self.mid_line);
        taken
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

    #[test]
    fn the_note_is_taken_out_whole_or_across_reads() {
        let mut f = OwnLines::default();
        let mut b = format!("{{\"a\":1}}\n{NOTE}").into_bytes();
        assert_eq!(f.filter_vec(&mut b), Some(7));
        assert_eq!(b, b"{\"a\":1}\n");
        for cut in [1, 10, 40, NOTE.len() - 1] {
            let mut f = OwnLines::default();
            let text = format!("x\n{NOTE}");
            let (one, two) = text.split_at(2 + cut);
            let mut first = one.as_bytes().to_vec();
            assert_eq!(f.filter_vec(&mut first), None);
            assert_eq!(first, b"x\n", "cut at {cut}");
            let mut second = two.as_bytes().to_vec();
            assert_eq!(f.filter_vec(&mut second), Some(7), "cut at {cut}");
            assert!(second.is_empty());
        }
    }

    #[test]
    fn the_same_bytes_inside_a_line_are_not_the_note() {
        let mut f = OwnLines::default();
        let inner = NOTE.trim_end();
        let mut b = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{inner}}}\n").into_bytes();
        let before = b.clone();
        assert_eq!(f.filter_vec(&mut b), None);
        assert_eq!(b, before);
    }

    #[test]
    fn other_lines_pass_even_when_cut() {
        let mut f = OwnLines::default();
        let mut b = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"t\":\"notifications/mcpd/closing\"}}\n{\"jsonrpc\":\"2.0\",\"id\"".to_vec();
        let before = b.clone();
        assert_eq!(f.filter_vec(&mut b), None);
        assert_eq!(
            b, before,
            "a prefix that cannot be the note is not kept back"
        );
        // Inside a line (no line starts in this read): passed on.
        let mut c = b":2}\n".to_vec();
        assert_eq!(f.filter_vec(&mut c), None);
        assert_eq!(c, b":2}\n");
    }
}
