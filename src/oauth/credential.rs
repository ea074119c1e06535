//! The owner of one server's credential: an actor that holds its tokens, refreshes them ahead of expiry and after a refused request, once for every caller at a time, and stores a rotated refresh token before the new access token is used.

use super::authorize::{self, TokenError, Tokens};
use super::store::{self, Stored, StoredTokens};
use crate::config::Secret;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

/// Refreshed this long before expiry at most (or 10 % of the lifetime, if less).
const AHEAD_MAX: Duration = Duration::from_secs(60);
/// After a refresh that failed for a transient reason, the next try waits this long.
const RETRY_AFTER: Duration = Duration::from_secs(10);

/// Where the credential stands, as status shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// A token that works (as far as mcpd knows), valid until `expires_at` if known.
    LoggedIn { expires_at: Option<SystemTime> },
    /// No usable token: a person must run `mcpd ctl login`. Says why.
    NeedsLogin(String),
}

/// Why no token can be had now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoToken(pub String);

enum Msg {
    /// The server refused `rejected`: answer with a newer token, refreshing if needed.
    Refused {
        rejected: Arc<Secret>,
        respond_to: oneshot::Sender<Result<Arc<Secret>, NoToken>>,
    },
}

/// The cloneable way to a credential.
#[derive(Clone)]
pub struct CredentialHandle {
    tx: mpsc::Sender<Msg>,
    token: watch::Receiver<Option<Arc<Secret>>>,
    state: watch::Receiver<State>,
}

impl std::fmt::Debug for CredentialHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CredentialHandle({:?})", *self.state.borrow())
    }
}

impl CredentialHandle {
    /// Starts the owner of a stored login, whose changes are written to `file`.
    pub fn spawn(http: reqwest::Client, stored: Stored, file: PathBuf) -> CredentialHandle {
        let (tx, rx) = mpsc::channel(64);
        let access = Arc::new(Secret::new(stored.tokens.access_token.clone()));
        let expires_at = stored.tokens.expires_at.map(store::from_epoch);
        let (token_tx, token) = watch::channel(Some(access));
        let (state_tx, state) = watch::channel(State::LoggedIn { expires_at });
        let actor = Credential {
            http,
            stored,
            file,
            rx,
            token: token_tx,
            state: state_tx,
            refreshing: None,
            waiting: Vec::new(),
            retry_at: None,
        };
        tokio::spawn(actor.run());
        CredentialHandle { tx, token, state }
    }

    /// The access token to send now, if there is one.
    pub fn token(&self) -> Option<Arc<Secret>> {
        self.token.borrow().clone()
    }

    pub fn state(&self) -> State {
        self.state.borrow().clone()
    }

    /// The server refused `rejected` (a 401): a newer token, from the one refresh every
    /// caller waits on; or why there is none.
    pub async fn refused(&self, rejected: Arc<Secret>) -> Result<Arc<Secret>, NoToken> {
        let asked = crate::ask::ask(&self.tx, Duration::from_secs(60), |respond_to| {
            Msg::Refused {
                rejected,
                respond_to,
            }
        })
        .await;
        asked.unwrap_or_else(|e| Err(NoToken(format!("the credential is not available: {e}"))))
    }
}

struct Credential {
    http: reqwest::Client,
    stored: Stored,
    file: PathBuf,
    rx: mpsc::Receiver<Msg>,
    token: watch::Sender<Option<Arc<Secret>>>,
    state: watch::Sender<State>,
    /// The one refresh in flight, if any.
    refreshing: Option<BoxFuture<'static, Result<Tokens, TokenError>>>,
    /// Callers waiting for it.
    waiting: Vec<oneshot::Sender<Result<Arc<Secret>, NoToken>>>,
    /// When to try again after a transient failure.
    retry_at: Option<Instant>,
}

impl Credential {
    async fn run(mut self) {
        loop {
            let ahead = self.refresh_due();
            tokio::select! {
                msg = self.rx.recv() => match msg {
                    Some(Msg::Refused { rejected, respond_to }) => self.on_refused(&rejected, respond_to),
                    None => break,
                },
                outcome = poll(&mut self.refreshing) => {
                    self.refreshing = None;
                    self.on_refreshed(outcome).await;
                }
                () = sleep_until(ahead), if self.refreshing.is_none() => self.start_refresh(),
            }
        }
    }

    /// When the token should be refreshed: ahead of its expiry by the smaller of a
    /// minute and a tenth of its lifetime; None without a refresh token or expiry.
    fn refresh_due(&self) -> Option<Instant> {
        if let Some(t) = self.retry_at {
            return Some(t);
        }
        if !matches!(*self.state.borrow(), State::LoggedIn { .. }) {
            return None;
        }
        let t = &self.stored.tokens;
        t.refresh_token.as_ref()?;
        let expires = store::from_epoch(t.expires_at?);
        let lifetime = Duration::from_secs(t.lifetime.unwrap_or(600));
        let ahead = (lifetime / 10).min(AHEAD_MAX);
        let left = expires
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        Some(Instant::now() + left.saturating_sub(ahead))
    }

    fn on_refused(
        &mut self,
        rejected: &Secret,
        respond_to: oneshot::Sender<Result<Arc<Secret>, NoToken>>,
    ) {
        if let State::NeedsLogin(why) = &*self.state.borrow() {
            let _ = respond_to.send(Err(NoToken(why.clone()))); // the caller may have gone
            return;
        }
        // Refused a token that is no longer the current one: the current one is newer.
        let current = self.token.borrow().clone();
        if let Some(c) = current
            && c.expose() != rejected.expose()
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
        let Some(refresh) = self.stored.tokens.refresh_token.clone() else {
            self.needs_login(
                "the access token expired and the server gave no refresh token".into(),
            );
            return;
        };
        let http = self.http.clone();
        let endpoint = self.stored.metadata.token_endpoint.clone();
        let client = self.stored.client.client();
        let resource = self.stored.resource.clone();
        let scope = self.stored.tokens.scope.clone();
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
        match outcome {
            Ok(tokens) => {
                let t = &mut self.stored.tokens;
                t.access_token = tokens.access.expose().to_owned();
                t.expires_at = tokens.expires_at.map(store::epoch_secs);
                t.lifetime = tokens.lifetime.map(|d| d.as_secs());
                // A rotated refresh token replaces the old one; without one, the old stays.
                if let Some(r) = &tokens.refresh {
                    t.refresh_token = Some(r.expose().to_owned());
                }
                if tokens.scope.is_some() {
                    t.scope = tokens.scope.clone();
                }
                // Stored (and synced) before anything uses the new tokens: a crash now
                // must not leave only the spent refresh token on disk.
                if let Err(e) = store::save(self.file.clone(), &self.stored).await {
                    tracing::warn!(path = %self.file.display(), "could not store refreshed credentials: {e}");
                }
                let access = Arc::new(tokens.access);
                self.token.send_replace(Some(access.clone()));
                self.state.send_replace(State::LoggedIn {
                    expires_at: tokens.expires_at,
                });
                for w in self.waiting.drain(..) {
                    let _ = w.send(Ok(access.clone())); // the caller may have gone
                }
            }
            Err(TokenError::Unreachable(why)) => {
                // Transient: keep the tokens, try again soon; callers hear why now.
                self.retry_at = Some(Instant::now() + RETRY_AFTER);
                for w in self.waiting.drain(..) {
                    let _ = w.send(Err(NoToken(format!("refreshing the token failed: {why}"))));
                }
            }
            Err(e) => self.needs_login(e.to_string()),
        }
    }

    fn needs_login(&mut self, why: String) {
        tracing::warn!("a server's login ended: {why}");
        self.stored.tokens = StoredTokens {
            refresh_token: None,
            ..self.stored.tokens.clone()
        };
        self.token.send_replace(None);
        self.state.send_replace(State::NeedsLogin(why.clone()));
        for w in self.waiting.drain(..) {
            let _ = w.send(Err(NoToken(why.clone()))); // the caller may have gone
        }
    }
}

async fn poll(
    f: &mut Option<BoxFuture<'static, Result<Tokens, TokenError>>>,
) -> Result<Tokens, TokenError> {
    match f {
        Some(f) => f.await,
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

    fn stored(token_endpoint: String, lifetime: u64) -> Stored {
        Stored {
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
        let cred = CredentialHandle::spawn(http(), stored(url, 3600), file.clone());
        let old = cred.token().unwrap();
        let calls: Vec<_> = (0..16)
            .map(|_| {
                let cred = cred.clone();
                let old = old.clone();
                tokio::spawn(async move { cred.refused(old).await })
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
        assert_eq!(cred.refused(old).await.unwrap().expose(), "a1");
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
        let cred = CredentialHandle::spawn(http(), stored(url, 2), dir.path().join("x.json"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while endpoint.lock().unwrap().refreshes < 2 {
            assert!(Instant::now() < deadline, "refreshed ahead of expiry");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(matches!(cred.state(), State::LoggedIn { .. }));
        // The server forgets the token family: the next refresh is refused for good.
        endpoint.lock().unwrap().current = "gone".into();
        // A refresh ahead of expiry that the server answered before it forgot may still
        // bring one more token; a refresh ahead of expiry may also meet the refusal first.
        // Either way, the first refused refresh is final.
        let mut successes = 0;
        while let Some(current) = cred.token() {
            match cred.refused(current).await {
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
            matches!(cred.state(), State::NeedsLogin(ref why) if why.contains("invalid_grant"))
        );
        assert!(cred.token().is_none());
        let refreshes = endpoint.lock().unwrap().refreshes;
        assert!(
            cred.refused(Arc::new(Secret::new("x".into())))
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
