//! The dashboard's port kept across restarts.
//!
//! Without `ui_listen`, the port it last listened on is remembered in the state directory
//! (`dashboard.json`) and asked for again at the next start, so the page's address (and a
//! bookmark of it, or an SSH forward) stays the same.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file in the state directory.
const FILE: &str = "dashboard.json";

#[derive(Serialize, Deserialize)]
struct Kept {
    /// The port the dashboard last listened on.
    port: u16,
}

fn file(state: &Path) -> PathBuf {
    state.join(FILE)
}

/// The port remembered in `state`, if any: a missing, unreadable or malformed file
/// remembers none (the dashboard then gets a fresh port, and the file is written anew).
pub(super) async fn remembered(state: &Path) -> Option<u16> {
    let bytes = tokio::fs::read(file(state)).await.ok()?;
    let kept: Kept = serde_json::from_slice(&bytes).ok()?;
    (kept.port != 0).then_some(kept.port)
}

/// Remembers `port` in `state` (written aside and renamed, mode 0600, on a blocking
/// thread). A failure is logged and otherwise ignored: the dashboard runs as well, and
/// only its next start may get another port.
pub(super) async fn remember(state: &Path, port: u16) {
    let path = file(state);
    let bytes = match serde_json::to_vec(&Kept { port }) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!("the dashboard's port could not be kept: {e}");
            return;
        }
    };
    let shown = path.display().to_string();
    let written = mcpd_runtime::tracker::spawn_blocking(move || {
        mcpd_runtime::private_file::write(&path, &bytes)
    })
    .await;
    match written {
        Ok(Ok(())) => tracing::debug!(port, file = %shown, "kept the dashboard's port"),
        Ok(Err(e)) => tracing::warn!(
            port,
            file = %shown,
            "the dashboard's port could not be kept ({e}); the next start may give it another address"
        ),
        Err(e) => tracing::warn!("the dashboard's port could not be kept: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_kept_port_is_read_back_and_a_bad_file_keeps_none() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        assert_eq!(remembered(&state).await, None);
        remember(&state, 40123).await;
        assert_eq!(remembered(&state).await, Some(40123));
        use std::os::unix::fs::PermissionsExt;
        let meta = tokio::fs::metadata(file(&state)).await.unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        for bad in [
            "",
            "{",
            "{\"port\": 0}",
            "{\"port\": 70000}",
            "{\"port\": \"1\"}",
        ] {
            tokio::fs::write(file(&state), bad).await.unwrap();
            assert_eq!(remembered(&state).await, None, "{bad:?}");
        }
    }
}
