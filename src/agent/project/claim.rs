//! One agent's claims about its project (the profile's, its roots', the shim's directory).
//!
//! Each checked off the connection's actor, and the project in force among them.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::mpsc;

/// The longest path a claim may name.
const MAX_PATH: usize = 4096;
/// How long a call to a project server waits for the agent's claims being checked (its
/// roots asked, its directory looked up) before it goes on without a project.
pub(super) const CLAIM_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Claims being checked, and the project in force: what a call to a project server
/// made meanwhile waits on.
pub type Seen = tokio::sync::watch::Receiver<(u32, Option<Arc<Path>>)>;

/// Where a claim came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Shim,
    Roots,
    Profile,
}

/// A checked claim: the canonical directory, or None when the source names none now.
#[derive(Debug)]
pub struct News {
    pub(super) source: Source,
    pub(super) path: Option<Arc<Path>>,
}

/// What a connection knows of its agent's project.
#[derive(Debug)]
pub struct Project {
    /// Checked claims come back to the connection here.
    pub(super) tx: mpsc::Sender<News>,
    shim: Option<Arc<Path>>,
    roots: Option<Arc<Path>>,
    fixed: Option<Arc<Path>>,
    /// The project in force: the profile's, the roots', or the shim's.
    pub current: Option<Arc<Path>>,
    /// The agent is another user's (`allow_uids`): project servers are not for it, as
    /// they would run with the daemon user's rights in a directory it names.
    pub foreign: bool,
    /// Claims being checked (each ends as `News`).
    pending: u32,
    /// `pending` and `current`, for calls waiting on them.
    seen: tokio::sync::watch::Sender<(u32, Option<Arc<Path>>)>,
}

impl Project {
    pub fn new(tx: mpsc::Sender<News>, foreign: bool) -> Project {
        Project {
            tx,
            shim: None,
            roots: None,
            fixed: None,
            current: None,
            foreign,
            pending: 0,
            seen: tokio::sync::watch::Sender::new((0, None)),
        }
    }

    /// A claim is being checked: calls to project servers wait for it.
    pub(super) fn pending(&mut self) {
        self.pending += 1;
        self.seen.send_replace((self.pending, self.current.clone()));
    }

    /// What calls wait on while claims are checked, if any are (a claim of a source
    /// that outranks the one in force may change it).
    pub fn waiting(&self) -> Option<Seen> {
        (self.pending > 0).then(|| self.seen.subscribe())
    }

    /// Checks a claim off the actor (the directory is looked up on a blocking thread);
    /// its verdict comes back as `News`.
    pub fn claim(&mut self, agent: u64, source: Source, path: Option<PathBuf>) {
        if self.foreign {
            tracing::debug!(
                agent,
                ?source,
                "ignored the project of another user's agent"
            );
            return;
        }
        self.pending();
        let tx = self.tx.clone();
        mcpd_runtime::tracker::spawn(async move {
            let path = match path {
                Some(p) => checked(agent, p).await,
                None => None,
            };
            let _ = tx.send(News { source, path }).await; // the agent may have gone
        });
    }

    /// A checked claim arrived: the project in force, when it changed.
    pub fn apply(&mut self, news: News) -> Option<Option<Arc<Path>>> {
        let slot = match news.source {
            Source::Shim => &mut self.shim,
            Source::Roots => &mut self.roots,
            Source::Profile => &mut self.fixed,
        };
        *slot = news.path;
        self.pending = self.pending.saturating_sub(1);
        let now = self
            .fixed
            .clone()
            .or_else(|| self.roots.clone())
            .or_else(|| self.shim.clone());
        let changed = now != self.current;
        self.current = now.clone();
        self.seen.send_replace((self.pending, now.clone()));
        changed.then_some(now)
    }
}

/// The canonical directory a claim names, if it is one a project may be.
pub(super) async fn checked(agent: u64, path: PathBuf) -> Option<Arc<Path>> {
    let refuse = |why: &str| {
        tracing::debug!(agent, path = %path.display(), "not a project: {why}");
        None
    };
    if !path.is_absolute() || path.as_os_str().len() > MAX_PATH {
        return refuse("not an absolute path");
    }
    let canonical = match tokio::fs::canonicalize(&path).await {
        Ok(p) => p,
        Err(e) => return refuse(&e.to_string()),
    };
    match tokio::fs::metadata(&canonical).await {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return refuse("not a directory"),
        Err(e) => return refuse(&e.to_string()),
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if let Some(why) = unfit(&canonical, home.as_deref()) {
        return refuse(why);
    }
    Some(Arc::from(canonical))
}

/// Why a canonical directory cannot be a project, if it cannot.
fn unfit(dir: &Path, home: Option<&Path>) -> Option<&'static str> {
    if dir.parent().is_none() {
        return Some("the root directory");
    }
    let home = home?;
    if dir == home {
        return Some("the home directory");
    }
    let first = dir.strip_prefix(home).ok()?.components().next()?;
    first
        .as_os_str()
        .to_string_lossy()
        .starts_with('.')
        .then_some("a hidden directory in home (a client's own)")
}

/// The path of the first `file://` root in a `roots/list` result.
pub(super) fn first_root(result: &Value) -> Option<PathBuf> {
    result
        .get("roots")?
        .as_array()?
        .iter()
        .filter_map(|r| r.get("uri")?.as_str())
        .find_map(|uri| url::Url::parse(uri).ok()?.to_file_path().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn root_home_and_client_directories_are_no_projects() {
        let home = Some(Path::new("/home/u"));
        assert!(unfit(Path::new("/"), home).is_some());
        assert!(unfit(Path::new("/home/u"), home).is_some());
        assert!(unfit(Path::new("/home/u/.codex"), home).is_some());
        assert!(unfit(Path::new("/home/u/.codex/x"), home).is_some());
        assert!(unfit(Path::new("/home/u/code/app"), home).is_none());
        assert!(unfit(Path::new("/srv/app"), home).is_none());
        assert!(unfit(Path::new("/home/u/code/.hidden"), home).is_none());
    }

    #[test]
    fn the_first_file_root_is_the_project() {
        let r = json!({"roots": [
            {"uri": "https://example.com/x"},
            {"uri": "file:///home/u/my%20app", "name": "app"},
            {"uri": "file:///other"}
        ]});
        assert_eq!(first_root(&r), Some(PathBuf::from("/home/u/my app")));
        assert_eq!(first_root(&json!({"roots": []})), None);
        assert_eq!(first_root(&json!({})), None);
    }
}
