//! The authorization server's state without HTTP: clients, authorization codes, token
//! families, issuing and validating tokens, and the AS's part of `OAuthStats`.

use super::dpop::DpopState;
use super::options::{OAuthOptions, RefreshTokens};
use super::stats::{ClientSource, FamilyRevoked, OAuthStats, RegisteredClient, Revocation};
use super::wire::fresh;
use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// What the AS's handlers and every `OAuthHandle` share.
pub(super) struct AsShared {
    pub opts: OAuthOptions,
    /// The issuer identifier, e.g. `http://127.0.0.1:PORT/tenant1`.
    pub issuer: String,
    /// Test code: one lock is simpler than an actor, and nothing awaits while holding it.
    inner: Mutex<AsState>,
}

impl AsShared {
    pub fn new(opts: OAuthOptions, issuer: String) -> AsShared {
        let mut state = AsState {
            dpop: DpopState::new(opts.token_dpop_nonce),
            ..AsState::default()
        };
        for c in &opts.clients {
            let client = RegisteredClient {
                id: c.id.clone(),
                secret: c.secret.clone(),
                auth_method: c.auth_method,
                redirect_uris: c.redirect_uris.clone(),
                grant_types: vec!["authorization_code".into(), "refresh_token".into()],
                application_type: None,
                source: ClientSource::PreRegistered,
                public_key: c.public_key.clone(),
            };
            state.clients.insert(c.id.clone(), client);
        }
        AsShared {
            opts,
            issuer,
            inner: Mutex::new(state),
        }
    }

    /// Locks the state; a panic in another holder does not poison the fixture for the test.
    pub fn lock(&self) -> MutexGuard<'_, AsState> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `issuer` + `suffix`: where the AS's endpoints live.
    pub fn endpoint(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.issuer)
    }
}

#[derive(Default)]
pub(super) struct AsState {
    pub clients: HashMap<String, RegisteredClient>,
    pub codes: HashMap<String, Code>,
    pub access: HashMap<String, AccessToken>,
    pub refresh: HashMap<String, RefreshToken>,
    /// Revoked families: every token of one is invalid.
    pub revoked: HashMap<u64, Revocation>,
    /// The AS's part of the stats (the resource's and the log's are added by the handle).
    pub stats: OAuthStats,
    next_family: u64,
    /// The assertions the jwt-bearer grant accepts.
    pub assertions: HashMap<String, Assertion>,
    /// The `jti`s of every client assertion accepted so far.
    pub assertion_jtis: HashSet<String>,
    /// The token endpoint's DPoP nonce and seen proofs.
    pub dpop: DpopState,
}

/// An assertion the jwt-bearer grant accepts, and what it carries.
#[derive(Clone, Debug)]
pub(super) struct Assertion {
    /// Past this, refused; None: never.
    pub expires: Option<Instant>,
    /// The only client that may present it, when set.
    pub client_id: Option<String>,
    pub resource: Option<String>,
    pub scope: Vec<String>,
}

/// An authorization code and what its authorization request said.
pub(super) struct Code {
    pub client_id: String,
    pub redirect_uri: String,
    pub challenge: String,
    pub scope: Vec<String>,
    pub resource: Option<String>,
    /// The family its exchange started, once redeemed: a second redemption revokes it.
    pub redeemed: Option<u64>,
}

/// What a token carries, for the resource and for refreshes.
#[derive(Clone, Debug)]
pub(super) struct Grant {
    pub family: u64,
    pub client_id: String,
    pub scope: Vec<String>,
    pub resource: Option<String>,
}

pub(super) struct AccessToken {
    pub grant: Grant,
    pub expires: Instant,
    /// Revoked on its own at the revocation endpoint.
    pub revoked: bool,
    /// The thumbprint of the DPoP key it is bound to; None: a Bearer token.
    pub jkt: Option<String>,
}

pub(super) struct RefreshToken {
    pub grant: Grant,
    pub state: RefreshState,
    /// The thumbprint of the DPoP key a refresh must prove (public clients' tokens only).
    pub jkt: Option<String>,
}

/// The DPoP keys the tokens of one token response are bound to.
#[derive(Clone, Debug, Default)]
pub(super) struct Binding {
    pub access: Option<String>,
    pub refresh: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RefreshState {
    Active,
    /// Replaced by a newer refresh token: presenting it again is reuse.
    Rotated,
    /// Revoked on its own (a refresh token's revocation revokes its family).
    Revoked,
}

/// The tokens of one token response.
pub(super) struct Issued {
    pub access: String,
    pub refresh: Option<String>,
    pub expires_in: u64,
    /// `Bearer`, or `DPoP` for a bound access token.
    pub token_type: &'static str,
}

impl AsState {
    /// A new family, for one authorization code's exchange.
    pub fn new_family(&mut self) -> u64 {
        self.next_family += 1;
        self.next_family
    }

    /// Issues an access token for `grant`, and a refresh token when `refresh` is set, each
    /// bound as `binding` says.
    pub fn issue(
        &mut self,
        opts: &OAuthOptions,
        grant: &Grant,
        refresh: bool,
        binding: Binding,
    ) -> Issued {
        let access = fresh("at-");
        let token_type = match binding.access {
            Some(_) => "DPoP",
            None => "Bearer",
        };
        let token = AccessToken {
            grant: grant.clone(),
            expires: Instant::now() + opts.access_ttl,
            revoked: false,
            jkt: binding.access,
        };
        self.access.insert(access.clone(), token);
        let refresh = refresh.then(|| {
            let value = fresh("rt-");
            let token = RefreshToken {
                grant: grant.clone(),
                state: RefreshState::Active,
                jkt: binding.refresh,
            };
            self.refresh.insert(value.clone(), token);
            value
        });
        let ttl = opts.access_ttl;
        Issued {
            access,
            refresh,
            expires_in: ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0),
            token_type,
        }
    }

    /// Whether a code exchange for `scope` comes with a refresh token.
    pub fn refresh_for(opts: &OAuthOptions, scope: &[String]) -> bool {
        match opts.refresh_tokens {
            RefreshTokens::Always => true,
            RefreshTokens::WithOfflineAccess => scope.iter().any(|s| s == "offline_access"),
            RefreshTokens::Never => false,
        }
    }

    /// Revokes every token of `family`, once.
    pub fn revoke_family(&mut self, family: u64, why: Revocation) {
        if self.revoked.contains_key(&family) {
            return;
        }
        self.revoked.insert(family, why);
        self.stats
            .families_revoked
            .push(FamilyRevoked { family, why });
    }

    pub fn family_revoked(&self, family: u64) -> bool {
        self.revoked.contains_key(&family)
    }

    /// The grant of `token` if it is a valid access token right now.
    pub fn access_grant(&self, token: &str) -> Option<Grant> {
        self.access_binding(token).map(|(grant, _)| grant)
    }

    /// The grant of `token` and the DPoP key it is bound to, if it is a valid access token
    /// right now.
    pub fn access_binding(&self, token: &str) -> Option<(Grant, Option<String>)> {
        let t = self.access.get(token)?;
        let valid =
            !t.revoked && Instant::now() < t.expires && !self.family_revoked(t.grant.family);
        valid.then(|| (t.grant.clone(), t.jkt.clone()))
    }

    /// Every access token valid right now.
    pub fn valid_access_tokens(&self) -> Vec<String> {
        let mut tokens: Vec<String> = (self.access.keys())
            .filter(|t| self.access_grant(t).is_some())
            .cloned()
            .collect();
        tokens.sort();
        tokens
    }

    /// Every refresh token that a refresh would accept right now.
    pub fn valid_refresh_tokens(&self) -> Vec<String> {
        let mut tokens: Vec<String> = (self.refresh.iter())
            .filter(|(_, t)| {
                t.state == RefreshState::Active && !self.family_revoked(t.grant.family)
            })
            .map(|(v, _)| v.clone())
            .collect();
        tokens.sort();
        tokens
    }

    /// The family `token` (access or refresh) belongs to.
    pub fn family_of(&self, token: &str) -> Option<u64> {
        (self.access.get(token).map(|t| t.grant.family))
            .or_else(|| self.refresh.get(token).map(|t| t.grant.family))
    }

    /// Makes every access token expire now.
    pub fn expire_access_tokens(&mut self) {
        let now = Instant::now();
        for t in self.access.values_mut() {
            t.expires = t.expires.min(now);
        }
    }

    /// Revokes every family that has tokens.
    pub fn revoke_all(&mut self, why: Revocation) {
        let mut families: Vec<u64> = (self.access.values().map(|t| t.grant.family))
            .chain(self.refresh.values().map(|t| t.grant.family))
            .collect();
        families.sort_unstable();
        families.dedup();
        for family in families {
            self.revoke_family(family, why);
        }
    }
}
