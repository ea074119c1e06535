//! mcpd's own file store.
//!
//! One file per secret, `state_dir/secrets/NAME.json` (`{"value": "…"}`), 0600 in a 0700
//! directory, written whole or not at all through `private_file`.
//!
//! One file per secret rather than one file of all of them: setting or removing a secret
//! touches only its own file, so two `mcpd ctl secret set` of different names at once
//! cannot lose either (one shared file would be read, changed and written back by both,
//! and need a lock), listing is reading the directory, and a damaged file costs one
//! secret, not all. It mirrors systemd's credentials directory, one file a name. The
//! `.json` ending keeps each name's temporary file (`NAME.json.tmp`) its own.
//!
//! The values are in plain text, protected only by the file modes (as OAuth tokens are in
//! `state_dir/credentials/`): the store for machines without a keyring. A secret file
//! that others may read is refused, as ssh refuses such a key, rather than used.

use super::SecretError;
use super::value::{SecretName, SecretValue};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// The store: a directory under the state directory.
#[derive(Debug, Clone)]
pub(super) struct FileStore {
    dir: PathBuf,
}

/// One secret's file.
#[derive(Serialize, Deserialize)]
struct Stored<'a> {
    #[serde(borrow)]
    value: std::borrow::Cow<'a, str>,
}

/// The ending of a secret's file name.
const SUFFIX: &str = ".json";

/// The largest file read: the same bound as a systemd credential's, and its JSON escapes.
const MAX_FILE_BYTES: u64 = 6 * super::credentials::MAX_BYTES + 64;

impl FileStore {
    pub(super) fn new(state_dir: &Path) -> FileStore {
        FileStore {
            dir: state_dir.join("secrets"),
        }
    }

    #[cfg(test)]
    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, name: &SecretName) -> PathBuf {
        self.dir.join(format!("{name}{SUFFIX}"))
    }

    pub(super) async fn get(&self, name: &SecretName) -> Result<Option<SecretValue>, SecretError> {
        let (path, name) = (self.path(name), name.clone());
        blocking("reading the file store", move || read(&path, &name)).await
    }

    pub(super) async fn set(
        &self,
        name: &SecretName,
        value: &SecretValue,
    ) -> Result<(), SecretError> {
        let path = self.path(name);
        let bytes = Zeroizing::new(
            serde_json::to_vec(&Stored {
                value: value.expose().into(),
            })
            .map_err(|e| SecretError::io("encoding a secret", std::io::Error::other(e)))?,
        );
        let what = format!("writing secret {name:?} to {}", path.display());
        blocking("writing the file store", move || {
            mcpd_runtime::private_file::write(&path, &bytes).map_err(|e| SecretError::io(what, e))
        })
        .await
    }

    /// Whether there was a file to remove.
    pub(super) async fn remove(&self, name: &SecretName) -> Result<bool, SecretError> {
        let path = self.path(name);
        let what = format!("removing secret {name:?} ({})", path.display());
        match tokio::fs::remove_file(&path).await {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(SecretError::io(what, e)),
        }
    }

    pub(super) async fn list(&self) -> Result<Vec<String>, SecretError> {
        let dir = self.dir.clone();
        blocking("listing the file store", move || list(&dir)).await
    }
}

/// Runs `f` on a blocking thread.
async fn blocking<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> Result<T, SecretError> + Send + 'static,
) -> Result<T, SecretError> {
    mcpd_runtime::tracker::spawn_blocking(f)
        .await
        .map_err(|e| SecretError::io(what, std::io::Error::other(e)))?
}

#[allow(clippy::disallowed_methods, reason = "runs on a blocking thread")]
fn read(path: &Path, name: &SecretName) -> Result<Option<SecretValue>, SecretError> {
    use std::io::Read;
    let what = || format!("reading secret {name:?} ({})", path.display());
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(SecretError::io(what(), e)),
    };
    let mode = file
        .metadata()
        .map_err(|e| SecretError::io(what(), e))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(SecretError::Invalid(format!(
            "secret {name:?}: {} may be read by others (mode {:o}); `chmod 600` it, or set the secret again",
            path.display(),
            mode & 0o777
        )));
    }
    let mut bytes = Zeroizing::new(Vec::new());
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| SecretError::io(what(), e))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(SecretError::Invalid(format!(
            "secret {name:?}: {} is too large",
            path.display()
        )));
    }
    // serde_json's error names a line and column, never the text.
    let stored: Stored<'_> = serde_json::from_slice(&bytes).map_err(|e| {
        SecretError::Invalid(format!(
            "secret {name:?}: {} is not a secret file: {e}; set the secret again",
            path.display()
        ))
    })?;
    Ok(Some(SecretValue::new(stored.value.into_owned())))
}

fn list(dir: &Path) -> Result<Vec<String>, SecretError> {
    let what = || format!("listing the file store ({})", dir.display());
    super::value::names_in(dir, SUFFIX, &what)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests may block")]
mod tests {
    use super::*;

    fn name(n: &str) -> SecretName {
        SecretName::new(n).unwrap()
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[tokio::test]
    async fn a_secret_is_kept_privately_read_back_listed_and_removed() {
        let state = tempfile::tempdir().unwrap();
        let store = FileStore::new(state.path());
        assert!(store.get(&name("tok")).await.unwrap().is_none());
        assert!(store.list().await.unwrap().is_empty());

        let value = "va\"lue\n with \\ and ünïcode\u{0}";
        store
            .set(&name("tok"), &SecretValue::new(value.into()))
            .await
            .unwrap();
        store
            .set(&name("a.b"), &SecretValue::new("x".into()))
            .await
            .unwrap();
        let file = state.path().join("secrets/tok.json");
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(&state.path().join("secrets")), 0o700);
        assert_eq!(
            store.get(&name("tok")).await.unwrap().unwrap().expose(),
            value
        );
        assert_eq!(store.list().await.unwrap(), ["a.b", "tok"]);

        store
            .set(&name("tok"), &SecretValue::new("second".into()))
            .await
            .unwrap();
        assert_eq!(
            store.get(&name("tok")).await.unwrap().unwrap().expose(),
            "second"
        );
        assert!(store.remove(&name("tok")).await.unwrap());
        assert!(!store.remove(&name("tok")).await.unwrap());
        assert!(store.get(&name("tok")).await.unwrap().is_none());
        assert_eq!(store.list().await.unwrap(), ["a.b"]);
    }

    #[tokio::test]
    async fn a_secret_file_others_may_read_or_that_does_not_parse_is_refused() {
        let state = tempfile::tempdir().unwrap();
        let store = FileStore::new(state.path());
        store
            .set(&name("tok"), &SecretValue::new("canary-7d1".into()))
            .await
            .unwrap();
        let file = state.path().join("secrets/tok.json");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = store.get(&name("tok")).await.unwrap_err().to_string();
        assert!(e.contains("may be read by others (mode 644)"), "{e}");

        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&file, "canary-7d1").unwrap();
        let e = store.get(&name("tok")).await.unwrap_err().to_string();
        assert!(e.contains("is not a secret file"), "{e}");
        assert!(!e.contains("canary"), "{e}");
    }

    #[tokio::test]
    async fn temporary_and_foreign_files_are_not_listed() {
        let state = tempfile::tempdir().unwrap();
        let store = FileStore::new(state.path());
        store
            .set(&name("kept"), &SecretValue::new("x".into()))
            .await
            .unwrap();
        for f in [
            "half.json.tmp",
            "notes.txt",
            ".hidden.json",
            "bad name.json",
        ] {
            std::fs::write(store.dir().join(f), "{}").unwrap();
        }
        assert_eq!(store.list().await.unwrap(), ["kept"]);
    }
}
