//! Files only the daemon's user may read, written whole or not at all.
//!
//! The supervisor's state files, the OAuth credential store and the secrets' file store
//! write through here.
//!
//! Tool lists and descriptions may say more about a user's servers than others should
//! read, and a credential or secret file holds tokens.

#![allow(
    clippy::disallowed_methods,
    reason = "blocking file IO: every caller runs it on a blocking thread"
)]

use std::path::Path;

/// Writes `bytes` to `path`: aside (`path` with the extension `json.tmp`, as every caller
/// writes JSON) then renamed, so a reader sees the old file or the new one, never half of
/// one; the file 0600 and a directory it creates 0700; both synced before it returns.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    // The rename itself is on disk only once the directory is synced.
    match path.parent() {
        Some(dir) => std::fs::File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}
