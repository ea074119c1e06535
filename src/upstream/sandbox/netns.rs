//! A confined server's own network (a user and network namespace, no root needed).
//!
//! Only loopback inside, and a proxy listener made there before exec and handed to mcpd,
//! so that mcpd's filtering proxy is its one way out.
//!
//! A socket belongs to the namespace it was made in, but whoever holds its descriptor can
//! use it: the child binds a listener on its own loopback, sends the descriptor to mcpd
//! over a socket pair made before the fork, and mcpd accepts the child's connections on
//! it and makes the outward ones itself, in its own namespace, for the hosts the profile
//! lists. Inside there is no route anywhere else: no DNS, no UDP, no other TCP.

use nix::libc;
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// The port of the proxy listener on a server's own loopback (nothing else is there).
pub const PROXY_PORT: u16 = 3128;

/// The identity maps a child writes in its new user namespace: its own uid and gid map
/// to themselves, so files it makes belong to the user as before.
pub(super) struct Maps {
    uid: Vec<u8>,
    gid: Vec<u8>,
}

impl Maps {
    pub(super) fn of_this_process() -> Maps {
        let uid = nix::unistd::geteuid().as_raw();
        let gid = nix::unistd::getegid().as_raw();
        Maps {
            uid: format!("{uid} {uid} 1\n").into_bytes(),
            gid: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }

    /// Between fork and exec: a new user namespace and the others `flags` name, and the
    /// maps.
    pub(super) fn enter(&self, flags: libc::c_int) -> io::Result<()> {
        // SAFETY: unshare takes flags only.
        check(unsafe { libc::unshare(libc::CLONE_NEWUSER | flags) })?;
        write_proc(c"/proc/self/setgroups", b"deny")?;
        write_proc(c"/proc/self/uid_map", &self.uid)?;
        write_proc(c"/proc/self/gid_map", &self.gid)
    }
}

/// What a server's child needs to make its own network, and mcpd's end of the pair the
/// listener comes back through.
pub struct Isolation {
    child: ChildSide,
    parent: ParentSide,
}

/// Kept by mcpd to receive the listener.
pub struct ParentSide(UnixStream);

/// Moved into the child's `pre_exec`.
pub struct ChildSide {
    maps: Maps,
    /// The child's end of the pair (close-on-exec: the server never holds it).
    channel: OwnedFd,
}

impl Isolation {
    pub fn new() -> io::Result<Isolation> {
        let (parent, child) = UnixStream::pair()?;
        Ok(Isolation {
            child: ChildSide {
                maps: Maps::of_this_process(),
                channel: child.into(),
            },
            parent: ParentSide(parent),
        })
    }

    pub fn split(self) -> (ChildSide, ParentSide) {
        (self.child, self.parent)
    }
}

impl ParentSide {
    /// In mcpd after the spawn (the child sent it before exec, so it is there): the
    /// listener on the child's loopback.
    pub fn receive(self) -> io::Result<std::net::TcpListener> {
        use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
        let mut byte = [0u8; 1];
        let mut iov = [io::IoSliceMut::new(&mut byte)];
        let mut space = nix::cmsg_space!([RawFd; 1]);
        let msg = recvmsg::<()>(
            self.0.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC,
        )?;
        let fd = msg
            .cmsgs()?
            .find_map(|c| match c {
                ControlMessageOwned::ScmRights(fds) => fds.first().copied(),
                _ => None,
            })
            .ok_or_else(|| io::Error::other("the server's child sent no listener"))?;
        // SAFETY: the descriptor was just received and is owned by nothing else.
        let listener = std::net::TcpListener::from(unsafe { OwnedFd::from_raw_fd(fd) });
        listener.set_nonblocking(true)?;
        Ok(listener)
    }
}

impl ChildSide {
    /// Between fork and exec: its own namespaces, then a listener on its loopback sent
    /// to mcpd. Only system calls on memory prepared before the fork.
    pub fn enter(&self) -> io::Result<()> {
        self.maps.enter(libc::CLONE_NEWNET)?;
        self.hand_over()
    }

    /// In a network namespace of its own made by the caller: loopback up, and a
    /// listener on it sent to mcpd.
    pub(super) fn hand_over(&self) -> io::Result<()> {
        loopback_up()?;
        let listener = listen_loopback(PROXY_PORT)?;
        let sent = send_fd(self.channel.as_raw_fd(), listener);
        // SAFETY: closes the child's copy; mcpd holds its own.
        unsafe { libc::close(listener) };
        sent
    }
}

pub(super) fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Writes `text` to a `/proc/self` file in one call, as the kernel requires for the maps.
fn write_proc(path: &CStr, text: &[u8]) -> io::Result<()> {
    // SAFETY: a NUL-terminated path and flags.
    let fd = check(unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) })?;
    // SAFETY: `text` is valid for its length.
    let n = unsafe { libc::write(fd, text.as_ptr().cast(), text.len()) };
    let err = io::Error::last_os_error();
    // SAFETY: closes the descriptor just opened.
    unsafe { libc::close(fd) };
    if usize::try_from(n).ok() == Some(text.len()) {
        Ok(())
    } else {
        Err(err)
    }
}

/// Brings the namespace's loopback interface up (it starts down).
pub(super) fn loopback_up() -> io::Result<()> {
    // SAFETY: plain socket creation.
    let s =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: an all-zero ifreq is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (to, from) in ifr.ifr_name.iter_mut().zip(b"lo") {
        *to = *from as libc::c_char;
    }
    ifr.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    // SAFETY: SIOCSIFFLAGS reads the ifreq it is given.
    let r = unsafe { libc::ioctl(s, libc::SIOCSIFFLAGS, &ifr) };
    let err = io::Error::last_os_error();
    // SAFETY: closes the socket just made.
    unsafe { libc::close(s) };
    if r < 0 { Err(err) } else { Ok(()) }
}

/// A TCP listener on 127.0.0.1:`port`, as a raw descriptor.
fn listen_loopback(port: u16) -> io::Result<RawFd> {
    // SAFETY: plain socket creation.
    let fd =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `addr` is a valid sockaddr_in of `len` bytes.
    let bound = check(unsafe { libc::bind(fd, (&raw const addr).cast(), len) })
        // SAFETY: listen on the socket just bound.
        .and_then(|_| check(unsafe { libc::listen(fd, 128) }));
    if let Err(e) = bound {
        // SAFETY: closes the socket just made.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    Ok(fd)
}

/// Sends descriptor `fd` over the Unix socket `channel`. By hand rather than with nix's
/// `sendmsg`, which allocates its control buffer: this runs between fork and exec.
fn send_fd(channel: RawFd, fd: RawFd) -> io::Result<()> {
    // Room for one descriptor's control message, aligned as a cmsghdr.
    let mut control = [0u64; 4];
    let mut byte = [b'l'];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: an all-zero msghdr is a valid value; its pointers are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is arithmetic.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as _;
    // SAFETY: the control buffer is large enough for one header and one descriptor
    // (CMSG_SPACE(4) is 24 bytes on 64-bit Linux, the buffer 32), so the first header
    // and its data lie inside it.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
    }
    // SAFETY: `msg` points at live buffers for the call.
    let n = unsafe { libc::sendmsg(channel, &msg, libc::MSG_NOSIGNAL) };
    if n == 1 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
