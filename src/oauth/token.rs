//! The token endpoint (RFC 6749 §3.2).
//!
//! The code exchange, refresh, the machine grants' requests and revocation, each with the
//! client's authentication (`client_secret_basic`/`_post`, `private_key_jwt`) and, where
//! the login uses DPoP, a fresh proof (a `use_dpop_nonce` answer is honoured once, RFC
//! 9449 §8).

use super::authorize::PendingAuthorization;
use super::discovery::read_bounded;
use super::dpop::{DPOP, Dpop, Side};
use super::jose;
use super::registration::{AuthMethod, Client, ClientProof};
use crate::config::Secret;
use base64::Engine;
use reqwest::header::HeaderValue;
use reqwest::{Method, Url};
use serde::Deserialize;
use std::time::{Duration, SystemTime};
use url::form_urlencoded;

/// How long one token request may take.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);
pub const CLIENT_ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// Tokens as the token endpoint gave them.
#[derive(Debug, Clone)]
pub struct Tokens {
    pub access: Secret,
    /// When the access token stops working, if the server said.
    pub expires_at: Option<SystemTime>,
    /// For how long it was issued, if the server said.
    pub lifetime: Option<Duration>,
    pub refresh: Option<Secret>,
    /// The scopes granted (the response's `scope`), space-separated.
    pub scope: Option<String>,
    /// The token is bound to the DPoP key (`token_type: DPoP`): it goes with proofs.
    pub dpop_bound: bool,
    /// An OpenID Connect ID token, from an identity provider's sign-in.
    pub id_token: Option<Secret>,
}

/// Why a token request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The code, refresh token or assertion is no longer good.
    #[error("the authorization server refused the grant (invalid_grant{}): log in again", description.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    InvalidGrant { description: Option<String> },
    #[error("the authorization server does not know mcpd's client, or refused its credential (invalid_client{}); its registration may have expired", description.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    InvalidClient { description: Option<String> },
    /// The authorization server wants a DPoP proof with its nonce (RFC 9449 §8); retried
    /// once, so this is seen only when the server asks again.
    #[error("the authorization server kept asking for a DPoP nonce (use_dpop_nonce)")]
    DpopNonce,
    #[error("the token request failed: {0}")]
    Failed(String),
    /// The network or the server is down: worth trying again later.
    #[error("the token endpoint could not be reached: {0}")]
    Unreachable(String),
}

/// Where token requests go, as whom, and with which DPoP key.
pub struct At<'a> {
    pub http: &'a reqwest::Client,
    pub endpoint: &'a str,
    /// The authorization server's issuer: the audience of a client assertion.
    pub issuer: &'a str,
    pub client: &'a Client,
    pub dpop: Option<&'a Dpop>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    id_token: Option<String>,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

/// Exchanges the code of a checked redirect for tokens, once (a DPoP nonce asked for
/// before the code was looked at is the one exception, RFC 9449 §8).
pub async fn exchange(
    at: &At<'_>,
    pending: &PendingAuthorization,
    code: &Secret,
) -> Result<Tokens, TokenError> {
    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("code", code.expose()),
        ("redirect_uri", pending.redirect_uri.as_str()),
        ("code_verifier", pending.verifier.expose()),
    ];
    // An identity provider's sign-in is for no resource.
    if !pending.resource.is_empty() {
        form.push(("resource", pending.resource.as_str()));
    }
    request(at, &form).await
}

/// Gets a new access token with a refresh token, for the same resource and the scopes
/// granted before.
pub async fn refresh(
    at: &At<'_>,
    refresh_token: &Secret,
    resource: &str,
    scope: Option<&str>,
) -> Result<Tokens, TokenError> {
    let mut form = vec![
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token.expose()),
        ("resource", resource),
    ];
    if let Some(s) = scope.filter(|s| !s.is_empty()) {
        form.push(("scope", s));
    }
    request(at, &form).await
}

/// Revokes a token (RFC 7009). The server answers 200 even for a token it does not
/// know, so only a failure to reach it or another status is an error.
pub async fn revoke(at: &At<'_>, token: &Secret, hint: &str) -> Result<(), TokenError> {
    let form = [("token", token.expose()), ("token_type_hint", hint)];
    let (req, body) = form_request(at, &form)?;
    let resp = req
        .body(body)
        .send()
        .await
        .map_err(|e| TokenError::Unreachable(e.to_string()))?;
    if resp.status().is_success() {
        Ok(())
    } else {
        Err(TokenError::Failed(format!("HTTP {}", resp.status())))
    }
}

/// A token request with `form` (a grant's parameters): sent with a DPoP proof when the
/// login uses DPoP, and once more if the server asks for a nonce.
pub async fn request(at: &At<'_>, form: &[(&str, &str)]) -> Result<Tokens, TokenError> {
    let mut nonce_retry = at.dpop.is_some();
    loop {
        let (mut req, body) = form_request(at, form)?;
        let mut proved = false;
        if let Some(d) = at.dpop {
            let url = Url::parse(at.endpoint).map_err(|e| TokenError::Failed(e.to_string()))?;
            if let Some(proof) = d.proof(Side::Token, &Method::POST, &url, None) {
                req = req.header(DPOP, proof);
                proved = true;
            }
        }
        let resp = req
            .body(body)
            .send()
            .await
            .map_err(|e| TokenError::Unreachable(e.to_string()))?;
        let status = resp.status();
        let nonce_given = at.dpop.is_some_and(|d| d.saw(Side::Token, resp.headers()));
        let text = read_bounded(resp).await.map_err(TokenError::Failed)?;
        let answer = answer(status, &text, proved);
        if matches!(answer, Err(TokenError::DpopNonce)) && nonce_given && nonce_retry {
            nonce_retry = false;
            continue;
        }
        return answer;
    }
}

/// A form POST to an endpoint of the authorization server, with the client's
/// authentication (RFC 6749 §2.3.1, RFC 7523 §2.2).
fn form_request(
    at: &At<'_>,
    form: &[(&str, &str)],
) -> Result<(reqwest::RequestBuilder, String), TokenError> {
    let client = at.client;
    // The form is finished before any await: its serializer is not `Send`.
    let mut basic = None;
    let body = {
        let mut body = form_urlencoded::Serializer::new(String::new());
        body.extend_pairs(form.iter().copied());
        match (client.method, &client.secret, &client.proof) {
            (AuthMethod::ClientSecretBasic, Some(secret), _) => {
                let enc =
                    |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
                let pair = format!("{}:{}", enc(&client.client_id), enc(secret.expose()));
                let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
                let mut value = HeaderValue::from_str(&format!("Basic {encoded}"))
                    .map_err(|e| TokenError::Failed(e.to_string()))?;
                value.set_sensitive(true);
                basic = Some(value);
            }
            (AuthMethod::ClientSecretPost, Some(secret), _) => {
                body.append_pair("client_id", &client.client_id);
                body.append_pair("client_secret", secret.expose());
            }
            (AuthMethod::PrivateKeyJwt, _, Some(proof)) => {
                let assertion = match proof {
                    ClientProof::Key(key) => {
                        jose::client_assertion(key, &client.client_id, at.issuer).map_err(|e| {
                            TokenError::Failed(format!("cannot sign the client assertion: {e}"))
                        })?
                    }
                    ClientProof::Assertion(a) => a.expose().to_owned(),
                };
                body.append_pair("client_id", &client.client_id);
                body.append_pair("client_assertion_type", CLIENT_ASSERTION_TYPE);
                body.append_pair("client_assertion", &assertion);
            }
            _ if client.client_id.is_empty() => {}
            _ => {
                body.append_pair("client_id", &client.client_id);
            }
        }
        body.finish()
    };
    let mut req = at
        .http
        .post(at.endpoint)
        .header(reqwest::header::ACCEPT, "application/json")
        .timeout(TOKEN_TIMEOUT);
    if let Some(value) = basic {
        req = req.header(reqwest::header::AUTHORIZATION, value);
    }
    let req = req.header(
        reqwest::header::CONTENT_TYPE,
        "application/x-www-form-urlencoded",
    );
    Ok((req, body))
}

/// Tokens from a token endpoint's answer, or why there are none. `proved`: the request
/// carried a DPoP proof (a `DPoP` token type is only honoured then).
fn answer(status: reqwest::StatusCode, text: &[u8], proved: bool) -> Result<Tokens, TokenError> {
    if status.is_success() {
        let answer: TokenAnswer = serde_json::from_slice(text)
            .map_err(|e| TokenError::Failed(format!("unreadable token answer: {e}")))?;
        let dpop_bound = answer
            .token_type
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("dpop"));
        if dpop_bound && !proved {
            return Err(TokenError::Failed(
                "the server issued a DPoP token to a request without a proof".into(),
            ));
        }
        let lifetime = answer.expires_in.map(Duration::from_secs);
        return Ok(Tokens {
            access: Secret::new(answer.access_token),
            expires_at: lifetime.and_then(|l| SystemTime::now().checked_add(l)),
            lifetime,
            refresh: answer.refresh_token.map(Secret::new),
            scope: answer.scope,
            dpop_bound,
            id_token: answer.id_token.map(Secret::new),
        });
    }
    if status.is_server_error() {
        return Err(TokenError::Unreachable(format!("HTTP {status}")));
    }
    match serde_json::from_slice::<ErrorAnswer>(text) {
        Ok(e) if e.error == "invalid_grant" => Err(TokenError::InvalidGrant {
            description: e.error_description,
        }),
        Ok(e) if e.error == "invalid_client" => Err(TokenError::InvalidClient {
            description: e.error_description,
        }),
        Ok(e) if e.error == "use_dpop_nonce" => Err(TokenError::DpopNonce),
        Ok(e) => Err(TokenError::Failed(format!(
            "{}{}",
            e.error,
            e.error_description
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ))),
        Err(_) => Err(TokenError::Failed(format!("HTTP {status}"))),
    }
}
