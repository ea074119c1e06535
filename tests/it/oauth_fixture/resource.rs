//! The protected resource: the check in front of the HTTP fixture's MCP endpoints (401 with
//! the Bearer and/or DPoP challenge, DPoP-bound tokens with their proofs, 403
//! `insufficient_scope` for step-up) and its Protected Resource Metadata.

use super::dpop::{self, DpopState, Expect, Refusal};
use super::options::{OAuthOptions, PrmAt};
use super::server::{AsShared, Grant};
use super::stats::{DpopCheck, ResourceOutcome, ResourceRequest};
use super::wire::{access_token, header_value};
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
    /// The resource's DPoP nonce and seen proofs.
    pub dpop: DpopState,
}

impl RsShared {
    pub fn new(opts: OAuthOptions, port: u16, auth: Option<Arc<AsShared>>) -> RsShared {
        let origin = format!("http://127.0.0.1:{port}");
        let issuers = auth.iter().map(|a| a.issuer.clone()).collect();
        let state = RsState {
            authorization_servers: opts.prm_authorization_servers.clone().unwrap_or(issuers),
            trusted: auth.into_iter().collect(),
            requests: Vec::new(),
            dpop: DpopState::new(opts.rs_dpop_nonce),
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
        if self.opts.rs_dpop {
            doc["dpop_signing_alg_values_supported"] = json!(["ES256"]);
        }
        doc
    }

    /// Lets a request through (None) or answers it: 401 without a valid token (or, for a
    /// DPoP-bound one, without a valid proof), 403 when a `tools/call` needs scopes the
    /// token lacks.
    pub fn check(&self, parts: &Parts, body: &[u8]) -> Option<Response> {
        let presented = access_token(&parts.headers);
        let (rpc_method, tool) = rpc_of(body);
        let (verdict, dpop) = self.authenticate(parts, presented.as_ref());
        let (outcome, answer) = match verdict {
            Err(denial) => (
                ResourceOutcome::Unauthorized,
                Some(self.unauthorized(&denial)),
            ),
            Ok(grant) => {
                match self.missing_scopes(tool.as_deref(), rpc_method.as_deref(), &grant) {
                    Some(needed) => {
                        let dpop = presented
                            .as_ref()
                            .is_some_and(|(s, _)| s.eq_ignore_ascii_case("dpop"));
                        let answer = self.forbidden(&needed, dpop);
                        (ResourceOutcome::InsufficientScope(needed), Some(answer))
                    }
                    None => (ResourceOutcome::Admitted, None),
                }
            }
        };
        let error = (answer.as_ref())
            .and_then(|a| a.extensions().get::<ChallengeError>())
            .map(|e| e.0.to_owned());
        let (scheme, token) = presented.unzip();
        self.lock().requests.push(ResourceRequest {
            method: parts.method.to_string(),
            path: parts.uri.path().to_owned(),
            token,
            scheme,
            dpop,
            error,
            rpc_method,
            tool,
            outcome,
        });
        answer
    }

    /// The grant a request's token gives it, or why it gets none; and the check of its DPoP
    /// proof when its token is bound.
    fn authenticate(
        &self,
        parts: &Parts,
        presented: Option<&(String, String)>,
    ) -> (Result<Grant, Denial>, Option<DpopCheck>) {
        let Some((scheme, token)) = presented else {
            return (Err(Denial::NoToken), None);
        };
        let dpop_scheme = scheme.eq_ignore_ascii_case("dpop");
        let Some((grant, bound)) = self.grant(token) else {
            return (Err(Denial::InvalidToken { dpop: dpop_scheme }), None);
        };
        match (dpop_scheme, bound) {
            (false, None) => (Ok(grant), None),
            // A bound token sent as Bearer, or a Bearer token sent as DPoP.
            (false, Some(_)) | (true, None) => (Err(Denial::InvalidToken { dpop: true }), None),
            (true, Some(jkt)) => {
                let (check, verdict) = self.proof(parts, token, &jkt);
                (verdict.map(|()| grant), Some(check))
            }
        }
    }

    /// Checks the DPoP proof of a request carrying `token`, bound to `jkt`.
    fn proof(&self, parts: &Parts, token: &str, jkt: &str) -> (DpopCheck, Result<(), Denial>) {
        let proof = match dpop::proof_header(&parts.headers) {
            Ok(Some(proof)) => proof,
            Ok(None) => return (dpop::missing("no DPoP proof", false), Err(Denial::BadProof)),
            Err(why) => return (dpop::missing(&why, true), Err(Denial::BadProof)),
        };
        let htu = format!("{}{}", self.origin, parts.uri.path());
        let expect = Expect {
            htm: parts.method.as_str(),
            htu: &htu,
            access_token: Some(token),
            jkt: Some(jkt),
        };
        let mut st = self.lock();
        let (check, verdict) = dpop::check(&mut st.dpop, &proof, &expect);
        let verdict = match verdict {
            Ok(_) => Ok(()),
            Err(Refusal::Invalid) => Err(Denial::BadProof),
            Err(Refusal::Nonce) => Err(Denial::Nonce(st.dpop.nonce.clone().unwrap_or_default())),
        };
        (check, verdict)
    }

    /// The grant of `token` at a trusted AS and the DPoP key it is bound to, if valid now
    /// (and for this resource, when the audience is checked).
    fn grant(&self, token: &str) -> Option<(Grant, Option<String>)> {
        let trusted = self.lock().trusted.clone();
        let (grant, bound) = trusted
            .iter()
            .find_map(|a| a.lock().access_binding(token))?;
        let audience_ok =
            !self.opts.check_audience || grant.resource.as_deref() == Some(&self.resource_id());
        audience_ok.then_some((grant, bound))
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

    /// The 401: a `Bearer` challenge, a `DPoP` one (`rs_dpop`, or a DPoP-bound token), or
    /// both; the error goes in the scheme it concerns.
    fn unauthorized(&self, denial: &Denial) -> Response {
        let (error, of_dpop) = match denial {
            Denial::NoToken => (None, false),
            Denial::InvalidToken { dpop } => (Some("invalid_token"), *dpop),
            Denial::BadProof => (Some("invalid_dpop_proof"), true),
            Denial::Nonce(_) => (Some("use_dpop_nonce"), true),
        };
        let rs_dpop = self.opts.rs_dpop;
        let dpop = rs_dpop || of_dpop;
        let bearer = !rs_dpop || self.opts.rs_dpop_bearer_challenge;
        let error_in_dpop = of_dpop || !bearer;
        let mut common = Vec::new();
        if self.opts.challenge_resource_metadata
            && let Some(url) = self.prm_url()
        {
            common.push(format!(r#"resource_metadata="{url}""#));
        }
        if let Some(scope) = &self.opts.challenge_scope {
            common.push(format!(r#"scope="{scope}""#));
        }
        let with_error = |mine: bool| {
            let error = error.filter(|_| mine).map(|e| format!(r#"error="{e}""#));
            error.into_iter().chain(common.iter().cloned())
        };
        let mut challenges = Vec::new();
        if bearer {
            challenges.push(scheme("Bearer", with_error(!error_in_dpop).collect()));
        }
        if dpop {
            let params = with_error(error_in_dpop).chain([r#"algs="ES256""#.to_owned()]);
            let at = if rs_dpop { 0 } else { challenges.len() };
            challenges.insert(at, scheme("DPoP", params.collect()));
        }
        let text = match dpop {
            true => "missing or invalid access token or DPoP proof",
            false => "missing or invalid bearer token",
        };
        let mut resp = respond(StatusCode::UNAUTHORIZED, &challenges, text);
        if let Denial::Nonce(nonce) = denial {
            resp.headers_mut().insert("dpop-nonce", header_value(nonce));
        }
        if let Some(error) = error {
            resp.extensions_mut().insert(ChallengeError(error));
        }
        resp
    }

    /// The 403, in the scheme the token came with.
    fn forbidden(&self, needed: &[String], dpop: bool) -> Response {
        let mut parts = vec![
            r#"error="insufficient_scope""#.to_owned(),
            format!(r#"scope="{}""#, needed.join(" ")),
        ];
        if self.opts.challenge_resource_metadata
            && let Some(url) = self.prm_url()
        {
            parts.push(format!(r#"resource_metadata="{url}""#));
        }
        let name = match dpop {
            true => {
                parts.push(r#"algs="ES256""#.to_owned());
                "DPoP"
            }
            false => "Bearer",
        };
        let challenges = [scheme(name, parts)];
        let mut resp = respond(StatusCode::FORBIDDEN, &challenges, "insufficient scope");
        resp.extensions_mut()
            .insert(ChallengeError("insufficient_scope"));
        resp
    }
}

/// Why a request gets a 401.
enum Denial {
    /// No token (or one under a scheme other than Bearer and DPoP).
    NoToken,
    /// `invalid_token`: unknown, expired, revoked, for another audience, or sent under the
    /// wrong scheme (`dpop`: the error belongs in the DPoP challenge).
    InvalidToken { dpop: bool },
    /// `invalid_dpop_proof`: a bound token without a valid proof.
    BadProof,
    /// `use_dpop_nonce`, with the nonce to use.
    Nonce(String),
}

/// The `error` of a challenge, kept on the response for the request's record.
#[derive(Clone, Copy)]
struct ChallengeError(&'static str);

/// One challenge: `scheme` and `params`, comma-separated.
fn scheme(scheme: &str, params: Vec<String>) -> String {
    match params.is_empty() {
        true => scheme.to_owned(),
        false => format!("{scheme} {}", params.join(", ")),
    }
}

/// A response with one `WWW-Authenticate` header per challenge, in order.
fn respond(status: StatusCode, challenges: &[String], text: &str) -> Response {
    let mut resp = (status, text.to_owned()).into_response();
    for challenge in challenges {
        resp.headers_mut()
            .append(header::WWW_AUTHENTICATE, header_value(challenge));
    }
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
