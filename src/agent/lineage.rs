//! Where a socket peer's process comes from.
//!
//! A process of a server mcpd started (mcpd is its ancestor) or not, read from the
//! parents in `/proc/PID/stat`.
//!
//! mcpd is a child subreaper (`reaper.rs`), so every process a server starts, and every
//! descendant of those, has mcpd as an ancestor even after its own parent died: a walk up
//! the parents that reaches mcpd finds a server's process, one that reaches init does not.

/// The most parents walked. A chain deeper than this is a server's making (a person's
/// shell is a handful of steps from init), so it counts as [`PeerOrigin::Unknown`].
const MAX_STEPS: usize = 64;

/// Where a connection's peer process comes from, as the process tree tells at accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PeerOrigin {
    /// Not a descendant of the daemon: a person's shell or agent, or a connection without
    /// a peer process (HTTP, or a peer in another pid namespace).
    #[default]
    Outside,
    /// A descendant of the daemon: a process of a server it started. `leader` is the
    /// daemon's own child it descends from: the server's process, its group's leader; for
    /// a process whose parents died (reparented to mcpd, the subreaper), that process.
    Server { leader: u32 },
    /// The walk could not finish: a process on the way up was gone (a child that connects
    /// and exits at once) or hidden (`hidepid`), or the chain was over [`MAX_STEPS`]. A
    /// server can cause each on purpose, so this is treated as a server's.
    Unknown,
}

impl PeerOrigin {
    /// The leader pid of the server the peer belongs to, if it is known to be a server's.
    pub fn server(self) -> Option<u32> {
        match self {
            PeerOrigin::Server { leader } => Some(leader),
            PeerOrigin::Outside | PeerOrigin::Unknown => None,
        }
    }
}

/// Where the process `peer` (from `SO_PEERCRED`) comes from. At most [`MAX_STEPS`] reads
/// of procfs, which never waits on a device.
pub fn origin(peer: Option<i32>) -> PeerOrigin {
    let me = std::process::id();
    match peer.and_then(|p| u32::try_from(p).ok()) {
        // Pid 0: the peer is in a pid namespace that mcpd's descendants never are
        // outside of (a descendant is always visible to its ancestors).
        None | Some(0) => PeerOrigin::Outside,
        Some(pid) => walk(pid, me, parent_of),
    }
}

/// Walks up from `pid` through `parent` until it reaches `me` (a server's process),
/// init or the top of the namespace (pid 1, or 0 for a process whose parent is outside
/// it), or gives up.
fn walk(mut pid: u32, me: u32, parent: impl Fn(u32) -> Option<u32>) -> PeerOrigin {
    if pid == me {
        // The daemon itself is no server.
        return PeerOrigin::Outside;
    }
    for _ in 0..MAX_STEPS {
        let Some(up) = parent(pid) else {
            return PeerOrigin::Unknown;
        };
        // Before the test for init: mcpd may be pid 1 itself (a container's entry point).
        if up == me {
            return PeerOrigin::Server { leader: pid };
        }
        if up <= 1 {
            return PeerOrigin::Outside;
        }
        pid = up;
    }
    PeerOrigin::Unknown
}

/// The parent of process `pid`, from `/proc/PID/stat`; None if it cannot be read.
pub fn parent_of(pid: u32) -> Option<u32> {
    #[allow(
        clippy::disallowed_methods,
        reason = "a procfs file, which never waits"
    )]
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    ppid_in(&stat)
}

/// The fourth field of a `/proc/PID/stat` line, read after the command name's closing
/// parenthesis: the name itself may hold spaces and parentheses, so the last one ends it.
fn ppid_in(stat: &str) -> Option<u32> {
    let after = stat.get(stat.rfind(')')? + 1..)?;
    after.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_is_read_after_the_last_parenthesis() {
        let check = |stat: &str, expected: Option<u32>| {
            assert_eq!(ppid_in(stat), expected, "{stat}");
        };
        check("1234 (node) S 77 1234 1234 0 -1", Some(77));
        check("1234 (a) S 9 (b) S 5) R 88 1 1", Some(88));
        check("1234 (two words) S 3 1 1", Some(3));
        check("1 (systemd) S 0 1 1", Some(0));
        check("1234 (node) S", None);
        check("1234 node S 77", None);
        check("", None);
    }

    #[test]
    fn a_walk_finds_the_daemons_child_stops_at_init_and_gives_up_when_it_cannot_tell() {
        // mcpd is 100; 200 is a server, 300 its child, 400 a grandchild; 50 is a shell.
        let tree = |pid: u32| match pid {
            200 => Some(100),
            300 => Some(200),
            400 => Some(300),
            100 => Some(50),
            50 => Some(1),
            60 => Some(0),
            // 500's parent is gone.
            500 => Some(501),
            // A chain too deep to walk: 1000 → 1001 → … → 1100 → 100.
            1100 => Some(100),
            p @ 1000..1100 => Some(p + 1),
            _ => None,
        };
        let check = |pid: u32, me: u32, expected: PeerOrigin| {
            assert_eq!(walk(pid, me, tree), expected, "from {pid}");
        };
        check(200, 100, PeerOrigin::Server { leader: 200 });
        check(400, 100, PeerOrigin::Server { leader: 200 });
        check(50, 100, PeerOrigin::Outside);
        check(60, 100, PeerOrigin::Outside);
        check(100, 100, PeerOrigin::Outside);
        check(500, 100, PeerOrigin::Unknown);
        check(9999, 100, PeerOrigin::Unknown);
        check(1000, 100, PeerOrigin::Unknown);
        check(1050, 100, PeerOrigin::Server { leader: 1100 });
        // mcpd as pid 1: everything its tree holds is a server's.
        check(50, 1, PeerOrigin::Server { leader: 50 });
    }

    #[test]
    fn this_process_and_init_are_outside_and_a_child_of_this_one_is_a_servers() {
        assert_eq!(origin(None), PeerOrigin::Outside);
        assert_eq!(origin(Some(0)), PeerOrigin::Outside);
        assert_eq!(origin(Some(1)), PeerOrigin::Outside);
        let me = std::process::id();
        assert_eq!(origin(i32::try_from(me).ok()), PeerOrigin::Outside);
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .expect("sleep");
        let pid = child.id();
        let seen = origin(i32::try_from(pid).ok());
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(seen, PeerOrigin::Server { leader: pid });
    }
}
