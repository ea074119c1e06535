//! The systemd credentials store, read-only.
//!
//! `$CREDENTIALS_DIRECTORY/NAME`, which systemd fills from the unit's `LoadCredential=`,
//! `LoadCredentialEncrypted=` and `SetCredential=`.
//!
//! A credential is byte-exact in systemd; mcpd takes it as its text with exactly one
//! trailing `\n` removed, if it has one. The usual ways to make one (`echo TOKEN > file`,
//! an editor, `systemd-creds encrypt` of such a file) end it with a newline the user did
//! not mean as part of the secret, and a value ending in a newline can never be a header
//! value and would surprise as an environment variable. A credential that must end in
//! `\n` is written with two. The stores mcpd writes itself (keyring, file) keep values
//! exactly as they were set.

use super::SecretError;
use super::value::{SecretName, SecretValue};
use std::io::Read;
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// The largest credential mcpd reads: secrets are tokens and keys, and a value goes into an
/// environment variable or a header, where far less fits anyway.
pub const MAX_BYTES: u64 = 64 * 1024;

/// The credential `name` in `dir`, None when `dir` has no such file.
pub(super) async fn read(
    dir: PathBuf,
    name: SecretName,
) -> Result<Option<SecretValue>, SecretError> {
    mcpd_runtime::tracker::spawn_blocking(move || read_blocking(&dir, &name))
        .await
        .map_err(|e| SecretError::io("reading a systemd credential", std::io::Error::other(e)))?
}

/// The names of the credentials in `dir` (files whose names are secret names).
pub(super) async fn list(dir: PathBuf) -> Result<Vec<String>, SecretError> {
    mcpd_runtime::tracker::spawn_blocking(move || list_blocking(&dir))
        .await
        .map_err(|e| SecretError::io("listing systemd credentials", std::io::Error::other(e)))?
}

#[allow(clippy::disallowed_methods, reason = "runs on a blocking thread")]
fn read_blocking(dir: &Path, name: &SecretName) -> Result<Option<SecretValue>, SecretError> {
    let path = dir.join(name.as_str());
    let what = || format!("reading systemd credential {name:?} ({})", path.display());
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(SecretError::io(what(), e)),
    };
    let mut bytes = Zeroizing::new(Vec::new());
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| SecretError::io(what(), e))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(SecretError::Invalid(format!(
            "systemd credential {name:?} is larger than {} KiB",
            MAX_BYTES / 1024
        )));
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    let text = String::from_utf8(std::mem::take(&mut *bytes)).map_err(|e| {
        // The bytes are the secret: clear them before the error drops them.
        let mut b = e.into_bytes();
        zeroize::Zeroize::zeroize(&mut b);
        SecretError::Invalid(format!(
            "systemd credential {name:?} is not UTF-8 text (a secret mcpd passes on must be)"
        ))
    })?;
    Ok(Some(SecretValue::new(text)))
}

fn list_blocking(dir: &Path) -> Result<Vec<String>, SecretError> {
    let what = || format!("listing systemd credentials in {}", dir.display());
    super::value::names_in(dir, "", &what)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests may block")]
mod tests {
    use super::*;

    fn name(n: &str) -> SecretName {
        SecretName::new(n).unwrap()
    }

    async fn check(content: &[u8], expected: Result<&str, &str>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tok"), content).unwrap();
        match (read(dir.path().to_owned(), name("tok")).await, expected) {
            (Ok(Some(v)), Ok(want)) => assert_eq!(v.expose(), want),
            (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{e} lacks {want:?}"),
            (got, want) => panic!("{content:?}: got {got:?}, expected {want:?}"),
        }
    }

    #[tokio::test]
    async fn a_credential_is_read_with_one_trailing_newline_removed() {
        check(b"s3cret", Ok("s3cret")).await;
        check(b"s3cret\n", Ok("s3cret")).await;
        check(b"s3cret\n\n", Ok("s3cret\n")).await;
        check(b"s3cret\r\n", Ok("s3cret\r")).await;
        check(b" spaced \t", Ok(" spaced \t")).await;
        check(b"", Ok("")).await;
        check(b"\n", Ok("")).await;
        check(
            &vec![b'x'; MAX_BYTES as usize],
            Ok(&"x".repeat(MAX_BYTES as usize)),
        )
        .await;
        check(
            &vec![b'x'; MAX_BYTES as usize + 1],
            Err("larger than 64 KiB"),
        )
        .await;
        check(b"\xff\xfe", Err("is not UTF-8")).await;
    }

    #[tokio::test]
    async fn an_absent_credential_or_directory_is_none_and_names_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_owned();
        assert!(read(d.clone(), name("nope")).await.unwrap().is_none());
        assert!(read(d.join("gone"), name("x")).await.unwrap().is_none());
        assert_eq!(list(d.join("gone")).await.unwrap(), Vec::<String>::new());
        for f in ["b-token", "a.key", ".hidden", "bad name"] {
            std::fs::write(d.join(f), "v").unwrap();
        }
        assert_eq!(list(d).await.unwrap(), ["a.key", "b-token"]);
    }
}
