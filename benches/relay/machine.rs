//! Facts about the machine and about processes, read from /proc.

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".into())
}

fn proc_field(path: &str, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim_start_matches([':', ' ', '\t']).trim().to_owned())
}

pub fn machine_facts() -> String {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = proc_field("/proc/cpuinfo", "model name").unwrap_or_else(|| "?".into());
    let mem = proc_field("/proc/meminfo", "MemTotal").unwrap_or_else(|| "?".into());
    format!(
        "machine: nproc {nproc}, kernel {} {} {}, cpu {cpu}, MemTotal {mem}",
        read_trim("/proc/sys/kernel/ostype"),
        read_trim("/proc/sys/kernel/osrelease"),
        std::env::consts::ARCH,
    )
}

pub fn loadavg() -> String {
    read_trim("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A value of /proc/PID/status in KiB (VmRSS, VmHWM).
pub fn status_kib(pid: u32, key: &str) -> Option<u64> {
    kib_of(&proc_field(&format!("/proc/{pid}/status"), key)?)
}

fn kib_of(value: &str) -> Option<u64> {
    value.split_whitespace().next()?.parse().ok()
}

/// A process's resident memory in KiB, from one read of /proc/PID/status.
#[derive(Clone, Copy)]
pub struct Rss {
    /// `VmRSS`: all of it, including pages of files other processes map too.
    pub vm: u64,
    /// `RssAnon`: what the process owns (heap, stacks, its writable data), and what the
    /// memory targets read.
    pub anon: u64,
    /// `RssFile`: the pages of mapped files it has touched, mostly code (its own binary's
    /// and the C library's); the kernel may drop them and read them back.
    pub file: u64,
}

pub fn rss_of(pid: u32) -> Option<Rss> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(kib_of)
    };
    Some(Rss {
        vm: field("VmRSS")?,
        anon: field("RssAnon")?,
        file: field("RssFile")?,
    })
}

/// The "Max open files" soft and hard limits of a process, as /proc shows them.
pub fn fd_limits_of(pid: u32) -> String {
    proc_field(&format!("/proc/{pid}/limits"), "Max open files")
        .map(|v| v.split_whitespace().take(2).collect::<Vec<_>>().join("/"))
        .unwrap_or_else(|| "?".into())
}

/// The command name and parent pid of a process, None once it is gone or a zombie.
pub fn comm_and_ppid(pid: u32) -> Option<(String, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    let mut rest = stat.get(close + 1..)?.split_whitespace();
    let state = rest.next()?;
    let ppid = rest.next()?.parse().ok()?;
    (state != "Z").then_some((comm, ppid))
}

/// Live children of `ppid` with their command names.
pub fn children_of(ppid: u32) -> Vec<(u32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let (comm, parent) = comm_and_ppid(pid)?;
            (parent == ppid).then_some((pid, comm))
        })
        .collect()
}

/// A process's read and write syscalls so far (`/proc/PID/io`: `syscr` + `syscw`) and its
/// minor page faults (`/proc/PID/stat`, field 10).
pub fn syscalls_and_faults(pid: u32) -> Option<(u64, u64)> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    let field = |name: &str| {
        io.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    let calls = field("syscr:")? + field("syscw:")?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')')?.1;
    let faults = rest.split_whitespace().nth(7)?.parse::<u64>().ok()?;
    Some((calls, faults))
}

/// A process's CPU time so far over all its live threads, in ns, from
/// `/proc/PID/task/*/schedstat` (finer than the clock ticks of `/proc/PID/stat`).
pub fn cpu_ns(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    tasks
        .map(|t| {
            let stat = std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok()?;
            stat.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}
