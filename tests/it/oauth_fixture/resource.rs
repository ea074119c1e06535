//! The protected resource: the check in front of the HTTP fixture's MCP endpoints (401 with
//! the challenge, 403 `insufficient_scope` for step-up) and its Protected Resource Metadata.

use super::options::{OAuthOptions, PrmAt};
use super::server::{AsShared, Grant};
use super::stats::{ResourceOutcome, ResourceRequest};
use super::wire::{bearer_token, header_value};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// What the check, the PRM route and every `OAuthHandle` share.
pub(super) struct RsShared {
    pub opts: OAuthOptions,
    /// `http://127.0.0.1:PORT`.
    pub origin: String,
    /// `http://127.0.0.1:PORT/mcp`.
    pub mcp_url: String,
    inner: Mutex<RsState>,
}

pub(super) struct RsState {
    /// The PRM's `authorization_servers`.
    pub authorization_servers: Vec<String>,
    /// The ASes whose access tokens the resource accepts.
    pub trusted: Vec<Arc<AsShared>>,
    pub requests: Vec<ResourceRequest>,
}

impl RsShared {
    pub fn new(opts: OAuthOptions, port: u16, auth: Option<Arc<AsShared>>) -> RsShared {
        let origin = format!("http://127.0.0.1:{port}");
        let issuers = auth.iter().map(|a| a.issuer.clone()).collect();
        let state = RsState {
            authorization_servers: opts.prm_authorization_servers.clone().unwrap_or(issuers),
            trusted: auth.into_iter().collect(),
            requests: Vec::new(),
        };
        RsShared {
            mcp_url: format!("{origin}/mcp"),
            origin,
            opts,
            inner: Mutex::new(state),
        }
    }

    /// Locks the state; a panic in another holder does not poison the fixture for the test.
    pub fn lock(&self) -> MutexGuard<'_, RsState> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The path of the PRM served at `at`.
    pub fn prm_path(at: &PrmAt) -> String {
        match at {
            PrmAt::PathAware => "/.well-known/oauth-protected-resource/mcp".to_owned(),
            PrmAt::Root => "/.well-known/oauth-protected-resource".to_owned(),
            PrmAt::Custom(path) => path.clone(),
        }
    }

    /// The URL of the first PRM, which the challenge names.
    pub fn prm_url(&self) -> Option<String> {
        let first = self.opts.prm_at.first()?;
        Some(format!("{}{}", self.origin, Self::prm_path(first)))
    }

    /// The PRM's `resource`.
    pub fn resource_id(&self) -> String {
        self.opts
            .prm_resource
            .clone()
            .unwrap_or_else(|| self.mcp_url.clone())
    }

    pub fn prm_document(&self) -> Value {
        let mut doc = json!({
            "resource": self.resource_id(),
            "authorization_servers": self.lock().authorization_servers,
            "bearer_methods_supported": ["header"],
        });
        if let Some(scopes) = &self.opts.prm_scopes {
            doc["scopes_supported"] = json!(scopes);
        }
        doc
    }

    /// Lets a request through (None) or answers it: 401 without a valid token, 403 when a
    /// `tools/call` needs scopes the token lacks.
    pub fn check(&self, parts: &Parts, body: &[u8]) -> Option<Response> {
        let token = bearer_token(&parts.headers);
        let (rpc_method, tool) = rpc_of(body);
        let grant = token.as_deref().and_then(|t| self.grant(t));
        let outcome = match grant {
            None => ResourceOutcome::Unauthorized,
            Some(grant) => {
                match self.missing_scopes(tool.as_deref(), rpc_method.as_deref(), &grant) {
                    Some(needed) => ResourceOutcome::InsufficientScope(needed),
                    None => ResourceOutcome::Admitted,
                }
            }
        };
        let answer = match &outcome {
            ResourceOutcome::Admitted => None,
            ResourceOutcome::Unauthorized => Some(self.unauthorized(token.is_some())),
            ResourceOutcome::InsufficientScope(needed) => Some(self.forbidden(needed)),
        };
        self.lock().requests.push(ResourceRequest {
            method: parts.method.to_string(),
            path: parts.uri.path().to_owned(),
            token,
            rpc_method,
            tool,
            outcome,
        });
        answer
    }

    /// The grant of `token` at a trusted AS, if valid now (and for this resource, when the
    /// audience is checked).
    fn grant(&self, token: &str) -> Option<Grant> {
        let trusted = self.lock().trusted.clone();
        let grant = trusted.iter().find_map(|a| a.lock().access_grant(token))?;
        let audience_ok =
            !self.opts.check_audience || grant.resource.as_deref() == Some(&self.resource_id());
        audience_ok.then_some(grant)
    }

    /// The scopes a `tools/call` of `tool` needs, when the grant lacks any of them.
    fn missing_scopes(
        &self,
        tool: Option<&str>,
        method: Option<&str>,
        grant: &Grant,
    ) -> Option<Vec<String>> {
        if method != Some("tools/call") {
            return None;
        }
        let (_, needed) = self
            .opts
            .step_up
            .iter()
            .find(|(t, _)| Some(t.as_str()) == tool)?;
        let lacking = needed.iter().any(|s| !grant.scope.contains(s));
        lacking.then(|| needed.clone())
    }

    fn unauthorized(&self, had_token: bool) -> Response {
        let mut parts = Vec::new();
        if had_token {
            parts.push(r#"error="invalid_token""#.to_owned());
        }
        if self.opts.challenge_resource_metadata
            && let Some(url) = self.prm_url()
        {
            parts.push(format!(r#"resource_metadata="{url}""#));
        }
        if let Some(scope) = &self.opts.challenge_scope {
            parts.push(format!(r#"scope="{scope}""#));
        }
        challenge(
            StatusCode::UNAUTHORIZED,
            &parts,
            "missing or invalid bearer token",
        )
    }

    fn forbidden(&self, needed: &[String]) -> Response {
        let mut parts = vec![
            r#"error="insufficient_scope""#.to_owned(),
            format!(r#"scope="{}""#, needed.join(" ")),
        ];
        if self.opts.challenge_resource_metadata
            && let Some(url) = self.prm_url()
        {
            parts.push(format!(r#"resource_metadata="{url}""#));
        }
        challenge(StatusCode::FORBIDDEN, &parts, "insufficient scope")
    }
}

/// A response with `WWW-Authenticate: Bearer` and `params`, comma-separated.
fn challenge(status: StatusCode, params: &[String], text: &str) -> Response {
    let value = match params.is_empty() {
        true => "Bearer".to_owned(),
        false => format!("Bearer {}", params.join(", ")),
    };
    let mut resp = (status, text.to_owned()).into_response();
    resp.headers_mut()
        .insert(header::WWW_AUTHENTICATE, header_value(&value));
    resp
}

/// The JSON-RPC method of a body holding one message, and the tool a `tools/call` names.
fn rpc_of(body: &[u8]) -> (Option<String>, Option<String>) {
    let Ok(msg) = serde_json::from_slice::<Value>(body) else {
        return (None, None);
    };
    let method = msg["method"].as_str().map(str::to_owned);
    let tool = (method.as_deref() == Some("tools/call"))
        .then(|| msg["params"]["name"].as_str().map(str::to_owned))
        .flatten();
    (method, tool)
}
