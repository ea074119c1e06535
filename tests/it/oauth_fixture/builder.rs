//! The setters of `OAuthBuilder`: each sets the `OAuthOptions` field of its name (a few
//! set more than one, as they say).

use super::OAuthBuilder;
use super::options::{
    AsMetadataAt, AsPlacement, AssertionAudience, AuthMethod, Client, IdpOptions, Iss, PrmAt,
    RefreshTokens,
};
use crate::http_fixture::FixtureOptions;
use serde_json::Value;
use std::time::Duration;

impl OAuthBuilder {
    pub fn resource(mut self, on: bool) -> Self {
        self.opts.resource = on;
        self
    }

    pub fn mcp(mut self, opts: FixtureOptions) -> Self {
        self.opts.mcp = opts;
        self
    }

    pub fn prm_at(mut self, at: &[PrmAt]) -> Self {
        self.opts.prm_at = at.to_vec();
        self
    }

    pub fn challenge_resource_metadata(mut self, on: bool) -> Self {
        self.opts.challenge_resource_metadata = on;
        self
    }

    pub fn challenge_scope(mut self, scope: &str) -> Self {
        self.opts.challenge_scope = Some(scope.to_owned());
        self
    }

    pub fn prm_resource(mut self, resource: &str) -> Self {
        self.opts.prm_resource = Some(resource.to_owned());
        self
    }

    pub fn prm_scopes(mut self, scopes: &[&str]) -> Self {
        self.opts.prm_scopes = Some(owned(scopes));
        self
    }

    pub fn prm_authorization_servers(mut self, issuers: &[&str]) -> Self {
        self.opts.prm_authorization_servers = Some(owned(issuers));
        self
    }

    /// `tools/call` of `tool` needs every one of `scopes`.
    pub fn step_up(mut self, tool: &str, scopes: &[&str]) -> Self {
        self.opts.step_up.push((tool.to_owned(), owned(scopes)));
        self
    }

    pub fn check_audience(mut self, on: bool) -> Self {
        self.opts.check_audience = on;
        self
    }

    pub fn auth_server(mut self, placement: AsPlacement) -> Self {
        self.opts.auth_server = placement;
        self
    }

    /// The issuer's path, e.g. `/tenant1`.
    pub fn issuer_path(mut self, path: &str) -> Self {
        self.opts.issuer_path = path.to_owned();
        self
    }

    pub fn metadata_at(mut self, at: &[AsMetadataAt]) -> Self {
        self.opts.metadata_at = at.to_vec();
        self
    }

    pub fn metadata_issuer(mut self, issuer: &str) -> Self {
        self.opts.metadata_issuer = Some(issuer.to_owned());
        self
    }

    pub fn pkce_metadata(mut self, on: bool) -> Self {
        self.opts.pkce_metadata = on;
        self
    }

    pub fn dcr(mut self, on: bool) -> Self {
        self.opts.dcr = on;
        self
    }

    pub fn dcr_auth_method(mut self, method: AuthMethod) -> Self {
        self.opts.dcr_auth_method = Some(method);
        self
    }

    pub fn dcr_requires_refresh_grant(mut self, on: bool) -> Self {
        self.opts.dcr_requires_refresh_grant = on;
        self
    }

    pub fn revocation(mut self, on: bool) -> Self {
        self.opts.revocation = on;
        self
    }

    pub fn cimd(mut self, on: bool) -> Self {
        self.opts.cimd = on;
        self
    }

    /// The metadata document of CIMD client id `url` (turns CIMD on).
    pub fn cimd_document(mut self, url: &str, document: Value) -> Self {
        self.opts.cimd = true;
        self.opts.cimd_documents.push((url.to_owned(), document));
        self
    }

    pub fn iss_supported(mut self, on: bool) -> Self {
        self.opts.iss_supported = on;
        self
    }

    pub fn iss(mut self, iss: Iss) -> Self {
        self.opts.iss = iss;
        self
    }

    pub fn auth_scopes(mut self, scopes: &[&str]) -> Self {
        self.opts.auth_scopes = Some(owned(scopes));
        self
    }

    pub fn auth_methods(mut self, methods: &[AuthMethod]) -> Self {
        self.opts.auth_methods = methods.to_vec();
        self
    }

    /// A pre-registered client (may be called more than once).
    pub fn client(mut self, client: Client) -> Self {
        self.opts.clients.push(client);
        self
    }

    pub fn access_ttl(mut self, ttl: Duration) -> Self {
        self.opts.access_ttl = ttl;
        self
    }

    pub fn refresh_tokens(mut self, when: RefreshTokens) -> Self {
        self.opts.refresh_tokens = when;
        self
    }

    pub fn rotating(mut self, on: bool) -> Self {
        self.opts.rotating = on;
        self
    }

    pub fn client_credentials(mut self, on: bool) -> Self {
        self.opts.client_credentials = on;
        self
    }

    pub fn jwt_bearer(mut self, on: bool) -> Self {
        self.opts.jwt_bearer = on;
        self
    }

    pub fn assertion_audiences(mut self, audiences: &[AssertionAudience]) -> Self {
        self.opts.assertion_audiences = audiences.to_vec();
        self
    }

    /// An identity provider on its own origin (turns `jwt_bearer` on).
    pub fn idp(mut self, idp: IdpOptions) -> Self {
        self.opts.idp = Some(idp);
        self.opts.jwt_bearer = true;
        self
    }

    /// DPoP advertised on both sides: `dpop_metadata` and `rs_dpop`.
    pub fn dpop(mut self, on: bool) -> Self {
        self.opts.dpop_metadata = on;
        self.opts.rs_dpop = on;
        self
    }

    pub fn dpop_metadata(mut self, on: bool) -> Self {
        self.opts.dpop_metadata = on;
        self
    }

    pub fn dpop_ignored(mut self, on: bool) -> Self {
        self.opts.dpop_ignored = on;
        self
    }

    pub fn require_dpop(mut self, on: bool) -> Self {
        self.opts.require_dpop = on;
        self
    }

    pub fn token_dpop_nonce(mut self, on: bool) -> Self {
        self.opts.token_dpop_nonce = on;
        self
    }

    pub fn rs_dpop(mut self, on: bool) -> Self {
        self.opts.rs_dpop = on;
        self
    }

    pub fn rs_dpop_bearer_challenge(mut self, on: bool) -> Self {
        self.opts.rs_dpop_bearer_challenge = on;
        self
    }

    pub fn rs_dpop_nonce(mut self, on: bool) -> Self {
        self.opts.rs_dpop_nonce = on;
        self
    }
}

fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}
