//! The writer task that owns a write half.
//!
//! Queued lines written in batches, a large line from its own buffer.

use std::io::IoSlice;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// Something a line writer can write: a line, or a message with nothing to write on a
/// byte stream (an HTTP-only instruction), which is skipped.
pub trait OutLine {
    fn line(&self) -> Option<&str>;
}

impl OutLine for String {
    fn line(&self) -> Option<&str> {
        Some(self)
    }
}

impl<T: OutLine> OutLine for crate::budget::Charged<T> {
    fn line(&self) -> Option<&str> {
        (**self).line()
    }
}

/// A line at least this long is written from its own buffer instead of being copied
/// into the batch first: large results are copied once less.
pub(super) const DIRECT: usize = 64 * 1024;

/// Writes each queued line followed by a newline. Everything already queued is written
/// before one flush, so a burst of messages costs one syscall, not one each. Returns when
/// the queue closes (every sender dropped) or a write fails (the peer went away), with the
/// bytes written.
pub async fn write_lines<W: AsyncWrite + Unpin, T: OutLine>(
    mut out: W,
    mut rx: mpsc::Receiver<T>,
) -> std::io::Result<u64> {
    // Allocated by the first batch, not up front: an idle connection holds only what its
    // largest recent batch needed.
    let mut buf = Vec::new();
    let mut written = 0u64;
    while let Some(first) = rx.recv().await {
        buf.clear();
        let mut large = None;
        let mut next = Some(first);
        while let Some(item) = next.take() {
            match item.line() {
                Some(line) if line.len() >= DIRECT => {
                    large = Some(item);
                    break;
                }
                line => push_line(&mut buf, line),
            }
            if buf.len() >= 1 << 20 {
                break;
            }
            next = rx.try_recv().ok();
        }
        let large_line = large.as_ref().and_then(|l| l.line()).unwrap_or_default();
        let mut parts = [
            IoSlice::new(&buf),
            IoSlice::new(large_line.as_bytes()),
            IoSlice::new(if large.is_some() { b"\n" } else { b"" }),
        ];
        written += write_all_vectored(&mut out, &mut parts).await?;
        if !buf.is_empty() || large.is_some() {
            out.flush().await?;
        }
        // A burst may have grown the batch to a megabyte; it goes back once the burst
        // is over.
        if buf.capacity() > 64 * 1024 && rx.is_empty() {
            buf = Vec::new();
        }
    }
    let _ = out.shutdown().await; // the peer may already be gone; nothing left to tell it
    Ok(written)
}

/// Writes every part, in as few syscalls as the kernel allows: a batch, a large line and
/// its newline go in one `writev` instead of three `write`s. Returns the bytes written.
async fn write_all_vectored<W: AsyncWrite + Unpin>(
    out: &mut W,
    parts: &mut [IoSlice<'_>],
) -> std::io::Result<u64> {
    let mut left = parts;
    let mut written = 0u64;
    IoSlice::advance_slices(&mut left, 0); // skips empty parts
    while !left.is_empty() {
        let n = out.write_vectored(left).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        written += n as u64;
        IoSlice::advance_slices(&mut left, n);
    }
    Ok(written)
}

fn push_line(buf: &mut Vec<u8>, line: Option<&str>) {
    if let Some(line) = line {
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
    }
}
