//! The credential's machine half.
//!
//! The client credentials or JWT bearer grant, run by mcpd alone, once for every caller
//! at a time, again ahead of expiry and when the server refuses the token; a grant
//! refused for good waits for `mcpd ctl login` (repeating it would repeat the refusal).

use super::{AuthState, Credential, NoToken, RETRY_AFTER, apply, login};
use crate::oauth::discovery::DiscoveryError;
use crate::oauth::flow::LoginError;
use crate::oauth::grant::{self, Granted};
use crate::oauth::store::{Stored, StoredClient, StoredTokens};
use crate::oauth::token::TokenError;
use futures::FutureExt;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio::time::Instant;

impl Credential {
    /// A request found no token on a machine-grant server: it waits for the grant.
    pub(super) fn grant_for(
        &mut self,
        respond_to: oneshot::Sender<Result<Arc<super::Access>, NoToken>>,
    ) {
        let failed = match &self.view.borrow().state {
            AuthState::NeedsLogin(why) if self.granting.is_none() => Some(why.clone()),
            _ => None,
        };
        if let Some(why) = failed {
            let _ = respond_to.send(Err(NoToken(why))); // the caller may have gone
            return;
        }
        self.waiting.push(respond_to);
        self.start_grant();
    }

    /// Starts the grant unless one is in flight.
    pub(super) fn start_grant(&mut self) {
        self.retry_at = None;
        if self.granting.is_some() {
            return;
        }
        let known = self
            .stored
            .as_ref()
            .map(|s| (s.metadata.clone(), s.resource.clone()));
        tracing::info!(upstream = %self.setup.server, grant = self.setup.oauth.grant.as_str(), "getting a token");
        self.granting = Some(
            grant::run(
                self.setup.clone(),
                self.challenge.clone(),
                known,
                self.dpop.clone(),
                self.signed_in.clone(),
            )
            .boxed(),
        );
    }

    /// `mcpd ctl login` of a machine-grant server: the grant now, a failed one too.
    pub(super) fn renew(&mut self, respond_to: oneshot::Sender<Result<(), LoginError>>) {
        if !self.setup.oauth.grant.is_machine() {
            let _ = respond_to.send(Err(LoginError::Other(
                "this server's login is in the browser".into(),
            ))); // the caller may have gone
            return;
        }
        self.renewers.push(respond_to);
        self.view.send_modify(|v| {
            if matches!(v.state, AuthState::NeedsLogin(_)) {
                v.state = AuthState::None;
            }
        });
        self.start_grant();
    }

    pub(super) async fn on_granted(&mut self, outcome: Result<Granted, LoginError>) {
        let g = match outcome {
            Ok(g) => g,
            Err(e) => return self.grant_failed(e),
        };
        let mut tokens = StoredTokens::default();
        apply(&mut tokens, &g.tokens);
        let stored = Stored {
            server_url: self.setup.url.to_string(),
            resource: g.resource,
            metadata: g.metadata,
            // The credential itself stays in the config (read again at each grant).
            client: StoredClient {
                client_id: g.client.client_id,
                client_secret: None,
                method: g.client.method,
                source: g.client.source,
                redirect_uri: None,
            },
            requested_scopes: g.scopes,
            tokens,
            grant: self.setup.oauth.grant,
            dpop_key: if g.tokens.dpop_bound {
                self.stored_key()
            } else {
                None
            },
        };
        if let Some(renewed) = g.signed_in {
            // The identity provider rotated its refresh token: kept before anything else.
            let idp = self.place.as_ref().map(|p| p.idp());
            if let Err(e) = login::keep(idp.as_ref(), &self.setup.server, &renewed).await {
                return self.grant_failed(e);
            }
            self.signed_in = Some(renewed);
        }
        if let Err(e) = login::keep(self.place.as_ref(), &self.setup.server, &stored).await {
            return self.grant_failed(e);
        }
        tracing::info!(upstream = %self.setup.server, issuer = %stored.metadata.issuer, grant = self.setup.oauth.grant.as_str(), dpop = g.tokens.dpop_bound, "got a token");
        self.expires = g.tokens.expires_at;
        self.challenge = None;
        let access = self.access(g.tokens.access.expose().to_owned(), g.tokens.dpop_bound);
        self.stored = Some(stored);
        self.token.send_replace(Some(access.clone()));
        self.publish_logged_in();
        for w in self.waiting.drain(..) {
            let _ = w.send(Ok(access.clone())); // the caller may have gone
        }
        for r in self.renewers.drain(..) {
            let _ = r.send(Ok(())); // the caller may have gone
        }
        (self.notify)(true);
    }

    /// A grant that failed: one that may work later (the network, the server) keeps a
    /// token still valid and tries again soon; a refusal ends the login until `mcpd
    /// ctl login`.
    fn grant_failed(&mut self, e: LoginError) {
        let transient = matches!(
            e,
            LoginError::Token(TokenError::Unreachable(_))
                | LoginError::Discovery(DiscoveryError::Fetch { .. })
        );
        for r in self.renewers.drain(..) {
            let _ = r.send(Err(e.clone())); // the caller may have gone
        }
        let why = format!("the {} grant failed: {e}", self.setup.oauth.grant.as_str());
        if transient {
            tracing::warn!(upstream = %self.setup.server, "{why}; trying again on the next request");
            if self.stored.is_some() {
                self.retry_at = Some(Instant::now() + RETRY_AFTER);
            }
            for w in self.waiting.drain(..) {
                let _ = w.send(Err(NoToken(why.clone()))); // the caller may have gone
            }
        } else {
            // The identity provider refused the sign-in's ID token or refresh token: it is
            // over too, and the next `mcpd ctl login` signs in again.
            if matches!(e, LoginError::IdentityProvider { .. }) && self.signed_in.take().is_some() {
                self.forget_sign_in();
            }
            self.needs_login(why);
        }
    }

    /// Removes the stored sign-in at the identity provider.
    pub(super) fn forget_sign_in(&mut self) {
        self.signed_in = None;
        let Some(place) = self.place.as_ref().map(|p| p.idp()) else {
            return;
        };
        let server = self.setup.server.clone();
        mcpd_runtime::tracker::spawn(async move {
            if let Err(e) = crate::oauth::store::remove(&place).await {
                tracing::warn!(upstream = %server, "could not remove the sign-in at the identity provider: {e}");
            }
        });
    }

    /// The user signed in at the identity provider (`mcpd ctl login`): the sign-in is
    /// kept, and the grant runs with its ID token; `ctl login` hears how that went.
    pub(super) async fn on_signed_in(
        &mut self,
        metadata: &crate::oauth::discovery::ServerMetadata,
        client: &crate::oauth::registration::Client,
        tokens: &crate::oauth::token::Tokens,
        finishers: Vec<oneshot::Sender<Result<(), LoginError>>>,
    ) -> Result<(), LoginError> {
        let idp = self.place.as_ref().map(|p| p.idp());
        let kept = match crate::oauth::idp::signed_in(metadata, client, tokens) {
            Ok(login) => login::keep(idp.as_ref(), &self.setup.server, &login)
                .await
                .map(|()| login),
            Err(e) => Err(e),
        };
        let login = match kept {
            Ok(login) => login,
            Err(e) => {
                for f in finishers {
                    let _ = f.send(Err(e.clone())); // the caller may have gone
                }
                return Err(e);
            }
        };
        tracing::info!(upstream = %self.setup.server, issuer = %login.issuer, "signed in at the identity provider");
        self.signed_in = Some(login);
        self.renewers.extend(finishers);
        self.view.send_modify(|v| {
            if matches!(v.state, AuthState::NeedsLogin(_)) {
                v.state = AuthState::None;
            }
        });
        self.start_grant();
        Ok(())
    }
}
