//! The steps of one login before the browser.
//!
//! Discovery, the scopes to ask for, the loopback listener for the redirect,
//! registration, and the authorization URL; and the listener itself.

use super::authorize::{self, PendingAuthorization};
use super::challenge::Bearer;
use super::discovery::{self, DiscoveryError, ServerMetadata};
use super::registration::{self, Configured, RegistrationError, Source};
use super::store::StoredClient;
use super::token;
use crate::config::OAuthConfig;
use reqwest::Url;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// What a login needs to know about its server, fixed by the config.
#[derive(Debug)]
pub struct Setup {
    pub server: String,
    /// The server's configured URL.
    pub url: Url,
    pub oauth: OAuthConfig,
    /// For metadata, registration and token requests: never carries a server credential.
    pub http: reqwest::Client,
    /// Where a `client_secret = "${secret:NAME}"` is looked up, when a login needs it.
    pub secrets: crate::secrets::Secrets,
}

/// Why a login could not start or finish.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    #[error(transparent)]
    Registration(#[from] RegistrationError),
    #[error("cannot listen for the redirect on {addr}: {why}; set another redirect_port, or none")]
    Listen { addr: String, why: String },
    #[error("the authorization endpoint {0:?} is not a URL")]
    BadEndpoint(String),
    #[error(transparent)]
    Callback(#[from] authorize::CallbackError),
    #[error("the login was not completed within {0}; run `mcpd ctl login` again")]
    Expired(String),
    #[error(transparent)]
    Token(#[from] token::TokenError),
    /// No login is pending and none is in force; says why.
    #[error("{0}")]
    NotLoggedIn(String),
    #[error("this login's code is already being exchanged")]
    Exchanging,
    #[error("logged out")]
    LoggedOut,
    #[error("could not remove the stored login: {0}")]
    Store(String),
    /// The configured store (the keyring) cannot keep a login: it was not used.
    #[error("the login cannot be stored: {0}")]
    NotStored(String),
    #[error("the login is not available: {0}")]
    Gone(#[from] mcpd_runtime::ask::AskError),
    #[error("{0}")]
    Other(String),
    /// The configured client secret names a secret that cannot be looked up.
    #[error("the client secret: {0}")]
    Secret(String),
    /// A machine grant's key, assertion or ID token cannot be read.
    #[error("cannot read {what}: {why}")]
    Unreadable { what: String, why: String },
    /// The enterprise identity provider refused the token exchange.
    #[error("the identity provider {issuer}: {error}")]
    IdentityProvider {
        issuer: String,
        error: super::token::TokenError,
    },
}

/// A login ready for the browser.
pub struct Prepared {
    /// The URL the user opens.
    pub url: Url,
    pub pending: PendingAuthorization,
    pub metadata: ServerMetadata,
    /// The bound loopback listener the redirect comes to.
    pub listener: tokio::net::TcpListener,
}

/// Discovers the server's authorization server, binds the loopback listener, registers
/// (or uses the configured client) and builds the authorization URL.
///
/// `challenge` is the server's last `WWW-Authenticate`, `wanted` the scopes a step-up
/// asked for on top of those granted before.
///
/// `registered` is a client registered dynamically before, with its issuer: reused
/// when the issuer is the same and its redirect port can be bound again.
pub async fn prepare(
    setup: Arc<Setup>,
    challenge: Option<Bearer>,
    wanted: Vec<String>,
    registered: Option<(String, StoredClient)>,
) -> Result<Prepared, LoginError> {
    let http = &setup.http;
    let Found {
        metadata,
        resource,
        supported,
    } = discover(&setup, challenge.as_ref()).await?;
    discovery::require_pkce(&metadata)?;
    let scopes = scopes(
        &setup.oauth,
        challenge.as_ref(),
        &supported,
        &wanted,
        &metadata,
    );
    // A client this authorization server registered before, with the port it knows.
    let reusable = registered
        .filter(|(issuer, c)| {
            *issuer == metadata.issuer
                && c.source == Source::Dynamic
                && setup.oauth.client_id.is_none()
        })
        .and_then(|(_, c)| {
            let port = c
                .redirect_uri
                .as_deref()
                .and_then(|u| Url::parse(u).ok())
                .and_then(|u| u.port())?;
            let fits = setup.oauth.redirect_port.is_none_or(|p| p == port);
            fits.then_some((c, port))
        });
    let mut listener = None;
    let mut reused = None;
    if let Some((client, port)) = reusable
        && let Ok(l) = tokio::net::TcpListener::bind(("127.0.0.1", port)).await
    {
        listener = Some(l);
        reused = Some(client);
    }
    let (listener, redirect_uri) = listen(setup.oauth.redirect_port, listener).await?;
    let configured = Configured {
        client_id: setup.oauth.client_id.clone(),
        client_secret: client_secret(&setup).await?,
        metadata_url: setup.oauth.client_metadata_url.clone(),
    };
    let client = match reused {
        Some(c) => c.client(),
        None => {
            registration::register(http, &setup.server, &metadata, &configured, &redirect_uri)
                .await?
        }
    };
    let (url, pending) = authorize::start(&metadata, client, &redirect_uri, &resource, &scopes)
        .ok_or_else(|| LoginError::BadEndpoint(metadata.authorization_endpoint.clone()))?;
    Ok(Prepared {
        url,
        pending,
        metadata,
        listener,
    })
}

/// The loopback listener of a login's redirect (`already` one bound, else on `port`, or
/// a random one), and the redirect URI it serves.
pub async fn listen(
    port: Option<u16>,
    already: Option<tokio::net::TcpListener>,
) -> Result<(tokio::net::TcpListener, String), LoginError> {
    let addr = format!("127.0.0.1:{}", port.unwrap_or(0));
    let listener = match already {
        Some(l) => l,
        None => tokio::net::TcpListener::bind(&addr)
            .await
            .map_err(|e| LoginError::Listen {
                addr: addr.clone(),
                why: e.to_string(),
            })?,
    };
    let bound = listener
        .local_addr()
        .map_err(|e| LoginError::Listen {
            addr,
            why: e.to_string(),
        })?
        .port();
    Ok((listener, format!("http://127.0.0.1:{bound}/callback")))
}

/// What discovery found for a server.
pub struct Found {
    pub metadata: ServerMetadata,
    /// The resource tokens are asked for.
    pub resource: String,
    /// The resource's `scopes_supported`.
    pub supported: Vec<String>,
}

/// The server's authorization server and resource: from its protected resource metadata
/// (the first authorization server it lists), else the origin's metadata (2025-03-26).
pub async fn discover(setup: &Setup, challenge: Option<&Bearer>) -> Result<Found, LoginError> {
    let http = &setup.http;
    let prm = discovery::resource_metadata(http, &setup.url, challenge).await?;
    Ok(match prm {
        Some(prm) => {
            // RFC 9728 §7.6: choosing among several is the client's job; the first is
            // the one the server lists first.
            let issuer = prm
                .authorization_servers
                .first()
                .ok_or(DiscoveryError::NoAuthorizationServer)?;
            Found {
                metadata: discovery::server_metadata(http, issuer).await?,
                resource: prm.resource,
                supported: prm.scopes_supported,
            }
        }
        None => Found {
            metadata: discovery::origin_server(http, &setup.url).await?,
            resource: resource_of(&setup.url),
            supported: Vec::new(),
        },
    })
}

/// The resource of a server without protected resource metadata: its URL without a
/// fragment (RFC 8707 §2).
fn resource_of(url: &Url) -> String {
    let mut u = url.clone();
    u.set_fragment(None);
    u.to_string()
}

/// The scopes to ask for, in the 2026-07-28 priority: the challenge's, else the
/// resource's `scopes_supported`, else none; then the configured ones and those a step-up
/// asked for, and `offline_access` when the authorization server offers it.
fn scopes(
    cfg: &OAuthConfig,
    challenge: Option<&Bearer>,
    supported: &[String],
    wanted: &[String],
    meta: &ServerMetadata,
) -> Vec<String> {
    let from_challenge = challenge.map(Bearer::scopes).unwrap_or_default();
    let base = if from_challenge.is_empty() {
        supported.to_vec()
    } else {
        from_challenge
    };
    let mut out: Vec<String> = Vec::new();
    for s in base.iter().chain(&cfg.scopes).chain(wanted) {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    let offline = "offline_access".to_owned();
    if !out.is_empty() && meta.scopes_supported.contains(&offline) && !out.contains(&offline) {
        out.push(offline);
    }
    out
}

/// A redirect that reached the listener, for the credential's owner to check.
pub struct Arrived {
    pub url: Url,
    pub respond_to: oneshot::Sender<Result<(), LoginError>>,
}

/// Serves the loopback listener until `cancel` fires: each `GET /callback?…` is handed
/// over, and the browser is told how it went. Anything else gets 404.
pub async fn serve_callback(
    listener: tokio::net::TcpListener,
    arrived: mpsc::Sender<Arrived>,
    cancel: CancellationToken,
) {
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let app = axum::Router::new().route(
        "/callback",
        axum::routing::get(move |uri: axum::http::Uri| {
            let arrived = arrived.clone();
            async move { on_callback(uri, port, arrived).await }
        }),
    );
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(cancel.cancelled_owned())
        .await;
    if let Err(e) = served {
        tracing::warn!("the login's redirect listener failed: {e}");
    }
}

async fn on_callback(
    uri: axum::http::Uri,
    port: u16,
    arrived: mpsc::Sender<Arrived>,
) -> (axum::http::StatusCode, axum::response::Html<String>) {
    use axum::http::StatusCode;
    let page = |status: StatusCode, text: &str| {
        let escaped = text
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        (
            status,
            axum::response::Html(format!(
                "<!doctype html><meta charset=utf-8><title>mcpd login</title><p>{escaped}</p>"
            )),
        )
    };
    let Ok(url) = Url::parse(&format!("http://127.0.0.1:{port}{uri}")) else {
        return page(
            StatusCode::BAD_REQUEST,
            "That is not a redirect mcpd can read.",
        );
    };
    let (respond_to, rx) = oneshot::channel();
    if arrived.send(Arrived { url, respond_to }).await.is_err() {
        return page(
            StatusCode::GONE,
            "This login is over; run `mcpd ctl login` again.",
        );
    }
    match rx.await {
        Ok(Ok(())) => page(
            StatusCode::OK,
            "mcpd is logged in. You can close this window.",
        ),
        Ok(Err(why)) => page(
            StatusCode::BAD_REQUEST,
            &format!("mcpd could not log in: {why}"),
        ),
        Err(_) => page(
            StatusCode::GONE,
            "This login is over; run `mcpd ctl login` again.",
        ),
    }
}

/// The configured client secret, its `${secret:NAME}` references put in (looked up now,
/// as at a server's start); a variable's value as it is.
pub async fn client_secret(setup: &Setup) -> Result<Option<crate::config::Secret>, LoginError> {
    match &setup.oauth.client_secret {
        None => Ok(None),
        Some(text) => put_in(setup, text)
            .await
            .map(Some)
            .map_err(LoginError::Secret),
    }
}

/// A setting's text with its `${secret:NAME}` references put in (looked up now); text
/// without references as it is.
pub async fn put_in(
    setup: &Setup,
    text: &crate::config::Secret,
) -> Result<crate::config::Secret, String> {
    let names = crate::secrets::references(text.expose())?;
    if names.is_empty() {
        return Ok(text.clone());
    }
    let found = setup
        .secrets
        .lookup_all(&names)
        .await
        .map_err(|e| e.to_string())?;
    let value = crate::secrets::substitute(text.expose(), |n| {
        found
            .iter()
            .find(|(name, _, _)| name == n)
            .map(|(_, v, _)| v.expose())
    })?;
    Ok(value)
}

/// Largest key, assertion or ID token file read.
const MAX_FILE: u64 = 64 * 1024;

/// A file's text, trimmed: at most `MAX_FILE` bytes, read now (a rotated file is
/// picked up at the next grant).
pub async fn read(path: &std::path::Path, what: &str) -> Result<crate::config::Secret, LoginError> {
    use tokio::io::AsyncReadExt;
    let shown = format!("{what} {}", path.display());
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| unreadable(&shown, e.to_string()))?;
    let mut text = String::new();
    file.take(MAX_FILE + 1)
        .read_to_string(&mut text)
        .await
        .map_err(|e| unreadable(&shown, e.to_string()))?;
    if text.len() as u64 > MAX_FILE {
        return Err(unreadable(
            &shown,
            format!("it is larger than {MAX_FILE} bytes"),
        ));
    }
    let text = text.trim();
    if text.is_empty() {
        return Err(unreadable(&shown, "it is empty".into()));
    }
    Ok(crate::config::Secret::new(text.to_owned()))
}

pub fn unreadable(what: &str, why: String) -> LoginError {
    LoginError::Unreadable {
        what: what.to_owned(),
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(offline: bool) -> ServerMetadata {
        ServerMetadata {
            scopes_supported: if offline {
                vec!["mcp:basic".into(), "offline_access".into()]
            } else {
                Vec::new()
            },
            ..ServerMetadata::default()
        }
    }

    fn bearer(scope: Option<&str>) -> Bearer {
        Bearer {
            scope: scope.map(str::to_owned),
            ..Bearer::default()
        }
    }

    #[test]
    fn scopes_follow_the_challenge_then_the_resource_and_add_offline_access_when_offered() {
        let cfg = OAuthConfig::default();
        let supported = vec!["mcp:basic".to_owned(), "mcp:read".to_owned()];
        let c = bearer(Some("mcp:basic"));
        assert_eq!(
            scopes(&cfg, Some(&c), &supported, &[], &meta(false)),
            ["mcp:basic"]
        );
        assert_eq!(
            scopes(&cfg, None, &supported, &[], &meta(false)),
            ["mcp:basic", "mcp:read"]
        );
        assert!(scopes(&cfg, None, &[], &[], &meta(true)).is_empty());
        assert_eq!(
            scopes(&cfg, Some(&c), &[], &["mcp:write".into()], &meta(true)),
            ["mcp:basic", "mcp:write", "offline_access"]
        );
    }
}
