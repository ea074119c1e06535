//! An agent's Unix socket, split so the runtime watches it for writability only while a write waits for room.
//!
//! Why not tokio's `UnixStream`: it registers a socket for reading and writing at once,
//! edge-triggered, for as long as it lives. The kernel reports a socket writable again
//! each time its peer reads from it, so every reply the agent read woke the daemon's
//! worker once more, with nothing to do: a one-agent echo loop measured 2.85 voluntary
//! context switches of the worker per call, where two (the request, the server's answer)
//! are needed. Here the read side is registered for reading only. The write side writes
//! straight to the socket, and only when the socket is full does it register (a
//! duplicate descriptor, for writability) and wait; the registration goes at the next
//! flush, which `framing::write_lines` does after each batch.

use std::io::{self, IoSlice, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// Takes a connected socket off the runtime's standing registration and splits it.
pub fn split(stream: tokio::net::UnixStream) -> io::Result<(ReadSide, WriteSide)> {
    // Non-blocking, as tokio left it; the duplicate shares that flag with it.
    let stream = stream.into_std()?;
    let write = stream.try_clone()?;
    let read = register(stream, Interest::READABLE).map_err(|(_, e)| e)?;
    Ok((
        ReadSide { fd: read },
        WriteSide {
            idle: Some(write),
            waiting: None,
        },
    ))
}

/// Registers `stream` with the runtime for `interest` only; on failure, gives it back.
fn register(
    stream: UnixStream,
    interest: Interest,
) -> Result<AsyncFd<UnixStream>, (UnixStream, io::Error)> {
    // SAFETY: a `UnixStream` owns its descriptor, which stays open and the same for as
    // long as the `AsyncFd` holds the stream (until it is dropped or `into_inner`).
    unsafe { AsyncFd::register_with_interest(stream, interest) }.map_err(|e| e.into_parts())
}

/// The reading side, registered for reading only.
pub struct ReadSide {
    fd: AsyncFd<UnixStream>,
}

impl AsyncRead for ReadSide {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            let mut guard = ready!(this.fd.poll_read_ready(cx))?;
            let fd = guard.get_inner().as_raw_fd();
            // SAFETY: `recv` writes at most `len` bytes at `dst` and never reads them, so
            // the unfilled part may be uninitialised (the framing's read buffer is spare
            // capacity); tokio's own socket reads work the same way. Zeroing it first, as
            // the safe `initialize_unfilled` would, costs a memset of the whole buffer per
            // read.
            let unfilled = unsafe { buf.unfilled_mut() };
            let len = unfilled.len();
            let dst = unfilled.as_mut_ptr().cast::<nix::libc::c_void>();
            match guard.try_io(|_| {
                // SAFETY: `dst` and `len` describe the unfilled part of `buf` (above).
                let n = unsafe { nix::libc::recv(fd, dst, len, 0) };
                usize::try_from(n).map_err(|_| io::Error::last_os_error())
            }) {
                Ok(Ok(n)) => {
                    // A short read emptied the socket, so more data will be a new edge:
                    // readiness is cleared now instead of by one more `recv` that would
                    // only say "would block" (tokio's own streams do the same).
                    if n > 0 && n < len {
                        guard.clear_ready();
                    }
                    // SAFETY: `recv` initialised the first `n` bytes of the unfilled part.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => {}
            }
        }
    }
}

/// The writing side: writes directly, and is registered for writability only while a
/// write waits for room in the socket.
pub struct WriteSide {
    /// Not registered: writes go straight to the socket.
    idle: Option<UnixStream>,
    /// Registered, until the next flush.
    waiting: Option<AsyncFd<UnixStream>>,
}

impl WriteSide {
    /// The socket, registered for writability from now until the next flush.
    fn register(&mut self) -> io::Result<&AsyncFd<UnixStream>> {
        if let Some(stream) = self.idle.take() {
            match register(stream, Interest::WRITABLE) {
                Ok(fd) => self.waiting = Some(fd),
                Err((stream, e)) => {
                    self.idle = Some(stream);
                    return Err(e);
                }
            }
        }
        self.waiting
            .as_ref()
            .ok_or_else(|| io::Error::other("the agent's socket is gone"))
    }
}

impl AsyncWrite for WriteSide {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(stream) = &this.idle {
            match (&*stream).write_vectored(bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                result => return Poll::Ready(result),
            }
        }
        let fd = this.register()?;
        loop {
            let mut guard = ready!(fd.poll_write_ready(cx))?;
            if let Ok(result) = guard.try_io(|fd| fd.get_ref().write_vectored(bufs)) {
                return Poll::Ready(result);
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// A socket holds nothing back to flush; the writability registration goes, so the
    /// agent reading what was written does not wake the daemon.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(fd) = this.waiting.take() {
            this.idle = Some(fd.into_inner());
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.as_mut().poll_flush(cx))?;
        match &self.idle {
            Some(stream) => Poll::Ready(stream.shutdown(std::net::Shutdown::Write)),
            None => Poll::Ready(Ok(())),
        }
    }
}

impl Drop for WriteSide {
    /// As tokio's write half does: the agent reads the end of the stream even while the
    /// reading side is still open.
    fn drop(&mut self) {
        let stream = self
            .idle
            .as_ref()
            .or(self.waiting.as_ref().map(AsyncFd::get_ref));
        if let Some(stream) = stream {
            let _ = stream.shutdown(std::net::Shutdown::Write); // the agent may be gone
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_write_larger_than_the_socket_holds_waits_for_the_reader_then_all_arrives() {
        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        let (_, mut write) = split(a).unwrap();
        let (mut read, _) = split(b).unwrap();
        // Several times what a socket's buffer holds, so writes wait for room.
        let sent: Vec<u8> = (0..8 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        let writer = async {
            write.write_all(&sent).await.unwrap();
            write.flush().await.unwrap();
            assert!(write.waiting.is_none(), "flush ends the registration");
            write.shutdown().await.unwrap();
        };
        let mut got = Vec::new();
        let reader = read.read_to_end(&mut got);
        let ((), n) = tokio::join!(writer, reader);
        assert_eq!(n.unwrap(), sent.len());
        assert!(got == sent, "the bytes arrive in order, none lost");
    }

    #[tokio::test]
    async fn short_reads_and_an_end_of_stream_are_seen() {
        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        let (mut read, _) = split(a).unwrap();
        let (_, mut write) = split(b).unwrap();
        write.write_all(b"one\n").await.unwrap();
        let mut buf = [0u8; 64];
        let n = read.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"one\n");
        // After a short read (readiness cleared) the next line still wakes the reader.
        write.write_all(b"two\n").await.unwrap();
        let n = read.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"two\n");
        write.shutdown().await.unwrap();
        assert_eq!(read.read(&mut buf).await.unwrap(), 0);
    }
}
