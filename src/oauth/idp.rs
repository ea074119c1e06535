//! The enterprise identity provider of an enterprise-managed server.
//!
//! The user's sign-in there (an OpenID Connect authorization code flow with PKCE, run
//! like a server's login), the ID token kept fresh with its refresh token, and the
//! exchange of that ID token for an ID-JAG (RFC 8693) meant for the server's
//! authorization server.

use super::authorize;
use super::discovery::{self, ServerMetadata};
use super::flow::{self, LoginError, Prepared, Setup, read, unreadable};
use super::registration::{AuthMethod, Client, Source};
use super::store::{IdpLogin, StoredClient};
use super::token::{self, At};
use crate::config::{IdentityProvider, KeySource, Secret};
use std::sync::Arc;

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
/// An ID token this close to its `exp` is renewed before it is exchanged.
const FRESH_FOR: u64 = 30;

/// The server's identity provider when the user signs in there (no ID token configured).
pub fn signs_in(setup: &Setup) -> Option<&IdentityProvider> {
    setup
        .oauth
        .identity_provider
        .as_deref()
        .filter(|i| i.id_token.is_none())
}

/// mcpd's client at the identity provider, its secret looked up now.
async fn client(setup: &Setup, idp: &IdentityProvider) -> Result<Client, LoginError> {
    let secret = match &idp.client_secret {
        Some(text) => Some(
            flow::put_in(setup, text)
                .await
                .map_err(|why| unreadable("the identity provider's client_secret", why))?,
        ),
        None => None,
    };
    Ok(Client {
        client_id: idp.client_id.clone(),
        method: if secret.is_some() {
            AuthMethod::ClientSecretBasic
        } else {
            AuthMethod::None
        },
        secret,
        source: Source::PreRegistered,
        proof: None,
    })
}

/// Prepares the user's sign-in at the identity provider: its metadata, the loopback
/// listener, the authorization URL asking for `openid` (and `offline_access`, so the ID
/// token can be renewed without the browser, when offered).
pub async fn prepare(setup: Arc<Setup>) -> Result<Prepared, LoginError> {
    let Some(idp) = signs_in(&setup) else {
        return Err(LoginError::Other(
            "no identity provider to sign in at".into(),
        ));
    };
    let metadata = discovery::server_metadata(&setup.http, &idp.issuer).await?;
    discovery::require_pkce(&metadata)?;
    let (listener, redirect_uri) = flow::listen(setup.oauth.redirect_port, None).await?;
    let client = client(&setup, idp).await?;
    let offline = metadata.scopes_supported.is_empty()
        || metadata
            .scopes_supported
            .iter()
            .any(|s| s == "offline_access");
    let mut scopes = vec!["openid".to_owned()];
    if offline {
        scopes.push("offline_access".into());
    }
    let (url, pending) = authorize::start(&metadata, client, &redirect_uri, "", &scopes)
        .ok_or_else(|| LoginError::BadEndpoint(metadata.authorization_endpoint.clone()))?;
    Ok(Prepared {
        url,
        pending,
        metadata,
        listener,
    })
}

/// What a sign-in keeps: the ID token the code exchange gave.
pub fn signed_in(
    metadata: &ServerMetadata,
    client: &Client,
    tokens: &token::Tokens,
) -> Result<IdpLogin, LoginError> {
    let Some(id_token) = &tokens.id_token else {
        return Err(LoginError::Other(format!(
            "the identity provider {} gave no ID token (is `openid` among the client's scopes?)",
            metadata.issuer
        )));
    };
    Ok(IdpLogin {
        issuer: metadata.issuer.clone(),
        token_endpoint: metadata.token_endpoint.clone(),
        client: StoredClient {
            client_id: client.client_id.clone(),
            client_secret: None,
            method: client.method,
            source: client.source,
            redirect_uri: None,
        },
        id_token: id_token.expose().to_owned(),
        refresh_token: tokens.refresh.as_ref().map(|r| r.expose().to_owned()),
    })
}

/// The ID token of the sign-in, renewed with its refresh token when it has run out (or
/// is about to); the renewed sign-in too, to be stored.
async fn fresh_id_token(
    setup: &Setup,
    idp: &IdentityProvider,
    login: IdpLogin,
) -> Result<(Secret, Option<IdpLogin>), LoginError> {
    let now = super::store::epoch_secs(std::time::SystemTime::now());
    let exp = super::jose::unverified_exp(&login.id_token);
    if exp.is_none_or(|e| e > now + FRESH_FOR) {
        return Ok((Secret::new(login.id_token), None));
    }
    let Some(refresh) = login.refresh_token.clone() else {
        return Err(LoginError::NotLoggedIn(format!(
            "the ID token from the sign-in at {} has expired, and there is no refresh token to renew it: run `mcpd ctl login {}`",
            idp.issuer, setup.server
        )));
    };
    let client = client(setup, idp).await?;
    let at = At {
        http: &setup.http,
        endpoint: &login.token_endpoint,
        issuer: &login.issuer,
        client: &client,
        dpop: None,
    };
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh.as_str()),
        ("scope", "openid"),
    ];
    let tokens =
        token::request(&at, &form)
            .await
            .map_err(|error| LoginError::IdentityProvider {
                issuer: idp.issuer.clone(),
                error,
            })?;
    let Some(id_token) = tokens.id_token else {
        return Err(LoginError::Other(format!(
            "the identity provider {} renewed the sign-in without an ID token",
            idp.issuer
        )));
    };
    let renewed = IdpLogin {
        id_token: id_token.expose().to_owned(),
        refresh_token: tokens
            .refresh
            .map(|r| r.expose().to_owned())
            .or(login.refresh_token),
        ..login
    };
    Ok((id_token, Some(renewed)))
}

/// The user's ID token exchanged at the identity provider for an ID-JAG meant for the
/// server's authorization server (`audience`) and resource; with the renewed sign-in,
/// if its ID token had to be renewed first.
pub async fn id_jag(
    setup: &Setup,
    idp: &IdentityProvider,
    signed_in: Option<IdpLogin>,
    audience: &str,
    resource: &str,
    scopes: &[String],
) -> Result<(Secret, Option<IdpLogin>), LoginError> {
    let refused = |error| LoginError::IdentityProvider {
        issuer: idp.issuer.clone(),
        error,
    };
    let (id_token, renewed) = match (&idp.id_token, signed_in) {
        (Some(KeySource::File(path)), _) => (
            read(path, "the identity provider's id_token_file").await?,
            None,
        ),
        (Some(KeySource::Secret(text)), _) => (
            flow::put_in(setup, text)
                .await
                .map_err(|why| unreadable("the identity provider's id_token", why))?,
            None,
        ),
        (None, Some(login)) => fresh_id_token(setup, idp, login).await?,
        (None, None) => {
            return Err(LoginError::NotLoggedIn(format!(
                "sign in at the identity provider {}: run `mcpd ctl login {}`",
                idp.issuer, setup.server
            )));
        }
    };
    let endpoint = match &idp.token_endpoint {
        Some(e) => e.clone(),
        None => {
            discovery::server_metadata(&setup.http, &idp.issuer)
                .await?
                .token_endpoint
        }
    };
    let client = client(setup, idp).await?;
    let scope = scopes.join(" ");
    let mut form = vec![
        ("grant_type", TOKEN_EXCHANGE),
        ("requested_token_type", ID_JAG),
        ("subject_token", id_token.expose()),
        ("subject_token_type", ID_TOKEN),
        ("audience", audience),
        ("resource", resource),
    ];
    if !scope.is_empty() {
        form.push(("scope", &scope));
    }
    let at = At {
        http: &setup.http,
        endpoint: &endpoint,
        issuer: &idp.issuer,
        client: &client,
        dpop: None,
    };
    let answer = token::request(&at, &form).await.map_err(refused)?;
    Ok((answer.access, renewed))
}
