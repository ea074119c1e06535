//! The file store of logins.
//!
//! `state_dir/credentials/SERVER.json` (directory 0700, file 0600), written aside, synced
//! and renamed through `private_file`, on a blocking thread.

use super::StoreError;
use std::path::{Path, PathBuf};

/// The file's bytes, None when there is no file.
pub(super) async fn read(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    match tokio::fs::read(path).await {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StoreError::File {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Writes the file atomically and durably (the file and its directory are synced before
/// this returns), on a blocking thread.
pub(super) async fn write(path: &Path, bytes: Vec<u8>) -> Result<(), StoreError> {
    let file = path.to_owned();
    let written = mcpd_runtime::tracker::spawn_blocking(move || {
        mcpd_runtime::private_file::write(&file, &bytes)?;
        sync_dir(&file)
    })
    .await
    .map_err(std::io::Error::other)
    .and_then(|r| r);
    written.map_err(|source| StoreError::File {
        path: path.to_owned(),
        source,
    })
}

/// Removes the file; whether there was one.
pub(super) async fn remove(path: &Path) -> Result<bool, StoreError> {
    match tokio::fs::remove_file(path).await {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(StoreError::File {
            path: PathBuf::from(path),
            source,
        }),
    }
}

/// Syncs the directory holding `file`, so its rename survives a crash.
#[allow(clippy::disallowed_methods, reason = "called on a blocking thread")]
fn sync_dir(file: &Path) -> std::io::Result<()> {
    match file.parent() {
        Some(dir) => std::fs::File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}
