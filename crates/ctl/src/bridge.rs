//! `mcpd connect`: the byte pump between a stdio client and the daemon's socket.
//!
//! Every stdio client reaches the daemon through this process, so it does as little as
//! a relay can: after the optional profile handshake it never looks at the bytes. One
//! thread polls stdin, stdout and the socket and moves whatever is ready with `read` and
//! `write` through one buffer per direction, so a burst of requests and replies costs one
//! wake-up for both directions. No descriptor is waited on while another has bytes to
//! move: the socket is non-blocking, and stdout (which the client shares, so it is never
//! made non-blocking) is written with `RWF_NOWAIT`, so a client that writes a large
//! request before it reads any reply still gets it through.
//!
//! Measured with the relay bench's `hop CPU` (the hop process's CPU time per call, which
//! moves far less between runs than calls/s; docs/performance.md): a thread per
//! direction cost 4.0–5.0 µs per call at 64 in flight and 18–23 µs at 8, against 3.2–3.6
//! and 15.5–17.3 for this loop, as much as the socat-like pump. Splicing stdin into the
//! socket when it is a pipe saved nothing measurable, so it is not done. There is no
//! async runtime:
//! `tokio::io::stdin` reads through the blocking pool (a thread hand-off per read).

use super::{CTL_TIMEOUT, CtlError, refusal};
use crate::control_api::PROJECT_NOTIFICATION;
use mcpd_wire::jsonrpc::{self, Id, Message};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

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
pub fn bridge(
    socket: &Path,
    profile: Option<&str>,
    project: Option<&Path>,
) -> Result<(), CtlError> {
    let stream =
        UnixStream::connect(socket).map_err(|source| super::not_running(socket, &source))?;
    // The project first, as a notification: no answer to wait for, and a daemon that
    // does not know it ignores it.
    if let Some(dir) = project {
        let params = serde_json::json!({ "path": dir });
        let line = jsonrpc::notification_line(PROJECT_NOTIFICATION, Some(&params)) + "\n";
        (&stream).write_all(line.as_bytes())?;
    }
    // Chosen before the client says anything, so every answer it gets is filtered.
    let early = match profile {
        Some(name) => choose_profile(&stream, name)?,
        None => Vec::new(),
    };
    stream.set_nonblocking(true)?;
    let (stdin, stdout) = (io::stdin(), io::stdout());
    let mut pump = Pump::new(stdin.as_fd(), stdout.as_fd(), &stream, early);
    pump.run().into_result()
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

/// How the pump ended.
enum End {
    /// The daemon closed the connection, or stdin ended and the replies after it were
    /// all passed on (or did not come within `LINGER`).
    Eof,
    /// The client closed its end of stdout (`EPIPE`): nobody wants more bytes.
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

/// Bytes read from one side and not yet written to the other: at most one read's worth,
/// so the pump holds at most [`COPY_BUF`] per direction.
struct Pending {
    buf: Vec<u8>,
    from: usize,
    to: usize,
}

impl Pending {
    fn new() -> Pending {
        Pending {
            buf: Vec::new(),
            from: 0,
            to: 0,
        }
    }

    fn is_empty(&self) -> bool {
        self.from == self.to
    }

    fn bytes(&self) -> &[u8] {
        self.buf.get(self.from..self.to).unwrap_or_default()
    }

    fn consumed(&mut self, n: usize) {
        self.from = (self.from + n).min(self.to);
    }

    /// Reads once from `fd` into the (empty) buffer: the count read, 0 at end of file.
    fn read_from(&mut self, fd: BorrowedFd<'_>) -> Result<usize, Errno> {
        if self.buf.is_empty() {
            self.buf = vec![0; COPY_BUF]; // allocated by the first read only
        }
        let n = nix::unistd::read(fd.as_raw_fd(), &mut self.buf)?;
        (self.from, self.to) = (0, n);
        Ok(n)
    }
}

/// What one `poll` found ready.
#[derive(Default)]
struct Ready {
    sock_in: bool,
    sock_out: bool,
    stdin: bool,
    stdout: bool,
}

/// The pump's state: one thread, one `poll` over the three descriptors.
struct Pump<'a> {
    stdin: BorrowedFd<'a>,
    stdout: BorrowedFd<'a>,
    sock: &'a UnixStream,
    /// stdin has not ended.
    reading: bool,
    /// stdin's bytes the socket has not taken yet: while there are any, the pump waits
    /// for room on the socket and reads no more of stdin.
    up: Pending,
    /// The daemon's bytes not yet on stdout.
    down: Pending,
    /// How stdout is written without waiting.
    stdout_mode: Writes,
    /// When stdin ended: the replies still coming have until then.
    linger: Option<std::time::Instant>,
}

impl<'a> Pump<'a> {
    fn new(
        stdin: BorrowedFd<'a>,
        stdout: BorrowedFd<'a>,
        sock: &'a UnixStream,
        early: Vec<u8>,
    ) -> Pump<'a> {
        let to = early.len();
        Pump {
            stdin,
            stdout,
            sock,
            reading: true,
            up: Pending::new(),
            down: Pending {
                buf: early,
                from: 0,
                to,
            },
            stdout_mode: if is_pipe(stdout) || is_socket(stdout) {
                Writes::NoWait
            } else {
                Writes::Plain
            },
            linger: None,
        }
    }

    fn run(&mut self) -> End {
        loop {
            let ready = match self.wait() {
                Ok(Some(ready)) => ready,
                Ok(None) => return End::Eof, // the replies after stdin ended did not come
                Err(e) => return End::Failed(e.into()),
            };
            if ready.stdout
                && let Err(e) = self.send_down()
            {
                return End::of(e);
            }
            if ready.sock_in {
                match self.down.read_from(self.sock.as_fd()) {
                    Ok(0) | Err(Errno::ECONNRESET) => return End::Eof,
                    Ok(_) => {
                        if let Err(e) = self.send_down() {
                            return End::of(e);
                        }
                    }
                    Err(Errno::EAGAIN | Errno::EINTR) => {}
                    Err(e) => return End::Failed(e.into()),
                }
            }
            if ready.stdin
                && let Err(e) = self.read_stdin()
            {
                return End::Failed(e.into());
            }
            if ready.sock_out
                && let Err(e) = self.send_up()
            {
                return End::Failed(e.into());
            }
            if !self.reading && self.up.is_empty() && self.linger.is_none() {
                // Everything the client sent is on its way: the daemon sees the agent leave.
                let _ = self.sock.shutdown(Shutdown::Write); // the daemon may be gone already
                self.linger = Some(std::time::Instant::now() + LINGER);
            }
        }
    }

    /// Polls what there is reason to: the socket for replies when the last ones are
    /// written out, and for room when it refused bytes; stdin when the last bytes are on
    /// the socket; stdout when replies wait for it. A descriptor with nothing to wait for
    /// is left out, or its hang-up would wake the loop again and again. `None` once the
    /// linger has passed.
    fn wait(&self) -> Result<Option<Ready>, Errno> {
        let mut sock_events = PollFlags::empty();
        if self.down.is_empty() {
            sock_events |= PollFlags::POLLIN;
        }
        if !self.up.is_empty() {
            sock_events |= PollFlags::POLLOUT;
        }
        let want_stdin = self.reading && self.up.is_empty();
        let want_stdout = !self.down.is_empty();
        let mut fds = Vec::with_capacity(3);
        let mut at = [None; 3]; // where the socket, stdin and stdout are in `fds`
        for (i, (fd, events)) in [
            (self.sock.as_fd(), sock_events),
            (
                self.stdin,
                if want_stdin {
                    PollFlags::POLLIN
                } else {
                    PollFlags::empty()
                },
            ),
            (
                self.stdout,
                if want_stdout {
                    PollFlags::POLLOUT
                } else {
                    PollFlags::empty()
                },
            ),
        ]
        .into_iter()
        .enumerate()
        {
            if !events.is_empty()
                && let Some(slot) = at.get_mut(i)
            {
                *slot = Some(fds.len());
                fds.push(PollFd::new(fd, events));
            }
        }
        let timeout = match self.linger {
            None => PollTimeout::NONE,
            Some(until) => {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return Ok(None);
                }
                PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX)
            }
        };
        match poll(&mut fds, timeout) {
            Ok(0) if self.linger.is_some() => return Ok(None),
            Ok(_) => {}
            Err(Errno::EINTR) => return Ok(Some(Ready::default())),
            Err(e) => return Err(e),
        }
        // A hang-up or an error counts as ready: the next read or write reports it.
        let done = PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL;
        let ready = |i: usize, want: PollFlags| {
            at.get(i)
                .copied()
                .flatten()
                .and_then(|j| fds.get(j))
                .and_then(|f| f.revents())
                .is_some_and(|r| r.intersects(want | done))
        };
        Ok(Some(Ready {
            sock_in: self.down.is_empty() && ready(0, PollFlags::POLLIN),
            sock_out: !self.up.is_empty() && ready(0, PollFlags::POLLOUT),
            stdin: ready(1, PollFlags::POLLIN),
            stdout: ready(2, PollFlags::POLLOUT),
        }))
    }

    /// Reads what stdin has and writes what the socket takes of it.
    fn read_stdin(&mut self) -> Result<(), Errno> {
        match self.up.read_from(self.stdin) {
            Ok(0) => self.reading = false,
            Ok(_) => self.send_up()?,
            // A non-blocking stdin shared with another reader that took the bytes first.
            Err(Errno::EAGAIN | Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Writes what the socket takes of stdin's bytes; the rest waits for room.
    fn send_up(&mut self) -> Result<(), Errno> {
        // SIGPIPE is ignored (Rust's runtime does so at start): a closed socket is EPIPE.
        match nix::unistd::write(self.sock.as_fd(), self.up.bytes()) {
            Ok(n) => self.up.consumed(n),
            Err(Errno::EAGAIN | Errno::EINTR) => {}
            // The daemon is gone: drop what the client sent; its replies end the pump.
            Err(Errno::EPIPE | Errno::ECONNRESET) => {
                self.up = Pending::new();
                self.reading = false;
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Writes what stdout takes of the daemon's bytes without waiting for room.
    fn send_down(&mut self) -> Result<(), Errno> {
        while !self.down.is_empty() {
            match write_nowait(self.stdout, self.down.bytes(), &mut self.stdout_mode) {
                Ok(0) | Err(Errno::EAGAIN) => return Ok(()),
                Ok(n) => self.down.consumed(n),
                Err(Errno::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

fn is_pipe(fd: BorrowedFd<'_>) -> bool {
    file_type(fd) == Some(nix::sys::stat::SFlag::S_IFIFO)
}

fn is_socket(fd: BorrowedFd<'_>) -> bool {
    file_type(fd) == Some(nix::sys::stat::SFlag::S_IFSOCK)
}

fn file_type(fd: BorrowedFd<'_>) -> Option<nix::sys::stat::SFlag> {
    use nix::sys::stat::{SFlag, fstat};
    let mode = fstat(fd.as_raw_fd()).ok()?.st_mode;
    Some(SFlag::from_bits_truncate(mode) & SFlag::S_IFMT)
}

/// The most a plain `write` to a pipe reported writable takes without blocking.
const PIPE_BUF: usize = 4096;

/// How the pump writes to stdout without waiting for room.
#[derive(Clone, Copy, PartialEq)]
enum Writes {
    /// `pwritev2` with `RWF_NOWAIT`: sockets have it, and pipes on recent kernels.
    NoWait,
    /// A pipe without `RWF_NOWAIT`: plain writes of at most [`PIPE_BUF`] bytes, which a
    /// pipe that `poll` reported writable takes at once.
    PipeBuf,
    /// Anything else (a terminal, a file): plain writes, which may wait.
    Plain,
}

/// One write to `fd` in the way `mode` says; a refused `RWF_NOWAIT` turns `mode` into
/// [`Writes::PipeBuf`] and writes that way.
fn write_nowait(fd: BorrowedFd<'_>, bytes: &[u8], mode: &mut Writes) -> Result<usize, Errno> {
    use nix::libc;
    if *mode == Writes::NoWait {
        let iov = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        // SAFETY: `iov` describes `bytes`, which outlives the call and which the kernel
        // only reads; one iovec, offset -1 (the file's position: a pipe or socket has none).
        let n = unsafe { libc::pwritev2(fd.as_raw_fd(), &iov, 1, -1, libc::RWF_NOWAIT) };
        match usize::try_from(n) {
            Ok(n) => return Ok(n),
            Err(_) => match Errno::last() {
                Errno::EOPNOTSUPP | Errno::ENOSYS | Errno::EINVAL => *mode = Writes::PipeBuf,
                e => return Err(e),
            },
        }
    }
    let most = if *mode == Writes::PipeBuf {
        PIPE_BUF
    } else {
        bytes.len()
    };
    nix::unistd::write(fd, bytes.get(..most.min(bytes.len())).unwrap_or(bytes))
}
