//! The credential's login half.
//!
//! The one pending authorization (its start, the redirect that comes back, the code
//! exchanged once), and logout with revocation.

use super::{
    ARRIVALS, AuthState, Credential, Exchange, LOGIN_TIMEOUT, NoToken, PendingLogin, apply,
};
use crate::config::Secret;
use crate::oauth::authorize;
use crate::oauth::flow::{self, LoginError, Prepared};
use crate::oauth::store::{self, Place, Stored, StoredClient, StoredTokens};
use crate::oauth::token::{self, At, TokenError, Tokens};
use futures::FutureExt;
use reqwest::Url;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

impl Credential {
    pub(super) fn on_login(&mut self, respond_to: oneshot::Sender<Result<Url, LoginError>>) {
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
        let prepare = if crate::oauth::idp::signs_in(&self.setup).is_some() {
            crate::oauth::idp::prepare(self.setup.clone()).boxed()
        } else {
            flow::prepare(
                self.setup.clone(),
                self.challenge.clone(),
                wanted,
                self.registered.clone(),
            )
            .boxed()
        };
        // A keyring that cannot take the login is found out before the browser is
        // involved; the login never falls back to a file.
        let place = self.place.clone();
        self.preparing = Some(
            async move {
                if let Some(place) = &place {
                    store::reachable(place)
                        .await
                        .map_err(|e| LoginError::NotStored(e.to_string()))?;
                }
                prepare.await
            }
            .boxed(),
        );
    }

    pub(super) fn on_prepared(&mut self, prepared: Result<Prepared, LoginError>) {
        match prepared {
            Ok(p) => {
                let (arrived_tx, arrived) = mpsc::channel(ARRIVALS);
                let listening = CancellationToken::new();
                mcpd_runtime::tracker::spawn(flow::serve_callback(
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
                if matches!(e, LoginError::NotStored(_)) && self.stored.is_none() {
                    self.view
                        .send_modify(|v| v.state = AuthState::NeedsLogin(e.to_string()));
                }
                for s in self.starters.drain(..) {
                    let _ = s.send(Err(e.clone())); // the caller may have gone
                }
                for f in self.finishers.drain(..) {
                    let _ = f.send(Err(e.clone())); // the caller may have gone
                }
            }
        }
    }

    /// A redirect came back (to the listener or pasted): checked against the pending
    /// login, whose code is then exchanged, once.
    pub(super) fn on_redirect(
        &mut self,
        url: Url,
        respond_to: oneshot::Sender<Result<(), LoginError>>,
    ) {
        if self.exchanging.is_some() {
            let _ = respond_to.send(Err(LoginError::Exchanging));
            return;
        }
        let Some(login) = &self.pending else {
            let _ = respond_to.send(Err(authorize::CallbackError::UnknownState.into()));
            return;
        };
        match authorize::callback(&login.pending, &url) {
            Err(authorize::CallbackError::UnknownState) => {
                // Not this login's redirect: the real one may still come.
                let _ = respond_to.send(Err(authorize::CallbackError::UnknownState.into()));
            }
            Err(e) => {
                tracing::warn!(upstream = %self.setup.server, "the login's redirect was refused: {e}");
                let why = LoginError::Callback(e);
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
                // Proofs when the authorization server offers DPoP (or the setting
                // asks): the tokens are then bound to the server's key.
                let dpop = (crate::oauth::dpop::wanted(
                    self.setup.oauth.dpop,
                    &login.metadata.dpop_signing_alg_values_supported,
                ) && self.dpop.usable()
                    && crate::oauth::idp::signs_in(&self.setup).is_none())
                .then(|| self.dpop.clone());
                self.exchanging = Some(Exchange {
                    future: async move {
                        let at = At {
                            http: &http,
                            endpoint: &pending.token_endpoint,
                            issuer: &pending.issuer,
                            client: &pending.client,
                            dpop: dpop.as_deref(),
                        };
                        token::exchange(&at, &pending, &code).await
                    }
                    .boxed(),
                    pending: login.pending,
                    metadata: login.metadata,
                    listening: login.listening,
                    respond_to,
                });
            }
        }
    }

    pub(super) async fn on_exchanged(&mut self, ex: Exchange, outcome: Result<Tokens, TokenError>) {
        self.view.send_modify(|v| v.pending = false);
        if crate::oauth::idp::signs_in(&self.setup).is_some() {
            let finishers = std::mem::take(&mut self.finishers);
            let signed = match outcome {
                Ok(tokens) => {
                    self.on_signed_in(&ex.metadata, &ex.pending.client, &tokens, finishers)
                        .await
                }
                Err(e) => {
                    for f in finishers {
                        let _ = f.send(Err(LoginError::Token(e.clone()))); // the caller may have gone
                    }
                    Err(LoginError::Token(e))
                }
            };
            if let Err(e) = &signed {
                tracing::warn!(upstream = %self.setup.server, "the sign-in at the identity provider failed: {e}");
            }
            let _ = ex.respond_to.send(signed); // the browser may have gone
            ex.listening.cancel();
            return;
        }
        let result = match outcome {
            Ok(tokens) => {
                let mut kept = StoredTokens::default();
                apply(&mut kept, &tokens);
                let stored = Stored {
                    server_url: self.setup.url.to_string(),
                    resource: ex.pending.resource.clone(),
                    metadata: ex.metadata,
                    client: StoredClient::of(&ex.pending.client, &ex.pending.redirect_uri),
                    requested_scopes: ex.pending.scopes.clone(),
                    tokens: kept,
                    grant: crate::config::Grant::AuthorizationCode,
                    dpop_key: if tokens.dpop_bound {
                        self.stored_key()
                    } else {
                        None
                    },
                };
                if let Err(e) = keep(self.place.as_ref(), &self.setup.server, &stored).await {
                    self.refuse_unkept(stored, &e);
                    let _ = ex.respond_to.send(Err(e.clone())); // the browser may have gone
                    ex.listening.cancel();
                    for f in self.finishers.drain(..) {
                        let _ = f.send(Err(e.clone())); // the caller may have gone
                    }
                    return;
                }
                tracing::info!(upstream = %self.setup.server, issuer = %stored.metadata.issuer, "logged in");
                self.registered = Some((stored.metadata.issuer.clone(), stored.client.clone()));
                // The login this one replaces is of no use to anyone: end it at its server.
                if let Some(old) = self.stored.replace(stored) {
                    let http = self.setup.http.clone();
                    let server = self.setup.server.clone();
                    mcpd_runtime::tracker::spawn(async move {
                        let what = revoke(&http, &old).await;
                        tracing::debug!(upstream = %server, "the replaced login: {what}");
                    });
                }
                self.expires = tokens.expires_at;
                self.retry_at = None;
                self.wanted.clear();
                self.challenge = None;
                let access = self.access(tokens.access.expose().to_owned(), tokens.dpop_bound);
                self.token.send_replace(Some(access));
                self.publish_logged_in();
                self.view.send_modify(|v| v.more_scope.clear());
                (self.notify)(true);
                Ok(())
            }
            Err(e) => {
                tracing::warn!(upstream = %self.setup.server, "the login failed: {e}");
                Err(LoginError::Token(e))
            }
        };
        let _ = ex.respond_to.send(result.clone()); // the browser may have gone
        ex.listening.cancel();
        for f in self.finishers.drain(..) {
            let _ = f.send(result.clone()); // the caller may have gone
        }
    }

    pub(super) fn expire_login(&mut self) {
        if let Some(p) = self.pending.take() {
            p.listening.cancel();
            let why = LoginError::Expired(humantime::format_duration(LOGIN_TIMEOUT).to_string());
            tracing::info!(upstream = %self.setup.server, "{why}");
            self.view.send_modify(|v| v.pending = false);
            for f in self.finishers.drain(..) {
                let _ = f.send(Err(why.clone())); // the caller may have gone
            }
        }
    }

    /// A new login the keyring would not take: its tokens are revoked, not used, and the
    /// status says why (the login in force before, if any, stays).
    fn refuse_unkept(&mut self, unkept: Stored, why: &LoginError) {
        tracing::warn!(upstream = %self.setup.server, "the login failed: {why}");
        if self.stored.is_none() {
            let why = why.to_string();
            self.view
                .send_modify(|v| v.state = AuthState::NeedsLogin(why));
        }
        let http = self.setup.http.clone();
        let server = self.setup.server.clone();
        mcpd_runtime::tracker::spawn(async move {
            let what = revoke(&http, &unkept).await;
            tracing::debug!(upstream = %server, "the login that could not be stored: {what}");
        });
    }

    /// The server left the config: its stored login is removed, and nothing is stored
    /// for it again (a connection still stopping keeps its tokens in memory until then).
    pub(super) fn forget(&mut self) {
        let Some(place) = self.place.take() else {
            return;
        };
        let server = self.setup.server.clone();
        mcpd_runtime::tracker::spawn(async move {
            match store::remove(&place).await {
                Ok(true) => {
                    tracing::info!(upstream = %server, "removed the stored login of {server} (no longer configured)");
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(upstream = %server, "could not remove the stored login of {server} (no longer configured): {e}");
                }
            }
        });
    }

    pub(super) fn logout(&mut self, respond_to: oneshot::Sender<Result<String, LoginError>>) {
        if let Some(p) = self.pending.take() {
            p.listening.cancel();
        }
        for f in self.finishers.drain(..) {
            let _ = f.send(Err(LoginError::LoggedOut)); // the caller may have gone
        }
        let stored = self.stored.take();
        self.registered = None;
        if self.signed_in.is_some() {
            self.forget_sign_in();
        }
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
        let place = self.place.clone();
        let http = self.setup.http.clone();
        let server = self.setup.server.clone();
        mcpd_runtime::tracker::spawn(async move {
            let removed = match &place {
                Some(p) => store::remove(p).await.map(|_| ()),
                None => Ok(()),
            };
            let revoked = match &stored {
                Some(s) => revoke(&http, s).await,
                None => "no login was stored".to_owned(),
            };
            tracing::info!(upstream = %server, "logged out: {revoked}");
            let answer = match removed {
                Ok(()) => Ok(revoked),
                Err(e) => Err(LoginError::Store(e.to_string())),
            };
            let _ = respond_to.send(answer); // the caller may have gone
        });
    }
}

/// Stores a new login. A file that cannot be written costs the login at the next restart
/// only (it is logged); a keyring that cannot take it fails the login, so no token is
/// held that the configured store does not have.
pub(super) async fn keep<T: serde::Serialize>(
    place: Option<&Place>,
    server: &str,
    stored: &T,
) -> Result<(), LoginError> {
    let Some(place) = place else {
        return Ok(());
    };
    match store::save(place, stored).await {
        Ok(()) => Ok(()),
        Err(e) if place.is_keyring() => Err(LoginError::NotStored(e.to_string())),
        Err(e) => {
            tracing::warn!(upstream = %server, "could not store the login (it works until mcpd restarts): {e}");
            Ok(())
        }
    }
}

/// Revokes a stored login's tokens where the server offers it (RFC 7009): the refresh
/// token first, which also ends its access tokens at most servers. Says what happened.
async fn revoke(http: &reqwest::Client, s: &Stored) -> String {
    let Some(endpoint) = &s.metadata.revocation_endpoint else {
        return "the authorization server offers no revocation; the tokens were forgotten".into();
    };
    let client = s.client.client();
    let at = At {
        http,
        endpoint,
        issuer: &s.metadata.issuer,
        client: &client,
        dpop: None,
    };
    let mut outcome = Vec::new();
    if let Some(r) = &s.tokens.refresh_token {
        let secret = Secret::new(r.clone());
        outcome.push(
            token::revoke(&at, &secret, "refresh_token")
                .await
                .map_err(|e| e.to_string()),
        );
    }
    let access = Secret::new(s.tokens.access_token.clone());
    outcome.push(
        token::revoke(&at, &access, "access_token")
            .await
            .map_err(|e| e.to_string()),
    );
    match outcome.into_iter().find_map(Result::err) {
        None => "the tokens were revoked".into(),
        Some(e) => format!("revoking the tokens failed ({e}); they were forgotten"),
    }
}
