//! While the daemon is away: reconnecting with backoff, and holding what the client sends.
//!
//! The client's requests are held (at most [`MAX_HELD_REQUESTS`] and [`MAX_HELD_BYTES`];
//! past that stdin is not read, so the client waits as on any full pipe) and sent to the
//! daemon once it is back. A request held [`HOLD_FOR`] is answered with an error instead;
//! after [`RECONNECT_FOR`] without a daemon the bridge gives up and exits.

use super::lines::{self, LineBuf};
use super::pump::Pending;
use super::session::Session;
use super::write::Writes;
use super::{COPY_BUF, CtlError, LINGER, Link};
use mcpd_wire::jsonrpc::{self, ErrorObject, Id, mcpd_code};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// The first wait between tries, doubled after each failed one up to [`MAX_DELAY`].
const FIRST_DELAY: Duration = Duration::from_millis(25);
const MAX_DELAY: Duration = Duration::from_secs(1);
/// How long the bridge tries before it gives up and exits.
pub const RECONNECT_FOR: Duration = Duration::from_secs(300);
/// How long a request the client sent meanwhile is held before it is answered with an error.
pub const HOLD_FOR: Duration = Duration::from_secs(30);
pub const MAX_HELD_REQUESTS: usize = 256;
/// One line of the daemon's default largest size, and a little.
pub const MAX_HELD_BYTES: usize = lines::MAX_LINE + 64 * 1024;

pub enum Outcome {
    /// A daemon answers again: the new connection, bytes for the client, and the held
    /// bytes to send it.
    Back {
        stream: UnixStream,
        early: Vec<u8>,
        held: Vec<u8>,
    },
    /// The client closed stdin or stdout meanwhile.
    AgentLeft,
    GaveUp(CtlError),
}

pub struct Away<'a> {
    stdin: BorrowedFd<'a>,
    stdout: BorrowedFd<'a>,
    mode: Writes,
    /// Bytes for the client: the old daemon's last ones, errors, then the held ones'.
    to_agent: Pending,
    /// The client's bytes for the next daemon.
    held: Vec<u8>,
    held_lines: LineBuf,
    /// The held requests' ids (canonical JSON text), and when the first was held.
    held_ids: Vec<String>,
    since: Option<Instant>,
}

impl<'a> Away<'a> {
    pub fn new(
        (stdin, stdout): (BorrowedFd<'a>, BorrowedFd<'a>),
        to_agent: Vec<u8>,
        held: Vec<u8>,
    ) -> Away<'a> {
        let mut away = Away {
            stdin,
            stdout,
            mode: Writes::for_fd(stdout),
            to_agent: Pending::holding(to_agent),
            held: Vec::new(),
            held_lines: LineBuf::default(),
            held_ids: Vec::new(),
            since: None,
        };
        away.hold(&held);
        away
    }

    /// Waits for a daemon: tries to reconnect (at once, then after growing delays),
    /// while holding what the client sends and writing out what it is owed.
    pub fn wait_for_daemon(mut self, link: &Link<'_>, session: &mut Session) -> Outcome {
        let started = Instant::now();
        let mut delay = FIRST_DELAY;
        let mut next = started;
        loop {
            let now = Instant::now();
            if now >= next {
                match try_once(link, session) {
                    Ok((stream, early)) => {
                        let mut bytes = self.to_agent.take();
                        bytes.extend_from_slice(&early);
                        return Outcome::Back {
                            stream,
                            early: bytes,
                            held: self.held,
                        };
                    }
                    Err(Try::Fatal(e)) => return self.give_up(e),
                    Err(Try::Again(e)) if now.duration_since(started) >= RECONNECT_FOR => {
                        return self.give_up(e);
                    }
                    Err(Try::Again(_)) => {
                        next = Instant::now() + delay;
                        delay = (delay * 2).min(MAX_DELAY);
                    }
                }
            }
            if self.since.is_some_and(|t| t.elapsed() >= HOLD_FOR) {
                self.answer_held(&format!(
                    "mcpd is not running and did not come back within {}s; this request was not sent to it: call again later",
                    HOLD_FOR.as_secs()
                ));
            }
            let mut until = next;
            if let Some(t) = self.since {
                until = until.min(t + HOLD_FOR);
            }
            match self.wait(until) {
                Ok(true) => {}
                Ok(false) => return Outcome::AgentLeft,
                Err(e) => return Outcome::GaveUp(CtlError::Io(e.into())),
            }
        }
    }

    /// Polls stdin (while there is room to hold more) and stdout (while it is owed
    /// bytes) until `until`. False once the client left.
    fn wait(&mut self, until: Instant) -> Result<bool, Errno> {
        let room = self.held.len() < MAX_HELD_BYTES && self.held_ids.len() < MAX_HELD_REQUESTS;
        let owed = !self.to_agent.is_empty();
        let mut fds = vec![
            PollFd::new(
                self.stdin,
                if room {
                    PollFlags::POLLIN
                } else {
                    PollFlags::empty()
                },
            ),
            PollFd::new(
                self.stdout,
                if owed {
                    PollFlags::POLLOUT
                } else {
                    PollFlags::empty()
                },
            ),
        ];
        let left = until.saturating_duration_since(Instant::now());
        match poll(
            &mut fds,
            PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
        let ready = |i: usize| {
            fds.get(i)
                .and_then(|f| f.revents())
                .is_some_and(|r| !r.is_empty())
        };
        if owed && ready(1) {
            match self.write_out() {
                Ok(()) => {}
                Err(Errno::EPIPE | Errno::ECONNRESET) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        if room && ready(0) {
            let mut chunk = vec![0u8; COPY_BUF.min(MAX_HELD_BYTES - self.held.len())];
            match nix::unistd::read(self.stdin.as_raw_fd(), &mut chunk) {
                Ok(0) => {
                    self.flush_before(Instant::now() + LINGER);
                    return Ok(false);
                }
                Ok(n) => self.hold(chunk.get(..n).unwrap_or_default()),
                Err(Errno::EAGAIN | Errno::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Keeps the client's bytes for the next daemon, noting each request's id.
    fn hold(&mut self, bytes: &[u8]) {
        let Away {
            held_lines,
            held_ids,
            since,
            ..
        } = self;
        held_lines.feed(bytes, |_, line| {
            if let Some(h) = lines::head(line)
                && h.is_request()
                && let Some(id) = h.id
            {
                held_ids.push(id);
                since.get_or_insert_with(Instant::now);
            }
        });
        self.held.extend_from_slice(bytes);
    }

    /// Answers every held request with an error and drops the held lines (a line the
    /// client has not finished stays).
    fn answer_held(&mut self, why: &str) {
        let error = ErrorObject::new(mcpd_code::DAEMON_RESTARTED, why);
        let mut out = self.to_agent.take();
        for id in self.held_ids.drain(..) {
            let Some(id) = serde_json::from_str(&id)
                .ok()
                .as_ref()
                .and_then(Id::from_value)
            else {
                continue;
            };
            out.extend_from_slice(jsonrpc::error_line(Some(&id), &error).as_bytes());
            out.push(b'\n');
        }
        self.to_agent = Pending::holding(out);
        let keep = memchr::memrchr(b'\n', &self.held).map_or(0, |i| i + 1);
        self.held.drain(..keep);
        self.since = None;
    }

    fn give_up(mut self, e: CtlError) -> Outcome {
        self.answer_held(&format!(
            "mcpd is not running ({e}); this request was not sent to it"
        ));
        self.flush_before(Instant::now() + LINGER);
        Outcome::GaveUp(e)
    }

    /// Writes what stdout takes now.
    fn write_out(&mut self) -> Result<(), Errno> {
        self.to_agent.write_to(self.stdout, &mut self.mode)
    }

    /// Writes what the client is owed, waiting for room until `deadline`.
    fn flush_before(&mut self, deadline: Instant) {
        while !self.to_agent.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.write_out().is_err() {
                return;
            }
            let mut fds = [PollFd::new(self.stdout, PollFlags::POLLOUT)];
            let _ = poll(
                &mut fds,
                PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX),
            );
        }
    }
}

/// Why one try failed: worth trying again (no daemon yet, or it went again), or not
/// (the daemon refused the session: an unknown profile, an `initialize` it rejects).
enum Try {
    Again(CtlError),
    Fatal(CtlError),
}

fn try_once(link: &Link<'_>, session: &mut Session) -> Result<(UnixStream, Vec<u8>), Try> {
    let stream = UnixStream::connect(link.socket)
        .map_err(|source| Try::Again(crate::not_running(link.socket, &source)))?;
    // The replay changes the session (listens count as in flight again): a failed try
    // must leave it as it was.
    let mut attempt = session.clone();
    match link.handshake(&stream, &mut attempt) {
        Ok(early) => {
            *session = attempt;
            Ok((stream, early))
        }
        Err(e @ CtlError::Rpc { .. }) => Err(Try::Fatal(e)),
        Err(e) => Err(Try::Again(e)),
    }
}
