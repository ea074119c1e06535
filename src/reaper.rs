//! Reaping orphans: mcpd is a child subreaper.
//!
//! So a server's children that lose their parent become mcpd's, and are reaped here.

#![allow(
    clippy::disallowed_methods,
    reason = "procfs reads never wait on a device, and the sweep runs once per burst of exits"
)]

use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use std::collections::HashSet;

/// Makes orphaned descendants (a server's children, once the server has exited) children
/// of mcpd instead of PID 1, which does not reap them on every machine.
pub fn become_subreaper() {
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        tracing::warn!(
            "cannot become a child subreaper ({e}); orphaned grandchildren of servers are left to init"
        );
    }
}

/// Reaps every zombie child of this process except `owned`: the processes whose
/// `Child` handle is waited on elsewhere (server leaders, the sentinel). Returns how many
/// were reaped.
pub fn reap_orphans(owned: &HashSet<u32>) -> usize {
    let me = std::process::id();
    let mut reaped = 0;
    for pid in children().unwrap_or_else(every_process) {
        if owned.contains(&pid) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the parenthesised command name: state, ppid, ...
        let mut rest = stat
            .rsplit_once(')')
            .map(|(_, r)| r.split_whitespace())
            .into_iter()
            .flatten();
        let (Some(state), Some(ppid)) = (rest.next(), rest.next()) else {
            continue;
        };
        if state == "Z" && ppid.parse::<u32>().ok() == Some(me) {
            // WNOHANG: never block; the zombie is ours, so this reaps it at once.
            if waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::WNOHANG)).is_ok() {
                reaped += 1;
            }
        }
    }
    reaped
}

/// This process's children, from each thread's `/proc/self/task/TID/children`: a few
/// small reads instead of a walk over every process on the machine. None where the
/// kernel does not provide those files.
fn children() -> Option<Vec<u32>> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut out = Vec::new();
    for task in tasks.flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).ok()?;
        out.extend(
            list.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    Some(out)
}

/// Every process id, for kernels without `children` files.
fn every_process() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .collect()
}
