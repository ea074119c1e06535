//! The owner of one remote server's login: an actor that holds its tokens, refreshes them ahead of expiry and after a refused request (once for every caller at a time, a rotated refresh token stored before the new access token is used), and runs `mcpd ctl login`'s one pending authorization and `logout`.

use super::authorize::{self, Pending, TokenError, Tokens};
use super::challenge::Bearer;
use super::flow::{self, Arrived, LoginError, Prepared, Setup};
use super::store::{self, Stored, StoredClient, StoredTokens};
use crate::config::Secret;
use futures::FutureExt;
use futures::future::BoxFuture;
use reqwest::Url;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

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

/// Where a server's login stands, as status shows it. Never holds a token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthView {
    #[serde(flatten)]
    pub state: AuthState,
    /// A `mcpd ctl login` waits for its redirect.
    pub pending: bool,
    /// The authorization server of the current login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The scopes granted, space-separated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<String>,
    /// Scopes the server asked for (a 403 `insufficient_scope`) that the login lacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_scope: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state", content = "detail")]
pub enum AuthState {
    /// The server has not asked for a login, and none is stored.
    None,
    /// A token that works as far as mcpd knows; valid until then (seconds since the
    /// epoch), if known.
    LoggedIn { expires_at: Option<u64> },
    /// No usable token: a person must run `mcpd ctl login`. Says why.
    NeedsLogin(String),
}

/// Why no token can be had now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoToken(pub String);

/// Told of each login that ends well (true) and each logout (false).
pub type Notify = Box<dyn Fn(bool) + Send + Sync>;

enum Msg {
    /// The server refused `rejected` (or a request without a token): answer with a newer
    /// token, refreshing if needed.
    Refused {
        rejected: Option<Arc<Secret>>,
        challenge: Option<Bearer>,
        respond_to: oneshot::Sender<Result<Arc<Secret>, NoToken>>,
    },
    /// The server wants scopes the token lacks.
    Insufficient { challenge: Bearer },
    /// `mcpd ctl login`: the authorization URL of the one pending login.
    Login {
        respond_to: oneshot::Sender<Result<Url, LoginError>>,
    },
    /// A redirect pasted by hand (`mcpd ctl login --paste`).
    Redirected {
        url: Url,
        respond_to: oneshot::Sender<Result<(), String>>,
    },
    /// Waits for the pending login to end.
    Wait {
        respond_to: oneshot::Sender<Result<(), String>>,
    },
    Logout {
        respond_to: oneshot::Sender<Result<String, String>>,
    },
    /// The server refused a token that was just renewed: the login is over.
    Spent { token: Arc<Secret>, why: String },
}

/// The cloneable way to a server's login.
#[derive(Clone)]
pub struct CredentialHandle {
    tx: mpsc::Sender<Msg>,
    token: watch::Receiver<Option<Arc<Secret>>>,
    view: watch::Receiver<AuthView>,
    /// The store has been read (a token, if any, is in `token`).
    loaded: watch::Receiver<bool>,
}

impl std::fmt::Debug for CredentialHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CredentialHandle({:?})", self.view.borrow().state)
    }
}

impl CredentialHandle {
    /// Starts the owner of a server's login, which reads `file` (the stored login, if
    /// any) first and writes every change to it.
    /// Without a file (no state directory), a login lasts until mcpd stops.
    pub fn spawn(setup: Arc<Setup>, file: Option<PathBuf>, notify: Notify) -> CredentialHandle {
        let (tx, rx) = mpsc::channel(64);
        let (token_tx, token) = watch::channel(None);
        let (view_tx, view) = watch::channel(AuthView {
            state: AuthState::None,
            pending: false,
            issuer: None,
            scopes: None,
            more_scope: Vec::new(),
        });
        let (loaded_tx, loaded) = watch::channel(false);
        let actor = Credential {
            setup,
            file,
            notify,
            rx,
            stored: None,
            expires: None,
            token: token_tx,
            view: view_tx,
            refreshing: None,
            waiting: Vec::new(),
            retry_at: None,
            challenge: None,
            wanted: Vec::new(),
            registered: None,
            preparing: None,
            starters: Vec::new(),
            pending: None,
            exchanging: None,
            finishers: Vec::new(),
        };
        tokio::spawn(actor.run(loaded_tx));
        CredentialHandle {
            tx,
            token,
            view,
            loaded,
        }
    }

    /// The access token to send now, once the store has been read.
    pub async fn current(&self) -> Option<Arc<Secret>> {
        let mut loaded = self.loaded.clone();
        // An actor gone before loading has no token to give.
        let _ = loaded.wait_for(|l| *l).await;
        self.token()
    }

    /// The access token to send now, if there is one.
    pub fn token(&self) -> Option<Arc<Secret>> {
        self.token.borrow().clone()
    }

    pub fn view(&self) -> AuthView {
        self.view.borrow().clone()
    }

    /// Whether the login is over until a person logs in again.
    pub fn needs_login(&self) -> Option<String> {
        match &self.view.borrow().state {
            AuthState::NeedsLogin(why) => Some(why.clone()),
            _ => None,
        }
    }

    /// The server refused `rejected` (a 401), or a request that carried no token: a
    /// newer token, from the one refresh every caller waits on; or why there is none.
    pub async fn refused(
        &self,
        rejected: Option<Arc<Secret>>,
        challenge: Option<Bearer>,
    ) -> Result<Arc<Secret>, NoToken> {
        let asked = crate::ask::ask(&self.tx, ASK_TIMEOUT, |respond_to| Msg::Refused {
            rejected,
            challenge,
            respond_to,
        })
        .await;
        asked.unwrap_or_else(|e| Err(NoToken(format!("the login is not available: {e}"))))
    }

    /// The server answered 403 `insufficient_scope`: the next login asks for more.
    pub async fn insufficient(&self, challenge: Bearer) {
        // If the actor is gone, there is no next login to widen.
        let _ = self.tx.send(Msg::Insufficient { challenge }).await;
    }

    /// The server refused even a renewed `token`: unless a newer one has come since, the
    /// login is over.
    pub async fn spent(&self, token: Arc<Secret>, why: &str) {
        let why = why.to_owned();
        // If the actor is gone, so is the login.
        let _ = self.tx.send(Msg::Spent { token, why }).await;
    }

    /// Starts a login (or joins the one pending): the URL to open.
    pub async fn login(&self) -> Result<Url, LoginError> {
        let asked = crate::ask::ask(&self.tx, ASK_TIMEOUT, |respond_to| Msg::Login {
            respond_to,
        })
        .await;
        asked.unwrap_or_else(|e| Err(LoginError::Other(e.to_string())))
    }

    /// Hands over the URL the browser was redirected to; Ok once the code is exchanged.
    pub async fn redirected(&self, url: Url) -> Result<(), String> {
        let asked = crate::ask::ask(&self.tx, ASK_TIMEOUT, |respond_to| Msg::Redirected {
            url,
            respond_to,
        })
        .await;
        asked.unwrap_or_else(|e| Err(e.to_string()))
    }

    /// Waits (up to the login's own timeout) for the pending login to end.
    pub async fn wait(&self) -> Result<(), String> {
        let (respond_to, rx) = oneshot::channel();
        if self.tx.send(Msg::Wait { respond_to }).await.is_err() {
            return Err("the login is not available".into());
        }
        match tokio::time::timeout(LOGIN_TIMEOUT + ASK_TIMEOUT, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err("the login was abandoned".into()),
            Err(_) => Err("the login did not end in time".into()),
        }
    }

    /// Forgets the login (revoking its tokens where the server offers revocation).
    pub async fn logout(&self) -> Result<String, String> {
        let asked = crate::ask::ask(&self.tx, ASK_TIMEOUT, |respond_to| Msg::Logout {
            respond_to,
        })
        .await;
        asked.unwrap_or_else(|e| Err(e.to_string()))
    }
}

/// The one login waiting for its redirect.
struct PendingLogin {
    pending: Pending,
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
    pending: Pending,
    metadata: super::discovery::ServerMetadata,
    listening: CancellationToken,
    respond_to: oneshot::Sender<Result<(), String>>,
}

struct Credential {
    setup: Arc<Setup>,
    file: Option<PathBuf>,
    notify: Notify,
    rx: mpsc::Receiver<Msg>,
    stored: Option<Stored>,
    /// When the access token expires, as exactly as known (the store keeps seconds).
    expires: Option<SystemTime>,
    token: watch::Sender<Option<Arc<Secret>>>,
    view: watch::Sender<AuthView>,
    /// The one refresh in flight, if any.
    refreshing: Option<BoxFuture<'static, Result<Tokens, TokenError>>>,
    /// Callers waiting for it.
    waiting: Vec<oneshot::Sender<Result<Arc<Secret>, NoToken>>>,
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
    finishers: Vec<oneshot::Sender<Result<(), String>>>,
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

    /// Reads the stored login, if it is this server's.
    async fn load(&mut self) {
        let Some(file) = self.file.clone() else {
            return;
        };
        let Some(stored) = store::load(file).await else {
            return;
        };
        if stored.server_url != self.setup.url.as_str() {
            tracing::info!(upstream = %self.setup.server, "the stored login is for another URL; a new login is needed");
            return;
        }
        tracing::info!(upstream = %self.setup.server, issuer = %stored.metadata.issuer, "using the stored login");
        self.token.send_replace(Some(Arc::new(Secret::new(
            stored.tokens.access_token.clone(),
        ))));
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
        self.view.send_modify(|v| {
            v.state = state;
            v.issuer = issuer;
            v.scopes = scopes;
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
            Msg::Login { respond_to } => self.on_login(respond_to),
            Msg::Redirected { url, respond_to } => self.on_redirect(url, respond_to),
            Msg::Wait { respond_to } => {
                if self.pending.is_none() && self.preparing.is_none() && self.exchanging.is_none() {
                    let r = match self.needs() {
                        Some(why) => Err(why),
                        None => Ok(()),
                    };
                    let _ = respond_to.send(r); // the caller may have gone
                } else {
                    self.finishers.push(respond_to);
                }
            }
            Msg::Logout { respond_to } => self.logout(respond_to),
            Msg::Spent { token, why } => {
                let current = self.token.borrow().clone();
                if current.is_some_and(|c| c.expose() == token.expose()) {
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
        t.refresh_token.as_ref()?;
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
        rejected: Option<&Secret>,
        respond_to: oneshot::Sender<Result<Arc<Secret>, NoToken>>,
    ) {
        if self.stored.is_none() {
            let why = match &self.view.borrow().state {
                AuthState::NeedsLogin(why) => why.clone(),
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
            && rejected.is_none_or(|r| c.expose() != r.expose())
        {
            let _ = respond_to.send(Ok(c)); // the caller may have gone
            return;
        }
        self.waiting.push(respond_to);
        if self.refreshing.is_none() {
            self.start_refresh();
        }
    }

    fn start_refresh(&mut self) {
        self.retry_at = None;
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
        let client = stored.client.client();
        let resource = stored.resource.clone();
        // The scopes granted before (or asked for, if the server did not say).
        let scope = stored
            .tokens
            .scope
            .clone()
            .or_else(|| Some(stored.requested_scopes.join(" ")));
        self.refreshing = Some(
            async move {
                let refresh = Secret::new(refresh);
                authorize::refresh(
                    &http,
                    &endpoint,
                    &client,
                    &refresh,
                    &resource,
                    scope.as_deref(),
                )
                .await
            }
            .boxed(),
        );
    }

    async fn on_refreshed(&mut self, outcome: Result<Tokens, TokenError>) {
        let Some(stored) = &mut self.stored else {
            return; // logged out meanwhile
        };
        match outcome {
            Ok(tokens) => {
                apply(&mut stored.tokens, &tokens);
                self.expires = tokens.expires_at;
                // Stored (and synced) before anything uses the new tokens: a crash now
                // must not leave only the spent refresh token on disk.
                if let Some(file) = &self.file
                    && let Err(e) = store::save(file.clone(), stored).await
                {
                    tracing::warn!(path = %file.display(), "could not store refreshed credentials: {e}");
                }
                tracing::debug!(upstream = %self.setup.server, "refreshed the access token");
                let access = Arc::new(tokens.access);
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
        tracing::warn!(upstream = %self.setup.server, "the login ended: {why}; run `mcpd ctl login {}`", self.setup.server);
        self.stored = None;
        if let Some(file) = self.file.clone() {
            tokio::spawn(async move {
                if let Err(e) = store::remove(file.clone()).await {
                    tracing::warn!(path = %file.display(), "could not remove the spent credentials: {e}");
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

    fn on_login(&mut self, respond_to: oneshot::Sender<Result<Url, LoginError>>) {
        // One pending authorization: a second `ctl login` joins it, so its verifier
        // and state are never replaced while a browser may still come back with them.
        if let Some(p) = &self.pending {
            let _ = respond_to.send(Ok(p.url.clone())); // the caller may have gone
            return;
        }
        if self.exchanging.is_some() {
            let _ = respond_to.send(Err(LoginError::Other(
                "a login is completing right now; wait for it".into(),
            )));
            return;
        }
        self.starters.push(respond_to);
        if self.preparing.is_some() {
            return;
        }
        let mut wanted = self
            .stored
            .as_ref()
            .map(|s| s.requested_scopes.clone())
            .unwrap_or_default();
        for s in &self.wanted {
            if !wanted.contains(s) {
                wanted.push(s.clone());
            }
        }
        tracing::info!(upstream = %self.setup.server, "starting a login");
        self.preparing = Some(
            flow::prepare(
                self.setup.clone(),
                self.challenge.clone(),
                wanted,
                self.registered.clone(),
            )
            .boxed(),
        );
    }

    fn on_prepared(&mut self, prepared: Result<Prepared, LoginError>) {
        match prepared {
            Ok(p) => {
                let (arrived_tx, arrived) = mpsc::channel(ARRIVALS);
                let listening = CancellationToken::new();
                tokio::spawn(flow::serve_callback(
                    p.listener,
                    arrived_tx,
                    listening.clone(),
                ));
                tracing::info!(upstream = %self.setup.server, issuer = %p.metadata.issuer, redirect = %p.pending.redirect_uri, "waiting for the login's redirect");
                for s in self.starters.drain(..) {
                    let _ = s.send(Ok(p.url.clone())); // the caller may have gone
                }
                self.pending = Some(PendingLogin {
                    pending: p.pending,
                    metadata: p.metadata,
                    url: p.url,
                    arrived,
                    listening,
                    expires: Instant::now() + LOGIN_TIMEOUT,
                });
                self.view.send_modify(|v| v.pending = true);
            }
            Err(e) => {
                tracing::warn!(upstream = %self.setup.server, "the login could not start: {e}");
                for s in self.starters.drain(..) {
                    let _ = s.send(Err(e.clone())); // the caller may have gone
                }
                for f in self.finishers.drain(..) {
                    let _ = f.send(Err(e.to_string())); // the caller may have gone
                }
            }
        }
    }

    /// A redirect came back (to the listener or pasted): checked against the pending
    /// login, whose code is then exchanged, once.
    fn on_redirect(&mut self, url: Url, respond_to: oneshot::Sender<Result<(), String>>) {
        if self.exchanging.is_some() {
            let _ = respond_to.send(Err("this login's code is already being exchanged".into()));
            return;
        }
        let Some(login) = &self.pending else {
            let _ = respond_to.send(Err(authorize::CallbackError::UnknownState.to_string()));
            return;
        };
        match authorize::callback(&login.pending, &url) {
            Err(authorize::CallbackError::UnknownState) => {
                // Not this login's redirect: the real one may still come.
                let _ = respond_to.send(Err(authorize::CallbackError::UnknownState.to_string()));
            }
            Err(e) => {
                tracing::warn!(upstream = %self.setup.server, "the login's redirect was refused: {e}");
                let why = e.to_string();
                if let Some(p) = self.pending.take() {
                    p.listening.cancel();
                }
                self.view.send_modify(|v| v.pending = false);
                let _ = respond_to.send(Err(why.clone()));
                for f in self.finishers.drain(..) {
                    let _ = f.send(Err(why.clone())); // the caller may have gone
                }
            }
            Ok(code) => {
                let Some(login) = self.pending.take() else {
                    return;
                };
                let http = self.setup.http.clone();
                let pending = login.pending.clone();
                self.exchanging = Some(Exchange {
                    future: async move { authorize::exchange(&http, &pending, &code).await }
                        .boxed(),
                    pending: login.pending,
                    metadata: login.metadata,
                    listening: login.listening,
                    respond_to,
                });
            }
        }
    }

    async fn on_exchanged(&mut self, ex: Exchange, outcome: Result<Tokens, TokenError>) {
        self.view.send_modify(|v| v.pending = false);
        let result = match outcome {
            Ok(tokens) => {
                let mut kept = StoredTokens {
                    access_token: String::new(),
                    expires_at: None,
                    lifetime: None,
                    refresh_token: None,
                    scope: None,
                };
                apply(&mut kept, &tokens);
                let stored = Stored {
                    server_url: self.setup.url.to_string(),
                    resource: ex.pending.resource.clone(),
                    metadata: ex.metadata,
                    client: StoredClient::of(&ex.pending.client, &ex.pending.redirect_uri),
                    requested_scopes: ex.pending.scopes.clone(),
                    tokens: kept,
                };
                if let Some(file) = &self.file
                    && let Err(e) = store::save(file.clone(), &stored).await
                {
                    tracing::warn!(path = %file.display(), "could not store the login (it works until mcpd restarts): {e}");
                }
                tracing::info!(upstream = %self.setup.server, issuer = %stored.metadata.issuer, "logged in");
                self.registered = Some((stored.metadata.issuer.clone(), stored.client.clone()));
                // The login this one replaces is of no use to anyone: end it at its server.
                if let Some(old) = self.stored.replace(stored) {
                    let http = self.setup.http.clone();
                    let server = self.setup.server.clone();
                    tokio::spawn(async move {
                        let what = revoke(&http, &old).await;
                        tracing::debug!(upstream = %server, "the replaced login: {what}");
                    });
                }
                self.expires = tokens.expires_at;
                self.retry_at = None;
                self.wanted.clear();
                self.challenge = None;
                self.token.send_replace(Some(Arc::new(tokens.access)));
                self.publish_logged_in();
                self.view.send_modify(|v| v.more_scope.clear());
                (self.notify)(true);
                Ok(())
            }
            Err(e) => {
                tracing::warn!(upstream = %self.setup.server, "the login failed: {e}");
                Err(e.to_string())
            }
        };
        let _ = ex.respond_to.send(result.clone()); // the browser may have gone
        ex.listening.cancel();
        for f in self.finishers.drain(..) {
            let _ = f.send(result.clone()); // the caller may have gone
        }
    }

    fn expire_login(&mut self) {
        if let Some(p) = self.pending.take() {
            p.listening.cancel();
            let why = LoginError::Expired(humantime::format_duration(LOGIN_TIMEOUT).to_string())
                .to_string();
            tracing::info!(upstream = %self.setup.server, "{why}");
            self.view.send_modify(|v| v.pending = false);
            for f in self.finishers.drain(..) {
                let _ = f.send(Err(why.clone())); // the caller may have gone
            }
        }
    }

    fn logout(&mut self, respond_to: oneshot::Sender<Result<String, String>>) {
        if let Some(p) = self.pending.take() {
            p.listening.cancel();
        }
        for f in self.finishers.drain(..) {
            let _ = f.send(Err("logged out".into())); // the caller may have gone
        }
        let stored = self.stored.take();
        self.registered = None;
        self.refreshing = None;
        self.retry_at = None;
        self.token.send_replace(None);
        self.view.send_modify(|v| {
            v.state = AuthState::NeedsLogin("logged out with `mcpd ctl logout`".into());
            v.pending = false;
            v.issuer = None;
            v.scopes = None;
        });
        for w in self.waiting.drain(..) {
            let _ = w.send(Err(NoToken("logged out".into()))); // the caller may have gone
        }
        (self.notify)(false);
        let file = self.file.clone();
        let http = self.setup.http.clone();
        let server = self.setup.server.clone();
        tokio::spawn(async move {
            let removed = match file {
                Some(f) => store::remove(f).await,
                None => Ok(()),
            };
            let revoked = match &stored {
                Some(s) => revoke(&http, s).await,
                None => "no login was stored".to_owned(),
            };
            tracing::info!(upstream = %server, "logged out: {revoked}");
            let answer = match removed {
                Ok(()) => Ok(revoked),
                Err(e) => Err(format!("could not remove the stored login: {e}")),
            };
            let _ = respond_to.send(answer); // the caller may have gone
        });
    }
}

/// Revokes a stored login's tokens where the server offers it (RFC 7009): the refresh
/// token first, which also ends its access tokens at most servers. Says what happened.
async fn revoke(http: &reqwest::Client, s: &Stored) -> String {
    let Some(endpoint) = &s.metadata.revocation_endpoint else {
        return "the authorization server offers no revocation; the tokens were forgotten".into();
    };
    let client = s.client.client();
    let mut outcome = Vec::new();
    if let Some(r) = &s.tokens.refresh_token {
        let secret = Secret::new(r.clone());
        outcome.push(
            authorize::revoke(http, endpoint, &client, &secret, "refresh_token")
                .await
                .map_err(|e| e.to_string()),
        );
    }
    let access = Secret::new(s.tokens.access_token.clone());
    outcome.push(
        authorize::revoke(http, endpoint, &client, &access, "access_token")
            .await
            .map_err(|e| e.to_string()),
    );
    match outcome.into_iter().find_map(Result::err) {
        None => "the tokens were revoked".into(),
        Some(e) => format!("revoking the tokens failed ({e}); they were forgotten"),
    }
}

/// Puts what a token answer says into the kept tokens. A rotated refresh token replaces
/// the old one; without one, the old one stays.
fn apply(t: &mut StoredTokens, tokens: &Tokens) {
    t.access_token = tokens.access.expose().to_owned();
    t.expires_at = tokens.expires_at.map(store::epoch_secs);
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

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests may block")]
mod tests {
    use super::*;
    use crate::oauth::discovery::ServerMetadata;
    use crate::oauth::registration::{AuthMethod, Source};
    use crate::oauth::store::StoredClient;
    use axum::{Form, Json, Router, http::StatusCode, response::IntoResponse, routing::post};
    use std::collections::HashMap;
    use std::sync::Mutex;

    /// A token endpoint with rotating refresh tokens: the current one works once; any
    /// older one is refused with invalid_grant.
    #[derive(Default)]
    struct Endpoint {
        current: String,
        refreshes: usize,
        lifetime: u64,
    }

    async fn serve(state: Arc<Mutex<Endpoint>>) -> String {
        let app = Router::new().route(
            "/token",
            post(move |Form(form): Form<HashMap<String, String>>| {
                let state = state.clone();
                async move {
                    let mut s = state.lock().unwrap();
                    if form.get("refresh_token") != Some(&s.current) {
                        return (StatusCode::BAD_REQUEST, Json(serde_json::json!({"error": "invalid_grant"}))).into_response();
                    }
                    s.refreshes += 1;
                    s.current = format!("r{}", s.refreshes);
                    Json(serde_json::json!({"access_token": format!("a{}", s.refreshes),
                        "token_type": "Bearer", "expires_in": s.lifetime, "refresh_token": s.current}))
                    .into_response()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    const SERVER: &str = "http://127.0.0.1:9/mcp";

    fn stored(token_endpoint: String, lifetime: u64) -> Stored {
        Stored {
            server_url: SERVER.into(),
            resource: "http://127.0.0.1/mcp".into(),
            metadata: ServerMetadata {
                issuer: "http://127.0.0.1".into(),
                token_endpoint,
                ..ServerMetadata::default()
            },
            client: StoredClient {
                client_id: "c".into(),
                client_secret: None,
                method: AuthMethod::None,
                source: Source::Dynamic,
                redirect_uri: None,
            },
            requested_scopes: Vec::new(),
            tokens: StoredTokens {
                access_token: "a0".into(),
                expires_at: Some(store::epoch_secs(SystemTime::now()) + lifetime),
                lifetime: Some(lifetime),
                refresh_token: Some("r0".into()),
                scope: None,
            },
        }
    }

    fn http() -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::new()
    }

    /// A credential whose store holds `stored`, as after a login.
    async fn spawn(stored: Stored, file: PathBuf) -> CredentialHandle {
        store::save(file.clone(), &stored).await.unwrap();
        let setup = Arc::new(Setup {
            server: "x".into(),
            url: Url::parse(SERVER).unwrap(),
            oauth: crate::config::OAuthConfig::default(),
            http: http(),
        });
        let cred = CredentialHandle::spawn(setup, Some(file), Box::new(|_| {}));
        assert!(cred.current().await.is_some(), "the stored login is used");
        cred
    }

    #[tokio::test]
    async fn many_refused_callers_share_one_refresh_and_the_rotated_token_is_stored_first() {
        let endpoint = Arc::new(Mutex::new(Endpoint {
            current: "r0".into(),
            lifetime: 3600,
            ..Endpoint::default()
        }));
        let url = serve(endpoint.clone()).await;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("credentials/x.json");
        let cred = spawn(stored(url, 3600), file.clone()).await;
        let old = cred.token().unwrap();
        let calls: Vec<_> = (0..16)
            .map(|_| {
                let cred = cred.clone();
                let old = old.clone();
                tokio::spawn(async move { cred.refused(Some(old), None).await })
            })
            .collect();
        for c in calls {
            assert_eq!(c.await.unwrap().unwrap().expose(), "a1");
        }
        assert_eq!(endpoint.lock().unwrap().refreshes, 1, "one refresh for all");
        let kept = store::load(file).await.unwrap();
        assert_eq!(kept.tokens.refresh_token.as_deref(), Some("r1"));
        assert_eq!(cred.token().unwrap().expose(), "a1");
        // A caller still holding the old token gets the new one without a refresh.
        assert_eq!(cred.refused(Some(old), None).await.unwrap().expose(), "a1");
        assert_eq!(endpoint.lock().unwrap().refreshes, 1);
    }

    #[tokio::test]
    async fn tokens_are_refreshed_ahead_of_expiry_and_a_refused_grant_needs_a_login() {
        let endpoint = Arc::new(Mutex::new(Endpoint {
            current: "r0".into(),
            lifetime: 2,
            ..Endpoint::default()
        }));
        let url = serve(endpoint.clone()).await;
        let dir = tempfile::tempdir().unwrap();
        let cred = spawn(stored(url, 2), dir.path().join("x.json")).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while endpoint.lock().unwrap().refreshes < 2 {
            assert!(Instant::now() < deadline, "refreshed ahead of expiry");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(matches!(cred.view().state, AuthState::LoggedIn { .. }));
        // The server forgets the token family: the next refresh is refused for good.
        endpoint.lock().unwrap().current = "gone".into();
        // A refresh ahead of expiry that the server answered before it forgot may still
        // bring one more token; a refresh ahead of expiry may also meet the refusal first.
        // Either way, the first refused refresh is final.
        let mut successes = 0;
        while let Some(current) = cred.token() {
            match cred.refused(Some(current), None).await {
                Ok(_) => successes += 1,
                Err(e) => {
                    assert!(e.0.contains("invalid_grant"), "{e}");
                    break;
                }
            }
            assert!(
                successes <= 1,
                "the server forgot the family: at most one refresh in flight could succeed"
            );
        }
        assert!(
            cred.needs_login()
                .is_some_and(|why| why.contains("invalid_grant"))
        );
        assert!(cred.token().is_none());
        let refreshes = endpoint.lock().unwrap().refreshes;
        assert!(
            cred.refused(Some(Arc::new(Secret::new("x".into()))), None)
                .await
                .is_err()
        );
        assert_eq!(
            endpoint.lock().unwrap().refreshes,
            refreshes,
            "no retry storm"
        );
    }
}
