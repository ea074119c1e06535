//! RLIMIT_NOFILE, raised so a thousand idle agents fit.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// The soft and hard limits.
pub fn get() -> Result<(u64, u64), String> {
    getrlimit(Resource::RLIMIT_NOFILE).map_err(|e| format!("getrlimit: {e}"))
}

/// Raises the soft limit to at least `want` (up to the hard limit); returns the result.
pub fn raise(want: u64) -> Result<(u64, u64), String> {
    let (cur, max) = get()?;
    if cur >= want {
        return Ok((cur, max));
    }
    if max < want {
        return Err(format!(
            "RLIMIT_NOFILE hard limit {max} is below the {want} file descriptors needed"
        ));
    }
    setrlimit(Resource::RLIMIT_NOFILE, want, max)
        .map_err(|e| format!("setrlimit(RLIMIT_NOFILE, {want}): {e}"))?;
    get()
}
