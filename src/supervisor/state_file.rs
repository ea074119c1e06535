//! The supervisor's state files (`eras.json`, `catalog.json`): read leniently, written atomically.

use serde::de::DeserializeOwned;
use std::path::Path;

/// Reads a state file; a missing or unreadable one is the empty state (`what` names it
/// in the warning). The files only save time, so a bad one never stops the daemon.
pub fn load<T: DeserializeOwned + Default>(path: Option<&Path>, what: &str) -> T {
    path.and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|text| match serde_json::from_str(&text) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!("ignoring the {what}, which cannot be read: {e}");
                None
            }
        })
        .unwrap_or_default()
}

/// Writes a state file atomically (written aside, then renamed). A failure is logged.
pub fn save(path: &Path, text: Result<Vec<u8>, serde_json::Error>, what: &str) {
    let result = (|| -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text.map_err(std::io::Error::other)?)?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        tracing::warn!(path = %path.display(), "could not save the {what}: {e}");
    }
}
