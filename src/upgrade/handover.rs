//! The handover across `execve`: a sealed memory file with what the new image takes.
//!
//! The old image writes the state (format, the listening socket's descriptor, the
//! sealing key, the upgrade count) into a memfd, seals it against any change, clears
//! close-on-exec on it and on the socket, and executes the new binary with
//! `MCPD_HANDOVER=<fd>`. The new image reads it once, checks the seals and the format,
//! and takes the socket and the key. The key never touches a disk.

use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// The environment variable naming the handover's descriptor.
pub const ENV: &str = "MCPD_HANDOVER";
/// The most the new image reads of it.
const MAX_STATE: u64 = 64 * 1024;

#[derive(Debug, Serialize, Deserialize)]
struct State {
    format: u32,
    from_version: String,
    socket_fd: RawFd,
    owns_socket: bool,
    /// The sealing key of task ids and request states, hex.
    key: String,
    upgrades: u32,
}

/// What the old image hands over.
pub struct Outgoing {
    pub socket: OwnedFd,
    pub owns_socket: bool,
    pub upgrades: u32,
    /// The key that seals task ids and request states, so those issued before still open.
    pub key: [u8; 32],
}

/// What the new image took.
pub struct Incoming {
    pub socket: std::os::unix::net::UnixListener,
    pub owns_socket: bool,
    pub upgrades: u32,
    pub from_version: String,
    pub key: [u8; 32],
}

/// Why a handover could not be read; the new image then starts cold.
#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    #[error("{ENV} is not a descriptor number")]
    NotAnFd,
    #[error("the handover file is not sealed memory")]
    NotSealed,
    #[error("cannot read the handover: {0}")]
    Read(std::io::Error),
    #[error("the handover is not readable: {0}")]
    Parse(serde_json::Error),
    #[error("the handover is format {0}, this build reads {ours}", ours = super::FORMAT)]
    Format(u32),
    #[error("the handover's sealing key is malformed")]
    Key,
    #[error("the handed-over descriptor {0} is not a listening socket")]
    NotAListener(RawFd),
}

/// The binary to execute: the one now at mcpd's path, or the very file this image was
/// started from (opened at start, so it is the old one even after a package replaced
/// the path), to come back as it was when the new one cannot be executed.
pub enum Target<'a> {
    Path(&'a Path),
    Old(std::os::fd::BorrowedFd<'a>),
}

/// Executes `target` in this process with the handover. Returns only when `execve`
/// failed; the socket is then close-on-exec again and the handover file closed.
pub fn exec(target: &Target<'_>, out: &Outgoing) -> std::io::Error {
    match try_exec(target, out) {
        Ok(never) => match never {},
        Err(e) => {
            set_cloexec(out.socket.as_raw_fd(), true);
            e
        }
    }
}

fn try_exec(
    target: &Target<'_>,
    out: &Outgoing,
) -> Result<std::convert::Infallible, std::io::Error> {
    use nix::fcntl::{FcntlArg, SealFlag, fcntl};
    use nix::sys::memfd::{MemFdCreateFlag, memfd_create};
    let state = State {
        format: super::FORMAT,
        from_version: env!("CARGO_PKG_VERSION").to_owned(),
        socket_fd: out.socket.as_raw_fd(),
        owns_socket: out.owns_socket,
        key: hex::encode(out.key),
        upgrades: out.upgrades,
    };
    let text = serde_json::to_vec(&state).map_err(std::io::Error::other)?;
    let name = c"mcpd-handover";
    // Without MFD_CLOEXEC: it is meant to cross the exec.
    let memfd = memfd_create(name, MemFdCreateFlag::MFD_ALLOW_SEALING)?;
    let mut file = std::fs::File::from(memfd);
    file.write_all(&text)?;
    let seals = SealFlag::F_SEAL_SHRINK
        | SealFlag::F_SEAL_GROW
        | SealFlag::F_SEAL_WRITE
        | SealFlag::F_SEAL_SEAL;
    fcntl(file.as_raw_fd(), FcntlArg::F_ADD_SEALS(seals))?;
    set_cloexec(out.socket.as_raw_fd(), false);
    let argv: Vec<CString> = std::env::args_os()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()?;
    let mut env: Vec<CString> = std::env::vars_os()
        .filter(|(k, _)| k != ENV)
        .map(|(k, v)| {
            let mut kv = k;
            kv.push("=");
            kv.push(v);
            CString::new(kv.as_bytes())
        })
        .collect::<Result<_, _>>()?;
    // The socket's number too, outside the file: a new image that cannot read the file
    // still closes the socket instead of leaving agents waiting in its backlog.
    env.push(CString::new(format!(
        "{ENV}={},{}",
        file.as_raw_fd(),
        out.socket.as_raw_fd()
    ))?);
    Ok(match target {
        Target::Path(path) => {
            let path = CString::new(path.as_os_str().as_bytes())?;
            nix::unistd::execve(&path, &argv, &env)?
        }
        Target::Old(fd) => nix::unistd::fexecve(fd.as_raw_fd(), &argv, &env)?,
    })
}

fn set_cloexec(fd: RawFd, on: bool) {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    let flag = if on {
        FdFlag::FD_CLOEXEC
    } else {
        FdFlag::empty()
    };
    let _ = fcntl(fd, FcntlArg::F_SETFD(flag));
}

/// The handover this image was started with, if any: read once, checked, and taken.
/// Call before the socket is bound; its key must be adopted before any task id or
/// request state is sealed.
pub fn take() -> Result<Option<Incoming>, HandoverError> {
    static TAKEN: AtomicBool = AtomicBool::new(false);
    let Some(value) = std::env::var_os(ENV) else {
        return Ok(None);
    };
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Ok(None);
    }
    let fds: Vec<RawFd> = value
        .to_str()
        .unwrap_or_default()
        .split(',')
        .filter_map(|s| s.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    let [memfd, socket] = fds[..] else {
        return Err(HandoverError::NotAnFd);
    };
    let taken = read(memfd, socket);
    if taken.is_err() && is_listener(socket) {
        // SAFETY: the socket the old image named for this one, which nothing else owns;
        // closed so the agents in its backlog are told at once (they connect again).
        drop(unsafe { OwnedFd::from_raw_fd(socket) });
    }
    taken.map(Some)
}

fn is_listener(fd: RawFd) -> bool {
    nix::sys::socket::getsockopt(
        // SAFETY: borrowed only for this call.
        &unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) },
        nix::sys::socket::sockopt::AcceptConn,
    )
    .unwrap_or(false)
}

/// Reads the handover file `fd`, which must name `socket`, and takes both.
fn read(fd: RawFd, socket: RawFd) -> Result<Incoming, HandoverError> {
    let seals = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GET_SEALS)
        .map_err(|_| HandoverError::NotSealed)?;
    let needed = nix::fcntl::SealFlag::F_SEAL_WRITE
        | nix::fcntl::SealFlag::F_SEAL_GROW
        | nix::fcntl::SealFlag::F_SEAL_SHRINK;
    if !nix::fcntl::SealFlag::from_bits_truncate(seals).contains(needed) {
        return Err(HandoverError::NotSealed);
    }
    // SAFETY: the descriptor was named by the image that executed this one, for this
    // image to own; it is a sealed memfd (checked above), read here once (TAKEN).
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    // The old image's write left the offset at the end.
    file.seek(std::io::SeekFrom::Start(0))
        .map_err(HandoverError::Read)?;
    let mut text = Vec::new();
    (&mut file)
        .take(MAX_STATE)
        .read_to_end(&mut text)
        .map_err(HandoverError::Read)?;
    drop(file);
    let state: State = serde_json::from_slice(&text).map_err(HandoverError::Parse)?;
    if state.format != super::FORMAT {
        return Err(HandoverError::Format(state.format));
    }
    if state.socket_fd != socket {
        return Err(HandoverError::NotAListener(state.socket_fd));
    }
    let key: [u8; 32] = hex::decode(&state.key)
        .ok()
        .and_then(|k| k.try_into().ok())
        .ok_or(HandoverError::Key)?;
    if !is_listener(socket) {
        return Err(HandoverError::NotAListener(socket));
    }
    // SAFETY: a listening socket (checked above) the old image handed to this one.
    let listener = unsafe { std::os::unix::net::UnixListener::from_raw_fd(socket) };
    set_cloexec(socket, true);
    listener
        .set_nonblocking(true)
        .map_err(HandoverError::Read)?;
    Ok(Incoming {
        socket: listener,
        owns_socket: state.owns_socket,
        upgrades: state.upgrades,
        from_version: state.from_version,
        key,
    })
}
