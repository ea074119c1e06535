//! The pointer to its socket a daemon under an unusual `XDG_RUNTIME_DIR` leaves for clients.
//!
//! It is left where clients without that variable look last (`/tmp/mcpd-UID/mcpd.sock`):
//! a symlink to its socket, made only where no live daemon answers, removed at exit if it
//! is still its own.
//!
//! MCP clients start `mcpd connect` without `XDG_RUNTIME_DIR` (`paths::socket_candidates`
//! says where it then looks), so a daemon under `/run/user/UID` is found and one under
//! any other runtime directory is not. A symlink is what every client already follows:
//! `connect` and `ctl` take the first place with a socket, and connecting through a
//! symlink reaches its target. The place belongs to whoever listens there: a daemon that
//! binds the fallback itself replaces a pointer ([`clear_for`]), and a pointer never
//! replaces a live socket or another daemon's live pointer.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a daemon at the place gets to answer before it counts as gone.
const ANSWER: Duration = Duration::from_secs(2);

/// A pointer this daemon left.
pub struct Pointer {
    at: PathBuf,
    to: PathBuf,
}

/// Leaves a pointer to `socket` where clients without `XDG_RUNTIME_DIR` look, when they
/// would not find it otherwise and no live daemon is there.
pub async fn leave(socket: &Path) -> Option<Pointer> {
    let at = mcpd_ctl::paths::pointer_place(socket)?;
    let dir = at.parent()?;
    if let Err(e) = own_dir(dir).await {
        tracing::warn!(dir = %dir.display(), "no pointer to the socket for clients without XDG_RUNTIME_DIR: {e}");
        return None;
    }
    let free = match tokio::fs::symlink_metadata(&at).await {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => {
            tracing::warn!(place = %at.display(), "no pointer to the socket: {e}");
            false
        }
        Ok(m) if m.file_type().is_symlink() => {
            let target = tokio::fs::read_link(&at).await.ok();
            target.as_deref() == Some(socket) || !answers(&at).await
        }
        Ok(m) if m.file_type().is_socket() => !answers(&at).await,
        Ok(_) => {
            tracing::warn!(place = %at.display(), "no pointer to the socket: something that is no socket is there");
            false
        }
    };
    if !free {
        tracing::info!(place = %at.display(), "another daemon answers where clients without XDG_RUNTIME_DIR look; they will reach it, not this one");
        return None;
    }
    // Made aside and renamed over the place: a client never finds it half made.
    let aside = dir.join(format!(".mcpd.sock.{}", std::process::id()));
    let _ = tokio::fs::remove_file(&aside).await; // a leftover of an earlier daemon of this pid, if any
    let placed = match tokio::fs::symlink(socket, &aside).await {
        Ok(()) => tokio::fs::rename(&aside, &at).await,
        Err(e) => Err(e),
    };
    if let Err(e) = placed {
        let _ = tokio::fs::remove_file(&aside).await; // not made, or made and not moved
        tracing::warn!(place = %at.display(), "could not leave a pointer to the socket: {e}");
        return None;
    }
    tracing::info!(place = %at.display(), "clients without XDG_RUNTIME_DIR find this daemon through a pointer");
    Some(Pointer {
        at,
        to: socket.to_owned(),
    })
}

impl Pointer {
    /// Removes the pointer if it is still this daemon's (a daemon that listens at the
    /// place itself may have taken it).
    pub async fn remove(self) {
        let ours = tokio::fs::read_link(&self.at).await.ok() == Some(self.to);
        if ours && let Err(e) = tokio::fs::remove_file(&self.at).await {
            tracing::warn!(place = %self.at.display(), "could not remove the pointer to the socket: {e}");
        }
    }
}

/// Before a daemon binds `socket`: when that is the fallback place and holds another
/// daemon's pointer, the pointer goes (the place is for the daemon that listens there).
pub async fn clear_for(socket: &Path) {
    if socket != mcpd_ctl::paths::fallback_socket() {
        return;
    }
    let pointer = tokio::fs::symlink_metadata(socket)
        .await
        .is_ok_and(|m| m.file_type().is_symlink());
    if pointer {
        tracing::info!(socket = %socket.display(), "replacing the pointer to another daemon's socket");
        let _ = tokio::fs::remove_file(socket).await; // gone meanwhile: the bind is what matters
    }
}

/// Whether a daemon answers at `path` (a connection it sees as an agent that leaves).
async fn answers(path: &Path) -> bool {
    matches!(
        tokio::time::timeout(ANSWER, tokio::net::UnixStream::connect(path)).await,
        Ok(Ok(_)) | Err(_)
    )
}

/// Makes the place's directory (0700) if missing; refuses one that is a symlink or
/// another user's, or that others may write.
async fn own_dir(dir: &Path) -> std::io::Result<()> {
    let made = tokio::fs::DirBuilder::new().mode(0o700).create(dir).await;
    match made {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    let meta = tokio::fs::symlink_metadata(dir).await?;
    let uid = nix::unistd::getuid().as_raw();
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "it is not a directory only this user may write",
        ));
    }
    Ok(())
}
