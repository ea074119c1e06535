//! The seccomp filter of a confined server, compiled in the daemon.
//!
//! It is installed between fork and exec, and refuses what Landlock on this kernel cannot
//! refuse.

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

/// The families a confined server may make sockets of: an allow-list, so a family the
/// kernel adds later (or one a profile never thought of: vsock, which reaches the host
/// of a VM; packet; netlink) is refused unless it is named here. Unix sockets unless
/// refused; IPv4 and IPv6 unless `network = "none"`, and netlink (the local routing
/// table, which `getaddrinfo` and interface listings read) only with them.
fn allowed(refused: Refused) -> Vec<i32> {
    let mut families = Vec::new();
    if !refused.unix {
        families.push(nix::libc::AF_UNIX);
    }
    if !refused.ip {
        families.extend([
            nix::libc::AF_INET,
            nix::libc::AF_INET6,
            nix::libc::AF_NETLINK,
        ]);
    }
    families
}

/// The filter for `refused`: a `socket` call of a family not [`allowed`], each refused
/// datagram socket, and `io_uring_setup` (whose operations make sockets without the
/// `socket` system call), fail with EPERM; everything else is allowed.
pub fn filter(refused: Refused) -> Result<Option<seccompiler::BpfProgram>, SandboxError> {
    let fail = |e: &dyn std::fmt::Display| SandboxError::Seccomp(e.to_string());
    let arg = |n: u8, op: SeccompCmpOp, v: i32| {
        SeccompCondition::new(n, SeccompCmpArgLen::Dword, op, v as u64).map_err(|e| fail(&e))
    };
    let family = |f: i32| arg(0, SeccompCmpOp::Eq, f);
    let rule =
        |conditions: Vec<SeccompCondition>| SeccompRule::new(conditions).map_err(|e| fail(&e));
    // One rule whose conditions (all must hold) say "none of the allowed families".
    let others = allowed(refused)
        .into_iter()
        .map(|f| arg(0, SeccompCmpOp::Ne, f))
        .collect::<Result<Vec<_>, _>>()?;
    // No family allowed: the call itself matches, with no conditions.
    let mut socket = match others.is_empty() {
        true => Vec::new(),
        false => vec![rule(others)?],
    };
    if refused.udp && !refused.ip {
        for f in [nix::libc::AF_INET, nix::libc::AF_INET6] {
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
