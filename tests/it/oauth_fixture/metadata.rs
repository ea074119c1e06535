//! The routes of both roles: the PRM documents of the resource (RFC 9728), and the AS's
//! metadata (RFC 8414, OIDC discovery) with its endpoints.

use super::grants::JWT_BEARER;
use super::options::{AsMetadataAt, AuthMethod};
use super::resource::RsShared;
use super::server::AsShared;
use super::wire::json_response;
use super::{authorize, register, token};
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The PRM at every path `prm_at` names.
pub(super) fn prm_routes(rs: Arc<RsShared>) -> Router {
    let paths: BTreeSet<String> = rs.opts.prm_at.iter().map(RsShared::prm_path).collect();
    let mut router = Router::new();
    for path in paths {
        router = router.route(&path, get(prm));
    }
    router.with_state(rs)
}

async fn prm(State(rs): State<Arc<RsShared>>) -> Response {
    json_response(StatusCode::OK, &rs.prm_document())
}

/// The AS's metadata where `as_metadata` says, and its endpoints below the issuer's path.
pub(super) fn as_routes(auth: Arc<AsShared>) -> Router {
    let p = auth.opts.issuer_path.clone();
    let mut paths = BTreeSet::new();
    for at in &auth.opts.metadata_at {
        paths.insert(match at {
            AsMetadataAt::Rfc8414 => format!("/.well-known/oauth-authorization-server{p}"),
            AsMetadataAt::OidcInserted => format!("/.well-known/openid-configuration{p}"),
            AsMetadataAt::OidcAppended => format!("{p}/.well-known/openid-configuration"),
        });
    }
    let mut router = Router::new();
    for path in paths {
        router = router.route(&path, get(as_metadata));
    }
    router = router
        .route(&format!("{p}/authorize"), get(authorize::authorize))
        .route(&format!("{p}/token"), post(token::token))
        .route(
            &format!("{p}/jwks"),
            get(|| async { axum::Json(json!({"keys": []})) }),
        );
    if auth.opts.dcr {
        router = router.route(&format!("{p}/register"), post(register::register));
    }
    if auth.opts.revocation {
        router = router.route(&format!("{p}/revoke"), post(token::revoke));
    }
    router.with_state(auth)
}

async fn as_metadata(State(auth): State<Arc<AsShared>>) -> Response {
    json_response(StatusCode::OK, &metadata_document(&auth))
}

/// The AS metadata document; flags that are off are left out rather than `false`.
pub(super) fn metadata_document(auth: &AsShared) -> Value {
    let opts = &auth.opts;
    let methods: Vec<&str> = opts.auth_methods.iter().map(|m| m.as_str()).collect();
    let mut grants = vec!["authorization_code", "refresh_token"];
    if opts.client_credentials {
        grants.push("client_credentials");
    }
    if opts.jwt_bearer {
        grants.push(JWT_BEARER);
    }
    let mut doc = json!({
        "issuer": opts.metadata_issuer.clone().unwrap_or_else(|| auth.issuer.clone()),
        "authorization_endpoint": auth.endpoint("/authorize"),
        "token_endpoint": auth.endpoint("/token"),
        "response_types_supported": ["code"],
        "grant_types_supported": grants,
        "token_endpoint_auth_methods_supported": methods,
    });
    let set = |doc: &mut Value, key: &str, value: Value| doc[key] = value;
    if opts.auth_methods.contains(&AuthMethod::PrivateKeyJwt) {
        set(
            &mut doc,
            "token_endpoint_auth_signing_alg_values_supported",
            json!(["ES256"]),
        );
    }
    if opts.dpop_metadata {
        set(
            &mut doc,
            "dpop_signing_alg_values_supported",
            json!(["ES256"]),
        );
    }
    if opts.pkce_metadata {
        set(
            &mut doc,
            "code_challenge_methods_supported",
            json!(["S256"]),
        );
    }
    if opts.dcr {
        set(
            &mut doc,
            "registration_endpoint",
            json!(auth.endpoint("/register")),
        );
    }
    if opts.revocation {
        set(
            &mut doc,
            "revocation_endpoint",
            json!(auth.endpoint("/revoke")),
        );
        set(
            &mut doc,
            "revocation_endpoint_auth_methods_supported",
            json!(methods),
        );
    }
    if let Some(scopes) = &opts.auth_scopes {
        set(&mut doc, "scopes_supported", json!(scopes));
    }
    if opts.cimd {
        set(
            &mut doc,
            "client_id_metadata_document_supported",
            json!(true),
        );
    }
    if opts.iss_supported {
        set(
            &mut doc,
            "authorization_response_iss_parameter_supported",
            json!(true),
        );
    }
    let oidc = |at: &AsMetadataAt| at != &AsMetadataAt::Rfc8414;
    if opts.metadata_at.iter().any(oidc) {
        // What OIDC discovery requires on top (OpenID Connect Discovery 1.0 §3).
        set(&mut doc, "jwks_uri", json!(auth.endpoint("/jwks")));
        set(&mut doc, "subject_types_supported", json!(["public"]));
        set(
            &mut doc,
            "id_token_signing_alg_values_supported",
            json!(["RS256"]),
        );
    }
    doc
}
