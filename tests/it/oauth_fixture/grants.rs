//! The grants without a user at the token endpoint: `client_credentials` (a confidential
//! client alone) and jwt-bearer (RFC 7523 §2.1: an assertion the test registered or the
//! fixture's IdP issued). Both issue an access token and no refresh token.

use super::authorize::scopes;
use super::options::AuthMethod;
use super::server::{AsShared, AsState, Grant};
use super::stats::RegisteredClient;
use super::token::{Granted, binding};
use super::wire::{OAuthError, param};
use std::time::Instant;

/// The jwt-bearer grant type.
pub(super) const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

type Params = [(String, String)];

/// An access token for the client itself; `scope` must be supported (when the AS lists
/// scopes), `resource` is its audience.
pub(super) fn client_credentials(
    auth: &AsShared,
    st: &mut AsState,
    client: &RegisteredClient,
    params: &Params,
    jkt: Option<String>,
) -> Granted {
    if client.auth_method == AuthMethod::None {
        let why = "client_credentials is for confidential clients";
        return Err(OAuthError::new("unauthorized_client", why));
    }
    let scope = scopes(param(params, "scope"));
    if let Some(supported) = &auth.opts.auth_scopes
        && !scope.iter().all(|s| supported.contains(s))
    {
        let why = "a requested scope is not supported";
        return Err(OAuthError::new("invalid_scope", why));
    }
    let grant = Grant {
        family: st.new_family(),
        client_id: client.id.clone(),
        scope: scope.clone(),
        resource: param(params, "resource").map(str::to_owned),
    };
    let issued = st.issue(&auth.opts, &grant, false, binding(client, jkt));
    Ok((issued, scope))
}

/// An access token for a known assertion (unexpired, and presented by its client when it
/// names one). The scope and resource are the request's, else the assertion's.
pub(super) fn jwt_bearer(
    auth: &AsShared,
    st: &mut AsState,
    client: &RegisteredClient,
    params: &Params,
    jkt: Option<String>,
) -> Granted {
    let invalid = |why: &str| Err(OAuthError::new("invalid_grant", why));
    let Some(presented) = param(params, "assertion") else {
        return Err(OAuthError::new("invalid_request", "assertion is missing"));
    };
    let Some(known) = st.assertions.get(presented).cloned() else {
        return invalid("unknown assertion");
    };
    if known.expires.is_some_and(|at| Instant::now() >= at) {
        return invalid("the assertion has expired");
    }
    if known.client_id.as_ref().is_some_and(|id| *id != client.id) {
        return invalid("the assertion was issued for another client");
    }
    let scope = match param(params, "scope") {
        Some(asked) => scopes(Some(asked)),
        None => known.scope.clone(),
    };
    let resource = param(params, "resource")
        .map(str::to_owned)
        .or(known.resource);
    let grant = Grant {
        family: st.new_family(),
        client_id: client.id.clone(),
        scope: scope.clone(),
        resource,
    };
    let issued = st.issue(&auth.opts, &grant, false, binding(client, jkt));
    Ok((issued, scope))
}
