//! Writing to the client's stdout without waiting for room, and what stdout is.

use nix::errno::Errno;
use std::os::fd::{AsRawFd, BorrowedFd};

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
pub enum Writes {
    /// `pwritev2` with `RWF_NOWAIT`: sockets have it, and pipes on recent kernels.
    NoWait,
    /// A pipe without `RWF_NOWAIT`: plain writes of at most [`PIPE_BUF`] bytes, which a
    /// pipe that `poll` reported writable takes at once.
    PipeBuf,
    /// Anything else (a terminal, a file): plain writes, which may wait.
    Plain,
}

impl Writes {
    /// How stdout is written: without waiting where the kernel allows it.
    pub fn for_fd(fd: BorrowedFd<'_>) -> Writes {
        if is_pipe(fd) || is_socket(fd) {
            Writes::NoWait
        } else {
            Writes::Plain
        }
    }
}

/// One write to `fd` in the way `mode` says; a refused `RWF_NOWAIT` turns `mode` into
/// [`Writes::PipeBuf`] and writes that way.
pub fn write_nowait(fd: BorrowedFd<'_>, bytes: &[u8], mode: &mut Writes) -> Result<usize, Errno> {
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
