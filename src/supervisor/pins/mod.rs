//! Pinned definitions: every list a server sends passes one gate (`admit`) first.
//!
//! The gate comes before anything else sees the list, at arrival and when the cached
//! catalog is listed at start; new or changed definitions are held until a person
//! approves them; pins live in `state_dir/pins/SERVER.json`.
//!
//! A pin file that cannot be read or does not hold together holds the whole server (fail
//! closed). Pin files of servers no longer configured are kept: removing a server and
//! adding it back must not trust it again silently.

mod canon;
mod gate;
mod set;

pub use canon::Kind;
pub use gate::{Admitted, Answer, PinError, PinGate, PinOp};
pub use set::{NotHeld, PinSet};

use super::state_file::StateWriter;
use crate::config::PinMode;
use mcpd_wire::protocol::ListKind;
use serde_json::Value;
use set::Approved;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::oneshot;

/// The pin file's format version.
const VERSION: u32 = 1;

impl From<ListKind> for Kind {
    fn from(k: ListKind) -> Kind {
        match k {
            ListKind::Prompts => Kind::Prompt,
            ListKind::Resources => Kind::Resource,
            ListKind::Templates => Kind::Template,
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct PinFile {
    version: u32,
    approved: Vec<FileEntry>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct FileEntry {
    kind: FileKind,
    id: String,
    sha256: String,
    definition: Value,
}

#[derive(Clone, Copy, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum FileKind {
    Tool,
    Prompt,
    Resource,
    Template,
}

impl From<FileKind> for Kind {
    fn from(k: FileKind) -> Kind {
        match k {
            FileKind::Tool => Kind::Tool,
            FileKind::Prompt => Kind::Prompt,
            FileKind::Resource => Kind::Resource,
            FileKind::Template => Kind::Template,
        }
    }
}

impl From<Kind> for FileKind {
    fn from(k: Kind) -> FileKind {
        match k {
            Kind::Tool => FileKind::Tool,
            Kind::Prompt => FileKind::Prompt,
            Kind::Resource => FileKind::Resource,
            Kind::Template => FileKind::Template,
        }
    }
}

/// Every server's pins, owned by the supervisor.
pub struct Pins {
    /// `state_dir/pins`; None without a state directory (pins then last until mcpd stops).
    dir: Option<PathBuf>,
    sets: HashMap<Arc<str>, PinSet>,
    writer: StateWriter,
}

impl Pins {
    pub fn new(state_dir: Option<&Path>, writer: StateWriter) -> Pins {
        let dir = state_dir.map(|d| d.join("pins"));
        if dir.is_none() {
            tracing::warn!("no state_dir (nor HOME): pinned definitions last until mcpd stops");
        }
        Pins {
            dir,
            sets: HashMap::new(),
            writer,
        }
    }

    /// The pins of `server` (its pin file read the first time), in `mode`.
    pub fn of(&mut self, server: &Arc<str>, mode: PinMode) -> &mut PinSet {
        let dir = self.dir.as_deref();
        let set = self
            .sets
            .entry(server.clone())
            .or_insert_with(|| read(dir, server, mode));
        if set.mode() != mode {
            set.set_mode(mode);
        }
        set
    }

    /// The gate: what of `raw` agents may see (a pin set it changed is saved by
    /// `save_changed`).
    pub fn admit(
        &mut self,
        server: &Arc<str>,
        mode: PinMode,
        kind: Kind,
        instance: Option<u64>,
        raw: Vec<Value>,
    ) -> Vec<Value> {
        let set = self.of(server, mode);
        let before = set.held_ids(kind);
        let out = set.admit(kind, instance, raw);
        let now = set.held_ids(kind);
        let new: Vec<&String> = now.iter().filter(|id| !before.contains(id)).collect();
        if !new.is_empty() {
            // Names only (quoted, the first ten): the held text is for a person's
            // `ctl diff`, not the log.
            let names: Vec<&String> = new.iter().take(10).copied().collect();
            tracing::warn!(
                upstream = %server,
                "{} {} definitions new or changed and held for approval ({names:?}); run `mcpd ctl diff {server}`, then `mcpd ctl approve {server}`",
                new.len(),
                kind.as_str(),
            );
        }
        out
    }

    /// Writes the pin files that changed since they were last written (first listings
    /// approved): once per burst of lists, not once per list. Not waited for: a failure
    /// is logged, and the next change writes the file again.
    pub fn save_changed(&mut self) {
        let changed: Vec<Arc<str>> = self
            .sets
            .iter()
            .filter(|(_, s)| s.dirty)
            .map(|(k, _)| k.clone())
            .collect();
        for server in changed {
            drop(self.save(&server));
        }
    }

    pub fn get(&self, server: &str) -> Option<&PinSet> {
        self.sets.get(server)
    }

    /// Writes `server`'s pin file; answered once it is on disk.
    pub fn save(&mut self, server: &Arc<str>) -> oneshot::Receiver<Result<(), String>> {
        let (tx, rx) = oneshot::channel();
        let (Some(dir), Some(set)) = (self.dir.as_ref(), self.sets.get_mut(server)) else {
            let _ = tx.send(Ok(())); // nowhere to keep it: nothing to wait for
            return rx;
        };
        set.dirty = false;
        let file = PinFile {
            version: VERSION,
            approved: set
                .approved()
                .iter()
                .map(|((kind, id), a)| FileEntry {
                    kind: (*kind).into(),
                    id: id.clone(),
                    sha256: a.sha256.clone(),
                    definition: a.definition.clone(),
                })
                .collect(),
        };
        match serde_json::to_vec_pretty(&file) {
            Ok(bytes) => self
                .writer
                .write_acked(path(dir, server), bytes, "pin file", tx),
            Err(e) => {
                let _ = tx.send(Err(e.to_string())); // the asker may be gone
            }
        }
        rx
    }
}

/// `dir/SERVER.json`.
fn path(dir: &Path, server: &str) -> PathBuf {
    dir.join(format!("{server}.json"))
}

/// A server's pins as its file holds them: none yet when there is no file, broken when it
/// cannot be read or does not hold together.
fn read(dir: Option<&Path>, server: &str, mode: PinMode) -> PinSet {
    let Some(dir) = dir else {
        return PinSet::new(mode);
    };
    let file = path(dir, server);
    #[allow(
        clippy::disallowed_methods,
        reason = "one small file per server, read once: at start, or when a reload adds the server"
    )]
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return PinSet::new(mode),
        Err(e) => return broken(mode, &file, &e.to_string()),
    };
    let parsed: PinFile = match serde_json::from_str(&text) {
        Ok(p) => p,
        Err(e) => return broken(mode, &file, &e.to_string()),
    };
    if parsed.version != VERSION {
        let why = format!("version {} (this mcpd writes {VERSION})", parsed.version);
        return broken(mode, &file, &why);
    }
    let mut approved = BTreeMap::new();
    for e in parsed.approved {
        if canon::fingerprint(&e.definition) != e.sha256 {
            let why = format!("the entry of {:?} does not match its fingerprint", e.id);
            return broken(mode, &file, &why);
        }
        let a = Approved {
            sha256: e.sha256,
            definition: e.definition,
        };
        approved.insert((Kind::from(e.kind), e.id), a);
    }
    PinSet::loaded(mode, approved)
}

fn broken(mode: PinMode, file: &Path, why: &str) -> PinSet {
    let why = format!(
        "its pin file {} cannot be used ({why}); everything it lists is held until `mcpd ctl approve` (or fix the file)",
        file.display()
    );
    tracing::error!("{why}");
    PinSet::broken(mode, why)
}
