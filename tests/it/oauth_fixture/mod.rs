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
//! Without a user, the AS also offers `client_credentials` (with `private_key_jwt` client
//! authentication) and the jwt-bearer grant, fed by an optional identity provider doing
//! token exchange to ID-JAGs (where a client can also sign in, OpenID Connect style, for
//! the ID token to exchange); both sides can speak DPoP (RFC 9449), nonces included.
//!
//! Reading order: `options` (what can be asked for; `builder` sets them), `stats` (what is
//! recorded), `resource` (the 401/403 check and the PRM), `metadata` (every route),
//! `authorize`, `token`, `grants` (client credentials, jwt-bearer), `register`, `clients`
//! (lookup, redirect URIs, client authentication), `assertion` (`private_key_jwt`), `dpop`
//! (proofs), `idp` (token exchange), `idp_signin` (signing in at the IdP), `server` (codes,
//! tokens, families), `handle` (introspection and control), `wire` (encodings, errors),
//! `jose` (JWS checks). `jwt` is for tests: ES256 keys, assertions and proofs.

// Each test uses the part of this API it needs; no single test uses all of it.
#![allow(dead_code)]

mod assertion;
mod authorize;
mod builder;
mod clients;
mod dpop;
mod grants;
mod handle;
mod idp;
mod idp_signin;
mod jose;
pub mod jwt;
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
    AsMetadataAt, AsPlacement, AssertionAudience, AuthMethod, Client, IdpOptions, Iss,
    OAuthOptions, PrmAt, RefreshTokens,
};
// The record types tests name when they look into `OAuthStats`; not every one is named yet.
#[allow(unused_imports)]
pub use stats::{
    AuthorizationRequest, ClientSource, DpopCheck, FamilyRevoked, HttpRecord, IdpRequest,
    OAuthStats, RegisteredClient, ResourceOutcome, ResourceRequest, Revocation, RevocationRequest,
    TokenRequest,
};

use crate::http_fixture::{FixtureOptions, HttpFixture, Wrap};
use axum::Router;
use idp::IdpShared;
use resource::RsShared;
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
    /// The identity provider's server, when it runs one.
    idp_server: Option<(CancellationToken, JoinHandle<()>)>,
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

    /// The AS's token endpoint (what DPoP proofs and client assertions may name).
    pub fn token_endpoint(&self) -> String {
        format!("{}/token", self.issuer())
    }

    /// The identity provider's issuer, `http://127.0.0.1:PORT`; its token endpoint is
    /// `/token` below it.
    pub fn idp_issuer(&self) -> String {
        self.handle
            .idp_issuer()
            .expect("this fixture runs no identity provider")
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
        for server in [self.as_server.take(), self.idp_server.take()] {
            let Some((shutdown, task)) = server else {
                continue;
            };
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
        for (shutdown, _) in self.as_server.iter().chain(&self.idp_server) {
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
            idp: None,
            log: log.clone(),
        };
        let rs = rs_listener.map(|listener| {
            let port = port_of(&listener);
            let rs = Arc::new(RsShared::new(opts.clone(), port, auth.clone()));
            handle.resource = Some(rs.clone());
            (listener, rs)
        });
        let idp_server = match &opts.idp {
            Some(idp) => {
                let listener = bind().await;
                let auth = auth.clone().expect("an identity provider needs an AS");
                let resource = rs.as_ref().map(|(_, rs)| rs.resource_id());
                let idp = IdpShared::new(idp.clone(), port_of(&listener), auth, resource);
                let idp = Arc::new(idp);
                handle.idp = Some(idp.clone());
                Some(serve(listener, idp::routes(idp), log.clone()))
            }
            None => None,
        };
        let mcp = rs.map(|(listener, rs)| {
            let same = auth
                .clone()
                .filter(|_| placement == AsPlacement::SameOrigin);
            start_resource(listener, rs, same, log.clone())
        });
        let as_server = as_listener.map(|listener| {
            let auth = auth.clone().expect("an AS on its own origin exists");
            serve(listener, metadata::as_routes(auth), log.clone())
        });
        OAuthFixture {
            mcp,
            as_server,
            idp_server,
            handle,
        }
    }
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

/// `routes` (the AS's, or the identity provider's) alone on their own origin.
fn serve(listener: TcpListener, routes: Router, log: Log) -> (CancellationToken, JoinHandle<()>) {
    let port = listener.local_addr().expect("local address").port();
    let router = wire::logged(routes, log, port);
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
