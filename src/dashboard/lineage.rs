//! The daemon's descendants, read from `/proc`, which the dashboard never serves.
//!
//! They are every process of every server it started, and theirs: the dashboard serves
//! none of them, whatever token or cookie it holds.
//!
//! mcpd is a child subreaper (`reaper.rs`), so a server's process whose parent died is
//! still among them. The tree is read from the kernel's `children` files (one per thread)
//! where the kernel has them, else from every process's parent in `/proc/PID/stat`.

use std::collections::HashMap;

/// The most descendants walked: a server that makes more is not told apart from one
/// hiding its socket among them, so the request is refused.
const MAX_DESCENDANTS: usize = 4096;
/// The most descriptors of one process looked at.
pub(super) const MAX_FDS: usize = 65_536;
/// The most processes read for the parents when the kernel has no `children` files.
const MAX_PROCESSES: usize = 65_536;

/// Calls `visit` with each descendant of the daemon until it answers `Ok(false)` (found
/// what it looked for) or an error. `Err` when the tree cannot be read whole.
pub(super) fn each_descendant(
    mut visit: impl FnMut(u32) -> Result<bool, String>,
) -> Result<(), String> {
    let me = std::process::id();
    let mut queue = vec![me];
    let mut seen = 0usize;
    let by_parent = if children_of(me).is_none() {
        Some(parents()?)
    } else {
        None
    };
    while let Some(pid) = queue.pop() {
        let children = match &by_parent {
            Some(map) => map.get(&pid).cloned().unwrap_or_default(),
            // A process that ended meanwhile has no children to look at.
            None => children_of(pid).unwrap_or_default(),
        };
        for child in children {
            seen += 1;
            if seen > MAX_DESCENDANTS {
                return Err(format!("more than {MAX_DESCENDANTS} descendants"));
            }
            if !visit(child)? {
                return Ok(());
            }
            queue.push(child);
        }
    }
    Ok(())
}

/// The children of `pid` from its threads' `children` files; None when the kernel has
/// none (built without `CONFIG_PROC_CHILDREN`) or the process is gone.
fn children_of(pid: u32) -> Option<Vec<u32>> {
    #[allow(
        clippy::disallowed_methods,
        reason = "procfs directories and files, which never wait"
    )]
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut out = Vec::new();
    for task in tasks.flatten() {
        let mut file = task.path();
        file.push("children");
        #[allow(
            clippy::disallowed_methods,
            reason = "a procfs file, which never waits"
        )]
        let text = std::fs::read_to_string(&file).ok()?;
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    Some(out)
}

/// Every process's children, from each one's parent in `/proc/PID/stat`.
fn parents() -> Result<HashMap<u32, Vec<u32>>, String> {
    #[allow(clippy::disallowed_methods, reason = "procfs, which never waits")]
    let entries = std::fs::read_dir("/proc").map_err(|e| format!("/proc: {e}"))?;
    let mut map: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in entries.flatten().take(MAX_PROCESSES) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // A process gone meanwhile is no one's child any more.
        if let Some(parent) = crate::agent::parent_of(pid) {
            map.entry(parent).or_default().push(pid);
        }
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_of_this_process_is_a_descendant_and_init_is_not() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut found = Vec::new();
        each_descendant(|pid| {
            found.push(pid);
            Ok(true)
        })
        .unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.contains(&child.id()), "{found:?}");
        assert!(!found.contains(&1));
        assert!(!found.contains(&std::process::id()));
    }

    #[test]
    fn the_tree_read_from_parents_matches_the_children_files() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let map = parents().unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert!(map[&std::process::id()].contains(&child.id()));
    }
}
