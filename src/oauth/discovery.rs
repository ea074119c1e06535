//! Discovery: a server's protected resource metadata, then its authorization server's.
//!
//! The first is RFC 9728, the second RFC 8414 or OpenID Connect, each validated before
//! use; the 2025-03-26 fallback applies when a server has neither.

use super::challenge::Bearer;
use super::wellknown;
use reqwest::Url;
use serde::Deserialize;
use std::time::Duration;

/// Longest metadata document read.
const MAX_DOCUMENT: usize = 64 * 1024;
/// How long one metadata request may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(15);

/// Why discovery could not find a usable authorization server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    #[error("{url} may not be used: OAuth endpoints must be https (or http on a loopback address)")]
    Insecure { url: String },
    #[error("fetching {url} failed: {why}")]
    Fetch { url: String, why: String },
    #[error(
        "the server's protected resource metadata names the resource {named:?}, not this server ({server}); mcpd will not authorize for it"
    )]
    ResourceMismatch { named: String, server: String },
    #[error("the server's protected resource metadata names no authorization server")]
    NoAuthorizationServer,
    #[error("no authorization server metadata was found for {issuer} (tried {tried})")]
    NoMetadata { issuer: String, tried: String },
    #[error(
        "the metadata at {url} claims the issuer {claimed:?}, not {issuer:?}; mcpd does not use it"
    )]
    IssuerMismatch {
        url: String,
        issuer: String,
        claimed: String,
    },
    #[error(
        "the authorization server {issuer} does not support PKCE with S256 (code_challenge_methods_supported), which MCP requires"
    )]
    NoPkce { issuer: String },
}

/// What a server says about how to get a token for it (RFC 9728).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ResourceMetadata {
    pub resource: String,
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    #[serde(default)]
    pub scopes_supported: Vec<String>,
}

/// An authorization server's endpoints and abilities (RFC 8414).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct ServerMetadata {
    pub issuer: String,
    /// Empty at a server that offers no browser login (machine grants only).
    #[serde(default)]
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    #[serde(default)]
    pub code_challenge_methods_supported: Vec<String>,
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Vec<String>,
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
    /// RFC 9449 §5.1: the algorithms it takes DPoP proofs in; empty: no DPoP.
    #[serde(default)]
    pub dpop_signing_alg_values_supported: Vec<String>,
}

impl ServerMetadata {
    /// Every endpoint it names, for the https check.
    fn endpoints(&self) -> impl Iterator<Item = &str> {
        let authorize = Some(self.authorization_endpoint.as_str()).filter(|e| !e.is_empty());
        authorize
            .into_iter()
            .chain([self.token_endpoint.as_str()])
            .chain(self.registration_endpoint.as_deref())
            .chain(self.revocation_endpoint.as_deref())
    }
}

/// A server's protected resource metadata: from the URL its challenge names (and no
/// other), else from the well-known URLs in order. None when it has none.
pub async fn resource_metadata(
    client: &reqwest::Client,
    server: &Url,
    challenge: Option<&Bearer>,
) -> Result<Option<ResourceMetadata>, DiscoveryError> {
    let named = challenge.and_then(|c| c.resource_metadata.as_deref());
    let candidates: Vec<(Url, bool)> = match named {
        Some(u) => {
            let url = Url::parse(u).map_err(|e| DiscoveryError::Fetch {
                url: u.to_owned(),
                why: e.to_string(),
            })?;
            vec![(url, false)]
        }
        // The root document may name the origin instead of the server's URL.
        None => wellknown::resource_metadata_candidates(server)
            .into_iter()
            .map(|u| {
                let root = u.path() == "/.well-known/oauth-protected-resource";
                (u, root)
            })
            .collect(),
    };
    for (url, from_root) in candidates {
        let Some(doc) = fetch::<ResourceMetadata>(client, &url).await? else {
            continue;
        };
        if !wellknown::resource_matches(&doc.resource, server, from_root) {
            return Err(DiscoveryError::ResourceMismatch {
                named: doc.resource,
                server: server.to_string(),
            });
        }
        if doc.authorization_servers.is_empty() {
            return Err(DiscoveryError::NoAuthorizationServer);
        }
        return Ok(Some(doc));
    }
    Ok(None)
}

/// An authorization server's metadata, from the candidates its issuer gives, checked:
/// the document must name the same issuer, offer PKCE with S256, and use only https (or
/// loopback) endpoints.
pub async fn server_metadata(
    client: &reqwest::Client,
    issuer: &str,
) -> Result<ServerMetadata, DiscoveryError> {
    let candidates = wellknown::authorization_server_candidates(issuer).ok_or_else(|| {
        DiscoveryError::Fetch {
            url: issuer.to_owned(),
            why: "the issuer is not a URL".into(),
        }
    })?;
    let tried = candidates
        .iter()
        .map(Url::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    for url in &candidates {
        let Some(doc) = fetch::<ServerMetadata>(client, url).await? else {
            continue;
        };
        if doc.issuer != issuer {
            return Err(DiscoveryError::IssuerMismatch {
                url: url.to_string(),
                issuer: issuer.to_owned(),
                claimed: doc.issuer,
            });
        }
        return checked(doc);
    }
    Err(DiscoveryError::NoMetadata {
        issuer: issuer.to_owned(),
        tried,
    })
}

/// The 2025-03-26 way, for a server without protected resource metadata: its origin is
/// the authorization server, described at the origin's RFC 8414 URL, or else served at
/// the default endpoints.
pub async fn origin_server(
    client: &reqwest::Client,
    server: &Url,
) -> Result<ServerMetadata, DiscoveryError> {
    let (url, [authorize, token, register]) = wellknown::origin_defaults(server);
    let issuer = wellknown::origin_of(server);
    if let Some(doc) = fetch::<ServerMetadata>(client, &url).await? {
        if doc.issuer.trim_end_matches('/') != issuer {
            return Err(DiscoveryError::IssuerMismatch {
                url: url.to_string(),
                issuer,
                claimed: doc.issuer,
            });
        }
        // Metadata of that era need not list PKCE methods; S256 is sent regardless.
        return checked(ServerMetadata {
            code_challenge_methods_supported: with_s256(doc.code_challenge_methods_supported),
            ..doc
        });
    }
    let text = |u: Option<Url>| u.map(|u| u.to_string()).unwrap_or_default();
    checked(ServerMetadata {
        issuer,
        authorization_endpoint: text(authorize),
        token_endpoint: text(token),
        registration_endpoint: register.map(|u| u.to_string()),
        code_challenge_methods_supported: vec!["S256".into()],
        ..ServerMetadata::default()
    })
}

fn with_s256(mut methods: Vec<String>) -> Vec<String> {
    if methods.is_empty() {
        methods.push("S256".into());
    }
    methods
}

/// Whether the metadata allows the authorization code grant as mcpd runs it: with PKCE
/// S256. Machine grants need no PKCE.
pub fn require_pkce(doc: &ServerMetadata) -> Result<(), DiscoveryError> {
    if doc
        .code_challenge_methods_supported
        .iter()
        .any(|m| m == "S256")
    {
        Ok(())
    } else {
        Err(DiscoveryError::NoPkce {
            issuer: doc.issuer.clone(),
        })
    }
}

fn checked(doc: ServerMetadata) -> Result<ServerMetadata, DiscoveryError> {
    for e in doc.endpoints() {
        let ok = Url::parse(e).is_ok_and(|u| wellknown::endpoint_allowed(&u));
        if !ok {
            return Err(DiscoveryError::Insecure { url: e.to_owned() });
        }
    }
    Ok(doc)
}

/// GETs a JSON document: Some on a 200 that parses, None on a 4xx (not there), an error
/// otherwise. Only https or loopback URLs are fetched; no credential is ever sent.
async fn fetch<T: serde::de::DeserializeOwned>(
    client: &reqwest::Client,
    url: &Url,
) -> Result<Option<T>, DiscoveryError> {
    if !wellknown::endpoint_allowed(url) {
        return Err(DiscoveryError::Insecure {
            url: url.to_string(),
        });
    }
    let failed = |why: String| DiscoveryError::Fetch {
        url: url.to_string(),
        why,
    };
    let resp = client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .timeout(FETCH_TIMEOUT)
        .send()
        .await
        .map_err(|e| failed(e.to_string()))?;
    let status = resp.status();
    if status.is_client_error() {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(failed(format!("HTTP {status}")));
    }
    let body = read_bounded(resp).await.map_err(failed)?;
    match serde_json::from_slice(&body) {
        Ok(doc) => Ok(Some(doc)),
        // A document that is not metadata is as good as none.
        Err(_) => Ok(None),
    }
}

/// A response body of at most `MAX_DOCUMENT` bytes.
pub async fn read_bounded(mut resp: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_DOCUMENT {
            return Err(format!("the document is larger than {MAX_DOCUMENT} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::{Json, Router, routing::get};
    use serde_json::{Value, json};

    /// A loopback server answering `routes` (path → JSON); returns its base URL.
    async fn serve(routes: Vec<(&'static str, Value)>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let mut app = Router::new();
        for (path, doc) in routes {
            let doc = doc.to_string().replace("BASE", &base);
            let doc: Value = serde_json::from_str(&doc).unwrap();
            app = app.route(path, get(move || async move { Json(doc) }));
        }
        mcpd_runtime::tracker::spawn(async move { axum::serve(listener, app).await });
        base
    }

    fn client() -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::new()
    }

    fn as_doc(issuer: &str) -> Value {
        json!({"issuer": issuer, "authorization_endpoint": "BASE/authorize", "token_endpoint": "BASE/token",
            "code_challenge_methods_supported": ["S256"]})
    }

    #[tokio::test]
    async fn metadata_is_found_where_the_rfcs_say_and_checked() {
        let base = serve(vec![
            (
                "/.well-known/oauth-protected-resource/mcp",
                json!({"resource": "BASE/mcp", "authorization_servers": ["BASE/tenant1"], "scopes_supported": ["a"]}),
            ),
            ("/.well-known/oauth-authorization-server/tenant1", as_doc("BASE/tenant1")),
            ("/.well-known/openid-configuration", as_doc("https://attacker.example.com")),
        ])
        .await;
        let server = Url::parse(&format!("{base}/mcp")).unwrap();
        let prm = resource_metadata(&client(), &server, None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(prm.authorization_servers, [format!("{base}/tenant1")]);
        assert_eq!(prm.scopes_supported, ["a"]);
        let meta = server_metadata(&client(), &prm.authorization_servers[0])
            .await
            .unwrap();
        assert_eq!(meta.token_endpoint, format!("{base}/token"));
        // The root issuer's OIDC document claims another issuer: not used.
        let e = server_metadata(&client(), &base).await.unwrap_err();
        assert!(matches!(e, DiscoveryError::IssuerMismatch { .. }), "{e}");
    }

    #[tokio::test]
    async fn a_document_for_another_resource_is_refused() {
        let base = serve(vec![(
            "/custom.json",
            json!({"resource": "https://evil.example.com/mcp", "authorization_servers": ["BASE"]}),
        )])
        .await;
        let server = Url::parse(&format!("{base}/mcp")).unwrap();
        let challenge = Bearer {
            resource_metadata: Some(format!("{base}/custom.json")),
            ..Bearer::default()
        };
        let e = resource_metadata(&client(), &server, Some(&challenge))
            .await
            .unwrap_err();
        assert!(matches!(e, DiscoveryError::ResourceMismatch { .. }), "{e}");
        // Nothing at the well-known URLs: no metadata, and the origin fallback applies.
        assert_eq!(resource_metadata(&client(), &server, None).await, Ok(None));
        let fallback = origin_server(&client(), &server).await.unwrap();
        assert_eq!(fallback.issuer, base);
        assert_eq!(fallback.token_endpoint, format!("{base}/token"));
    }
}
