//! The supervisor's state files (`eras.json`, `catalog/SERVER.json`).
//!
//! Read leniently at start, written atomically and privately by a writer task off the
//! runtime.

#![allow(
    clippy::disallowed_methods,
    reason = "files are read once at start, before agents are served, and written on blocking threads"
)]

use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

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

/// What the writer is asked to do with one file.
#[derive(Debug)]
enum Job {
    Write { bytes: Vec<u8>, what: &'static str },
    Remove,
}

/// Jobs queued for the writer; more are dropped with a warning (the files only save
/// time, and the next change writes the file again).
const QUEUE: usize = 256;

/// Told when a write is on disk, or why it is not.
type Ack = oneshot::Sender<Result<(), String>>;

enum Msg {
    Job(PathBuf, Job, Option<Ack>),
    /// Answered once everything queued before it is written.
    Flush(oneshot::Sender<()>),
}

/// The cloneable way to the writer task, which ends when the last handle is dropped.
#[derive(Debug, Clone)]
pub struct StateWriter {
    tx: mpsc::Sender<Msg>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Msg::Job(path, ..) => write!(f, "Job({})", path.display()),
            Msg::Flush(_) => write!(f, "Flush"),
        }
    }
}

impl StateWriter {
    /// Starts the writer: files are written by blocking threads, never on the runtime's
    /// workers, and a burst of changes to one file writes it once.
    pub fn spawn() -> StateWriter {
        let (tx, rx) = mpsc::channel(QUEUE);
        mcpd_runtime::tracker::spawn(StateWriterActor { rx }.run());
        StateWriter { tx }
    }

    /// Writes `bytes` to `path` atomically, mode 0600, in a directory of mode 0700.
    pub fn write(&self, path: PathBuf, bytes: Vec<u8>, what: &'static str) {
        self.queue(path, Job::Write { bytes, what });
    }

    /// As `write`, and `ack` is told once the file is on disk (its directory synced), or
    /// why it is not.
    pub fn write_acked(&self, path: PathBuf, bytes: Vec<u8>, what: &'static str, ack: Ack) {
        if let Err(e) = self
            .tx
            .try_send(Msg::Job(path, Job::Write { bytes, what }, Some(ack)))
        {
            let Msg::Job(.., Some(ack)) = e.into_inner() else {
                return;
            };
            let _ = ack.send(Err(format!(
                "the {what} was not saved: its writer is behind or stopped"
            )));
        }
    }

    /// Removes `path` if it exists.
    pub fn remove(&self, path: PathBuf) {
        self.queue(path, Job::Remove);
    }

    fn queue(&self, path: PathBuf, job: Job) {
        if self.tx.try_send(Msg::Job(path, job, None)).is_err() {
            tracing::warn!("a state file was not saved: its writer is behind or stopped");
        }
    }

    /// Waits, at most `within`, until everything queued so far is written (shutdown).
    pub async fn flush(&self, within: Duration) {
        if mcpd_runtime::ask::ask(&self.tx, within, Msg::Flush)
            .await
            .is_err()
        {
            tracing::warn!("some state files were not saved before shutdown");
        }
    }
}

/// The actor behind `StateWriter`: takes every queued job, keeps the newest per file,
/// writes them on a blocking thread, then answers the flushes queued with them.
struct StateWriterActor {
    rx: mpsc::Receiver<Msg>,
}

impl StateWriterActor {
    async fn run(mut self) {
        while let Some(first) = self.rx.recv().await {
            let (jobs, flushes) = self.batch(first);
            let done = mcpd_runtime::tracker::spawn_blocking(move || {
                for (path, (job, acks)) in jobs {
                    let result = apply(&path, job);
                    for ack in acks {
                        let _ = ack.send(result.clone()); // the asker may have stopped waiting
                    }
                }
            });
            if done.await.is_err() {
                tracing::warn!("writing state files failed");
            }
            for respond_to in flushes {
                let _ = respond_to.send(()); // the asker may have stopped waiting
            }
        }
    }

    /// `first` and everything queued behind it: only the newest job for each file
    /// matters, and flushes are answered once the jobs queued before them are done.
    #[allow(
        clippy::type_complexity,
        reason = "a private batch, named by its parts"
    )]
    fn batch(
        &mut self,
        first: Msg,
    ) -> (BTreeMap<PathBuf, (Job, Vec<Ack>)>, Vec<oneshot::Sender<()>>) {
        let mut jobs: BTreeMap<PathBuf, (Job, Vec<Ack>)> = BTreeMap::new();
        let mut flushes = Vec::new();
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Job(path, job, ack) => {
                    // The newest job wins; whoever waited on an older one learns of it.
                    let acks = jobs.remove(&path).map(|(_, a)| a).unwrap_or_default();
                    let entry = jobs.entry(path).or_insert((job, acks));
                    entry.1.extend(ack);
                }
                Msg::Flush(respond_to) => flushes.push(respond_to),
            }
            next = self.rx.try_recv().ok();
        }
        (jobs, flushes)
    }
}

fn apply(path: &Path, job: Job) -> Result<(), String> {
    match job {
        Job::Write { bytes, what } => {
            mcpd_runtime::private_file::write(path, &bytes).map_err(|e| {
                tracing::warn!(path = %path.display(), "could not save the {what}: {e}");
                format!("could not save the {what} {}: {e}", path.display())
            })
        }
        Job::Remove => match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => {
                tracing::warn!(path = %path.display(), "could not remove a state file: {e}");
                Err(e.to_string())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[tokio::test]
    async fn files_are_written_privately_and_removed_and_the_last_write_wins() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/catalog/a.json");
        let writer = StateWriter::spawn();
        writer.write(path.clone(), b"1".to_vec(), "test");
        writer.write(path.clone(), b"2".to_vec(), "test");
        let gone = dir.path().join("state/gone.json");
        writer.write(gone.clone(), b"x".to_vec(), "test");
        writer.remove(gone.clone());
        writer.flush(Duration::from_secs(10)).await;
        assert_eq!(std::fs::read(&path).unwrap(), b"2");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert!(!gone.exists());
    }
}
