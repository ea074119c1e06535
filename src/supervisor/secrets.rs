//! Secrets at each start.
//!
//! A server whose launch refers to `${secret:NAME}` has them looked up (off the
//! supervisor's loop, every store bounded in time) before its process or session starts,
//! and again at every restart; a secret that cannot be found keeps that server alone
//! down, saying which and how to set it.

use super::{Finished, ServerState, Supervisor};
use crate::config::Launch;
use crate::secrets::{SecretError, SecretValue};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::time::Instant;

/// The values of one start's secrets, by name.
pub(super) type Resolved = Arc<HashMap<String, SecretValue>>;

impl Supervisor {
    /// Whether `name` may start now: it needs no secrets, or this start's are looked up.
    /// Otherwise the lookup starts (once; its answer comes back through `on_secrets`,
    /// which starts the server again) and the server shows as starting.
    pub(super) fn secrets_ready(&mut self, name: &Arc<str>) -> bool {
        let Some(slot) = self.slots.get_mut(name) else {
            return false;
        };
        let needed = &slot.cfg.secrets;
        if needed.is_empty() {
            return true;
        }
        // Values looked up for another config (a reload changed the references) are not
        // this start's.
        if slot
            .resolved
            .as_ref()
            .is_some_and(|r| needed.iter().all(|n| r.contains_key(n)))
        {
            return true;
        }
        slot.resolved = None;
        if slot.resolving.is_some() {
            return false;
        }
        let lookup = self.starter.next_id();
        slot.resolving = Some(lookup);
        slot.state = ServerState::Starting;
        slot.retry_at = None;
        let names = needed.clone();
        let secrets = self.starter.secrets().clone();
        let server = name.clone();
        self.conns.spawn(async move {
            let found = secrets.lookup_all(&names).await.map(|all| {
                all.into_iter()
                    .map(|(name, value, store)| {
                        tracing::debug!(upstream = %server, secret = %name, %store, "secret found");
                        (name, value)
                    })
                    .collect()
            });
            (server, lookup, Finished::Secrets(found))
        });
        false
    }

    /// A start's secrets were looked up: start it with them, or say why it cannot start.
    pub(super) fn on_secrets(
        &mut self,
        name: &Arc<str>,
        lookup: u64,
        found: Result<HashMap<String, SecretValue>, SecretError>,
    ) {
        let Some(slot) = self.slots.get_mut(name) else {
            return;
        };
        // Stopped, restarted or reconfigured meanwhile: this answer is not wanted.
        if slot.resolving != Some(lookup) {
            return;
        }
        slot.resolving = None;
        match found {
            Ok(values) => {
                slot.missing_secret = None;
                slot.resolved = Some(Arc::new(values));
                self.start(name);
            }
            Err(e) => {
                slot.missing_secret = match &e {
                    SecretError::Missing { name, .. } => Some(name.clone()),
                    _ => None,
                };
                let why = format!("not started: {e}");
                tracing::error!(upstream = %name, "{why}");
                slot.note(why.clone());
                slot.last_error = Some(why);
                // A keyring that failed (locked, slow) is retried within the crash
                // budget; a secret the stores do not have waits for a person.
                if passing(&e) && !slot.budget.record(Instant::now()) {
                    let delay = slot.backoff.next_delay(rand::random::<f64>());
                    slot.retry_at = Some(Instant::now() + delay);
                    slot.state = ServerState::Backoff;
                } else {
                    slot.state = ServerState::Failed;
                    slot.retry_at = None;
                }
                self.settle_waiters(name);
            }
        }
        self.publish();
    }

    /// Servers that are down for want of the secret `name`, started again now that it
    /// is set; and every server that refers to it, whose running process keeps the old
    /// value until it restarts.
    pub(super) fn on_secret_set(&mut self, secret: &str) -> (Vec<String>, Vec<String>) {
        let users: Vec<Arc<str>> = self
            .slots
            .iter()
            .filter(|(_, s)| s.cfg.secrets.iter().any(|n| n == secret))
            .map(|(k, _)| k.clone())
            .collect();
        let mut started = Vec::new();
        let mut running = Vec::new();
        for key in users {
            let Some(slot) = self.slots.get_mut(&key) else {
                continue;
            };
            let waiting = slot.running.is_none()
                && slot.resolving.is_none()
                && matches!(slot.state, ServerState::Failed | ServerState::Backoff)
                && slot.missing_secret.as_deref() == Some(secret);
            if waiting {
                slot.budget.clear();
                slot.backoff.reset();
                started.push(key.to_string());
                self.start(&key);
            } else if slot.running.is_some() {
                running.push(key.to_string());
            }
        }
        self.publish();
        (started, running)
    }
}

/// Whether a lookup's failure may pass by itself: the keyring was reached but did not
/// answer in time, or is locked. A secret no store has waits for a person (`ctl secret
/// set` starts the server), as does a keyring that was not there to search: retrying
/// would not find it.
fn passing(e: &SecretError) -> bool {
    matches!(e, SecretError::Keyring(_))
}

/// The launch a start uses: its config's, with this start's secrets put in.
pub(super) fn launch(
    cfg: &crate::config::ServerConfig,
    resolved: Option<&Resolved>,
) -> Result<Launch, String> {
    let empty = HashMap::new();
    cfg.with_secrets(resolved.map_or(&empty, |r| r))
}
