//! The supervisor's state files (`eras.json`, `catalog/SERVER.json`): read leniently at start, written atomically and privately by a writer task off the runtime.

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

enum Msg {
    Job(PathBuf, Job),
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
            Msg::Job(path, _) => write!(f, "Job({})", path.display()),
            Msg::Flush(_) => write!(f, "Flush"),
        }
    }
}

impl StateWriter {
    /// Starts the writer: files are written by blocking threads, never on the runtime's
    /// workers, and a burst of changes to one file writes it once.
    pub fn spawn() -> StateWriter {
        let (tx, rx) = mpsc::channel(QUEUE);
        crate::tasks::spawn(StateWriterActor { rx }.run());
        StateWriter { tx }
    }

    /// Writes `bytes` to `path` atomically, mode 0600, in a directory of mode 0700.
    pub fn write(&self, path: PathBuf, bytes: Vec<u8>, what: &'static str) {
        self.queue(path, Job::Write { bytes, what });
    }

    /// Removes `path` if it exists.
    pub fn remove(&self, path: PathBuf) {
        self.queue(path, Job::Remove);
    }

    fn queue(&self, path: PathBuf, job: Job) {
        if self.tx.try_send(Msg::Job(path, job)).is_err() {
            tracing::warn!("a state file was not saved: its writer is behind or stopped");
        }
    }

    /// Waits, at most `within`, until everything queued so far is written (shutdown).
    pub async fn flush(&self, within: Duration) {
        if crate::ask::ask(&self.tx, within, Msg::Flush).await.is_err() {
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
            let done = crate::tasks::spawn_blocking(move || {
                for (path, job) in jobs {
                    apply(&path, job);
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
    fn batch(&mut self, first: Msg) -> (BTreeMap<PathBuf, Job>, Vec<oneshot::Sender<()>>) {
        let mut jobs = BTreeMap::new();
        let mut flushes = Vec::new();
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Job(path, job) => {
                    jobs.insert(path, job);
                }
                Msg::Flush(respond_to) => flushes.push(respond_to),
            }
            next = self.rx.try_recv().ok();
        }
        (jobs, flushes)
    }
}

fn apply(path: &Path, job: Job) {
    match job {
        Job::Write { bytes, what } => {
            if let Err(e) = crate::private_file::write(path, &bytes) {
                tracing::warn!(path = %path.display(), "could not save the {what}: {e}");
            }
        }
        Job::Remove => match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %path.display(), "could not remove a state file: {e}"),
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
