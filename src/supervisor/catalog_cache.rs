//! The catalog kept across daemon restarts: each server's last good lists, so agents get a full `tools/list` at once, before servers finish starting. Owned by the supervisor.
//!
//! Entries are keyed by server name and the fingerprint of its launch settings (as the
//! era cache is), so a changed config never serves another server's tools. The lists are
//! stored as the server sent them; the config's tool filter is applied when they are
//! used, so filter changes take effect without a refetch.

use crate::config::ServerConfig;
use crate::registry::Kind;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Lists {
    pub fingerprint: String,
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub prompts: Vec<Value>,
    #[serde(default)]
    pub resources: Vec<Value>,
    #[serde(default)]
    pub templates: Vec<Value>,
}

impl Lists {
    fn slot(&mut self, kind: Kind) -> &mut Vec<Value> {
        match kind {
            Kind::Prompts => &mut self.prompts,
            Kind::Resources => &mut self.resources,
            Kind::Templates => &mut self.templates,
        }
    }
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
        let file = path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|text| match serde_json::from_str(&text) {
                Ok(f) => Some(f),
                Err(e) => {
                    tracing::warn!("ignoring the catalog cache, which cannot be read: {e}");
                    None
                }
            })
            .unwrap_or_default();
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
        let entry = self.entry(cfg);
        if entry.tools.as_deref() == Some(tools) {
            return;
        }
        entry.tools = Some(tools.to_vec());
        self.save();
    }

    pub fn put_list(&mut self, cfg: &ServerConfig, kind: Kind, items: &[Value]) {
        let slot = self.entry(cfg).slot(kind);
        if slot.as_slice() == items {
            return;
        }
        *slot = items.to_vec();
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
        let Some(path) = &self.path else { return };
        let result = (|| -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let tmp = path.with_extension("json.tmp");
            std::fs::write(
                &tmp,
                serde_json::to_vec(&self.file).map_err(std::io::Error::other)?,
            )?;
            std::fs::rename(&tmp, path)
        })();
        if let Err(e) = result {
            tracing::warn!(path = %path.display(), "could not save the catalog cache: {e}");
        }
    }
}
