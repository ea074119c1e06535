//! The HTTP listener's bearer token.
//!
//! Taken from `daemon.http_token_env`, or generated once into a 0600 file beside the
//! socket and reused on later starts.

#![allow(
    clippy::disallowed_methods,
    reason = "the token file is read or written once, when the listener starts"
)]

use super::HttpError;
use crate::config::Secret;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Where the generated token lives: beside the socket, in the runtime directory.
pub fn path(socket: &Path) -> PathBuf {
    socket.with_file_name("mcpd-http-token")
}

/// The token in `file`, made (32 random bytes as hex, mode 0600) if there is none.
/// A file readable by others is tightened to 0600 with a warning.
pub fn load_or_create(file: &Path) -> Result<Secret, HttpError> {
    let err = |source| HttpError::Token {
        path: file.to_owned(),
        source,
    };
    match std::fs::read_to_string(file) {
        Ok(text) => {
            let meta = std::fs::metadata(file).map_err(err)?;
            if meta.permissions().mode() & 0o077 != 0 {
                tracing::warn!(path = %file.display(), "the HTTP token file was readable by others; setting it to 0600");
                std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
                    .map_err(err)?;
            }
            let token = text.trim();
            if token.len() >= 16 && token.bytes().all(|b| b.is_ascii_graphic()) {
                return Ok(Secret::new(token.to_owned()));
            }
            tracing::warn!(path = %file.display(), "the HTTP token file holds no usable token; writing a new one");
            std::fs::remove_file(file).map_err(err)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let token = format!(
        "{:032x}{:032x}",
        rand::random::<u128>(),
        rand::random::<u128>()
    );
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)
        .map_err(err)?;
    writeln!(f, "{token}").map_err(err)?;
    tracing::info!(path = %file.display(), "generated the HTTP bearer token (`mcpd ctl http-token` prints it)");
    Ok(Secret::new(token))
}
