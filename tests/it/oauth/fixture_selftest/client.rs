//! A minimal OAuth client and MCP client for the OAuth fixture's self-tests, written with
//! plain reqwest and the `url` crate's form encoding (not the fixture's own code).

use crate::oauth::fixture::OAuthFixture;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::{StatusCode, Url};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

/// Every await in these tests is bounded by this.
pub(super) const BOUND: Duration = Duration::from_secs(2);

/// The loopback redirect URI the tests register.
pub(super) const REDIRECT: &str = "http://127.0.0.1:53682/callback";

pub(super) async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(BOUND, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {BOUND:?}: {what}"),
    }
}

/// A client that never follows redirects: the authorization redirect is read, not followed.
/// Built once (building one loads the system's root certificates, which is slow); it keeps
/// no idle connections, so none outlives the test runtime that opened it.
pub(super) fn client() -> reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    let build = || {
        let _ = crate::support::http_client(); // installs the TLS provider reqwest needs
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(0)
            .build()
            .unwrap()
    };
    CLIENT.get_or_init(build).clone()
}

pub(super) async fn send(what: &str, req: reqwest::RequestBuilder) -> reqwest::Response {
    bounded(what, req.send()).await.expect("request sent")
}

pub(super) async fn json_of(resp: reqwest::Response) -> (StatusCode, Value) {
    let status = resp.status();
    let text = bounded("body", resp.text()).await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

pub(super) async fn get_json(url: &str) -> (StatusCode, Value) {
    json_of(send("GET", client().get(url)).await).await
}

/// A form body, encoded by the `url` crate (not by the fixture's own decoder).
pub(super) fn form<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)]) -> String {
    let mut url = Url::parse("http://form.invalid/").unwrap();
    url.query_pairs_mut().extend_pairs(pairs);
    url.query().unwrap_or_default().to_owned()
}

/// `base` with `edits` applied: a new value for a parameter (added when absent), or None to
/// leave it out.
pub(super) fn edited(
    base: &[(&str, &str)],
    edits: &[(&str, Option<&str>)],
) -> Vec<(String, String)> {
    let mut params: Vec<(String, String)> = (base.iter())
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    for (name, value) in edits {
        params.retain(|(k, _)| k != name);
        params.extend(value.map(|v| ((*name).to_owned(), v.to_owned())));
    }
    params
}

pub(super) fn form_post<K: AsRef<str>, V: AsRef<str>>(
    url: &str,
    pairs: &[(K, V)],
) -> reqwest::RequestBuilder {
    client()
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(pairs))
}

/// A POST to an endpoint named in the AS metadata, as a public client would send it.
pub(super) async fn post_to<K: AsRef<str>, V: AsRef<str>>(
    meta: &Value,
    endpoint: &str,
    pairs: &[(K, V)],
) -> (StatusCode, Value) {
    let url = meta[endpoint].as_str().unwrap();
    json_of(send(endpoint, form_post(url, pairs)).await).await
}

/// The parameters of a `WWW-Authenticate: Bearer …` challenge (values without commas).
pub(super) fn challenge(resp: &reqwest::Response) -> HashMap<String, String> {
    let value = resp.headers()["www-authenticate"].to_str().unwrap();
    let rest = value.strip_prefix("Bearer").expect("a Bearer challenge");
    (rest.trim().split(", ").filter(|p| !p.is_empty()))
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap();
            (k.to_owned(), v.trim_matches('"').to_owned())
        })
        .collect()
}

pub(super) const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// A Streamable HTTP POST of `msg` to the MCP endpoint, with a bearer token if given.
pub(super) async fn mcp(
    url: &str,
    token: Option<&str>,
    session: Option<&str>,
    msg: &Value,
) -> reqwest::Response {
    let mut req = client()
        .post(url)
        .header("accept", ACCEPT_BOTH)
        .header("content-type", "application/json")
        .body(msg.to_string());
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    if let Some(session) = session {
        req = req.header("mcp-session-id", session);
    }
    send("MCP POST", req).await
}

pub(super) fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "oauth-selftest", "version": "1"}}})
}

pub(super) fn tools_list() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
}

pub(super) fn call(tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}})
}

/// Initializes an MCP session with `token` and returns its id.
pub(super) async fn open_session(url: &str, token: &str) -> String {
    let resp = mcp(url, Some(token), None, &initialize()).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let session = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = mcp(url, Some(token), Some(&session), &initialized).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    session
}

/// The AS metadata at the root RFC 8414 URL of an issuer without a path.
pub(super) async fn as_metadata(issuer: &str) -> Value {
    let url = format!("{issuer}/.well-known/oauth-authorization-server");
    let (status, meta) = get_json(&url).await;
    assert_eq!(status, StatusCode::OK, "{meta}");
    meta
}

/// Registers a public loopback client by DCR and returns the registration response.
pub(super) async fn register(meta: &Value) -> Value {
    let body = json!({
        "client_name": "selftest", "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        "token_endpoint_auth_method": "none", "application_type": "native"});
    let url = meta["registration_endpoint"].as_str().unwrap();
    let (status, reg) = json_of(send("DCR", client().post(url).json_body(&body)).await).await;
    assert_eq!(status, StatusCode::CREATED, "{reg}");
    reg
}

pub(super) trait JsonBody {
    fn json_body(self, body: &Value) -> Self;
}

impl JsonBody for reqwest::RequestBuilder {
    fn json_body(self, body: &Value) -> Self {
        self.header("content-type", "application/json")
            .body(body.to_string())
    }
}

/// A fresh PKCE pair: (verifier, S256 challenge).
pub(super) fn pkce() -> (String, String) {
    let verifier = format!(
        "{:032x}{:032x}",
        rand::random::<u128>(),
        rand::random::<u128>()
    );
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

/// GETs the authorization endpoint with `params`, redirects not followed.
pub(super) async fn authorize<K: AsRef<str>, V: AsRef<str>>(
    meta: &Value,
    params: &[(K, V)],
) -> reqwest::Response {
    let mut url = Url::parse(meta["authorization_endpoint"].as_str().unwrap()).unwrap();
    url.query_pairs_mut().extend_pairs(params);
    send("authorize", client().get(url)).await
}

/// The query of a 302's `Location`.
pub(super) fn callback(resp: &reqwest::Response) -> HashMap<String, String> {
    assert_eq!(resp.status(), StatusCode::FOUND);
    let location = resp.headers()["location"].to_str().unwrap();
    let url = Url::parse(location).unwrap();
    assert!(location.starts_with(REDIRECT), "{location}");
    url.query_pairs().into_owned().collect()
}

/// An authorization code and the verifier that redeems it.
pub(super) struct Code {
    pub(super) code: String,
    pub(super) verifier: String,
    pub(super) callback: HashMap<String, String>,
}

/// Runs an authorization request for `client_id` and reads the code from the redirect.
pub(super) async fn code_for(
    meta: &Value,
    client_id: &str,
    scope: Option<&str>,
    resource: &str,
) -> Code {
    let (verifier, challenge) = pkce();
    let mut params = vec![
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", REDIRECT),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("state", "state-1"),
        ("resource", resource),
    ];
    params.extend(scope.map(|s| ("scope", s)));
    let callback = callback(&authorize(meta, &params).await);
    assert_eq!(callback["state"], "state-1");
    Code {
        code: callback["code"].clone(),
        verifier,
        callback,
    }
}

pub(super) async fn redeem(
    meta: &Value,
    client_id: &str,
    code: &Code,
    resource: &str,
) -> (StatusCode, Value) {
    let pairs = [
        ("grant_type", "authorization_code"),
        ("code", code.code.as_str()),
        ("redirect_uri", REDIRECT),
        ("code_verifier", code.verifier.as_str()),
        ("client_id", client_id),
        ("resource", resource),
    ];
    post_to(meta, "token_endpoint", &pairs).await
}

pub(super) async fn refresh(
    meta: &Value,
    client_id: &str,
    refresh_token: &str,
) -> (StatusCode, Value) {
    let pairs = [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token),
        ("client_id", client_id),
    ];
    post_to(meta, "token_endpoint", &pairs).await
}

/// What one login at a fixture gave.
pub(super) struct Login {
    pub(super) meta: Value,
    pub(super) client_id: String,
    pub(super) access: String,
    pub(super) refresh: Option<String>,
}

/// Metadata, DCR, authorization and code exchange at `fx`'s AS, for `fx`'s resource.
pub(super) async fn login(fx: &OAuthFixture, scope: Option<&str>) -> Login {
    let meta = as_metadata(&fx.issuer()).await;
    let client_id = register(&meta).await["client_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let code = code_for(&meta, &client_id, scope, &fx.mcp_url()).await;
    let (status, tokens) = redeem(&meta, &client_id, &code, &fx.mcp_url()).await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    Login {
        access: tokens["access_token"].as_str().unwrap().to_owned(),
        refresh: tokens["refresh_token"].as_str().map(str::to_owned),
        meta,
        client_id,
    }
}

pub(super) fn error_code(body: &Value) -> &str {
    body["error"].as_str().unwrap_or_default()
}
