//! Sockets: a listener whose connections all fail once the fixture stops (so `stop` really
//! closes them), and the `stall` server that reads requests and never answers.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// A TCP listener for `axum::serve` whose connections end when `shutdown` is cancelled,
/// however busy they are (graceful shutdown alone would wait for open streams).
pub(super) struct ClosingListener {
    pub inner: TcpListener,
    pub shutdown: CancellationToken,
}

impl axum::serve::Listener for ClosingListener {
    type Io = ClosingStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    let stop = Box::pin(self.shutdown.clone().cancelled_owned());
                    return (ClosingStream { stream, stop }, addr);
                }
                // Out of file descriptors and the like: back off, as axum's own listener does.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A connection that fails every read and write once the fixture stops. Polling `stop` on
/// each read registers the connection's task to be woken by the stop.
pub(super) struct ClosingStream {
    stream: TcpStream,
    stop: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl ClosingStream {
    fn stopped(&mut self, cx: &mut Context<'_>) -> bool {
        self.stop.as_mut().poll(cx).is_ready()
    }
}

fn aborted() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, "fixture stopped")
}

impl AsyncRead for ClosingStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.stopped(cx) {
            return Poll::Ready(Err(aborted()));
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for ClosingStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.stopped(cx) {
            return Poll::Ready(Err(aborted()));
        }
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Accepts connections and reads whatever arrives, answering nothing, until `shutdown`; then
/// closes every connection.
pub(super) async fn stall(listener: TcpListener, shutdown: CancellationToken) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    connections.spawn(swallow(stream));
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    // Dropping the set aborts every connection task, closing its socket.
    drop(connections);
}

async fn swallow(mut stream: TcpStream) {
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
}
