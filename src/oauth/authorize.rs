//! The authorization code grant with PKCE (RFC 7636, S256 only).
//!
//! The authorization URL and the checks on the redirect that comes back (`state`, RFC
//! 9207 `iss`); the code is exchanged in `token.rs`.
//!
//! Written here rather than with the `oauth2` crate: its 5.0 links a second `base64`
//! (0.22, where reqwest and hyper-util use 0.23; `deny.toml` refuses two) and `chrono`,
//! for what is here a URL, two checks and a SHA-256. PKCE is checked against RFC 7636's
//! own example.

use super::discovery::ServerMetadata;
use super::registration::Client;
use crate::config::Secret;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::Url;
use sha2::{Digest, Sha256};

/// An authorization in progress: everything the redirect is checked against and the
/// code exchanged with. There is one per server; its `state` finds it, and it is used once.
#[derive(Debug, Clone)]
pub struct PendingAuthorization {
    pub state: String,
    pub(super) verifier: Secret,
    /// The issuer of the validated metadata the user was sent to.
    pub issuer: String,
    /// Whether the server promised an `iss` parameter in its redirect.
    iss_promised: bool,
    pub redirect_uri: String,
    pub resource: String,
    pub scopes: Vec<String>,
    pub token_endpoint: String,
    pub client: Client,
}

/// Random bytes as base64url without padding.
fn random_text(bytes: usize) -> String {
    let data: Vec<u8> = (0..bytes).map(|_| rand::random::<u8>()).collect();
    URL_SAFE_NO_PAD.encode(data)
}

/// `BASE64URL(SHA256(verifier))`, the S256 challenge.
pub fn challenge_of(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Starts an authorization: the URL the user opens, and what to keep until the redirect.
/// None when the authorization endpoint is not a URL.
pub fn start(
    meta: &ServerMetadata,
    client: Client,
    redirect_uri: &str,
    resource: &str,
    scopes: &[String],
) -> Option<(Url, PendingAuthorization)> {
    let verifier = random_text(32);
    let state = random_text(16);
    let mut url = Url::parse(&meta.authorization_endpoint).ok()?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &client.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("state", &state)
            .append_pair("code_challenge", &challenge_of(&verifier))
            .append_pair("code_challenge_method", "S256");
        // An identity provider's sign-in is for no resource.
        if !resource.is_empty() {
            q.append_pair("resource", resource);
        }
        if !scopes.is_empty() {
            q.append_pair("scope", &scopes.join(" "));
        }
    }
    let pending = PendingAuthorization {
        state,
        verifier: Secret::new(verifier),
        issuer: meta.issuer.clone(),
        iss_promised: meta.authorization_response_iss_parameter_supported,
        redirect_uri: redirect_uri.to_owned(),
        resource: resource.to_owned(),
        scopes: scopes.to_vec(),
        token_endpoint: meta.token_endpoint.clone(),
        client,
    };
    Some((url, pending))
}

/// Why a redirect was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallbackError {
    #[error(
        "the redirect carries no state, or one of no login in progress; start again with `mcpd ctl login`"
    )]
    UnknownState,
    #[error(
        "the redirect lacks the iss parameter its authorization server promised; it may come from another server, so it is not used"
    )]
    IssMissing,
    #[error(
        "the redirect names the issuer {got:?}, not {want:?}; it may come from another server, so it is not used"
    )]
    IssMismatch { got: String, want: String },
    #[error("the authorization server refused: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Denied {
        error: String,
        description: Option<String>,
    },
    #[error("the redirect carries no code")]
    NoCode,
}

/// Checks the URL the browser was redirected to against the pending authorization and
/// returns its code. The `iss` check comes before anything else the redirect says,
/// errors included (RFC 9207 §2.4).
pub fn callback(pending: &PendingAuthorization, redirected: &Url) -> Result<Secret, CallbackError> {
    let param = |name: &str| {
        redirected
            .query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    if param("state").as_deref() != Some(pending.state.as_str()) {
        return Err(CallbackError::UnknownState);
    }
    match param("iss") {
        Some(got) if got != pending.issuer => {
            return Err(CallbackError::IssMismatch {
                got,
                want: pending.issuer.clone(),
            });
        }
        None if pending.iss_promised => return Err(CallbackError::IssMissing),
        _ => {}
    }
    if let Some(error) = param("error") {
        return Err(CallbackError::Denied {
            error,
            description: param("error_description"),
        });
    }
    param("code").map(Secret::new).ok_or(CallbackError::NoCode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oauth::registration::{AuthMethod, Source};

    fn meta(iss: bool) -> ServerMetadata {
        ServerMetadata {
            issuer: "https://auth.example.com".into(),
            authorization_endpoint: "https://auth.example.com/authorize?tenant=1".into(),
            token_endpoint: "https://auth.example.com/token".into(),
            authorization_response_iss_parameter_supported: iss,
            ..ServerMetadata::default()
        }
    }

    fn client() -> Client {
        Client {
            client_id: "id 1".into(),
            secret: None,
            method: AuthMethod::None,
            source: Source::Dynamic,
            proof: None,
        }
    }

    #[test]
    fn the_s256_challenge_is_the_rfc_7636_example() {
        // RFC 7636 appendix B.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        assert_eq!(
            challenge_of(verifier),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn the_authorization_url_carries_pkce_state_resource_and_scopes() {
        let scopes = vec!["mcp:basic".to_owned(), "offline_access".to_owned()];
        let (url, p) = start(
            &meta(false),
            client(),
            "http://127.0.0.1:5/callback",
            "https://mcp.example.com/mcp",
            &scopes,
        )
        .unwrap();
        let q: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
        assert_eq!(q["tenant"], "1", "the endpoint's own query stays");
        assert_eq!(q["response_type"], "code");
        assert_eq!(q["client_id"], "id 1");
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q["code_challenge"], challenge_of(p.verifier.expose()));
        assert_eq!(q["state"], p.state);
        assert_eq!(q["resource"], "https://mcp.example.com/mcp");
        assert_eq!(q["scope"], "mcp:basic offline_access");
        assert!(p.verifier.expose().len() >= 43);
        let (url, _) = start(
            &meta(false),
            client(),
            "http://127.0.0.1:5/callback",
            "r",
            &[],
        )
        .unwrap();
        assert!(
            !url.query_pairs().any(|(k, _)| k == "scope"),
            "no scope when none is known"
        );
    }

    #[test]
    fn redirects_are_checked_for_state_and_issuer_before_anything_else() {
        let pending = |iss| {
            let redirect = "http://127.0.0.1:5/callback";
            start(&meta(iss), client(), redirect, "r", &[]).unwrap().1
        };
        let (promised, plain) = (pending(true), pending(false));
        let at = |p: &PendingAuthorization, q: &str| {
            let u = Url::parse(&format!(
                "http://127.0.0.1:5/callback?state={}&{q}",
                p.state
            ))
            .unwrap();
            callback(p, &u)
        };
        let iss = "iss=https%3A%2F%2Fauth.example.com";
        assert_eq!(
            at(&promised, &format!("code=c&{iss}")).unwrap().expose(),
            "c"
        );
        assert_eq!(
            at(&promised, "code=c").unwrap_err(),
            CallbackError::IssMissing
        );
        assert!(matches!(
            at(&promised, "code=c&iss=https%3A%2F%2Fauth.example.com%2F"),
            Err(CallbackError::IssMismatch { .. })
        ));
        assert!(matches!(
            at(&plain, "code=c&iss=https%3A%2F%2Fevil.example.com"),
            Err(CallbackError::IssMismatch { .. })
        ));
        assert!(
            matches!(
                at(
                    &plain,
                    "error=access_denied&iss=https%3A%2F%2Fevil.example.com"
                ),
                Err(CallbackError::IssMismatch { .. })
            ),
            "a foreign error is not shown"
        );
        assert_eq!(at(&plain, "code=c").unwrap().expose(), "c");
        assert!(matches!(
            at(&plain, "error=access_denied"),
            Err(CallbackError::Denied { .. })
        ));
        assert_eq!(at(&plain, "").unwrap_err(), CallbackError::NoCode);
        let wrong = Url::parse("http://127.0.0.1:5/callback?state=nope&code=c").unwrap();
        assert_eq!(
            callback(&plain, &wrong).unwrap_err(),
            CallbackError::UnknownState
        );
    }
}
