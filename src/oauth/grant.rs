//! The machine grants, run by mcpd alone (no person, no browser).
//!
//! Client credentials (RFC 6749 §4.4) and the JWT bearer grant (RFC 7523 §2.1) with an
//! assertion from a file (workload identity) or an ID-JAG from the enterprise's identity
//! provider (token exchange, RFC 8693; MCP's enterprise-managed authorization).

use super::challenge::Bearer;
use super::discovery::ServerMetadata;
use super::dpop::{self, Dpop};
use super::flow::{self, Found, LoginError, Setup, read, unreadable};
use super::jose::SigningKey;
use super::registration::{AuthMethod, Client, ClientProof, Source};
use super::store::IdpLogin;
use super::token::{self, At, Tokens};
use crate::config::{ClientAuth, Grant, KeySource, Secret};
use std::path::Path;
use std::sync::Arc;

pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// What a machine grant got, with what a login keeps.
pub struct Granted {
    pub tokens: Tokens,
    pub metadata: ServerMetadata,
    pub resource: String,
    pub client: Client,
    pub scopes: Vec<String>,
    /// The user's sign-in at the identity provider, when its ID token was renewed.
    pub signed_in: Option<IdpLogin>,
}

/// Runs the configured machine grant once: discovery (unless `known` from an earlier
/// grant), the client's credential read now, the ID-JAG fetched first for an
/// enterprise-managed server; DPoP proofs when the setting and metadata call for them.
pub async fn run(
    setup: Arc<Setup>,
    challenge: Option<Bearer>,
    known: Option<(ServerMetadata, String)>,
    dpop: Arc<Dpop>,
    signed_in: Option<IdpLogin>,
) -> Result<Granted, LoginError> {
    let (metadata, resource) = match known {
        Some(k) => k,
        None => {
            let Found {
                metadata, resource, ..
            } = flow::discover(&setup, challenge.as_ref()).await?;
            (metadata, resource)
        }
    };
    let mut scopes: Vec<String> = challenge.as_ref().map(Bearer::scopes).unwrap_or_default();
    for s in &setup.oauth.scopes {
        if !scopes.contains(s) {
            scopes.push(s.clone());
        }
    }
    let client = client(&setup, &metadata).await?;
    let mut renewed = None;
    let assertion = match (setup.oauth.grant, &setup.oauth.identity_provider) {
        (Grant::JwtBearer, Some(idp)) => {
            let (jag, r) =
                super::idp::id_jag(&setup, idp, signed_in, &metadata.issuer, &resource, &scopes)
                    .await?;
            renewed = r;
            Some(jag)
        }
        (Grant::JwtBearer, None) => match &setup.oauth.assertion_file {
            Some(path) => Some(assertion(path).await?),
            None => None,
        },
        _ => None,
    };
    let scope = scopes.join(" ");
    let mut form: Vec<(&str, &str)> = match &assertion {
        Some(a) => vec![("grant_type", JWT_BEARER), ("assertion", a.expose())],
        None => vec![("grant_type", "client_credentials")],
    };
    if !scope.is_empty() {
        form.push(("scope", &scope));
    }
    form.push(("resource", &resource));
    let proofs = dpop::wanted(
        setup.oauth.dpop,
        &metadata.dpop_signing_alg_values_supported,
    );
    let at = At {
        http: &setup.http,
        endpoint: &metadata.token_endpoint,
        issuer: &metadata.issuer,
        client: &client,
        dpop: proofs.then_some(&*dpop),
    };
    let tokens = token::request(&at, &form).await?;
    Ok(Granted {
        tokens,
        metadata,
        resource,
        client,
        scopes,
        signed_in: renewed,
    })
}

/// The configured client with its credential read now: the method the setting names,
/// else the one the credential allows (`private_key_jwt` with a key or a client
/// assertion, the metadata's first secret method with a secret, none without).
async fn client(setup: &Setup, meta: &ServerMetadata) -> Result<Client, LoginError> {
    let cfg = &setup.oauth;
    let secret = flow::client_secret(setup).await?;
    let proof = match (&cfg.private_key, cfg.grant, &cfg.assertion_file) {
        (Some(source), _, _) => Some(ClientProof::Key(Arc::new(key(setup, source).await?))),
        (None, Grant::ClientCredentials, Some(path)) => {
            Some(ClientProof::Assertion(assertion(path).await?))
        }
        _ => None,
    };
    let method = match cfg.client_auth {
        Some(ClientAuth::None) => AuthMethod::None,
        Some(ClientAuth::ClientSecretBasic) => AuthMethod::ClientSecretBasic,
        Some(ClientAuth::ClientSecretPost) => AuthMethod::ClientSecretPost,
        Some(ClientAuth::PrivateKeyJwt) => AuthMethod::PrivateKeyJwt,
        None if proof.is_some() => AuthMethod::PrivateKeyJwt,
        None if secret.is_some() => secret_method(meta),
        None => AuthMethod::None,
    };
    Ok(Client {
        client_id: cfg.client_id.clone().unwrap_or_default(),
        secret,
        method,
        source: Source::PreRegistered,
        proof,
    })
}

/// The first secret method the authorization server lists (RFC 8414's default,
/// `client_secret_basic`, when it lists none).
fn secret_method(meta: &ServerMetadata) -> AuthMethod {
    meta.token_endpoint_auth_methods_supported
        .iter()
        .filter_map(|m| AuthMethod::parse(m))
        .find(|m| {
            matches!(
                m,
                AuthMethod::ClientSecretBasic | AuthMethod::ClientSecretPost
            )
        })
        .unwrap_or(AuthMethod::ClientSecretBasic)
}

/// The client's private key, from its file or secret.
async fn key(setup: &Setup, source: &KeySource) -> Result<SigningKey, LoginError> {
    let (what, pem) = match source {
        KeySource::File(path) => (
            "the private_key_file",
            read(path, "the private_key_file").await?,
        ),
        KeySource::Secret(text) => (
            "the private_key",
            flow::put_in(setup, text)
                .await
                .map_err(|why| unreadable("the private_key", why))?,
        ),
    };
    SigningKey::from_pem(pem.expose()).map_err(|e| unreadable(what, e.to_string()))
}

/// The JWT in `assertion_file`, read now; one that says it has expired is not sent
/// (what writes the file has stopped renewing it).
async fn assertion(path: &Path) -> Result<Secret, LoginError> {
    let jwt = read(path, "the assertion_file").await?;
    if let Some(exp) = super::jose::unverified_exp(jwt.expose()) {
        let now = super::store::epoch_secs(std::time::SystemTime::now());
        if exp <= now {
            return Err(unreadable(
                &format!("the assertion_file {}", path.display()),
                format!(
                    "the JWT in it expired {} ago; whatever writes the file has stopped renewing it",
                    humantime::format_duration(std::time::Duration::from_secs(now - exp))
                ),
            ));
        }
    }
    Ok(jwt)
}
