//! `mcpd connect`: the byte pump between a stdio client and the daemon's socket.
//!
//! Every stdio client reaches the daemon through this process, so it does as little as
//! a relay can: after the optional profile handshake it never looks at the bytes. Each
//! direction is one OS thread in a blocking loop, so a request costs one wake-up and, when
//! stdin is a pipe (clients that spawn it with `pipe(2)`: Python, Rust, Go), one
//! `splice(2)` that moves the bytes inside the kernel: no user-space buffer, no second
//! syscall. Otherwise (the replies, socketpairs, which Node.js uses for a child's stdio,
//! a terminal) it is `read`/`write` through a large buffer. There is no async runtime here:
//! `tokio::io::stdin` reads through the blocking pool (a thread hand-off per read) and
//! `tokio::io::copy` copies 8 KiB at a time, which cost 40 % of the throughput at eight
//! requests in flight. Nothing is buffered in this process, so nothing is ever flushed.

use super::{CTL_TIMEOUT, CtlError, refusal};
use crate::jsonrpc::{self, Id, Message};
use nix::errno::Errno;
use nix::fcntl::{SpliceFFlags, splice};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// Most bytes one `splice` moves; a pipe holds 64 KiB unless its owner made it larger.
const SPLICE_CHUNK: usize = 1 << 20;
/// The buffer of the `read`/`write` path: a 1 MiB result crosses in a few reads.
const COPY_BUF: usize = 256 * 1024;
/// How long replies may still come after stdin ended before the bridge gives up on them.
const LINGER: Duration = Duration::from_secs(5);
/// The longest answer to the profile request: it is a small JSON-RPC response.
const MAX_ANSWER: usize = 64 * 1024;

/// `mcpd connect`: copies stdin to the socket and the socket to stdout until either side
/// ends. When stdin ends the socket's write side is shut down so the daemon sees the
/// agent leave; replies still in the socket are copied out before exiting (for at most
/// `LINGER`). A client that closed stdout has left: that ends the bridge quietly.
pub fn bridge(socket: &Path, profile: Option<&str>) -> Result<(), CtlError> {
    let stream = UnixStream::connect(socket).map_err(|source| CtlError::NotRunning {
        path: socket.to_owned(),
        source,
    })?;
    // Chosen before the client says anything, so every answer it gets is filtered.
    let early = match profile {
        Some(name) => choose_profile(&stream, name)?,
        None => Vec::new(),
    };
    let to_daemon = stream.try_clone()?;
    let (done, ended) = mpsc::channel();
    let up_done = done.clone();
    let stdin = io::stdin();
    std::thread::Builder::new()
        .name("stdin-to-socket".into())
        .spawn(move || {
            let end = pump(stdin.as_fd(), to_daemon.as_fd());
            let _ = to_daemon.shutdown(Shutdown::Write); // the daemon may already be gone
            let _ = up_done.send(Way::Up(end)); // the bridge may already be ending
        })?;
    let stdout = io::stdout();
    std::thread::Builder::new()
        .name("socket-to-stdout".into())
        .spawn(move || {
            let end = match write_all(stdout.as_fd(), &early) {
                Ok(()) => pump(stream.as_fd(), stdout.as_fd()),
                Err(e) => End::of(e),
            };
            let _ = done.send(Way::Down(end)); // the bridge may already be ending
        })?;
    match ended.recv() {
        Ok(Way::Down(end)) => end.into_result(),
        Ok(Way::Up(End::Failed(e))) => Err(CtlError::Io(e)),
        Ok(Way::Up(End::Eof | End::Gone)) => match ended.recv_timeout(LINGER) {
            Ok(Way::Down(end)) => end.into_result(),
            _ => Ok(()),
        },
        Err(_) => Ok(()), // both threads are gone; they only exit through a send
    }
}

/// Sends the `mcpd/profile` request and reads its answer line. Bytes the daemon sent after
/// that line are returned, to be written to stdout before anything else.
fn choose_profile(stream: &UnixStream, name: &str) -> Result<Vec<u8>, CtlError> {
    let id = Id::Str("mcpd-connect-profile".into());
    let params = serde_json::json!({ "name": name });
    let line = jsonrpc::request_line(&id, "mcpd/profile", Some(&params)) + "\n";
    let mut writer = stream;
    let written = writer.write_all(line.as_bytes());
    stream.set_read_timeout(Some(CTL_TIMEOUT))?;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.iter().position(|&b| b == b'\n') {
            break i;
        }
        if buf.len() > MAX_ANSWER {
            return Err(CtlError::Unexpected(format!(
                "an answer to the profile request longer than {MAX_ANSWER} bytes"
            )));
        }
        let mut reader = stream;
        match reader.read(&mut chunk) {
            Ok(0) => return Err(written.err().map_or(CtlError::Closed, CtlError::Io)),
            Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(CtlError::Timeout(CTL_TIMEOUT));
            }
            Err(e) => return Err(CtlError::Io(e)),
        }
    };
    stream.set_read_timeout(None)?;
    let rest = buf.split_off(end + 1);
    let answer = String::from_utf8_lossy(&buf);
    match jsonrpc::parse(answer.trim_end()) {
        Ok(Message::Response(r)) if r.id == id => {
            r.outcome.map_err(|e| CtlError::Rpc {
                code: e.code,
                message: e.message,
            })?;
            Ok(rest)
        }
        // A daemon that refuses the connection says why with a null id, then closes.
        _ => Err(refusal(&answer).unwrap_or_else(|| CtlError::Unexpected(answer.into_owned()))),
    }
}

/// Which direction ended, and how.
enum Way {
    Up(End),
    Down(End),
}

/// How one direction of the pump ended.
enum End {
    /// Its source reached end of file.
    Eof,
    /// Its destination's reader left (`EPIPE`, `ECONNRESET`): nobody wants more bytes.
    Gone,
    Failed(io::Error),
}

impl End {
    fn into_result(self) -> Result<(), CtlError> {
        match self {
            End::Eof | End::Gone => Ok(()),
            End::Failed(e) => Err(CtlError::Io(e)),
        }
    }

    fn of(e: Errno) -> End {
        match e {
            Errno::EPIPE | Errno::ECONNRESET => End::Gone,
            e => End::Failed(io::Error::from(e)),
        }
    }
}

/// Copies `from` to `to` until `from` ends or `to` is gone. Only a pipe source is spliced:
/// splicing from the socket into stdout's pipe (Linux 6.18) left replies waiting in the
/// socket until more bytes arrived (`mcpd_connect_bridges_stdio_to_the_socket` hung), so
/// the socket is read with `read(2)`, one syscall more per reply.
fn pump(from: BorrowedFd<'_>, to: BorrowedFd<'_>) -> End {
    if is_pipe(from) {
        match splice_all(from, to) {
            // The kernel cannot splice these two (a file opened for appending, say);
            // nothing moved on a failed call, so copying picks up where it stopped.
            Err(Errno::EINVAL) => {}
            Err(e) => return End::of(e),
            Ok(()) => return End::Eof,
        }
    }
    copy_all(from, to)
}

fn is_pipe(fd: BorrowedFd<'_>) -> bool {
    use nix::sys::stat::{SFlag, fstat};
    fstat(fd.as_raw_fd())
        .is_ok_and(|s| SFlag::from_bits_truncate(s.st_mode) & SFlag::S_IFMT == SFlag::S_IFIFO)
}

/// Splices until `from` ends. A non-blocking end (a descriptor the client shares with
/// other processes may be) is waited for with `poll`.
fn splice_all(from: BorrowedFd<'_>, to: BorrowedFd<'_>) -> Result<(), Errno> {
    loop {
        match splice(
            from,
            None,
            to,
            None,
            SPLICE_CHUNK,
            SpliceFFlags::SPLICE_F_MOVE,
        ) {
            Ok(0) => return Ok(()),
            Ok(_) | Err(Errno::EINTR) => {}
            // Either end may be the one that is not ready: wait for both, in turn.
            Err(Errno::EAGAIN) => {
                wait(PollFd::new(from, PollFlags::POLLIN))?;
                wait(PollFd::new(to, PollFlags::POLLOUT))?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Copies through one buffer until `from` ends.
fn copy_all(from: BorrowedFd<'_>, to: BorrowedFd<'_>) -> End {
    let mut buf = vec![0u8; COPY_BUF];
    loop {
        let n = match nix::unistd::read(from.as_raw_fd(), &mut buf) {
            Ok(0) => return End::Eof,
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(Errno::EAGAIN) => match wait(PollFd::new(from, PollFlags::POLLIN)) {
                Ok(()) => continue,
                Err(e) => return End::Failed(e.into()),
            },
            Err(Errno::ECONNRESET) => return End::Eof,
            Err(e) => return End::Failed(e.into()),
        };
        if let Err(e) = write_all(to, buf.get(..n).unwrap_or_default()) {
            return End::of(e);
        }
    }
}

/// Writes all of `bytes`.
fn write_all(to: BorrowedFd<'_>, mut bytes: &[u8]) -> Result<(), Errno> {
    while !bytes.is_empty() {
        match nix::unistd::write(to, bytes) {
            Ok(n) => bytes = bytes.get(n..).unwrap_or_default(),
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => wait(PollFd::new(to, PollFlags::POLLOUT))?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Blocks until `fd` is ready (or hung up, which the next call reports).
fn wait(fd: PollFd<'_>) -> Result<(), Errno> {
    loop {
        match poll(&mut [fd], PollTimeout::NONE) {
            Ok(_) => return Ok(()),
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}
