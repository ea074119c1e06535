//! Client registration, in the 2026-07-28 order.
//!
//! A pre-registered client from the config, a client ID metadata document the
//! authorization server accepts, or dynamic client registration (RFC 7591).

use super::discovery::{ServerMetadata, read_bounded};
use crate::config::Secret;
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

/// How long a registration request may take.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(15);

/// How mcpd authenticates itself at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    /// A public client: `client_id` in the body, no secret.
    None,
    /// `Authorization: Basic` with the client id and secret (RFC 6749 §2.3.1).
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the body.
    ClientSecretPost,
    /// A signed JWT as `client_assertion` (RFC 7523 §2.2): signed with the configured
    /// key for each request, or a ready-made one from a file (workload identity).
    PrivateKeyJwt,
}

impl AuthMethod {
    pub fn parse(s: &str) -> Option<AuthMethod> {
        match s {
            "none" => Some(AuthMethod::None),
            "client_secret_basic" => Some(AuthMethod::ClientSecretBasic),
            "client_secret_post" => Some(AuthMethod::ClientSecretPost),
            "private_key_jwt" => Some(AuthMethod::PrivateKeyJwt),
            _ => None,
        }
    }
}

/// Where a client registration came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    PreRegistered,
    MetadataDocument,
    Dynamic,
}

/// mcpd's identity at one authorization server.
#[derive(Debug, Clone)]
pub struct Client {
    pub client_id: String,
    pub secret: Option<Secret>,
    pub method: AuthMethod,
    pub source: Source,
    /// What `private_key_jwt` signs with or sends; never stored (read from the config).
    pub proof: Option<ClientProof>,
}

/// The client's credential for `private_key_jwt`.
#[derive(Debug, Clone)]
pub enum ClientProof {
    /// Signs a fresh assertion for each request.
    Key(std::sync::Arc<super::jose::SigningKey>),
    /// An assertion made elsewhere (read from `assertion_file` just before).
    Assertion(Secret),
}

/// What the config says about a server's client.
#[derive(Debug, Clone, Default)]
pub struct Configured {
    pub client_id: Option<String>,
    pub client_secret: Option<Secret>,
    pub metadata_url: Option<String>,
}

/// Why mcpd has no client at an authorization server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistrationError {
    #[error(
        "the authorization server {issuer} offers neither dynamic client registration nor client ID metadata documents; register an OAuth client for mcpd there and set [servers.{server}.oauth] client_id (and client_secret_env if it has a secret)"
    )]
    NoWay { issuer: String, server: String },
    #[error("dynamic client registration at {url} failed: {why}")]
    Refused { url: String, why: String },
}

/// The token endpoint method for a client with or without a secret: the one the
/// authorization server lists first among those mcpd can do (RFC 8414's default is
/// `client_secret_basic`), `none` for a public client.
fn method_for(meta: &ServerMetadata, has_secret: bool) -> AuthMethod {
    if !has_secret {
        return AuthMethod::None;
    }
    let listed = &meta.token_endpoint_auth_methods_supported;
    if listed.is_empty() {
        return AuthMethod::ClientSecretBasic;
    }
    listed
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

/// Finds or makes mcpd's client at the server's authorization server.
pub async fn register(
    http: &reqwest::Client,
    server: &str,
    meta: &ServerMetadata,
    configured: &Configured,
    redirect_uri: &str,
) -> Result<Client, RegistrationError> {
    if let Some(id) = &configured.client_id {
        let secret = configured.client_secret.clone();
        return Ok(Client {
            client_id: id.clone(),
            method: method_for(meta, secret.is_some()),
            secret,
            source: Source::PreRegistered,
            proof: None,
        });
    }
    if let Some(url) = &configured.metadata_url
        && meta.client_id_metadata_document_supported
    {
        return Ok(Client {
            client_id: url.clone(),
            secret: None,
            method: AuthMethod::None,
            source: Source::MetadataDocument,
            proof: None,
        });
    }
    let Some(endpoint) = &meta.registration_endpoint else {
        return Err(RegistrationError::NoWay {
            issuer: meta.issuer.clone(),
            server: server.to_owned(),
        });
    };
    dynamic(http, endpoint, meta, redirect_uri).await
}

#[derive(Deserialize)]
struct Registered {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
}

/// RFC 7591 registration of a native public client with the loopback redirect.
async fn dynamic(
    http: &reqwest::Client,
    endpoint: &str,
    meta: &ServerMetadata,
    redirect_uri: &str,
) -> Result<Client, RegistrationError> {
    let refused = |why: String| RegistrationError::Refused {
        url: endpoint.to_owned(),
        why,
    };
    let mut body = json!({
        "client_name": "mcpd",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
        "software_id": "mcpd",
        "software_version": env!("CARGO_PKG_VERSION"),
    });
    if !meta.scopes_supported.is_empty() {
        mcpd_wire::jsonrpc::set_member(&mut body, "scope", json!(meta.scopes_supported.join(" ")));
    }
    let resp = http
        .post(endpoint)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .timeout(REGISTER_TIMEOUT)
        .send()
        .await
        .map_err(|e| refused(e.to_string()))?;
    let status = resp.status();
    let text = read_bounded(resp).await.map_err(refused)?;
    if !status.is_success() {
        let excerpt: String = String::from_utf8_lossy(&text).chars().take(200).collect();
        return Err(refused(format!("HTTP {status}: {excerpt}")));
    }
    let reg: Registered =
        serde_json::from_slice(&text).map_err(|e| refused(format!("unreadable answer: {e}")))?;
    let secret = reg.client_secret.filter(|s| !s.is_empty()).map(Secret::new);
    // The server may have chosen another method than the one asked for (RFC 7591 §3.2.1).
    let method = reg
        .token_endpoint_auth_method
        .as_deref()
        .and_then(AuthMethod::parse)
        .unwrap_or_else(|| method_for(meta, secret.is_some()));
    Ok(Client {
        client_id: reg.client_id,
        secret,
        method,
        source: Source::Dynamic,
        proof: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::{Json, Router, http::StatusCode, routing::post};
    use serde_json::Value;
    use std::sync::{Arc, Mutex};

    fn meta(registration: Option<String>) -> ServerMetadata {
        ServerMetadata {
            issuer: "http://127.0.0.1".into(),
            registration_endpoint: registration,
            scopes_supported: vec!["mcp:basic".into()],
            token_endpoint_auth_methods_supported: vec!["client_secret_post".into()],
            ..ServerMetadata::default()
        }
    }

    #[tokio::test]
    async fn the_configured_client_comes_first_then_metadata_documents_then_dcr() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::new();
        let configured = Configured {
            client_id: Some("pre".into()),
            client_secret: Some(Secret::new("s".into())),
            metadata_url: Some("https://example.com/mcpd.json".into()),
        };
        let c = register(
            &http,
            "x",
            &meta(None),
            &configured,
            "http://127.0.0.1:1/callback",
        )
        .await
        .unwrap();
        assert_eq!(
            (c.client_id.as_str(), c.method, c.source),
            ("pre", AuthMethod::ClientSecretPost, Source::PreRegistered)
        );
        let cimd = Configured {
            client_id: None,
            client_secret: None,
            ..configured
        };
        let mut m = meta(None);
        let e = register(&http, "x", &m, &cimd, "http://127.0.0.1:1/callback")
            .await
            .unwrap_err();
        assert!(e.to_string().contains("[servers.x.oauth] client_id"), "{e}");
        m.client_id_metadata_document_supported = true;
        let c = register(&http, "x", &m, &cimd, "http://127.0.0.1:1/callback")
            .await
            .unwrap();
        assert_eq!(c.source, Source::MetadataDocument);
        assert_eq!(c.client_id, "https://example.com/mcpd.json");

        // Dynamic registration: what is sent, and what the answer decides.
        let seen = Arc::new(Mutex::new(Value::Null));
        let record = seen.clone();
        let app = Router::new().route(
            "/register",
            post(move |Json(body): Json<Value>| {
                let record = record.clone();
                async move {
                    *record.lock().unwrap() = body;
                    (StatusCode::CREATED, Json(serde_json::json!({"client_id": "dyn-1", "token_endpoint_auth_method": "none"})))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/register", listener.local_addr().unwrap());
        mcpd_runtime::tracker::spawn(async move { axum::serve(listener, app).await });
        let c = register(
            &http,
            "x",
            &meta(Some(url)),
            &Configured::default(),
            "http://127.0.0.1:7/callback",
        )
        .await
        .unwrap();
        assert_eq!(
            (c.client_id.as_str(), c.method, c.source),
            ("dyn-1", AuthMethod::None, Source::Dynamic)
        );
        let body = seen.lock().unwrap().clone();
        assert_eq!(body["application_type"], "native");
        assert_eq!(body["redirect_uris"][0], "http://127.0.0.1:7/callback");
        assert_eq!(
            body["grant_types"],
            serde_json::json!(["authorization_code", "refresh_token"])
        );
        assert_eq!(body["token_endpoint_auth_method"], "none");
    }
}
