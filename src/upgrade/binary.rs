//! Checking the binary an upgrade would execute, before the daemon stops anything.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// How long `NEW handover-check` may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of its output read.
const MAX_OUTPUT: u64 = 4096;

/// Why the binary at mcpd's path cannot take over. The daemon goes on serving.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    #[error("no binary at {}: install the new mcpd there first (cargo install …), then run `mcpd ctl upgrade` again", path.display())]
    Missing { path: PathBuf },
    #[error("{} is not an executable file", path.display())]
    NotExecutable { path: PathBuf },
    #[error("{} is not mcpd, or an mcpd too old to upgrade in place: `{} handover-check` said {said:?}; restart instead (systemctl --user restart mcpd)", path.display(), path.display())]
    NotMcpd { path: PathBuf, said: String },
    #[error("{} (mcpd {version}) speaks handover format {theirs}, this daemon {ours}: restart instead (systemctl --user restart mcpd)", path.display(), ours = super::FORMAT)]
    Incompatible {
        path: PathBuf,
        version: String,
        theirs: String,
    },
    #[error("cannot run {}: {source}", path.display())]
    Run {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} did not answer `handover-check` within {CHECK_TIMEOUT:?}", path.display())]
    Timeout { path: PathBuf },
}

/// A binary found good.
#[derive(Debug)]
pub struct Checked {
    pub version: String,
}

/// Checks the binary at `path`: a file, executable, and mcpd speaking this format (its
/// `handover-check` line).
pub async fn check(path: &Path) -> Result<Checked, UpgradeError> {
    let path = path.to_owned();
    let meta = match tokio::fs::metadata(&path).await {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(UpgradeError::Missing { path });
        }
        Err(source) => return Err(UpgradeError::Run { path, source }),
    };
    if !meta.is_file() || nix::unistd::access(&path, nix::unistd::AccessFlags::X_OK).is_err() {
        return Err(UpgradeError::NotExecutable { path });
    }
    let mut child = tokio::process::Command::new(&path)
        .arg("handover-check")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env_remove(super::handover::ENV)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| UpgradeError::Run {
            path: path.clone(),
            source,
        })?;
    let mut said = String::new();
    let read = async {
        if let Some(out) = child.stdout.take() {
            let _ = out.take(MAX_OUTPUT).read_to_string(&mut said).await;
        }
    };
    if tokio::time::timeout(CHECK_TIMEOUT, read).await.is_err() {
        return Err(UpgradeError::Timeout { path });
    }
    // The output decides: the supervisor's orphan sweep may reap the child before a
    // wait here would, so its exit status is not relied on.
    let _ = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
    let line = said.lines().next().unwrap_or_default().trim().to_owned();
    let mut words = line.split(' ');
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some("mcpd-handover"), Some(format), Some(version), None) => {
            if format == super::FORMAT.to_string() {
                Ok(Checked {
                    version: version.to_owned(),
                })
            } else {
                Err(UpgradeError::Incompatible {
                    path,
                    version: version.to_owned(),
                    theirs: format.to_owned(),
                })
            }
        }
        _ => Err(UpgradeError::NotMcpd {
            path,
            said: mcpd_ctl::visible::escape(&line.chars().take(200).collect::<String>())
                .into_owned(),
        }),
    }
}
