//! A confined server's PID namespace between fork and exec.
//!
//! The process mcpd started stays outside and waits, a copy of it is the namespace's init
//! (PID 1), and the server is PID 2, with the signal semantics of any process.
//!
//! `unshare(CLONE_NEWPID)` puts the caller's next child, not the caller, in the new
//! namespace, so the process mcpd holds forks twice:
//! - it (outside, the process group's leader whose pid mcpd knows) closes every
//!   descriptor, waits for the init and ends as the server ended (the same exit code,
//!   or killed by the same signal), so mcpd sees the server's status;
//! - the init (PID 1, with its own parent-death signal: it dies with the outer one) mounts
//!   `/proc` for the namespace, forks the server, closes every descriptor and reaps every
//!   process of the namespace until the server ends; then it reports the server's status
//!   and exits, and the kernel kills whatever is left in the namespace;
//! - the server (PID 2) goes on to Landlock, seccomp and exec. A PID 1 ignores signals it
//!   has no handler for; PID 2 keeps the defaults, so `SIGTERM` ends it as it would
//!   outside.
//!
//! mcpd stops a server by signalling its process group, which all three share: the two
//! copies of mcpd ignore every such signal (a handler that does nothing, reset by the
//! server's exec), and the server gets it directly. `SIGKILL` ends them all. Nothing here
//! allocates or takes a lock: raw system calls only (the forks are `clone` system calls,
//! not libc's `fork`, which takes locks another thread of the daemon may have held).

use super::netns::check;
use nix::libc;
use std::io;

/// Does nothing: in the two copies of mcpd, a signal meant for the server's group only
/// interrupts their waits.
extern "C" fn ignore(_: libc::c_int) {}

/// Every catchable signal but the faults and `SIGCHLD` handled by [`ignore`]; those back
/// to their defaults. Also drops the daemon's own handlers, which a signal to this copy
/// would otherwise run (the daemon's tokio handlers write to its wake-up pipe).
pub(super) fn quiet_signals() {
    for sig in 1..32 {
        let default = matches!(
            sig,
            libc::SIGCHLD
                | libc::SIGSEGV
                | libc::SIGBUS
                | libc::SIGILL
                | libc::SIGFPE
                | libc::SIGTRAP
                | libc::SIGABRT
                | libc::SIGSYS
        );
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: an all-zero sigaction is valid; the handler is a plain function.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = if default {
                libc::SIG_DFL
            } else {
                ignore as extern "C" fn(libc::c_int) as libc::sighandler_t
            };
            act.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
}

/// A fork by system call: the child returns 0.
fn fork() -> io::Result<libc::pid_t> {
    // SAFETY: clone with SIGCHLD and no stack is fork; the child runs on a copy of this
    // stack and only makes system calls.
    let r = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as libc::pid_t)
    }
}

/// In the process mcpd started, just after `unshare(CLONE_NEWPID)` and the mounts:
/// returns in the server's process only, or with an error in the process that failed
/// (which then reports it to mcpd and does not exec). `proc` runs in the init, before the
/// server's fork; `argv` is blanked there.
pub(super) fn split(
    argv: Option<(usize, usize)>,
    proc: impl Fn() -> io::Result<()>,
) -> io::Result<()> {
    // SAFETY: pidfd_open of this process, with no flags (the descriptor is close-on-exec).
    let me =
        check(unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0u32) as libc::c_int })?;
    let mut pipe = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    check(unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) })?;
    let [report, reported] = pipe;
    if fork()? != 0 {
        outside(report);
    }
    // The init.
    // SAFETY: closes this process's copy of the read end.
    unsafe { libc::close(report) };
    // SAFETY: prctl with integers.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) })?;
    // The outer process ended before the line above: the signal will never come.
    let mut poll = libc::pollfd {
        fd: me,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polls one descriptor without waiting.
    if unsafe { libc::poll(&raw mut poll, 1, 0) } != 0 {
        // SAFETY: ends this copy without running anything of the daemon's.
        unsafe { libc::_exit(1) };
    }
    // SAFETY: closes the descriptor opened above.
    unsafe { libc::close(me) };
    proc()?;
    if let Some((start, len)) = argv {
        // SAFETY: the daemon's command line, where the kernel put it (read from
        // /proc/self/stat before the fork); this copy never reads it again.
        unsafe { std::ptr::write_bytes(start as *mut u8, 0, len) };
    }
    // SAFETY: prctl with a NUL-terminated name.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"mcpd-init".as_ptr(), 0, 0, 0) };
    let server = fork()?;
    if server == 0 {
        // SAFETY: the server does not keep the init's end of the report.
        unsafe { libc::close(reported) };
        return Ok(());
    }
    init(server, reported)
}

/// The process mcpd holds: waits for the init, then ends as the server did.
fn outside(report: libc::c_int) -> ! {
    close_all_but(report);
    let mut status = 0;
    loop {
        // SAFETY: waits for any child (the init is the only one) into `status`.
        let r = unsafe { libc::waitpid(-1, &raw mut status, 0) };
        if r > 0 {
            break;
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // SAFETY: ends this copy.
            unsafe { libc::_exit(1) };
        }
    }
    let mut bytes = [0u8; 4];
    // SAFETY: reads at most 4 bytes into the array.
    let n = unsafe { libc::read(report, bytes.as_mut_ptr().cast(), 4) };
    if n == 4 {
        status = i32::from_ne_bytes(bytes);
    }
    end_as(status)
}

/// The init: reaps every process of the namespace until the server ends, then reports its
/// status and exits (the kernel kills what is left).
fn init(server: libc::pid_t, reported: libc::c_int) -> ! {
    close_all_but(reported);
    loop {
        let mut status = 0;
        // SAFETY: waits for any child into `status`.
        let r = unsafe { libc::waitpid(-1, &raw mut status, 0) };
        if r == server {
            let bytes = status.to_ne_bytes();
            // SAFETY: writes the 4 bytes of the array; the outer process reads them.
            unsafe { libc::write(reported, bytes.as_ptr().cast(), 4) };
            // SAFETY: ends the init.
            unsafe { libc::_exit(0) };
        }
        if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // SAFETY: no child left (cannot happen while the server runs).
            unsafe { libc::_exit(1) };
        }
    }
}

/// Closes every descriptor but `keep` (standard ones included: mcpd must see the
/// server's pipes close when the server ends).
fn close_all_but(keep: libc::c_int) {
    // SAFETY: close_range with bounds and no flags.
    unsafe {
        if keep > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, (keep - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32);
    }
}

/// Ends this process as a wait `status` says the server ended.
fn end_as(status: libc::c_int) -> ! {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: no core file of this copy of mcpd; the signal back to its default; then
        // the signal to itself, which ends it as the server was ended.
        unsafe {
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            libc::signal(sig, libc::SIG_DFL);
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
    }
    // SAFETY: ends this copy with the server's code.
    unsafe { libc::_exit(libc::WEXITSTATUS(status)) }
}
