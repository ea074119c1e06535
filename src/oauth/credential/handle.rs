//! The cloneable side of a server's login.
//!
//! What status shows of it, the current access token (a `watch` every request reads), and
//! the requests to its owner: refused tokens, step-ups, `ctl login`, redirects, logout.

use super::{ASK_TIMEOUT, Credential, LOGIN_TIMEOUT};
use crate::config::{Grant, Secret};
use crate::oauth::challenge::Bearer;
use crate::oauth::dpop::Dpop;
use crate::oauth::flow::{LoginError, Setup};
use crate::oauth::store::Place;
use mcpd_ctl::control_api::{AuthState, AuthView};
use reqwest::Url;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};

/// Why no token can be had now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoToken(pub String);

/// The access token every request sends, and the DPoP key it is bound to, if it is.
#[derive(Debug)]
pub struct Access {
    pub token: Secret,
    pub dpop: Option<Arc<Dpop>>,
}

impl Access {
    /// Whether this is the same token as `other`.
    pub fn same(&self, other: &Access) -> bool {
        self.token.expose() == other.token.expose()
    }
}

/// Told of each login that ends well (true) and each logout (false).
pub type Notify = Box<dyn Fn(bool) + Send + Sync>;

pub(super) enum Msg {
    /// The server refused `rejected` (or a request without a token): answer with a newer
    /// token, refreshing if needed.
    Refused {
        rejected: Option<Arc<Access>>,
        challenge: Option<Bearer>,
        respond_to: oneshot::Sender<Result<Arc<Access>, NoToken>>,
    },
    /// The server wants scopes the token lacks.
    Insufficient { challenge: Bearer },
    /// `mcpd ctl login`: the authorization URL of the one pending login.
    Login {
        respond_to: oneshot::Sender<Result<Url, LoginError>>,
    },
    /// A machine grant run now (`mcpd ctl login` of such a server), a failed one too.
    Renew {
        respond_to: oneshot::Sender<Result<(), LoginError>>,
    },
    /// A redirect pasted by hand (`mcpd ctl login --paste`).
    Redirected {
        url: Url,
        respond_to: oneshot::Sender<Result<(), LoginError>>,
    },
    /// Waits for the pending login to end.
    Wait {
        respond_to: oneshot::Sender<Result<(), LoginError>>,
    },
    Logout {
        respond_to: oneshot::Sender<Result<String, LoginError>>,
    },
    /// The server refused a token that was just renewed: the login is over.
    Spent { token: Arc<Access>, why: String },
    /// The server left the config: remove its stored login and store nothing again.
    Forget,
}

/// The cloneable way to a server's login.
#[derive(Clone)]
pub struct CredentialHandle {
    tx: mpsc::Sender<Msg>,
    token: watch::Receiver<Option<Arc<Access>>>,
    /// The machine grant mcpd runs alone, if it does.
    machine: Option<Grant>,
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
    /// Starts the owner of a server's login, which reads `place` (the stored login, if
    /// any) first and writes every change to it.
    /// Without a place (the file store and no state directory), a login lasts until mcpd
    /// stops.
    pub fn spawn(setup: Arc<Setup>, place: Option<Place>, notify: Notify) -> CredentialHandle {
        let (tx, rx) = mpsc::channel(64);
        let (token_tx, token) = watch::channel(None);
        let (view_tx, view) = watch::channel(AuthView {
            state: AuthState::None,
            pending: false,
            issuer: None,
            scopes: None,
            more_scope: Vec::new(),
            grant: setup
                .oauth
                .grant
                .is_machine()
                .then(|| setup.oauth.grant.as_str().to_owned()),
            dpop: false,
        });
        let (loaded_tx, loaded) = watch::channel(false);
        // A server whose user signs in at an identity provider has a browser login.
        let machine = Some(setup.oauth.grant)
            .filter(|g| g.is_machine() && crate::oauth::idp::signs_in(&setup).is_none());
        let actor = Credential {
            setup,
            place,
            unread: None,
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
            dpop: super::bound::fresh_key(),
            granting: None,
            renewers: Vec::new(),
            signed_in: None,
        };
        mcpd_runtime::tracker::spawn(actor.run(loaded_tx));
        CredentialHandle {
            tx,
            token,
            machine,
            view,
            loaded,
        }
    }

    /// The access token to send now, once the store has been read.
    pub async fn current(&self) -> Option<Arc<Access>> {
        let mut loaded = self.loaded.clone();
        // An actor gone before loading has no token to give.
        let _ = loaded.wait_for(|l| *l).await;
        self.token()
    }

    /// The access token to send now, if there is one.
    pub fn token(&self) -> Option<Arc<Access>> {
        self.token.borrow().clone()
    }

    /// The machine grant mcpd runs alone for this server, if it does (no browser login).
    pub fn machine(&self) -> Option<Grant> {
        self.machine
    }

    /// Runs the machine grant now (again after a failure); Ok once a token is had.
    pub async fn renew(&self) -> Result<(), LoginError> {
        let asked = mcpd_runtime::ask::ask(&self.tx, ASK_TIMEOUT, |respond_to| Msg::Renew {
            respond_to,
        })
        .await;
        asked.unwrap_or_else(|e| Err(e.into()))
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
        rejected: Option<Arc<Access>>,
        challenge: Option<Bearer>,
    ) -> Result<Arc<Access>, NoToken> {
        let asked = mcpd_runtime::ask::ask(&self.tx, ASK_TIMEOUT, |respond_to| Msg::Refused {
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
    pub async fn spent(&self, token: Arc<Access>, why: &str) {
        let why = why.to_owned();
        // If the actor is gone, so is the login.
        let _ = self.tx.send(Msg::Spent { token, why }).await;
    }

    /// Starts a login (or joins the one pending): the URL to open.
    pub async fn login(&self) -> Result<Url, LoginError> {
        let asked = mcpd_runtime::ask::ask(&self.tx, ASK_TIMEOUT, |respond_to| Msg::Login {
            respond_to,
        })
        .await;
        asked.unwrap_or_else(|e| Err(e.into()))
    }

    /// Hands over the URL the browser was redirected to; Ok once the code is exchanged.
    pub async fn redirected(&self, url: Url) -> Result<(), LoginError> {
        let asked = mcpd_runtime::ask::ask(&self.tx, ASK_TIMEOUT, |respond_to| Msg::Redirected {
            url,
            respond_to,
        })
        .await;
        asked.unwrap_or_else(|e| Err(e.into()))
    }

    /// Waits (up to the login's own timeout) for the pending login to end.
    pub async fn wait(&self) -> Result<(), LoginError> {
        let (respond_to, rx) = oneshot::channel();
        if self.tx.send(Msg::Wait { respond_to }).await.is_err() {
            return Err(mcpd_runtime::ask::AskError::Gone.into());
        }
        match tokio::time::timeout(LOGIN_TIMEOUT + ASK_TIMEOUT, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(mcpd_runtime::ask::AskError::Gone.into()),
            Err(_) => Err(mcpd_runtime::ask::AskError::Timeout(LOGIN_TIMEOUT + ASK_TIMEOUT).into()),
        }
    }

    /// The server is no longer configured: its stored login (file or keyring item) is
    /// removed, after any write the owner has begun, and none is written again. Returns
    /// at once; the owner logs what it removed.
    pub fn forget(&self) {
        let tx = self.tx.clone();
        mcpd_runtime::tracker::spawn(async move {
            // If the owner is gone, the daemon is stopping; the login stays stored.
            let _ = tx.send(Msg::Forget).await;
        });
    }

    /// Forgets the login (revoking its tokens where the server offers revocation).
    pub async fn logout(&self) -> Result<String, LoginError> {
        let asked = mcpd_runtime::ask::ask(&self.tx, ASK_TIMEOUT, |respond_to| Msg::Logout {
            respond_to,
        })
        .await;
        asked.unwrap_or_else(|e| Err(e.into()))
    }
}
