//! The seccomp filter of a confined server, compiled in the daemon and installed between fork and exec: what Landlock on this kernel cannot refuse.

use super::SandboxError;
use seccompiler::{SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition};
use seccompiler::{SeccompFilter, SeccompRule};

/// Which sockets a confined server may not make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// Unix sockets made with `socket` (`socketpair` stays allowed): Landlock before ABI 9
    /// does not cover connecting to a pathname socket, and the user's session bus or
    /// agent sockets sit at paths anyone can guess (`/run/user/UID/bus`): through the
    /// bus a server could ask systemd to run anything outside its sandbox.
    pub unix: bool,
    /// Every IPv4 and IPv6 socket (`network = "none"`).
    pub ip: bool,
    /// IPv4 and IPv6 datagram sockets (a host list without a network namespace: Landlock
    /// covers TCP only, and UDP would leave DNS and QUIC open to any host).
    pub udp: bool,
}

/// The filter for `refused`: each listed `socket` call, and `io_uring_setup` (whose
/// operations make sockets without the `socket` system call), fail with EPERM;
/// everything else is allowed. None when nothing is refused.
pub fn filter(refused: Refused) -> Result<Option<seccompiler::BpfProgram>, SandboxError> {
    if refused
        == (Refused {
            unix: false,
            ip: false,
            udp: false,
        })
    {
        return Ok(None);
    }
    let fail = |e: &dyn std::fmt::Display| SandboxError::Seccomp(e.to_string());
    let arg = |n: u8, op: SeccompCmpOp, v: i32| {
        SeccompCondition::new(n, SeccompCmpArgLen::Dword, op, v as u64).map_err(|e| fail(&e))
    };
    let family = |f: i32| arg(0, SeccompCmpOp::Eq, f);
    let rule =
        |conditions: Vec<SeccompCondition>| SeccompRule::new(conditions).map_err(|e| fail(&e));
    let mut socket = Vec::new();
    if refused.unix {
        socket.push(rule(vec![family(nix::libc::AF_UNIX)?])?);
    }
    for f in [nix::libc::AF_INET, nix::libc::AF_INET6] {
        if refused.ip {
            socket.push(rule(vec![family(f)?])?);
        } else if refused.udp {
            // The type carries SOCK_NONBLOCK and SOCK_CLOEXEC above its low four bits.
            let dgram = arg(1, SeccompCmpOp::MaskedEq(0xf), nix::libc::SOCK_DGRAM)?;
            socket.push(rule(vec![family(f)?, dgram])?);
        }
    }
    let rules = [
        (nix::libc::SYS_socket, socket),
        (nix::libc::SYS_io_uring_setup, vec![]),
    ]
    .into_iter()
    .collect();
    let arch = std::env::consts::ARCH.try_into().map_err(|e| fail(&e))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(nix::libc::EPERM as u32),
        arch,
    )
    .map_err(|e| fail(&e))?;
    filter
        .try_into()
        .map(Some)
        .map_err(|e: seccompiler::BackendError| fail(&e))
}
