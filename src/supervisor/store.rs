//! The supervisor's state kept across daemon restarts.
//!
//! Where it lives, servers' protocol eras and last good lists, and the writer of their
//! files.

use super::catalog_cache::{CatalogCache, Lists};
use super::eras::{CachedEra, EraCache};
use super::state_file::StateWriter;
use crate::config::ServerConfig;
use mcpd_wire::protocol::ListKind;
use mcpd_wire::protocol::era::Era;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The state directory's caches, owned by the supervisor.
pub(super) struct StateStore {
    /// Where state files and credentials live, if anywhere.
    dir: Option<PathBuf>,
    /// Servers' protocol eras.
    eras: EraCache,
    /// Servers' last good lists.
    lists: CatalogCache,
    /// Writes every state file (the caches' and the pins'), off the runtime.
    writer: StateWriter,
}

impl StateStore {
    /// Loads the caches of `dir`, keeping only the servers `configured` says exist.
    pub(super) fn load(dir: Option<PathBuf>, configured: &dyn Fn(&str) -> bool) -> StateStore {
        let writer = StateWriter::spawn();
        StateStore {
            eras: EraCache::load(dir.clone(), configured, writer.clone()),
            lists: CatalogCache::load(dir.clone(), configured, writer.clone()),
            dir,
            writer,
        }
    }

    /// Where state files and credentials live, if anywhere.
    pub(super) fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The writer other state files (the pins') go through too.
    pub(super) fn writer(&self) -> StateWriter {
        self.writer.clone()
    }

    /// A server's cached era, if its configuration has not changed since.
    pub(super) fn era(&self, cfg: &ServerConfig) -> Option<&CachedEra> {
        self.eras.get(cfg)
    }

    pub(super) fn put_era(&mut self, cfg: &ServerConfig, era: Era, reason: String) {
        self.eras.put(cfg, era, reason);
    }

    /// Forgets an era that stopped working, so the next start probes again.
    pub(super) fn forget_era(&mut self, name: &str) {
        self.eras.forget(name);
    }

    /// A server's cached lists, if its configuration has not changed since.
    pub(super) fn lists(&self, cfg: &ServerConfig) -> Option<&Lists> {
        self.lists.get(cfg)
    }

    pub(super) fn put_tools(&mut self, cfg: &ServerConfig, tools: &[Value]) {
        self.lists.put_tools(cfg, tools);
    }

    pub(super) fn put_list(&mut self, cfg: &ServerConfig, kind: ListKind, items: &[Value]) {
        self.lists.put_list(cfg, kind, items);
    }

    /// Forgets a server's lists (never to be served again), and removes their file.
    pub(super) fn forget_lists(&mut self, name: &str) {
        self.lists.forget(name);
    }

    /// Forgets everything kept of a server that is no longer configured.
    pub(super) fn forget(&mut self, name: &str) {
        self.lists.forget(name);
        self.eras.forget(name);
    }

    /// Waits, at most `within`, for the files queued so far to be written.
    pub(super) async fn flush(&self, within: Duration) {
        self.writer.flush(within).await;
    }
}
