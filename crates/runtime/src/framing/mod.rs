//! Newline-delimited framing with one maximum line length.
//!
//! `write` holds the writer task that owns a write half.

use bytes::{Buf, BytesMut};
use futures::Stream;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncRead;
use tokio_util::codec::{Decoder, FramedRead};

mod write;
pub use write::{OutLine, write_lines};

/// One frame read from a peer.
#[derive(Debug, PartialEq)]
pub enum Frame {
    /// A complete line, without its newline.
    Line(String),
    /// A line longer than the limit. Its bytes were discarded up to the next newline,
    /// so memory never grows past the limit.
    TooLong,
    /// A line that is not UTF-8. It was discarded.
    NotUtf8,
}

/// Newline-delimited lines with a maximum length, over-long and non-UTF-8 lines reported as
/// frames instead of errors (a decoder error ends a `FramedRead` stream, and one bad line
/// from a peer must never end its connection).
///
/// This is `LinesCodec`'s algorithm (search on from where the last search stopped, skip an
/// over-long line to its end) with two differences that matter for large messages, which
/// is why it is not `LinesCodec` itself: the newline is found with `memchr` rather than a
/// byte loop, and a large line is handed over in the buffer it was read into instead of
/// being copied into a new `String` (the reader goes on in a fresh buffer sized for
/// another such line). A 1 MiB result then costs one UTF-8 check here, not a copy.
pub struct BoundedLines {
    max_length: usize,
    /// Bytes before this index of the buffer were searched and hold no newline.
    next_index: usize,
    /// Skipping the rest of an over-long line, up to its newline.
    discarding: bool,
}

impl BoundedLines {
    pub fn new(max_length: usize) -> Self {
        BoundedLines {
            max_length,
            next_index: 0,
            discarding: false,
        }
    }
}

/// A frame at least this long (or an over-long line) leaves the read buffer that large;
/// it is then given back, so one burst does not keep megabytes per connection. Smaller
/// lines keep the buffer, which steady traffic reuses.
const SHRINK_AFTER: usize = 2 * 1024 * 1024;
/// What is kept (and copied) when the buffer is given back: at most this much unread.
const KEEP: usize = 64 * 1024;
/// A line at least this long is handed over in its read buffer instead of copied.
const HAND_OVER: usize = 64 * 1024;
/// Room beyond a handed-over line's length in the buffer that takes the next such line,
/// so that a result rewritten in its own line for the agent (an envelope a little longer
/// than the server's: a longer id) does not have to move it to a larger allocation.
const HEADROOM: usize = 256;

impl Decoder for BoundedLines {
    type Item = Frame;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, Self::Error> {
        loop {
            let read_to = buf.len().min(self.max_length.saturating_add(1));
            let from = self.next_index.min(read_to);
            let window = buf.get(from..read_to).unwrap_or_default();
            let newline = memchr::memchr(b'\n', window).map(|at| from + at);
            match (self.discarding, newline) {
                (true, Some(at)) => {
                    buf.advance(at + 1);
                    self.discarding = false;
                    self.next_index = 0;
                }
                (true, None) => {
                    buf.advance(read_to);
                    self.next_index = 0;
                    if buf.is_empty() {
                        return Ok(None);
                    }
                }
                (false, Some(at)) => {
                    self.next_index = 0;
                    let frame = take_line(buf, at);
                    shrink_after(&frame, buf);
                    return Ok(Some(frame));
                }
                (false, None) if buf.len() > self.max_length => {
                    self.discarding = true;
                    let frame = Frame::TooLong;
                    shrink_after(&frame, buf);
                    return Ok(Some(frame));
                }
                (false, None) => {
                    self.next_index = read_to;
                    return Ok(None);
                }
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, Self::Error> {
        if let Some(frame) = self.decode(buf)? {
            return Ok(Some(frame));
        }
        self.next_index = 0;
        if self.discarding || buf.is_empty() || &buf[..] == b"\r" {
            buf.clear();
            return Ok(None);
        }
        // The last line had no newline: it ends where the input does.
        let len = buf.len();
        buf.extend_from_slice(b"\n");
        Ok(Some(take_line(buf, len)))
    }
}

/// Takes the line that ends with the newline at `at` off the front of `buf`.
fn take_line(buf: &mut BytesMut, at: usize) -> Frame {
    let mut bytes = if at >= HAND_OVER {
        // The buffer becomes the line; what follows it moves to a new buffer that can hold
        // another line this long (or a small one after a line long enough to give back).
        let rest = buf.get(at + 1..).unwrap_or_default();
        let room = if at < SHRINK_AFTER {
            at + 1 + HEADROOM
        } else {
            8 * 1024
        };
        let mut next = BytesMut::with_capacity(room.max(rest.len()));
        next.extend_from_slice(rest);
        let mut line = std::mem::replace(buf, next);
        line.truncate(at);
        // No copy when the buffer was not split before; otherwise one move to its start.
        Vec::from(line)
    } else {
        let line = buf.split_to(at + 1);
        line.get(..at).unwrap_or_default().to_vec()
    };
    if bytes.last() == Some(&b'\r') {
        bytes.pop();
    }
    crate::trim::note(bytes.len());
    if simdutf8::basic::from_utf8(&bytes).is_err() {
        return Frame::NotUtf8;
    }
    // SAFETY: simdutf8 has just found `bytes` to be valid UTF-8 (a full check, not a
    // hint). std's own `String::from_utf8` would check it again, a word at a time: for a
    // 1 MiB result that check was a quarter of the daemon's instructions.
    Frame::Line(unsafe { String::from_utf8_unchecked(bytes) })
}

/// Gives the read buffer back at once after a frame of [`SHRINK_AFTER`] or more, or an
/// over-long line.
fn shrink_after(frame: &Frame, buf: &mut BytesMut) {
    let large = match frame {
        Frame::Line(l) => l.len() >= SHRINK_AFTER,
        Frame::TooLong => true,
        Frame::NotUtf8 => false,
    };
    // Only after a large frame: a buffer that grew under steady traffic of smaller lines
    // is reused by the next ones, and giving it back each time would regrow it each time.
    if large {
        give_back(buf);
    }
}

/// The least room a read gets at the end of the read buffer.
const MIN_ROOM: usize = 512;

/// How long a reader stays quiet after a large frame before it gives its buffer back.
const QUIET: Duration = Duration::from_secs(1);

/// The frames of one peer: a `FramedRead` of [`BoundedLines`] that keeps its grown read
/// buffer while large messages keep coming (reused, never regrown) and gives it back once
/// the peer has been quiet for [`QUIET`] after the last one. Without that, one burst of
/// megabyte results would leave each reader holding megabytes for as long as it lives.
pub struct LineReader<R> {
    inner: FramedRead<R, BoundedLines>,
    /// Armed by a large frame; allocated then, so a reader that never sees one holds none.
    quiet: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<R: AsyncRead> LineReader<R> {
    pub fn new(read: R, max_length: usize) -> Self {
        Self::with_capacity(read, max_length, 8 * 1024)
    }

    pub fn with_capacity(read: R, max_length: usize, capacity: usize) -> Self {
        LineReader {
            inner: FramedRead::with_capacity(read, BoundedLines::new(max_length), capacity),
            quiet: None,
        }
    }
}

impl<R: AsyncRead + Unpin> Stream for LineReader<R> {
    type Item = std::io::Result<Frame>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        // `FramedRead` reads into whatever room is left at the buffer's end, which shrinks
        // as lines are taken off its front, down to a few bytes: a message then came in
        // two reads and two decodes. Between messages (nothing unread) room is made
        // first, which only moves the buffer's start back. A part-read line is left
        // alone: its buffer may be sized to it, and growing it would copy it.
        let buf = this.inner.read_buffer_mut();
        if buf.is_empty() && buf.capacity() < MIN_ROOM {
            buf.reserve(MIN_ROOM);
        }
        match Pin::new(&mut this.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let large = match &frame {
                    Frame::Line(l) => l.len() >= crate::trim::LARGE,
                    Frame::TooLong => true,
                    Frame::NotUtf8 => false,
                };
                if large {
                    let at = tokio::time::Instant::now() + QUIET;
                    match &mut this.quiet {
                        Some(sleep) => sleep.as_mut().reset(at),
                        None => this.quiet = Some(Box::pin(tokio::time::sleep_until(at))),
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                if let Some(sleep) = &mut this.quiet
                    && sleep.as_mut().poll(cx).is_ready()
                {
                    this.quiet = None;
                    give_back(this.inner.read_buffer_mut());
                }
                Poll::Pending
            }
            other => other,
        }
    }
}

/// Replaces a grown read buffer by a small copy of what is unread (at most [`KEEP`]). The
/// codec's search position refers to the unread bytes, which the copy keeps as they are.
fn give_back(buf: &mut BytesMut) {
    if buf.capacity() > KEEP && buf.len() <= KEEP {
        let mut small = BytesMut::with_capacity(8 * 1024);
        small.extend_from_slice(buf);
        *buf = small;
        crate::trim::gave_back();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;
    use write::DIRECT;

    fn frames(input: &[u8], max: usize) -> Vec<Frame> {
        let mut codec = BoundedLines::new(max);
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(f) = codec.decode(&mut buf).unwrap() {
            out.push(f);
        }
        while let Some(f) = codec.decode_eof(&mut buf).unwrap() {
            out.push(f);
        }
        out
    }

    #[tokio::test]
    async fn queued_lines_small_and_large_are_written_in_order() {
        let (tx, rx) = mpsc::channel(8);
        let big = "x".repeat(DIRECT + 1);
        for line in ["a", big.as_str(), "b", "", big.as_str()] {
            tx.send(line.to_owned()).await.unwrap();
        }
        drop(tx);
        let mut out = Vec::new();
        let n = write_lines(&mut out, rx).await.unwrap();
        let want = format!("a\n{big}\nb\n\n{big}\n");
        assert_eq!(String::from_utf8(out).unwrap(), want);
        assert_eq!(n, want.len() as u64);
    }

    #[tokio::test]
    async fn lines_cross_a_writer_that_takes_a_few_bytes_at_a_time() {
        use tokio::io::AsyncReadExt;
        let (tx, rx) = mpsc::channel(8);
        let big = "z".repeat(DIRECT + 3);
        for line in ["first", big.as_str(), "last"] {
            tx.send(line.to_owned()).await.unwrap();
        }
        drop(tx);
        // A 7-byte pipe: every write is partial, and a part can end inside a line.
        let (near, mut far) = tokio::io::duplex(7);
        let mut got = String::new();
        let (written, read) = tokio::join!(write_lines(near, rx), far.read_to_string(&mut got));
        read.unwrap();
        let want = format!("first\n{big}\nlast\n");
        assert_eq!(got, want);
        assert_eq!(written.unwrap(), want.len() as u64);
    }

    #[test]
    fn the_read_buffer_is_given_back_after_a_large_line_and_nothing_is_lost() {
        let mut codec = BoundedLines::new(8 * 1024 * 1024);
        let big = "x".repeat(3 * 1024 * 1024);
        let mut buf = BytesMut::from(format!("{big}\npartial").as_bytes());
        assert_eq!(codec.decode(&mut buf).unwrap(), Some(Frame::Line(big)));
        assert!(buf.capacity() <= 64 * 1024, "{}", buf.capacity());
        assert_eq!(&buf[..], b"partial");
        buf.extend_from_slice(b" line\n");
        assert_eq!(
            codec.decode(&mut buf).unwrap(),
            Some(Frame::Line("partial line".into()))
        );
    }

    #[test]
    fn over_long_and_non_utf8_lines_become_frames_and_reading_goes_on() {
        let l = |s: &str| Frame::Line(s.to_owned());
        assert_eq!(frames(b"a\nb\r\n", 10), vec![l("a"), l("b")]);
        assert_eq!(
            frames(b"short\n0123456789abcdef\nnext\n", 10),
            vec![l("short"), Frame::TooLong, l("next")]
        );
        assert_eq!(frames(b"\xff\xfe\nok\n", 10), vec![Frame::NotUtf8, l("ok")]);
        assert_eq!(frames(b"tail", 10), vec![l("tail")]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_gives_its_grown_buffer_back_once_quiet_after_a_large_line() {
        use futures::StreamExt;
        use tokio::io::AsyncWriteExt;
        let (mut tx, rx) = tokio::io::duplex(4 * 1024 * 1024);
        let mut reader = LineReader::new(rx, 8 * 1024 * 1024);
        let big = "y".repeat(1024 * 1024);
        tx.write_all(format!("{big}\npart").as_bytes())
            .await
            .unwrap();
        assert_eq!(reader.next().await.unwrap().unwrap(), Frame::Line(big));
        let grown = reader.inner.read_buffer().capacity();
        assert!(grown > KEEP, "the buffer grew to hold the line: {grown}");
        // Nothing arrives: the reader waits, and its quiet period passes meanwhile.
        let waited = tokio::time::timeout(QUIET * 3, reader.next()).await;
        assert!(waited.is_err(), "no frame was complete: {waited:?}");
        let kept = reader.inner.read_buffer().capacity();
        assert!(kept <= KEEP, "the buffer was given back: {kept}");
        tx.write_all(b"ial\n").await.unwrap();
        assert_eq!(
            reader.next().await.unwrap().unwrap(),
            Frame::Line("partial".into())
        );
    }

    #[test]
    fn large_lines_are_handed_over_whole_between_small_ones_split_anywhere() {
        let a = "a".repeat(HAND_OVER + 5);
        let c = "c".repeat(3 * HAND_OVER);
        let input = format!("s1\n{a}\r\nb\n{c}\nt\r\r\n?");
        let mut input = input.into_bytes();
        let last = input.len() - 1;
        input[last] = 0xff;
        let want = vec![
            Frame::Line("s1".into()),
            Frame::Line(a),
            Frame::Line("b".into()),
            Frame::Line(c),
            Frame::Line("t\r".into()),
            Frame::NotUtf8,
        ];
        for chunk in [1 << 20, 7, 4096, 65_536, 100_003] {
            let mut codec = BoundedLines::new(1 << 20);
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            for piece in input.chunks(chunk) {
                buf.extend_from_slice(piece);
                while let Some(f) = codec.decode(&mut buf).unwrap() {
                    got.push(f);
                }
            }
            while let Some(f) = codec.decode_eof(&mut buf).unwrap() {
                got.push(f);
            }
            assert_eq!(got, want, "chunks of {chunk}");
        }
    }

    #[test]
    fn an_over_long_line_is_one_frame_and_the_next_line_is_whole() {
        let long = "z".repeat(HAND_OVER * 2);
        let input = format!("{long}\nafter\n");
        for chunk in [5, 8192, 1 << 20] {
            let mut codec = BoundedLines::new(HAND_OVER);
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            for piece in input.as_bytes().chunks(chunk) {
                buf.extend_from_slice(piece);
                while let Some(f) = codec.decode(&mut buf).unwrap() {
                    got.push(f);
                }
            }
            assert_eq!(got, vec![Frame::TooLong, Frame::Line("after".into())]);
        }
    }
}
