//! The paths a confined server's launch names that its resolved profile does not let it reach.
//!
//! The paths are in its `args` and `env` values, which the profile does not let it reach
//! as it needs; each comes with the `[servers.NAME.sandbox]` entry that would: what
//! `check-config` and `mcpd import` warn about, before the server meets EACCES.
//!
//! Which paths a profile grants is `paths.rs`'s to say; this only compares. Whether a
//! path is to be read or written is guessed from the words of its setting (the variable,
//! or the option before it) and of its file name: `MEMORY_FILE_PATH`, `--db-path`,
//! `history.jsonl` are written, `--config`, `CA_CERT`, `settings.yaml` read; anything
//! else is said to be one or the other.

use super::Paths;
use crate::config::StdioLaunch;
use std::path::{Path, PathBuf};

/// What a path needs from the profile, as far as its names tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Read,
    Write,
    /// The names do not say.
    Either,
}

/// A path the profile does not grant as it needs.
#[derive(Debug, PartialEq, Eq)]
pub struct Outside {
    /// Where it is: `args[2]` or `env.MEMORY_FILE_PATH`.
    pub setting: String,
    /// The path as written.
    pub path: String,
    pub need: Need,
    /// Whether the server may read it (only writing is refused).
    pub readable: bool,
    pub fix: Fix,
}

/// What would let the server reach a path.
#[derive(Debug, PartialEq, Eq)]
pub enum Fix {
    /// Adding this entry (the path or its directory, as written: `~` kept), for this
    /// reason when it is not simply the path.
    Grant(String, Option<&'static str>),
    /// A file to write in a directory too wide to grant (`/tmp`, home): it needs a
    /// directory of its own.
    OwnDirectory(String),
}

/// Words of a setting or file name that say it is written.
const WRITTEN: &[&str] = &[
    "MEMORY",
    "DB",
    "DATABASE",
    "DATA",
    "STATE",
    "STORE",
    "STORAGE",
    "CACHE",
    "LOG",
    "LOGS",
    "OUT",
    "OUTPUT",
    "HISTORY",
    "SQLITE",
    "SQLITE3",
    "JSONL",
    "NDJSON",
    "WRITE",
    "SAVE",
    "DOWNLOAD",
    "DOWNLOADS",
    "UPLOAD",
    "UPLOADS",
    "WORKSPACE",
    "VAULT",
    "NOTES",
];
/// Words that say it is only read.
const READ: &[&str] = &[
    "CONFIG",
    "CONF",
    "CFG",
    "SETTINGS",
    "CERT",
    "CERTS",
    "CA",
    "PEM",
    "CRT",
    "KEY",
    "CREDENTIALS",
    "SECRET",
    "TOKEN",
    "SCHEMA",
    "TEMPLATE",
    "TEMPLATES",
    "YAML",
    "YML",
    "TOML",
    "INI",
    "READ",
    "INCLUDE",
];

/// The paths `launch` names that `granted` does not grant as they need.
pub fn outside(launch: &StdioLaunch, granted: &Paths) -> Vec<Outside> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let sets = Granted::new(granted);
    let mut found = Vec::new();
    let mut option: Option<&str> = None;
    for (i, arg) in launch.args.iter().enumerate() {
        // `--db=/x/y.db`, or `--db /x/y.db`: the option names the value.
        let (name, value) = match arg.split_once('=') {
            Some((k, v)) if k.starts_with('-') => (Some(k), v),
            _ => (option, arg.as_str()),
        };
        if rooted(value) {
            let setting = format!("args[{i}]");
            found.extend(check(&sets, home.as_deref(), setting, name, value));
        }
        option = arg
            .starts_with('-')
            .then_some(arg.as_str())
            .filter(|a| !a.contains('='));
    }
    for (k, v) in &launch.env {
        // A list of paths (`PYTHONPATH=/a:/b`) is checked path by path.
        for value in v.split(':').filter(|p| rooted(p)) {
            let setting = format!("env.{k}");
            found.extend(check(&sets, home.as_deref(), setting, Some(k), value));
        }
    }
    found
}

/// Whether a value is a path from the root or home, and holds no placeholder.
fn rooted(v: &str) -> bool {
    (v.starts_with('/') || v == "~" || v.starts_with("~/")) && !v.contains("${")
}

/// The readable and writable paths, also after symlinks (Landlock follows them).
struct Granted {
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
}

impl Granted {
    fn new(p: &Paths) -> Granted {
        Granted {
            read: with_real(p.read.iter().chain(&p.write)),
            write: with_real(p.write.iter()),
        }
    }
}

/// Each path, and each after symlinks.
fn with_real<'a>(list: impl Iterator<Item = &'a PathBuf>) -> Vec<PathBuf> {
    list.flat_map(|g| [g.clone(), real(g)]).collect()
}

fn within(list: &[PathBuf], path: &Path) -> bool {
    let real = real(path);
    list.iter()
        .any(|g| path.starts_with(g) || real.starts_with(g))
}

/// A path after symlinks, as far as it exists; the rest as written.
#[allow(
    clippy::disallowed_methods,
    reason = "check-config and import are commands of their own, not the daemon"
)]
fn real(path: &Path) -> PathBuf {
    for base in path.ancestors() {
        if let Ok(found) = std::fs::canonicalize(base) {
            let rest = path.strip_prefix(base).unwrap_or(Path::new(""));
            return found.join(rest);
        }
    }
    path.to_owned()
}

/// The verdict on one path: None when the profile grants what it needs, or when it does
/// not look like a path on this machine (neither it nor its directory exists).
fn check(
    sets: &Granted,
    home: Option<&Path>,
    setting: String,
    name: Option<&str>,
    written: &str,
) -> Option<Outside> {
    let path = match written.strip_prefix('~') {
        Some(rest) => home?.join(rest.trim_start_matches('/')),
        None => PathBuf::from(written),
    };
    let parent = path.parent().filter(|p| *p != Path::new("/"));
    let exists = path.exists();
    if !exists && !parent.is_some_and(Path::exists) {
        return None;
    }
    let need = need(name, &path);
    let readable = within(&sets.read, &path);
    if readable && (need != Need::Write || within(&sets.write, &path)) {
        return None;
    }
    Some(Outside {
        setting,
        path: written.to_owned(),
        need,
        readable,
        fix: fix(written, &path, exists, need),
    })
}

/// The entry that would grant `path` (written as `written`) what it needs.
fn fix(written: &str, path: &Path, exists: bool, need: Need) -> Fix {
    let dir = match written.rsplit_once('/') {
        Some(("", _)) => "/",
        Some((dir, _)) => dir,
        None => written,
    };
    // A file to write: in its directory, as a new file beside it that is renamed over
    // it (how many servers save), or because it does not exist yet.
    let file = if exists {
        !path.is_dir()
    } else {
        path.extension().is_some()
    };
    let (why, own) = match (exists, file, need) {
        (true, true, Need::Write) => (
            "its directory: a file is often written anew beside it and renamed over it",
            true,
        ),
        (false, true, _) => (
            "its directory: the file does not exist yet, and a path that does not exist grants nothing",
            need == Need::Write,
        ),
        (false, false, _) => {
            let why = "create it first: a path that does not exist grants nothing";
            return Fix::Grant(written.to_owned(), Some(why));
        }
        (true, _, _) => return Fix::Grant(written.to_owned(), None),
    };
    if !shared(dir) {
        Fix::Grant(dir.to_owned(), Some(why))
    } else if own {
        Fix::OwnDirectory(dir.to_owned())
    } else {
        let why = "create it first: a path that does not exist grants nothing";
        Fix::Grant(written.to_owned(), Some(why))
    }
}

/// What the names of a path's setting and its file say it needs.
fn need(name: Option<&str>, path: &Path) -> Need {
    let file = path.file_name().and_then(|f| f.to_str());
    let words: Vec<String> = name
        .into_iter()
        .chain(file)
        .flat_map(|s| s.split(|c: char| !c.is_ascii_alphanumeric()))
        .map(str::to_ascii_uppercase)
        .collect();
    let says = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    if says(WRITTEN) {
        Need::Write
    } else if says(READ) {
        Need::Read
    } else {
        Need::Either
    }
}

impl Outside {
    /// The warning, naming the server's table.
    pub fn warning(&self, server: &str) -> String {
        let refused = match (self.readable, self.need) {
            (true, _) => "may read but not write",
            (false, Need::Read) => "may not read",
            (false, _) => "may neither read nor write",
        };
        let tmp = if self.path == "/tmp" || self.path.starts_with("/tmp/") {
            " (a confined server's /tmp is not the system's: its TMPDIR is a private directory)"
        } else {
            ""
        };
        let key = match self.need {
            Need::Write => "write",
            Need::Read | Need::Either => "read",
        };
        let table = format!("[servers.{server}.sandbox]");
        let mut w = format!(
            "sandbox: {} is {}, which this confined server {refused}{tmp}; ",
            self.setting, self.path
        );
        match &self.fix {
            Fix::Grant(entry, why) => {
                w.push_str(&format!("add {table} {key} = [{entry:?}]"));
                if let Some(why) = why {
                    w.push_str(&format!(" ({why})"));
                }
            }
            Fix::OwnDirectory(dir) => w.push_str(&format!(
                "move it into a directory of its own and add that directory to {table} {key} (adding {dir} would open all of {dir})"
            )),
        }
        if self.need == Need::Either {
            w.push_str(", or write instead of read if the server writes there");
        }
        w
    }
}

/// A directory many programs share, too wide to grant for one file.
fn shared(dir: &str) -> bool {
    let home = std::env::var("HOME").ok();
    ["/", "/tmp", "/var/tmp", "/home", "~"].contains(&dir) || home.as_deref() == Some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_need(name: Option<&str>, path: &str, want: Need) {
        assert_eq!(need(name, Path::new(path)), want, "{name:?} {path}");
    }

    #[test]
    fn what_a_path_needs_is_read_from_its_setting_and_its_name() {
        check_need(Some("MEMORY_FILE_PATH"), "/x/memory.json", Need::Write);
        check_need(Some("--db-path"), "/x/a", Need::Write);
        check_need(None, "/x/history.jsonl", Need::Write);
        check_need(Some("--config"), "/x/a.json", Need::Read);
        check_need(Some("NODE_EXTRA_CA_CERTS"), "/x/corp.pem", Need::Read);
        check_need(None, "/x/settings.yaml", Need::Read);
        check_need(None, "/home/me/projects", Need::Either);
        // A word inside another is no word: CA in CACHE, LOG in LOGIN.
        check_need(Some("LOGIN_URL_FILE"), "/x/a", Need::Either);
    }

    #[test]
    fn the_entry_suggested_is_the_path_its_directory_or_a_directory_of_its_own() {
        let grant = |p: &str, why: Option<&'static str>| Fix::Grant(p.to_owned(), why);
        let missing = Some("create it first: a path that does not exist grants nothing");
        let new_file = Some(
            "its directory: the file does not exist yet, and a path that does not exist grants nothing",
        );
        let renamed =
            Some("its directory: a file is often written anew beside it and renamed over it");
        for (written, exists, need, want) in [
            (
                "/tmp/m.json",
                false,
                Need::Write,
                Fix::OwnDirectory("/tmp".into()),
            ),
            (
                "/srv/x/m.json",
                false,
                Need::Write,
                grant("/srv/x", new_file),
            ),
            (
                "/srv/x/m.json",
                false,
                Need::Read,
                grant("/srv/x", new_file),
            ),
            (
                "/tmp/m.toml",
                false,
                Need::Read,
                grant("/tmp/m.toml", missing),
            ),
            (
                "/tmp/notes",
                false,
                Need::Write,
                grant("/tmp/notes", missing),
            ),
            ("/etc/passwd", true, Need::Write, grant("/etc", renamed)),
            ("/etc/passwd", true, Need::Read, grant("/etc/passwd", None)),
            ("/usr", true, Need::Either, grant("/usr", None)),
        ] {
            assert_eq!(
                fix(written, Path::new(written), exists, need),
                want,
                "{written}"
            );
        }
    }

    #[test]
    fn only_paths_from_the_root_or_home_without_placeholders_are_looked_at() {
        for (v, want) in [
            ("/tmp/x", true),
            ("~/x", true),
            ("~", true),
            ("x/y", false),
            ("~x", false),
            ("${PROJECT}/x", false),
            ("/${PROJECT}", false),
            ("https://example.com/x", false),
        ] {
            assert_eq!(rooted(v), want, "{v}");
        }
    }
}
