//! Live reload: applying a new configuration's servers.
//!
//! Added ones start, removed ones stop, changed ones restart, unchanged ones are left
//! alone.
//!
//! A change of naming only (`prefix`, renames) keeps the process: its lists are presented
//! again under the new names at once.

use super::{AfterExit, ServerState, Slot, Supervisor, SupervisorHandle};
use crate::config::Config;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How long a reload may take (reading the file, the supervisor applying it).
const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a reload did not apply; the configuration in force stays.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReloadError {
    #[error("mcpd was started without a config file; there is nothing to reload")]
    NoConfigFile,
    #[error("reading the config failed: {0}")]
    Read(String),
    /// What `mcpd check-config` would print.
    #[error("{0}")]
    Invalid(String),
    #[error("mcpd is shutting down")]
    ShuttingDown,
    #[error("the reload did not finish: {0}; see the daemon's log")]
    Busy(String),
}

type ReloadReply = oneshot::Sender<Result<ReloadSummary, ReloadError>>;

/// Re-reads the config file and applies it: from SIGHUP and from `mcpd ctl reload`. Only
/// `[servers.*]` changes apply live; other changes are reported as needing a restart. A
/// small actor owns the configuration in force, so reloads happen one at a time.
#[derive(Debug, Clone)]
pub struct Reloader {
    tx: mpsc::Sender<ReloadReply>,
}

impl Reloader {
    pub fn spawn(path: Option<PathBuf>, current: Config, supervisor: SupervisorHandle) -> Reloader {
        let (tx, rx) = mpsc::channel(4);
        let actor = ConfigOwner {
            path,
            current,
            supervisor,
            rx,
        };
        mcpd_runtime::tracker::spawn(actor.run());
        Reloader { tx }
    }

    /// Reloads; the error says why nothing changed.
    pub async fn reload(&self) -> Result<ReloadSummary, ReloadError> {
        let asked = mcpd_runtime::ask::ask(&self.tx, RELOAD_TIMEOUT, |respond_to| respond_to).await;
        asked.unwrap_or_else(|e| {
            Err(match e {
                mcpd_runtime::ask::AskError::Gone => ReloadError::ShuttingDown,
                e @ mcpd_runtime::ask::AskError::Timeout(_) => ReloadError::Busy(e.to_string()),
            })
        })
    }
}

/// The actor behind `Reloader`: the owner of the configuration in force.
struct ConfigOwner {
    path: Option<PathBuf>,
    current: Config,
    supervisor: SupervisorHandle,
    rx: mpsc::Receiver<ReloadReply>,
}

impl ConfigOwner {
    async fn run(mut self) {
        while let Some(respond_to) = self.rx.recv().await {
            crate::systemd::reloading();
            let result = self.apply().await;
            crate::systemd::reloaded();
            if let Err(e) = &result {
                tracing::error!("reload rejected; the previous configuration stays in force: {e}");
            }
            let _ = respond_to.send(result); // the asker may have left
        }
    }

    async fn apply(&mut self) -> Result<ReloadSummary, ReloadError> {
        let Some(path) = self.path.clone() else {
            return Err(ReloadError::NoConfigFile);
        };
        // Read on a blocking thread: the runtime's workers serve agents meanwhile.
        let new = mcpd_runtime::tracker::spawn_blocking(move || Config::load(&path))
            .await
            .map_err(|e| ReloadError::Read(e.to_string()))?
            .map_err(|e| ReloadError::Invalid(e.to_string()))?;
        if new.daemon != self.current.daemon || new.profiles != self.current.profiles {
            tracing::warn!("[daemon] and [profiles] changes take effect when mcpd restarts");
        }
        let summary = self
            .supervisor
            .reload(new.clone())
            .await
            .map_err(|_| ReloadError::ShuttingDown)?;
        self.current = new;
        Ok(summary)
    }
}

/// What a reload changed, for the log and `mcpd ctl reload`.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct ReloadSummary {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
    /// Servers whose naming alone changed: renamed in place, not restarted.
    #[serde(default)]
    pub renamed: Vec<String>,
    pub unchanged: usize,
}

impl Supervisor {
    pub(super) fn reload(&mut self, config: &Config) -> ReloadSummary {
        let mut summary = ReloadSummary::default();
        // Removed servers (and their per-agent instances) stop; their calls in flight
        // finish or fail as in any stop, and their tools leave the catalog.
        let gone: Vec<Arc<str>> = self
            .slots
            .iter()
            .filter(|(k, s)| {
                let base = s.template().unwrap_or(k);
                !config.servers.contains_key(base)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in gone {
            let Some(slot) = self.slots.get_mut(&key) else {
                continue;
            };
            if slot.instance.is_none() {
                summary.removed.push(key.to_string());
                self.registry.forget_server(&key);
                self.store.forget(&key);
                // Its stored login (file or keyring item) goes too, by its owner, after
                // any write it has begun; instances share the server's login.
                if let Some(login) = &slot.login {
                    login.forget();
                }
            }
            slot.removing = true;
            slot.retry_at = None;
            slot.after_exit = AfterExit::Stay;
            match &slot.running {
                Some(r) => r.cancel.cancel(),
                None => {
                    self.slots.remove(&key);
                }
            }
        }
        let mut repin = Vec::new();
        for (name, cfg) in &config.servers {
            let key: Arc<str> = Arc::from(name.as_str());
            // Before anything is listed under the new config, so no list of this
            // server is ever presented under its old names.
            let renamed = self
                .registry
                .set_naming(&key, cfg.naming.clone(), self.name_limit);
            if let (Err(e), Some(slot)) = (&renamed, self.slots.get_mut(&key)) {
                tracing::warn!(upstream = %key, "its tools cannot be listed under the new names: {e}");
                slot.catalog_error = Some(format!("tool list rejected under the new names: {e}"));
            }
            // A server whose URL or OAuth settings change gets a login of its own.
            let fresh_login = match self.slots.get(&key) {
                Some(s) if launch_oauth(&s.cfg) != launch_oauth(cfg) => self.login_for(cfg),
                _ => None,
            };
            match self.slots.get_mut(&key) {
                None => {
                    summary.added.push(name.clone());
                    let mut slot = Slot::new(cfg.clone());
                    slot.login = self.login_for(cfg);
                    self.slots.insert(key.clone(), slot);
                    if cfg.enabled {
                        self.start_template(&key);
                    }
                }
                Some(slot) if slot.cfg == *cfg => summary.unchanged += 1,
                // A new pin mode needs no restart: the lists are gated again below.
                Some(slot) if slot.cfg.same_but_naming(cfg) => {
                    if slot.cfg.pin != cfg.pin {
                        repin.push(key.clone());
                    }
                    if slot.cfg.naming == cfg.naming {
                        summary.unchanged += 1;
                        slot.cfg = cfg.clone();
                        continue;
                    }
                    summary.renamed.push(name.clone());
                    slot.cfg = cfg.clone();
                    if renamed.is_ok() {
                        slot.catalog_error = None;
                    }
                }
                Some(slot) => {
                    summary.changed.push(name.clone());
                    if launch_oauth(&slot.cfg) != launch_oauth(cfg) {
                        slot.login = fresh_login;
                    }
                    slot.cfg = cfg.clone();
                    slot.budget.clear();
                    slot.backoff.reset();
                    slot.retry_at = None;
                    let enabled = cfg.enabled;
                    let instanced = cfg.share.instanced();
                    // Its instances restart under the new config (or stop, shared now);
                    // the server itself runs only to learn its tools (per agent) or never.
                    self.reconfigure_instances(&key);
                    if instanced {
                        continue;
                    }
                    let Some(slot) = self.slots.get_mut(&key) else {
                        continue;
                    };
                    match &slot.running {
                        Some(r) => {
                            slot.after_exit = if enabled {
                                AfterExit::Restart
                            } else {
                                AfterExit::Stay
                            };
                            r.cancel.cancel();
                        }
                        None if enabled => self.start(&key),
                        None => slot.state = ServerState::Disabled,
                    }
                }
            }
        }
        for key in repin {
            self.repin(&key);
        }
        tracing::info!(
            added = ?summary.added,
            removed = ?summary.removed,
            changed = ?summary.changed,
            renamed = ?summary.renamed,
            unchanged = summary.unchanged,
            "configuration reloaded"
        );
        self.publish();
        summary
    }
}

/// What a server's login depends on: its URL and OAuth settings.
fn launch_oauth(
    cfg: &crate::config::ServerConfig,
) -> Option<(&reqwest::Url, &crate::config::OAuthConfig)> {
    match &cfg.launch {
        crate::config::Launch::Http(l) => l.oauth.as_deref().map(|o| (&l.url, o)),
        crate::config::Launch::Stdio(_) => None,
    }
}
