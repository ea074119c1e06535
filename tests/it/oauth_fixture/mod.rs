//! An in-process OAuth 2.1 test fixture on 127.0.0.1, for mcpd's client side of MCP
//! authorization: a protected MCP resource (the HTTP fixture behind a bearer check, with
//! its Protected Resource Metadata) and an authorization server (metadata, PKCE
//! authorization codes, DCR, rotating refresh tokens, revocation), each optional, with
//! counters and logs in `OAuthStats` and controls on `OAuthHandle`.
//!
//! It uses no type of the `mcpd` crate, so a bug in mcpd's OAuth code cannot pass on both
//! sides. The AS approves every authorization request at once (no login page): a client
//! GETs the authorization URL with redirects disabled and reads `code`, `state` and `iss`
//! from the `Location`.
//!
//! Reading order: `options` (what can be asked for), `stats` (what is recorded), `resource`
//! (the 401/403 check and the PRM), `metadata` (every route), `authorize`, `token`,
//! `register`, `clients` (lookup, redirect URIs, client authentication), `server` (codes,
//! tokens, families), `handle` (introspection and control), `wire` (encodings, errors).

// Each test uses the part of this API it needs; no single test uses all of it.
#![allow(dead_code)]

mod authorize;
mod clients;
mod handle;
mod metadata;
mod options;
mod register;
mod resource;
mod server;
mod stats;
mod token;
mod wire;

pub use handle::OAuthHandle;
pub use options::{
    AsMetadataAt, AsPlacement, AuthMethod, Client, Iss, OAuthOptions, PrmAt, RefreshTokens,
};
// The record types tests name when they look into `OAuthStats`; not every one is named yet.
#[allow(unused_imports)]
pub use stats::{
    AuthorizationRequest, ClientSource, FamilyRevoked, HttpRecord, OAuthStats, RegisteredClient,
    ResourceOutcome, ResourceRequest, Revocation, RevocationRequest, TokenRequest,
};

use crate::http_fixture::{FixtureOptions, HttpFixture, Wrap};
use resource::RsShared;
use serde_json::Value;
use server::AsShared;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wire::Log;

/// A running OAuth fixture. Dropping it stops it too, without waiting.
pub struct OAuthFixture {
    /// The protected resource, when it runs one.
    mcp: Option<HttpFixture>,
    /// The AS's own server, when it runs on another origin (or without a resource).
    as_server: Option<(CancellationToken, JoinHandle<()>)>,
    handle: OAuthHandle,
}

impl OAuthFixture {
    pub fn builder() -> OAuthBuilder {
        OAuthBuilder::default()
    }

    /// `http://127.0.0.1:PORT/mcp`, the protected MCP endpoint.
    pub fn mcp_url(&self) -> String {
        self.http().url()
    }

    /// The wrapped HTTP fixture, for its own `Stats`.
    pub fn http(&self) -> &HttpFixture {
        self.mcp
            .as_ref()
            .expect("this fixture runs no protected resource")
    }

    /// The AS's issuer, e.g. `http://127.0.0.1:PORT` or `http://127.0.0.1:PORT/tenant1`.
    pub fn issuer(&self) -> String {
        self.handle
            .issuer()
            .expect("this fixture runs no authorization server")
    }

    /// The URL of the first PRM (the one the challenge names), if any is served.
    pub fn prm_url(&self) -> Option<String> {
        self.handle.resource.as_ref()?.prm_url()
    }

    /// The introspection and control handle.
    pub fn handle(&self) -> &OAuthHandle {
        &self.handle
    }

    /// Stops both servers and closes every connection.
    pub async fn stop(mut self) {
        if let Some(mcp) = self.mcp.take() {
            mcp.stop().await;
        }
        if let Some((shutdown, task)) = self.as_server.take() {
            shutdown.cancel();
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

impl Drop for OAuthFixture {
    fn drop(&mut self) {
        if let Some((shutdown, _)) = &self.as_server {
            shutdown.cancel();
        }
    }
}

/// Builds an `OAuthFixture`; each method sets the `OAuthOptions` field of its name.
#[derive(Clone, Debug, Default)]
pub struct OAuthBuilder {
    pub opts: OAuthOptions,
}

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

    /// Binds 127.0.0.1 on free ports (one, or two when the AS is on another origin) and
    /// serves in tokio tasks.
    pub async fn start(self) -> OAuthFixture {
        let opts = self.opts;
        let placement = match (opts.resource, opts.auth_server) {
            (false, AsPlacement::Absent) => panic!("an OAuth fixture needs a resource or an AS"),
            (false, _) => AsPlacement::OtherOrigin,
            (true, p) => p,
        };
        let rs_listener = match opts.resource {
            true => Some(bind().await),
            false => None,
        };
        let as_listener = match placement {
            AsPlacement::OtherOrigin => Some(bind().await),
            _ => None,
        };
        let port_of = |l: &TcpListener| l.local_addr().expect("local address").port();
        let as_port = match (&as_listener, &rs_listener) {
            (Some(l), _) | (None, Some(l)) => port_of(l),
            (None, None) => unreachable!("one of them is bound"),
        };
        let issuer = format!("http://127.0.0.1:{as_port}{}", opts.issuer_path);
        let auth = (placement != AsPlacement::Absent)
            .then(|| Arc::new(AsShared::new(opts.clone(), issuer)));
        let log = Log::default();
        let mut handle = OAuthHandle {
            auth: auth.clone(),
            resource: None,
            log: log.clone(),
        };
        let mcp = rs_listener.map(|listener| {
            let port = port_of(&listener);
            let rs = Arc::new(RsShared::new(opts.clone(), port, auth.clone()));
            handle.resource = Some(rs.clone());
            let same = auth
                .clone()
                .filter(|_| placement == AsPlacement::SameOrigin);
            start_resource(listener, rs, same, log.clone())
        });
        let as_server = as_listener.map(|listener| {
            let auth = auth.clone().expect("an AS on its own origin exists");
            start_as(listener, auth, log.clone())
        });
        OAuthFixture {
            mcp,
            as_server,
            handle,
        }
    }
}

fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

async fn bind() -> TcpListener {
    TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0 for the OAuth fixture")
}

/// The HTTP fixture with the resource's check in front and the PRM (and the AS, on the same
/// origin) beside it.
fn start_resource(
    listener: TcpListener,
    rs: Arc<RsShared>,
    same_origin_as: Option<Arc<AsShared>>,
    log: Log,
) -> HttpFixture {
    let port = listener.local_addr().expect("local address").port();
    let mut routes = metadata::prm_routes(rs.clone());
    if let Some(auth) = same_origin_as {
        routes = routes.merge(metadata::as_routes(auth));
    }
    let checker = rs.clone();
    let wrap = Wrap {
        check: Arc::new(move |parts, body| checker.check(parts, body)),
        routes: wire::logged(routes, log, port),
    };
    let opts = FixtureOptions {
        wrap: Some(wrap),
        ..rs.opts.mcp.clone()
    };
    HttpFixture::start_on(listener, opts)
}

/// The AS alone on its own origin.
fn start_as(
    listener: TcpListener,
    auth: Arc<AsShared>,
    log: Log,
) -> (CancellationToken, JoinHandle<()>) {
    let port = listener.local_addr().expect("local address").port();
    let router = wire::logged(metadata::as_routes(auth), log, port);
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let task = tokio::spawn(async move {
        let serve = axum::serve(listener, router).with_graceful_shutdown(stop.cancelled_owned());
        // An accept loop error cannot happen with axum's retrying listener; a test that needs
        // the server notices its absence anyway.
        let _ = serve.await;
    });
    (shutdown, task)
}
