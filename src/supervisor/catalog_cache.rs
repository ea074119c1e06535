//! The catalog kept across daemon restarts.
//!
//! Each server's last good lists, so agents get a full `tools/list` at once, before
//! servers finish starting. Owned by the supervisor.
//!
//! Each server has its own file, `state_dir/catalog/SERVER.json`, so a change to one
//! server's lists writes only that file (by the state writer, off the runtime); files of
//! servers no longer configured are removed. Entries are keyed by server name and the
//! fingerprint of its launch settings (as the era cache is), so a changed config never
//! serves another server's tools. The lists are
//! stored as the server sent them; the config's tool filter is applied when they are
//! used, so filter changes take effect without a refetch. They are kept as JSON text, not
//! as values: the registry holds the live copy, and this one is only read at start.

use super::state_file::{StateWriter, load};
use crate::config::ServerConfig;
use mcpd_wire::protocol::ListKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One server's lists, each the JSON text of an array.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Lists {
    pub fingerprint: String,
    tools: Option<Box<RawValue>>,
    #[serde(default)]
    prompts: Option<Box<RawValue>>,
    #[serde(default)]
    resources: Option<Box<RawValue>>,
    #[serde(default)]
    templates: Option<Box<RawValue>>,
}

impl Lists {
    fn slot(&mut self, kind: ListKind) -> &mut Option<Box<RawValue>> {
        match kind {
            ListKind::Prompts => &mut self.prompts,
            ListKind::Resources => &mut self.resources,
            ListKind::Templates => &mut self.templates,
        }
    }

    /// The cached tool list, if there is one that reads as a list.
    pub fn tools(&self) -> Option<Vec<Value>> {
        self.tools.as_deref().and_then(parse)
    }

    /// A cached prompt, resource or template list (empty if none).
    pub fn list(&self, kind: ListKind) -> Vec<Value> {
        let text = match kind {
            ListKind::Prompts => &self.prompts,
            ListKind::Resources => &self.resources,
            ListKind::Templates => &self.templates,
        };
        text.as_deref().and_then(parse).unwrap_or_default()
    }
}

fn parse(text: &RawValue) -> Option<Vec<Value>> {
    serde_json::from_str(text.get()).ok()
}

/// The JSON text of a list; None only if it cannot be written (it always can).
fn text(items: &[Value]) -> Option<Box<RawValue>> {
    serde_json::to_string(items)
        .ok()
        .and_then(|t| RawValue::from_string(t).ok())
}

/// Whether a kept text says the same as `new`.
fn same(kept: &Option<Box<RawValue>>, new: &Option<Box<RawValue>>) -> bool {
    kept.as_deref().map(RawValue::get) == new.as_deref().map(RawValue::get)
}

pub struct CatalogCache {
    /// `state_dir/catalog`; None when there is no state directory.
    dir: Option<PathBuf>,
    servers: BTreeMap<String, Lists>,
    writer: StateWriter,
}

impl CatalogCache {
    /// Loads every configured server's file from `state_dir/catalog/`; a missing or
    /// unreadable one is an empty entry. Files of other servers, and the single file of
    /// earlier versions, are removed.
    pub fn load(
        state_dir: Option<PathBuf>,
        configured: &dyn Fn(&str) -> bool,
        writer: StateWriter,
    ) -> CatalogCache {
        let dir = state_dir.as_ref().map(|d| d.join("catalog"));
        if let Some(old) = state_dir.map(|d| d.join("catalog.json")) {
            writer.remove(old);
        }
        let mut servers = BTreeMap::new();
        #[allow(
            clippy::disallowed_methods,
            reason = "read once at start, before agents are served"
        )]
        let entries = dir.as_ref().and_then(|d| std::fs::read_dir(d).ok());
        for path in entries.into_iter().flatten().flatten().map(|e| e.path()) {
            if path.extension().is_none_or(|x| x != "json") {
                continue;
            }
            let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if !configured(name) {
                writer.remove(path.clone());
                continue;
            }
            let lists: Option<Lists> = load(Some(&path), "catalog cache");
            if let Some(lists) = lists {
                servers.insert(name.to_owned(), lists);
            }
        }
        CatalogCache {
            dir,
            servers,
            writer,
        }
    }

    /// A server's cached lists, if its configuration has not changed since.
    pub fn get(&self, cfg: &ServerConfig) -> Option<&Lists> {
        self.servers
            .get(&cfg.name)
            .filter(|l| l.fingerprint == super::eras::fingerprint(cfg))
    }

    /// Forgets a server that is no longer configured, and removes its file.
    pub fn forget(&mut self, name: &str) {
        self.servers.remove(name);
        if let Some(dir) = &self.dir {
            self.writer.remove(dir.join(format!("{name}.json")));
        }
    }

    pub fn put_tools(&mut self, cfg: &ServerConfig, tools: &[Value]) {
        let new = text(tools);
        let entry = self.entry(cfg);
        if same(&entry.tools, &new) {
            return;
        }
        entry.tools = new;
        self.save(&cfg.name);
    }

    pub fn put_list(&mut self, cfg: &ServerConfig, kind: ListKind, items: &[Value]) {
        let new = text(items);
        let slot = self.entry(cfg).slot(kind);
        if same(slot, &new) {
            return;
        }
        *slot = new;
        self.save(&cfg.name);
    }

    fn entry(&mut self, cfg: &ServerConfig) -> &mut Lists {
        let fingerprint = super::eras::fingerprint(cfg);
        let entry = self.servers.entry(cfg.name.clone()).or_default();
        if entry.fingerprint != fingerprint {
            *entry = Lists {
                fingerprint,
                ..Lists::default()
            };
        }
        entry
    }

    /// Has the server's file written. A failure is logged: the cache only saves time.
    fn save(&self, name: &str) {
        let (Some(dir), Some(lists)) = (&self.dir, self.servers.get(name)) else {
            return;
        };
        match serde_json::to_vec(lists) {
            Ok(bytes) => {
                let path = dir.join(format!("{name}.json"));
                self.writer.write(path, bytes, "catalog cache");
            }
            Err(e) => tracing::warn!(upstream = name, "could not save the catalog cache: {e}"),
        }
    }
}
