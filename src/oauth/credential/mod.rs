//! The owner of one remote server's login.
//!
//! An actor that holds its tokens and DPoP key, refreshes them ahead of expiry and after
//! a refused request (once for every caller at a time, a rotated refresh token stored
//! before the new access token is used), runs a machine grant the same way, and runs
//! `mcpd ctl login`'s one pending authorization and `logout`.

use super::authorize::PendingAuthorization;
use super::challenge::Bearer;
use super::dpop::Dpop;
use super::flow::{Arrived, LoginError, Prepared, Setup};
use super::grant::Granted;
use super::store::{self, Place, Stored, StoredClient, StoredTokens};
use super::token::{self, At, TokenError, Tokens};
use crate::config::Secret;
use futures::FutureExt;
use futures::future::BoxFuture;
use reqwest::Url;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod bound;
mod handle;
mod login;
mod machine;
#[cfg(test)]
mod tests;

use handle::Msg;
pub use handle::{Access, CredentialHandle, NoToken, Notify};
use mcpd_ctl::control_api::{AuthState, AuthView};

/// Refreshed this long before expiry at most (or 10 % of the lifetime, if less).
const AHEAD_MAX: Duration = Duration::from_secs(60);
/// After a refresh that failed for a transient reason, the next try waits this long.
const RETRY_AFTER: Duration = Duration::from_secs(10);
/// How long a started login waits for its redirect.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// Callers of a handle wait this long at most (a refresh or a token exchange included).
const ASK_TIMEOUT: Duration = Duration::from_secs(60);
/// Redirects queued to the actor from the loopback listener.
const ARRIVALS: usize = 4;

/// The one login waiting for its redirect.
struct PendingLogin {
    pending: PendingAuthorization,
    metadata: super::discovery::ServerMetadata,
    url: Url,
    arrived: mpsc::Receiver<Arrived>,
    /// Ends the loopback listener.
    listening: CancellationToken,
    expires: Instant,
}

/// A code being exchanged: the login it belongs to, and who waits for the outcome.
struct Exchange {
    future: BoxFuture<'static, Result<Tokens, TokenError>>,
    pending: PendingAuthorization,
    metadata: super::discovery::ServerMetadata,
    listening: CancellationToken,
    respond_to: oneshot::Sender<Result<(), LoginError>>,
}

struct Credential {
    setup: Arc<Setup>,
    /// Where the login is kept; None without one (no state directory for the file
    /// store), and after the server left the config (nothing is written again).
    place: Option<Place>,
    /// Why the stored login could not be read at start (a keyring that cannot be
    /// reached, a damaged file): said when the server asks for a login.
    unread: Option<String>,
    notify: Notify,
    rx: mpsc::Receiver<Msg>,
    stored: Option<Stored>,
    /// When the access token expires, as exactly as known (the store keeps seconds).
    expires: Option<SystemTime>,
    token: watch::Sender<Option<Arc<Access>>>,
    view: watch::Sender<AuthView>,
    /// The one refresh in flight, if any.
    refreshing: Option<BoxFuture<'static, Result<Tokens, TokenError>>>,
    /// Callers waiting for it (or for the machine grant in flight).
    waiting: Vec<oneshot::Sender<Result<Arc<Access>, NoToken>>>,
    /// When to try again after a transient failure.
    retry_at: Option<Instant>,
    /// The server's last challenge, for the next login's discovery and scopes.
    challenge: Option<Bearer>,
    /// Scopes a step-up asked for.
    wanted: Vec<String>,
    /// The client registered dynamically at an authorization server (its issuer), kept
    /// when a login ends so the next login there reuses it; forgotten by logout.
    registered: Option<(String, StoredClient)>,
    /// Discovery and registration of a login, in flight.
    preparing: Option<BoxFuture<'static, Result<Prepared, LoginError>>>,
    /// `mcpd ctl login`s waiting for its URL.
    starters: Vec<oneshot::Sender<Result<Url, LoginError>>>,
    pending: Option<PendingLogin>,
    exchanging: Option<Exchange>,
    /// `mcpd ctl login`s waiting for the login to end.
    finishers: Vec<oneshot::Sender<Result<(), LoginError>>>,
    /// The server's DPoP key: generated at start, replaced by the stored one, stored
    /// with each login.
    dpop: Arc<Dpop>,
    /// The one machine grant in flight, if any.
    granting: Option<BoxFuture<'static, Result<Granted, LoginError>>>,
    /// `mcpd ctl login`s of a machine grant waiting for it.
    renewers: Vec<oneshot::Sender<Result<(), LoginError>>>,
    /// The user's sign-in at the identity provider (an enterprise-managed server without
    /// a configured ID token), kept beside the login (`Place::idp`).
    signed_in: Option<super::store::IdpLogin>,
}

impl Credential {
    async fn run(mut self, loaded: watch::Sender<bool>) {
        self.load().await;
        loaded.send_replace(true);
        loop {
            let ahead = self.refresh_due();
            let expires = self.pending.as_ref().map(|p| p.expires);
            tokio::select! {
                msg = self.rx.recv() => match msg {
                    Some(msg) => self.on_msg(msg),
                    None => break,
                },
                outcome = poll(&mut self.refreshing) => {
                    self.refreshing = None;
                    self.on_refreshed(outcome).await;
                }
                granted = poll(&mut self.granting) => {
                    self.granting = None;
                    self.on_granted(granted).await;
                }
                prepared = poll(&mut self.preparing) => {
                    self.preparing = None;
                    self.on_prepared(prepared);
                }
                Some(arrived) = arrival(&mut self.pending) => {
                    self.on_redirect(arrived.url, arrived.respond_to);
                }
                outcome = exchanged(&mut self.exchanging) => {
                    if let Some(ex) = self.exchanging.take() {
                        self.on_exchanged(ex, outcome).await;
                    }
                }
                () = sleep_until(expires) => self.expire_login(),
                () = sleep_until(ahead), if self.refreshing.is_none() => self.start_refresh(),
            }
        }
        if let Some(p) = self.pending.take() {
            p.listening.cancel();
        }
    }

    /// Reads the stored login, if it is this server's. One that cannot be read counts as
    /// none, and the reason is kept for the status.
    async fn load(&mut self) {
        let Some(place) = self.place.clone() else {
            return;
        };
        if super::idp::signs_in(&self.setup).is_some() {
            match store::load(&place.idp()).await {
                Ok(found) => self.signed_in = found,
                Err(e) => {
                    tracing::warn!(upstream = %self.setup.server, "the stored sign-in at the identity provider cannot be used; a new one is needed: {e}");
                }
            }
        }
        let stored: Stored = match store::load(&place).await {
            Ok(Some(stored)) => stored,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(upstream = %self.setup.server, "the stored login cannot be used; a new login is needed: {e}");
                self.unread = Some(format!("the stored login cannot be used: {e}"));
                return;
            }
        };
        if stored.server_url != self.setup.url.as_str() {
            tracing::info!(upstream = %self.setup.server, "the stored login is for another URL; a new login is needed");
            return;
        }
        if stored.grant != self.setup.oauth.grant {
            tracing::info!(upstream = %self.setup.server, "the stored login is of another grant; a new one is needed");
            return;
        }
        if let Some(key) = stored.dpop_key.as_deref().and_then(bound::decode_key) {
            self.dpop = Arc::new(Dpop::new(key));
        }
        tracing::info!(upstream = %self.setup.server, issuer = %stored.metadata.issuer, "using the stored login");
        let access = self.access(stored.tokens.access_token.clone(), stored.tokens.dpop_bound);
        self.token.send_replace(Some(access));
        self.expires = stored.tokens.expires_at.map(store::from_epoch);
        self.registered = Some((stored.metadata.issuer.clone(), stored.client.clone()));
        self.stored = Some(stored);
        self.publish_logged_in();
    }

    fn publish_logged_in(&mut self) {
        let Some(s) = &self.stored else { return };
        let state = AuthState::LoggedIn {
            expires_at: s.tokens.expires_at,
        };
        let issuer = Some(s.metadata.issuer.clone());
        let scopes = s.tokens.scope.clone();
        let dpop = s.tokens.dpop_bound;
        self.view.send_modify(|v| {
            v.state = state;
            v.issuer = issuer;
            v.scopes = scopes;
            v.dpop = dpop;
        });
    }

    fn on_msg(&mut self, msg: Msg) {
        match msg {
            Msg::Refused {
                rejected,
                challenge,
                respond_to,
            } => {
                if challenge.is_some() {
                    self.challenge = challenge;
                }
                self.on_refused(rejected.as_deref(), respond_to);
            }
            Msg::Insufficient { challenge } => {
                for s in challenge.scopes() {
                    if !self.wanted.contains(&s) {
                        self.wanted.push(s);
                    }
                }
                tracing::warn!(upstream = %self.setup.server, scopes = %self.wanted.join(" "), "the server wants scopes the login lacks; run `mcpd ctl login {}`", self.setup.server);
                let more = self.wanted.clone();
                self.view.send_modify(|v| v.more_scope = more);
                self.challenge = Some(challenge);
            }
            Msg::Login { respond_to }
                if self.setup.oauth.grant.is_machine()
                    && super::idp::signs_in(&self.setup).is_none() =>
            {
                let _ = respond_to.send(Err(LoginError::Other(format!(
                    "{} gets its tokens with the {} grant, without a browser; `mcpd ctl login {}` runs it again",
                    self.setup.server,
                    self.setup.oauth.grant.as_str(),
                    self.setup.server
                )))); // the caller may have gone
            }
            Msg::Login { respond_to } => self.on_login(respond_to),
            Msg::Renew { respond_to } => self.renew(respond_to),
            Msg::Redirected { url, respond_to } => self.on_redirect(url, respond_to),
            Msg::Wait { respond_to } => {
                if self.pending.is_none() && self.preparing.is_none() && self.exchanging.is_none() {
                    let r = match self.needs() {
                        Some(why) => Err(LoginError::NotLoggedIn(why)),
                        None => Ok(()),
                    };
                    let _ = respond_to.send(r); // the caller may have gone
                } else {
                    self.finishers.push(respond_to);
                }
            }
            Msg::Logout { respond_to } => self.logout(respond_to),
            Msg::Forget => self.forget(),
            Msg::Spent { token, why } => {
                let current = self.token.borrow().clone();
                if current.is_some_and(|c| c.same(&token)) {
                    self.needs_login(why);
                }
            }
        }
    }

    fn needs(&self) -> Option<String> {
        match &self.view.borrow().state {
            AuthState::NeedsLogin(why) => Some(why.clone()),
            AuthState::None => Some("not logged in".into()),
            AuthState::LoggedIn { .. } => None,
        }
    }

    /// When the token should be refreshed: ahead of its expiry by the smaller of a
    /// minute and a tenth of its lifetime; None without a refresh token or expiry.
    fn refresh_due(&self) -> Option<Instant> {
        if let Some(t) = self.retry_at {
            return Some(t);
        }
        let t = &self.stored.as_ref()?.tokens;
        if !self.setup.oauth.grant.is_machine() {
            t.refresh_token.as_ref()?;
        }
        let expires = self.expires?;
        let lifetime = Duration::from_secs(t.lifetime.unwrap_or(600));
        let ahead = (lifetime / 10).min(AHEAD_MAX);
        let left = expires
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        Some(Instant::now() + left.saturating_sub(ahead))
    }

    fn on_refused(
        &mut self,
        rejected: Option<&Access>,
        respond_to: oneshot::Sender<Result<Arc<Access>, NoToken>>,
    ) {
        if self.stored.is_none() && self.setup.oauth.grant.is_machine() {
            return self.grant_for(respond_to);
        }
        if self.stored.is_none() {
            let why = match (&self.view.borrow().state, &self.unread) {
                (AuthState::NeedsLogin(why), _) => why.clone(),
                (_, Some(unread)) => format!("the server asks for a login, and {unread}"),
                _ => "the server asks for a login".to_owned(),
            };
            if matches!(self.view.borrow().state, AuthState::None) {
                tracing::warn!(upstream = %self.setup.server, "the server asks for an OAuth login; run `mcpd ctl login {}`", self.setup.server);
                self.view
                    .send_modify(|v| v.state = AuthState::NeedsLogin(why.clone()));
            }
            let _ = respond_to.send(Err(NoToken(why))); // the caller may have gone
            return;
        }
        // Refused a token that is no longer the current one (or none at all): the
        // current one is newer.
        let current = self.token.borrow().clone();
        if let Some(c) = current
            && rejected.is_none_or(|r| !c.same(r))
        {
            let _ = respond_to.send(Ok(c)); // the caller may have gone
            return;
        }
        self.waiting.push(respond_to);
        if self.refreshing.is_none() && self.granting.is_none() {
            self.start_refresh();
        }
    }

    fn start_refresh(&mut self) {
        self.retry_at = None;
        if self.setup.oauth.grant.is_machine() {
            return self.start_grant();
        }
        let Some(stored) = &self.stored else {
            return;
        };
        let Some(refresh) = stored.tokens.refresh_token.clone() else {
            self.needs_login(
                "the server refused the access token, and there is no refresh token to renew it"
                    .into(),
            );
            return;
        };
        let http = self.setup.http.clone();
        let endpoint = stored.metadata.token_endpoint.clone();
        let issuer = stored.metadata.issuer.clone();
        let client = stored.client.client();
        let resource = stored.resource.clone();
        let dpop = self.dpop_for(stored).cloned();
        // The scopes granted before (or asked for, if the server did not say).
        let scope = stored
            .tokens
            .scope
            .clone()
            .or_else(|| Some(stored.requested_scopes.join(" ")));
        self.refreshing = Some(
            async move {
                let refresh = Secret::new(refresh);
                let at = At {
                    http: &http,
                    endpoint: &endpoint,
                    issuer: &issuer,
                    client: &client,
                    dpop: dpop.as_deref(),
                };
                token::refresh(&at, &refresh, &resource, scope.as_deref()).await
            }
            .boxed(),
        );
    }

    async fn on_refreshed(&mut self, outcome: Result<Tokens, TokenError>) {
        let key = self.stored_key();
        let Some(stored) = &mut self.stored else {
            return; // logged out meanwhile
        };
        match outcome {
            Ok(tokens) => {
                apply(&mut stored.tokens, &tokens);
                // A token first bound by a refresh: its key is kept from now on too.
                if tokens.dpop_bound && stored.dpop_key.is_none() {
                    stored.dpop_key = key;
                }
                self.expires = tokens.expires_at;
                // Stored (the file synced, the keyring item replaced) before anything
                // uses the new tokens: a crash now must not leave only the spent
                // refresh token kept. If it cannot be, the tokens still work until mcpd
                // stops; the old refresh token is spent either way.
                if let Some(place) = &self.place
                    && let Err(e) = store::save(place, stored).await
                {
                    tracing::warn!(upstream = %self.setup.server, "could not store the refreshed login (it works until mcpd restarts): {e}");
                }
                tracing::debug!(upstream = %self.setup.server, "refreshed the access token");
                let access = self.access(tokens.access.expose().to_owned(), tokens.dpop_bound);
                self.token.send_replace(Some(access.clone()));
                self.publish_logged_in();
                for w in self.waiting.drain(..) {
                    let _ = w.send(Ok(access.clone())); // the caller may have gone
                }
            }
            Err(TokenError::Unreachable(why)) => {
                // Transient: keep the tokens, try again soon; callers hear why now.
                tracing::warn!(upstream = %self.setup.server, "refreshing the token failed, retrying in {}: {why}", humantime::format_duration(RETRY_AFTER));
                self.retry_at = Some(Instant::now() + RETRY_AFTER);
                for w in self.waiting.drain(..) {
                    let _ = w.send(Err(NoToken(format!("refreshing the token failed: {why}"))));
                }
            }
            Err(e) => self.needs_login(e.to_string()),
        }
    }

    /// The login is over: forgets the tokens (on disk too) and says why.
    fn needs_login(&mut self, why: String) {
        if self.setup.oauth.grant.is_machine() {
            tracing::warn!(upstream = %self.setup.server, "{why}; fix [servers.{}.oauth] and run `mcpd ctl login {}` to try again", self.setup.server, self.setup.server);
        } else {
            tracing::warn!(upstream = %self.setup.server, "the login ended: {why}; run `mcpd ctl login {}`", self.setup.server);
        }
        self.stored = None;
        if let Some(place) = self.place.clone() {
            let server = self.setup.server.clone();
            mcpd_runtime::tracker::spawn(async move {
                if let Err(e) = store::remove(&place).await {
                    tracing::warn!(upstream = %server, "could not remove the spent login: {e}");
                }
            });
        }
        self.token.send_replace(None);
        self.view
            .send_modify(|v| v.state = AuthState::NeedsLogin(why.clone()));
        for w in self.waiting.drain(..) {
            let _ = w.send(Err(NoToken(why.clone()))); // the caller may have gone
        }
    }
}

/// Puts what a token answer says into the kept tokens. A rotated refresh token replaces
/// the old one; without one, the old one stays.
fn apply(t: &mut StoredTokens, tokens: &Tokens) {
    t.access_token = tokens.access.expose().to_owned();
    t.expires_at = tokens.expires_at.map(store::epoch_secs);
    t.dpop_bound = tokens.dpop_bound;
    t.lifetime = tokens.lifetime.map(|d| d.as_secs());
    if let Some(r) = &tokens.refresh {
        t.refresh_token = Some(r.expose().to_owned());
    }
    if tokens.scope.is_some() {
        t.scope = tokens.scope.clone();
    }
}

async fn poll<T>(f: &mut Option<BoxFuture<'static, T>>) -> T {
    match f {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

async fn exchanged(ex: &mut Option<Exchange>) -> Result<Tokens, TokenError> {
    match ex {
        Some(ex) => (&mut ex.future).await,
        None => std::future::pending().await,
    }
}

async fn arrival(p: &mut Option<PendingLogin>) -> Option<Arrived> {
    match p {
        Some(p) => p.arrived.recv().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(when: Option<Instant>) {
    match when {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
