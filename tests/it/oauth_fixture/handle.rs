//! `OAuthHandle`: what tests read from a running OAuth fixture (stats, valid tokens,
//! clients) and how they change it (revoke, expire, add or forget clients, migrate the
//! resource to another AS).

use super::idp::IdpShared;
use super::options::Client;
use super::resource::RsShared;
use super::server::{AsShared, Assertion};
use super::stats::{ClientSource, OAuthStats, RegisteredClient, Revocation};
use super::wire::Log;
use std::sync::Arc;

/// A cloneable view of one fixture's state; cheap to move into tasks.
#[derive(Clone)]
pub struct OAuthHandle {
    pub(super) auth: Option<Arc<AsShared>>,
    pub(super) resource: Option<Arc<RsShared>>,
    pub(super) idp: Option<Arc<IdpShared>>,
    pub(super) log: Log,
}

impl OAuthHandle {
    fn auth(&self) -> &AsShared {
        self.auth
            .as_deref()
            .expect("this fixture runs no authorization server")
    }

    fn idp(&self) -> &IdpShared {
        self.idp
            .as_deref()
            .expect("this fixture runs no identity provider")
    }

    fn resource(&self) -> &RsShared {
        self.resource
            .as_deref()
            .expect("this fixture runs no protected resource")
    }

    /// The AS's issuer, if this fixture runs one.
    pub fn issuer(&self) -> Option<String> {
        self.auth.as_ref().map(|a| a.issuer.clone())
    }

    /// Everything recorded so far.
    pub fn stats(&self) -> OAuthStats {
        let mut stats = match &self.auth {
            Some(auth) => auth.lock().stats.clone(),
            None => OAuthStats::default(),
        };
        if let Some(rs) = &self.resource {
            stats.resource_requests = rs.lock().requests.clone();
        }
        if let Some(idp) = &self.idp {
            let st = idp.lock();
            stats.idp_requests = st.requests.clone();
            stats.id_jags = st.issued.clone();
            stats.idp_authorizations = st.authorizations.clone();
            stats.id_tokens = st.id_tokens.iter().map(|t| t.token.clone()).collect();
        }
        stats.requests = self.log.lock().clone();
        stats
    }

    /// Token requests with this `grant_type` so far.
    pub fn token_requests(&self, grant_type: &str) -> usize {
        self.auth().lock().stats.token_requests_for(grant_type)
    }

    /// Refresh requests that presented `refresh_token` so far.
    pub fn refreshes_of(&self, refresh_token: &str) -> usize {
        let st = self.auth().lock();
        st.stats.refreshes.get(refresh_token).copied().unwrap_or(0)
    }

    /// Whether any token family was revoked, for whatever reason.
    pub fn any_family_revoked(&self) -> bool {
        !self.auth().lock().stats.families_revoked.is_empty()
    }

    /// Access tokens valid right now (sorted).
    pub fn valid_access_tokens(&self) -> Vec<String> {
        self.auth().lock().valid_access_tokens()
    }

    /// Refresh tokens a refresh would accept right now (sorted).
    pub fn valid_refresh_tokens(&self) -> Vec<String> {
        self.auth().lock().valid_refresh_tokens()
    }

    /// Every client the AS knows: pre-registered, registered, and CIMD ids it looked up.
    pub fn clients(&self) -> Vec<RegisteredClient> {
        let mut clients: Vec<_> = self.auth().lock().clients.values().cloned().collect();
        clients.sort_by(|a, b| a.id.cmp(&b.id));
        clients
    }

    /// Revokes the family of `token` (an access or refresh token), as a user revoking the
    /// grant would; false when the token is unknown.
    pub fn revoke(&self, token: &str) -> bool {
        let mut st = self.auth().lock();
        match st.family_of(token) {
            Some(family) => {
                st.revoke_family(family, Revocation::Test);
                true
            }
            None => false,
        }
    }

    /// Revokes every token family issued so far.
    pub fn revoke_all(&self) {
        self.auth().lock().revoke_all(Revocation::Test);
    }

    /// Makes every access token issued so far expire now (refresh tokens stay valid).
    pub fn expire_access_tokens(&self) {
        self.auth().lock().expire_access_tokens();
    }

    /// Adds (or replaces) a pre-registered client.
    pub fn add_client(&self, client: Client) {
        let registered = RegisteredClient {
            id: client.id.clone(),
            secret: client.secret,
            auth_method: client.auth_method,
            redirect_uris: client.redirect_uris,
            grant_types: vec!["authorization_code".into(), "refresh_token".into()],
            application_type: None,
            source: ClientSource::PreRegistered,
            public_key: client.public_key,
        };
        self.auth().lock().clients.insert(client.id, registered);
    }

    /// Forgets a client (an expired registration): its requests get `invalid_client`.
    pub fn forget_client(&self, id: &str) -> bool {
        self.auth().lock().clients.remove(id).is_some()
    }

    /// Sets the PRM's `authorization_servers`.
    pub fn set_authorization_servers(&self, issuers: Vec<String>) {
        self.resource().lock().authorization_servers = issuers;
    }

    /// The resource also accepts access tokens of `other`'s AS.
    pub fn trust(&self, other: &OAuthHandle) {
        let auth = other.auth.clone().expect("the other fixture runs no AS");
        self.resource().lock().trusted.push(auth);
    }

    /// Moves the resource to `other`'s AS: the PRM names only that issuer, and only its
    /// tokens are accepted from now on (the old AS's tokens get 401).
    pub fn migrate_to(&self, other: &OAuthHandle) {
        let auth = other.auth.clone().expect("the other fixture runs no AS");
        let mut rs = self.resource().lock();
        rs.authorization_servers = vec![auth.issuer.clone()];
        rs.trusted = vec![auth];
    }

    /// The identity provider's issuer, if this fixture runs one.
    pub fn idp_issuer(&self) -> Option<String> {
        self.idp.as_ref().map(|i| i.issuer.clone())
    }

    /// Makes the access token `token` expire now (its refresh token stays valid); false
    /// when unknown.
    pub fn expire(&self, token: &str) -> bool {
        let mut st = self.auth().lock();
        let Some(t) = st.access.get_mut(token) else {
            return false;
        };
        t.expires = t.expires.min(std::time::Instant::now());
        true
    }

    /// The RFC 7638 thumbprint of the DPoP key access token `token` is bound to; None for a
    /// Bearer token (or an unknown one).
    pub fn token_binding(&self, token: &str) -> Option<String> {
        self.auth().lock().access.get(token)?.jkt.clone()
    }

    /// The jwt-bearer grant accepts `assertion` from now on (from any client, no expiry).
    pub fn accept_assertion(&self, assertion: &str) {
        let accepted = Assertion {
            expires: None,
            client_id: None,
            resource: None,
            scope: Vec::new(),
        };
        self.auth()
            .lock()
            .assertions
            .insert(assertion.to_owned(), accepted);
    }

    /// The jwt-bearer grant refuses `assertion` from now on; false when it was not accepted.
    pub fn forget_assertion(&self, assertion: &str) -> bool {
        self.auth().lock().assertions.remove(assertion).is_some()
    }

    /// The ID token the identity provider's token exchange accepts from now on.
    pub fn set_id_token(&self, id_token: &str) {
        self.idp().lock().id_token = id_token.to_owned();
    }

    /// Requests to the identity provider's token endpoint with this `grant_type` so far
    /// (`authorization_code`, `refresh_token`, the token exchange's), whatever the outcome.
    pub fn idp_token_requests(&self, grant_type: &str) -> usize {
        let idp = self.idp();
        let st = idp.lock();
        (st.requests.iter())
            .filter(|r| r.param("grant_type").unwrap_or_default() == grant_type)
            .count()
    }

    /// Every ID token the sign-in issued so far counts as expired from now on: the token
    /// exchange refuses it with `invalid_grant` (the configured `id_token` is not affected).
    pub fn expire_id_tokens(&self) {
        for t in &mut self.idp().lock().id_tokens {
            t.exp = i64::MIN;
        }
    }

    /// Refresh tokens the identity provider's refresh accepts right now (sorted).
    pub fn idp_refresh_tokens(&self) -> Vec<String> {
        let mut tokens: Vec<_> = self.idp().lock().refresh_tokens.keys().cloned().collect();
        tokens.sort();
        tokens
    }

    /// The token endpoint's current DPoP nonce (None: it demands none).
    pub fn token_nonce(&self) -> Option<String> {
        self.auth().lock().dpop.nonce.clone()
    }

    /// A new token endpoint DPoP nonce, demanded from now on (turns its nonces on).
    pub fn rotate_token_nonce(&self) -> String {
        self.auth().lock().dpop.rotate()
    }

    /// The resource's current DPoP nonce (None: it demands none).
    pub fn rs_nonce(&self) -> Option<String> {
        self.resource().lock().dpop.nonce.clone()
    }

    /// A new resource DPoP nonce, demanded from now on (turns the resource's nonces on).
    pub fn rotate_rs_nonce(&self) -> String {
        self.resource().lock().dpop.rotate()
    }
}
