//! The catalog kept across daemon restarts: each server's last good lists, so agents get a full `tools/list` at once, before servers finish starting. Owned by the supervisor.
//!
//! Entries are keyed by server name and the fingerprint of its launch settings (as the
//! era cache is), so a changed config never serves another server's tools. The lists are
//! stored as the server sent them; the config's tool filter is applied when they are
//! used, so filter changes take effect without a refetch. They are kept as JSON text, not
//! as values: the registry holds the live copy, and this one is only read at start.

use crate::config::ServerConfig;
use crate::registry::Kind;
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
    fn slot(&mut self, kind: Kind) -> &mut Option<Box<RawValue>> {
        match kind {
            Kind::Prompts => &mut self.prompts,
            Kind::Resources => &mut self.resources,
            Kind::Templates => &mut self.templates,
        }
    }

    /// The cached tool list, if there is one that reads as a list.
    pub fn tools(&self) -> Option<Vec<Value>> {
        self.tools.as_deref().and_then(parse)
    }

    /// A cached prompt, resource or template list (empty if none).
    pub fn list(&self, kind: Kind) -> Vec<Value> {
        let text = match kind {
            Kind::Prompts => &self.prompts,
            Kind::Resources => &self.resources,
            Kind::Templates => &self.templates,
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

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    servers: BTreeMap<String, Lists>,
}

pub struct CatalogCache {
    path: Option<PathBuf>,
    file: File,
}

impl CatalogCache {
    /// Loads `dir/catalog.json`; a missing or unreadable file is an empty cache.
    pub fn load(dir: Option<PathBuf>) -> CatalogCache {
        let path = dir.map(|d| d.join("catalog.json"));
        let file = super::state_file::load(path.as_deref(), "catalog cache");
        CatalogCache { path, file }
    }

    /// A server's cached lists, if its configuration has not changed since.
    pub fn get(&self, cfg: &ServerConfig) -> Option<&Lists> {
        self.file
            .servers
            .get(&cfg.name)
            .filter(|l| l.fingerprint == super::eras::fingerprint(cfg))
    }

    pub fn put_tools(&mut self, cfg: &ServerConfig, tools: &[Value]) {
        let new = text(tools);
        let entry = self.entry(cfg);
        if same(&entry.tools, &new) {
            return;
        }
        entry.tools = new;
        self.save();
    }

    pub fn put_list(&mut self, cfg: &ServerConfig, kind: Kind, items: &[Value]) {
        let new = text(items);
        let slot = self.entry(cfg).slot(kind);
        if same(slot, &new) {
            return;
        }
        *slot = new;
        self.save();
    }

    fn entry(&mut self, cfg: &ServerConfig) -> &mut Lists {
        let fingerprint = super::eras::fingerprint(cfg);
        let entry = self.file.servers.entry(cfg.name.clone()).or_default();
        if entry.fingerprint != fingerprint {
            *entry = Lists {
                fingerprint,
                ..Lists::default()
            };
        }
        entry
    }

    /// Writes the file atomically. A failure is logged: the cache only saves time.
    fn save(&self) {
        if let Some(path) = &self.path {
            let text = serde_json::to_vec(&self.file);
            super::state_file::save(path, text, "catalog cache");
        }
    }
}
