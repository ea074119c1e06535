//! `mcpd connect`: the relay between a stdio client and the daemon's socket, which
//! outlives the daemon.
//!
//! Every stdio client reaches the daemon through this process, so it does as little as
//! a relay can. One thread polls stdin, stdout and the socket and moves whatever is ready
//! with `read` and `write` through one buffer per direction ([`pump`]), so a burst of
//! requests and replies costs one wake-up for both directions. No descriptor is waited
//! on while another has bytes to move: the socket is non-blocking, and stdout (which the
//! client shares, so it is never made non-blocking) is written with `RWF_NOWAIT`, so a
//! client that writes a large request before it reads any reply still gets it through.
//!
//! The bytes are moved as they come, but the bridge reads the head (id and method) of
//! every whole line that passes ([`session`]): enough to know which requests are in
//! flight and what the session needs again from a new daemon (its `initialize`, logging
//! level, subscriptions and listens). When the daemon goes while the client is still
//! there, the bridge answers the requests in flight with an error, holds what the client
//! sends next, reconnects with backoff ([`away`]), replays the session without showing
//! the client a second `initialize` answer, sends what it held, and tells the client its
//! lists changed.
//!
//! Measured with the relay bench's `hop CPU` (the hop process's CPU time per call, which
//! moves far less between runs than calls/s; docs/performance.md): a thread per
//! direction cost 4.0–5.0 µs per call at 64 in flight and 18–23 µs at 8, against 3.2–3.6
//! and 15.5–17.3 for this loop, as much as the socat-like pump. Splicing stdin into the
//! socket when it is a pipe saved nothing measurable, so it is not done. There is no
//! async runtime: `tokio::io::stdin` reads through the blocking pool (a thread hand-off
//! per read).

mod away;
mod lines;
mod own;
mod pump;
mod session;
mod write;

use super::{CTL_TIMEOUT, CtlError, refusal};
use crate::control_api::{BRIDGE_NOTIFICATION, PROJECT_NOTIFICATION};
use away::Outcome;
use mcpd_wire::jsonrpc::{self, Id, Message};
use pump::{End, Pump};
use session::{Awaited, Session};
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// The buffer of the `read`/`write` path: a 1 MiB result crosses in a few reads.
const COPY_BUF: usize = 256 * 1024;
/// How long replies may still come after stdin ended before the bridge gives up on them.
const LINGER: Duration = Duration::from_secs(5);
/// The longest answer to the profile request: it is a small JSON-RPC response.
const MAX_ANSWER: usize = 64 * 1024;

/// Where and how the bridge reaches the daemon, again after it went.
pub struct Link<'a> {
    pub socket: &'a Path,
    pub profile: Option<&'a str>,
    pub project: Option<&'a Path>,
    /// Whether the bridge reconnects when the daemon goes (`--no-reconnect` turns it off).
    pub reconnect: bool,
}

/// `mcpd connect`: copies stdin to the socket and the socket to stdout until the client
/// leaves. When stdin ends the socket's write side is shut down so the daemon sees the
/// agent leave; replies still in the socket are copied out before exiting (for at most
/// `LINGER`). A client that closed stdout has left: that ends the bridge quietly. A
/// daemon that goes is reconnected to ([`away`]) unless `link.reconnect` is off.
pub fn bridge(link: &Link<'_>) -> Result<(), CtlError> {
    let mut stream = UnixStream::connect(link.socket)
        .map_err(|source| super::not_running(link.socket, &source))?;
    let mut session = Session::default();
    let mut early = link.handshake(&stream, &mut session)?;
    let mut up = Vec::new();
    let (stdin, stdout) = (io::stdin(), io::stdout());
    loop {
        stream.set_nonblocking(true)?;
        let mut pump = Pump::new(
            (stdin.as_fd(), stdout.as_fd()),
            &stream,
            (up, early),
            session,
            link.reconnect,
        );
        match pump.run() {
            End::Eof | End::Gone => return Ok(()),
            End::Failed(e) => return Err(CtlError::Io(e)),
            End::DaemonGone => {}
        }
        let (down_left, up_left) = (pump.down.take(), pump.up.take());
        session = pump.session;
        let lost = session.lost();
        let mut held = lost.resend;
        held.extend_from_slice(&up_left);
        let mut to_agent = down_left;
        to_agent.extend_from_slice(&lost.to_agent);
        let away = away::Away::new((stdin.as_fd(), stdout.as_fd()), to_agent, held);
        match away.wait_for_daemon(link, &mut session) {
            Outcome::Back {
                stream: s,
                early: e,
                held: h,
            } => (stream, early, up) = (s, e, h),
            Outcome::AgentLeft => return Ok(()),
            Outcome::GaveUp(e) => return Err(e),
        }
    }
}

impl Link<'_> {
    /// What a new connection is told before the client's bytes: the project, the
    /// profile, and the session replayed (nothing the first time). Returns the bytes for
    /// the client that came meanwhile, ending with the notifications that make it list
    /// again after a replay.
    fn handshake(&self, stream: &UnixStream, session: &mut Session) -> Result<Vec<u8>, CtlError> {
        // Lines sent here count among the connection's lines, as the daemon counts them.
        let mut sent = 0;
        let mut send = |line: &str| -> Result<(), CtlError> {
            sent += 1;
            (&*stream).write_all(format!("{line}\n").as_bytes())?;
            Ok(())
        };
        // Notifications first: no answer to wait for, and a daemon that does not know
        // one ignores it. That this is a bridge, then the project.
        if self.reconnect {
            send(&jsonrpc::notification_line(BRIDGE_NOTIFICATION, None))?;
        }
        if let Some(dir) = self.project {
            let params = serde_json::json!({ "path": dir });
            send(&jsonrpc::notification_line(
                PROJECT_NOTIFICATION,
                Some(&params),
            ))?;
        }
        let mut reader = Reader::new(stream);
        // Chosen before the client says anything, so every answer it gets is filtered.
        if let Some(name) = self.profile {
            sent += 1;
            choose_profile(&mut reader, name)?;
        }
        let replayed = session.replay();
        if replayed.is_empty() {
            stream.set_read_timeout(None)?;
            session.connected(sent);
            session.came_down(&reader.buf);
            return Ok(reader.buf);
        }
        let mut passed = Vec::new();
        for r in &replayed {
            sent += 1;
            (&*stream).write_all(r.line.as_bytes())?;
            (&*stream).write_all(b"\n")?;
            let Some(awaited) = &r.awaits else { continue };
            loop {
                let line = reader.line()?;
                let head = lines::daemon_head(&line).unwrap_or_default();
                match awaited {
                    Awaited::Answer(id) if head.is_response() && head.id.as_ref() == Some(id) => {
                        if head.error {
                            let text = String::from_utf8_lossy(&line);
                            return Err(refusal(&text)
                                .unwrap_or_else(|| CtlError::Unexpected(text.into_owned())));
                        }
                        break;
                    }
                    Awaited::Acknowledged(id) if is_acknowledgement(&line, id) => break,
                    _ => {
                        if head.id.is_none() && head.error && head.method.is_none() {
                            // Refused (too many agents, say): tried again later.
                            return Err(CtlError::Closed);
                        }
                        passed.extend_from_slice(&line);
                        passed.push(b'\n');
                    }
                }
            }
        }
        stream.set_read_timeout(None)?;
        session.connected(sent);
        session.came_down(&passed);
        let relist = session.relist();
        session.came_down(&relist);
        session.came_down(&reader.buf);
        passed.extend_from_slice(&relist);
        passed.extend_from_slice(&reader.buf);
        Ok(passed)
    }
}

/// Whether `line` is the `notifications/subscriptions/acknowledged` of the listen whose
/// id is `id` (canonical JSON text).
fn is_acknowledgement(line: &[u8], id: &str) -> bool {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) else {
        return false;
    };
    v.get("method").and_then(serde_json::Value::as_str)
        == Some("notifications/subscriptions/acknowledged")
        && v.pointer("/params/_meta/io.modelcontextprotocol~1subscriptionId")
            .and_then(lines::canonical_id)
            .as_deref()
            == Some(id)
}

/// Lines read from a blocking socket, each within [`CTL_TIMEOUT`]; what came after the
/// last line read stays in `buf`.
struct Reader<'a> {
    stream: &'a UnixStream,
    buf: Vec<u8>,
}

impl<'a> Reader<'a> {
    fn new(stream: &'a UnixStream) -> Reader<'a> {
        Reader {
            stream,
            buf: Vec::new(),
        }
    }

    /// The next line, without its newline.
    fn line(&mut self) -> Result<Vec<u8>, CtlError> {
        self.stream.set_read_timeout(Some(CTL_TIMEOUT))?;
        let mut chunk = [0u8; 4096];
        let mut searched = 0;
        loop {
            if let Some(i) = memchr::memchr(b'\n', self.buf.get(searched..).unwrap_or_default()) {
                let end = searched + i;
                let rest = self.buf.split_off(end + 1);
                let mut line = std::mem::replace(&mut self.buf, rest);
                line.truncate(end);
                return Ok(line);
            }
            searched = self.buf.len();
            if self.buf.len() > lines::MAX_LINE {
                return Err(CtlError::Unexpected(format!(
                    "a line from the daemon longer than {} bytes",
                    lines::MAX_LINE
                )));
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(CtlError::Closed),
                Ok(n) => self
                    .buf
                    .extend_from_slice(chunk.get(..n).unwrap_or_default()),
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
        }
    }
}

/// Sends the `mcpd/profile` request and reads its answer line. Bytes the daemon sent after
/// that line stay in the reader, to be written to stdout before anything else.
fn choose_profile(reader: &mut Reader<'_>, name: &str) -> Result<(), CtlError> {
    let id = Id::Str("mcpd-connect-profile".into());
    let params = serde_json::json!({ "name": name });
    let line = jsonrpc::request_line(&id, "mcpd/profile", Some(&params)) + "\n";
    let written = (&*reader.stream).write_all(line.as_bytes());
    let answer = match reader.line() {
        Ok(line) if line.len() <= MAX_ANSWER => line,
        Ok(_) => {
            return Err(CtlError::Unexpected(format!(
                "an answer to the profile request longer than {MAX_ANSWER} bytes"
            )));
        }
        Err(CtlError::Closed) => return Err(written.err().map_or(CtlError::Closed, CtlError::Io)),
        Err(e) => return Err(e),
    };
    let answer = String::from_utf8_lossy(&answer);
    match jsonrpc::parse(answer.trim_end()) {
        Ok(Message::Response(r)) if r.id == id => {
            r.outcome.map_err(|e| CtlError::Rpc {
                code: e.code,
                message: e.message,
            })?;
            Ok(())
        }
        // A daemon that refuses the connection says why with a null id, then closes.
        _ => Err(refusal(&answer).unwrap_or_else(|| CtlError::Unexpected(answer.into_owned()))),
    }
}
