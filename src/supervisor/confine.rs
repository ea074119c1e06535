//! Which sandbox a local server's next process runs in.
//!
//! Its profile prepared (paths resolved for its project, the ruleset built), or why it
//! cannot be, which keeps it from starting.

use super::Slot;
use crate::config::StdioLaunch;
use crate::registry::InstanceKey;
use crate::upstream::process::SpawnError;
use crate::upstream::sandbox::{self, Prepared};

impl Slot {
    /// The confinement of this slot's next process (`name`): None when it runs
    /// unconfined (no sandbox configured, or a remote server).
    pub(super) fn confinement(
        &self,
        name: &str,
        launch: &StdioLaunch,
    ) -> Result<Option<Prepared>, SpawnError> {
        let slot = self;
        let Some(profile) = &slot.cfg.sandbox else {
            return Ok(None);
        };
        let project = match slot.instance.as_ref().map(|i| &i.key) {
            Some(InstanceKey::Project(p)) => Some(&**p),
            _ => None,
        };
        // Instances of one server share its private cache: they run the same code.
        let cache = slot
            .instance
            .as_ref()
            .map_or(&*slot.cfg.name, |i| &*i.template);
        match sandbox::prepare(&slot.cfg.name, cache, profile, launch, project) {
            Ok(p) => Ok(Some(p)),
            Err(e) => {
                tracing::error!(upstream = %name, "not started: {e}");
                Err(SpawnError::Sandbox(e.to_string()))
            }
        }
    }
}

impl Slot {
    /// The private package cache of this slot when it runs confined (its instances share
    /// their server's), for the hints that say which cache to clear.
    pub(super) fn private_cache(&self) -> Option<std::path::PathBuf> {
        let slot = self;
        slot.cfg.sandbox.as_ref()?;
        let server = slot
            .instance
            .as_ref()
            .map_or(&*slot.cfg.name, |i| &*i.template);
        sandbox::cache_path(server)
    }

    /// Whether this slot runs confined with a private cache that is missing or empty.
    pub(super) fn private_cache_empty(&self) -> bool {
        let Some(cache) = self.private_cache() else {
            return false;
        };
        #[allow(
            clippy::disallowed_methods,
            reason = "one local directory lookup before a package runner's start"
        )]
        let mut entries = match std::fs::read_dir(&cache) {
            Ok(entries) => entries,
            Err(_) => return true,
        };
        entries.next().is_none()
    }
}

/// Serves a host-list server's proxy, if its process has one, until the returned guard
/// is dropped with the process's `Running`.
pub(super) fn serve_egress(
    name: &str,
    spawned: &mut crate::upstream::process::Spawned,
) -> Option<tokio_util::sync::DropGuard> {
    let (listener, allow) = spawned.egress.take()?;
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            // The server then finds no proxy and its connections fail: it is not
            // given any other way out.
            tracing::error!(upstream = %name, "its network proxy cannot run: {e}");
            return None;
        }
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    mcpd_runtime::tracker::spawn(crate::egress::serve(
        listener,
        allow,
        name.to_owned(),
        cancel.clone(),
    ));
    Some(cancel.drop_guard())
}
