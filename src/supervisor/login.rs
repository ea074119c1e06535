//! Remote servers' OAuth logins as the supervisor sees them.
//!
//! Each slot owns its server's credential, a login that ends well starts the server, a
//! logout or a refused login parks it as `needs-login` instead of retrying.

use super::{AfterExit, ServerState, Slot, Supervisor, SupervisorError};
use crate::config::{Launch, ServerConfig};
use crate::oauth::credential::CredentialHandle;
use crate::oauth::flow::Setup;
use crate::upstream::ConnectionEvent;
use std::sync::Arc;
use std::time::Duration;

/// Redirect hops followed at most by metadata, registration and token requests.
const MAX_REDIRECTS: usize = 3;

impl Supervisor {
    /// The login of a remote server that may use OAuth, started (its store read) now.
    pub(super) fn login_for(&self, cfg: &ServerConfig) -> Option<CredentialHandle> {
        let Launch::Http(launch) = &cfg.launch else {
            return None;
        };
        let oauth = launch.oauth.clone()?;
        let http = match oauth_client(launch.connect_timeout) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(upstream = %cfg.name, "cannot set up the OAuth client: {e}");
                return None;
            }
        };
        let setup = Arc::new(Setup {
            server: cfg.name.clone(),
            url: launch.url.clone(),
            oauth: *oauth,
            http,
            secrets: self.starter.secrets().clone(),
        });
        let place = crate::oauth::store::Place::of(self.store.dir(), &cfg.name, setup.oauth.store);
        if place.is_none() {
            tracing::warn!(upstream = %cfg.name, "no state_dir (nor HOME): a login lasts until mcpd stops");
        }
        let events = self.starter.events();
        let server: Arc<str> = Arc::from(cfg.name.as_str());
        let notify = Box::new(move |logged_in: bool| {
            let events = events.clone();
            let server = server.clone();
            mcpd_runtime::tracker::spawn(async move {
                // If the supervisor is gone, the daemon is stopping.
                let _ = events
                    .send(ConnectionEvent::Login { server, logged_in })
                    .await;
            });
        });
        Some(CredentialHandle::spawn(setup, place, notify))
    }

    /// A login ended well (start the server if it waited for it) or was logged out
    /// (stop it until the next login).
    pub(super) fn on_login(&mut self, server: &Arc<str>, logged_in: bool) {
        let Some(slot) = self.slots.get_mut(server) else {
            return;
        };
        if logged_in {
            slot.more_scope = false;
            match slot.running {
                // A running connection sends the new token with its next request.
                Some(_) => {}
                None if slot.cfg.enabled && slot.state != ServerState::Stopped => {
                    slot.budget.clear();
                    slot.backoff.reset();
                    tracing::info!(upstream = %server, "logged in; starting it");
                    self.start(server);
                }
                None => {}
            }
        } else if let Some(r) = &slot.running {
            slot.after_exit = AfterExit::Recover;
            r.cancel.cancel();
        } else if matches!(
            slot.state,
            ServerState::Backoff | ServerState::Failed | ServerState::Starting
        ) {
            slot.retry_at = None;
            park(slot, server);
        }
        self.publish();
    }

    /// The credential of `server`, for `mcpd ctl login` and `logout`.
    pub(super) fn login_of(&self, server: &str) -> Result<CredentialHandle, SupervisorError> {
        let Some(slot) = self.slots.get(server) else {
            return Err(self.unknown(server));
        };
        slot.login.clone().ok_or_else(|| match &slot.cfg.launch {
            Launch::Stdio(_) => SupervisorError::LocalServer(server.to_owned()),
            Launch::Http(_) => SupervisorError::NoOAuth(server.to_owned()),
        })
    }
}

/// Parks a slot whose login is over as `needs-login`, with the hint. True if it was.
pub(super) fn park_if_logged_out(slot: &mut Slot, server: &str) -> bool {
    if slot.login.as_ref().and_then(|l| l.needs_login()).is_none() && !slot.more_scope {
        return false;
    }
    park(slot, server);
    true
}

/// Why a parked server waits for a login.
pub(super) fn login_reason(slot: &Slot) -> String {
    let login = slot.login.as_ref();
    let more = login
        .map(|l| l.view().more_scope.join(" "))
        .unwrap_or_default();
    match login.and_then(|l| l.needs_login()) {
        Some(why) => why,
        None if slot.more_scope => format!("it cannot be used without the scope {more:?}"),
        None => "not logged in".into(),
    }
}

/// What a parked server's error says, finishing "server 'x' …": a browser login to run,
/// or, for a machine grant, the settings to fix before `mcpd ctl login` runs it again
/// (running it alone would meet the same refusal).
pub(super) fn login_hint(slot: &Slot, server: &str, waiting: &str) -> String {
    let why = login_reason(slot);
    match slot.login.as_ref().and_then(|l| l.machine()) {
        Some(grant) => format!(
            "has no token from its {} grant ({why}): fix [servers.{server}.oauth], then run `mcpd ctl login {server}` to try again",
            grant.as_str()
        ),
        None => format!("{waiting} ({why}): run `mcpd ctl login {server}`"),
    }
}

fn park(slot: &mut Slot, server: &str) {
    let error = login_hint(slot, server, "needs an OAuth login");
    if slot.state != ServerState::NeedsLogin {
        tracing::warn!(upstream = %server, "{error}");
    }
    slot.last_error = Some(error);
    slot.state = ServerState::NeedsLogin;
}

/// The HTTP client of metadata, registration, token and revocation requests: no
/// credentials of the server, and redirects only to https (or loopback) URLs.
fn oauth_client(connect_timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    let _ = rustls::crypto::ring::default_provider().install_default(); // installed once
    let policy = reqwest::redirect::Policy::custom(|attempt| {
        if attempt.previous().len() > MAX_REDIRECTS {
            attempt.stop()
        } else if crate::oauth::wellknown::endpoint_allowed(attempt.url()) {
            attempt.follow()
        } else {
            attempt.stop()
        }
    });
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .redirect(policy)
        .user_agent(concat!("mcpd/", env!("CARGO_PKG_VERSION")))
        .build()
}
