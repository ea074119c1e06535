//! The pump: one thread moving bytes between the client's stdio and the daemon's socket.
//!
//! It copies what is ready in either direction through one buffer each, and shows the
//! session tracker ([`Session`]) the bytes the daemon took and sent, so a bridge that
//! reconnects knows what was in flight.

use super::own::OwnLines;
use super::session::Session;
use super::write::{Writes, write_nowait};
use super::{COPY_BUF, LINGER};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::io;
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;

/// How the pump ended.
pub enum End {
    /// The daemon closed the connection, or stdin ended and the replies after it were
    /// all passed on (or did not come within `LINGER`).
    Eof,
    /// The client closed its end of stdout (`EPIPE`): nobody wants more bytes.
    Gone,
    /// The daemon closed the connection or broke it while the client was still there:
    /// the bridge reconnects (unless told not to).
    DaemonGone,
    Failed(io::Error),
}

impl End {
    fn of(e: Errno) -> End {
        match e {
            Errno::EPIPE | Errno::ECONNRESET => End::Gone,
            e => End::Failed(io::Error::from(e)),
        }
    }
}

/// Bytes read from one side and not yet written to the other: at most one read's worth,
/// so the pump holds at most [`COPY_BUF`] per direction.
pub struct Pending {
    buf: Vec<u8>,
    from: usize,
    to: usize,
}

impl Pending {
    pub fn new() -> Pending {
        Pending::holding(Vec::new())
    }

    /// A buffer whose bytes are all still to be written.
    pub fn holding(buf: Vec<u8>) -> Pending {
        let to = buf.len();
        Pending { buf, from: 0, to }
    }

    /// The bytes not written yet, taken out.
    pub fn take(&mut self) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.truncate(self.to);
        buf.drain(..self.from.min(buf.len()));
        (self.from, self.to) = (0, 0);
        buf
    }

    pub fn is_empty(&self) -> bool {
        self.from == self.to
    }

    /// Writes what `fd` takes of the bytes without waiting for room (`write_nowait`).
    pub fn write_to(&mut self, fd: BorrowedFd<'_>, mode: &mut Writes) -> Result<(), Errno> {
        while !self.is_empty() {
            match write_nowait(fd, self.bytes(), mode) {
                Ok(0) | Err(Errno::EAGAIN) => return Ok(()),
                Ok(n) => self.consumed(n),
                Err(Errno::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    pub fn bytes(&self) -> &[u8] {
        self.buf.get(self.from..self.to).unwrap_or_default()
    }

    pub fn consumed(&mut self, n: usize) {
        self.from = (self.from + n).min(self.to);
    }

    /// Reads once from `fd` into the (empty) buffer: the count read, 0 at end of file.
    fn read_from(&mut self, fd: BorrowedFd<'_>) -> Result<usize, Errno> {
        if self.buf.len() < COPY_BUF {
            // Allocated by the first read, or grown from a buffer that came filled.
            self.buf.resize(COPY_BUF, 0);
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
pub struct Pump<'a> {
    stdin: BorrowedFd<'a>,
    stdout: BorrowedFd<'a>,
    sock: &'a UnixStream,
    /// stdin has not ended.
    pub reading: bool,
    /// stdin's bytes the socket has not taken yet: while there are any, the pump waits
    /// for room on the socket and reads no more of stdin.
    pub up: Pending,
    /// The daemon's bytes not yet on stdout.
    pub down: Pending,
    /// What the daemon took and sent.
    pub session: Session,
    /// The daemon's lines for the bridge, kept from the client.
    own: OwnLines,
    /// Whether a daemon that goes is reconnected to (`End::DaemonGone`) or ends the pump.
    reconnect: bool,
    /// The socket broke while writing to it.
    broken: bool,
    /// How stdout is written without waiting.
    stdout_mode: Writes,
    /// When stdin ended: the replies still coming have until then.
    linger: Option<std::time::Instant>,
}

impl<'a> Pump<'a> {
    pub fn new(
        (stdin, stdout): (BorrowedFd<'a>, BorrowedFd<'a>),
        sock: &'a UnixStream,
        (up, early): (Vec<u8>, Vec<u8>),
        session: Session,
        reconnect: bool,
    ) -> Pump<'a> {
        Pump {
            stdin,
            stdout,
            sock,
            reading: true,
            up: Pending::holding(up),
            down: Pending::holding(early),
            session,
            own: OwnLines::default(),
            reconnect,
            broken: false,
            stdout_mode: Writes::for_fd(stdout),
            linger: None,
        }
    }

    pub fn run(&mut self) -> End {
        loop {
            if self.broken {
                return End::DaemonGone;
            }
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
                    Ok(0) | Err(Errno::ECONNRESET) => return self.daemon_ended(),
                    Ok(n) => {
                        let (taken, n) = self.own.filter(&mut self.down.buf, n);
                        self.down.to = n;
                        self.session.came_down(self.down.bytes());
                        if let Some(taken) = taken {
                            // The daemon's last line: it waits for the bridge to close.
                            self.session.closing(taken);
                            if self.reconnect && self.reading {
                                return End::DaemonGone;
                            }
                        }
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

    /// The daemon closed the connection: the end of the bridge when the client is done
    /// too (or the daemon refused it, or reconnecting is off), else a reconnect.
    fn daemon_ended(&self) -> End {
        if self.reconnect && self.reading && !self.session.refused() {
            End::DaemonGone
        } else {
            End::Eof
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
    pub fn read_stdin(&mut self) -> Result<(), Errno> {
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
            Ok(n) => {
                self.session
                    .sent_up(self.up.bytes().get(..n).unwrap_or_default());
                self.up.consumed(n);
            }
            Err(Errno::EAGAIN | Errno::EINTR) => {}
            // The daemon is gone: what it did not take is sent to the next one.
            Err(Errno::EPIPE | Errno::ECONNRESET) if self.reconnect => self.broken = true,
            // Without reconnecting: drop what the client sent; its replies end the pump.
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
    pub fn send_down(&mut self) -> Result<(), Errno> {
        self.down.write_to(self.stdout, &mut self.stdout_mode)
    }
}
