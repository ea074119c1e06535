//! The stand-in for `socat - UNIX-CONNECT:SOCKET` where socat is not installed: the bench
//! binary re-run as `--socat-pump SOCKET`.
//!
//! It does what socat 1.7 does by default, so the shim's yardstick is the same on every
//! machine: one thread polls stdin and the socket, reads at most 8 KiB from whichever is
//! readable and writes it all to the other side before polling again. At end of stdin it
//! shuts down the socket's write side and carries on until the socket ends.

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

/// socat's default transfer block (`-b`).
const BLOCK: usize = 8192;

pub fn run(socket: &str) -> ExitCode {
    let sock = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("socat-pump: connect to {socket}: {e}");
            return ExitCode::from(1);
        }
    };
    match pump(&sock) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("socat-pump: {e}");
            ExitCode::from(1)
        }
    }
}

fn pump(sock: &UnixStream) -> Result<(), Errno> {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let mut buf = [0u8; BLOCK];
    let mut stdin_open = true;
    loop {
        let ready = |flags: Option<PollFlags>| {
            flags.is_some_and(|f| f.intersects(PollFlags::POLLIN | PollFlags::POLLHUP))
        };
        let (from_stdin, from_sock) = {
            let mut fds = vec![PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
            if stdin_open {
                fds.push(PollFd::new(stdin.as_fd(), PollFlags::POLLIN));
            }
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => return Err(e),
            }
            (
                stdin_open && ready(fds.get(1).and_then(|f| f.revents())),
                ready(fds.first().and_then(|f| f.revents())),
            )
        };
        if from_stdin {
            match nix::unistd::read(stdin.as_fd().as_raw_fd(), &mut buf)? {
                0 => {
                    stdin_open = false;
                    let _ = sock.shutdown(Shutdown::Write); // the daemon may be gone
                }
                n => write_all(sock.as_fd(), &buf[..n])?,
            }
        }
        if from_sock {
            match nix::unistd::read(sock.as_raw_fd(), &mut buf)? {
                0 => return Ok(()),
                n => match write_all(stdout.as_fd(), &buf[..n]) {
                    Err(Errno::EPIPE) => return Ok(()),
                    other => other?,
                },
            }
        }
    }
}

fn write_all(fd: BorrowedFd<'_>, mut bytes: &[u8]) -> Result<(), Errno> {
    while !bytes.is_empty() {
        match nix::unistd::write(fd, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
