//! `private_key_jwt` client authentication (RFC 7523 §2.2, §3): the client's ES256 JWT,
//! checked against the public key it registered — `alg`, `iss` = `sub` = the client, `aud`
//! one of the accepted audiences, `exp` in the future and at most five minutes after `iat`,
//! and a `jti` never seen before.

use super::clients::lookup;
use super::jose::{Jws, now};
use super::options::{AssertionAudience, AuthMethod};
use super::server::{AsShared, AsState};
use super::stats::RegisteredClient;
use super::wire::{OAuthError, param};

/// `client_assertion_type` of a JWT assertion.
pub(super) const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// The longest an assertion may live, from `iat` (or from now, without one).
const MAX_LIFETIME: i64 = 300;

/// How far in the future `iat` may be (clock skew).
const SKEW: i64 = 60;

/// The client whose assertion the request carries, or why not.
pub(super) fn authenticate(
    auth: &AsShared,
    st: &mut AsState,
    params: &[(String, String)],
) -> Result<RegisteredClient, OAuthError> {
    let refuse = |why: &str| Err(OAuthError::invalid_client(why));
    let Some(assertion) = param(params, "client_assertion") else {
        let why = "client_assertion_type without client_assertion";
        return Err(OAuthError::new("invalid_request", why));
    };
    if param(params, "client_assertion_type") != Some(ASSERTION_TYPE) {
        return refuse("client_assertion_type must be the jwt-bearer URN");
    }
    let jws = match Jws::parse(assertion) {
        Ok(jws) => jws,
        Err(why) => return refuse(&format!("client_assertion: {why}")),
    };
    if jws.header_str("alg") != Some("ES256") {
        return refuse("the client assertion's alg must be ES256");
    }
    let (Some(iss), Some(sub)) = (jws.str_claim("iss"), jws.str_claim("sub")) else {
        return refuse("the client assertion lacks iss or sub");
    };
    if iss != sub {
        return refuse("the client assertion's iss and sub differ");
    }
    if param(params, "client_id").is_some_and(|id| id != sub) {
        return refuse("client_id differs from the client assertion's sub");
    }
    let Some(client) = lookup(&auth.opts, st, sub) else {
        return refuse(&format!("unknown client {sub}"));
    };
    if client.auth_method != AuthMethod::PrivateKeyJwt {
        let why = format!(
            "client {sub} authenticates with {}, not private_key_jwt",
            client.auth_method.as_str()
        );
        return refuse(&why);
    }
    let Some(key) = &client.public_key else {
        return refuse("the client registered no public key");
    };
    if !jws.verifies_with(key) {
        return refuse("the client assertion's signature does not verify");
    }
    let accepted = audiences(auth);
    if !jws
        .audiences()
        .iter()
        .any(|a| accepted.iter().any(|x| x == a))
    {
        return refuse(&format!("aud must be one of {accepted:?}"));
    }
    lifetime(&jws).map_err(OAuthError::invalid_client)?;
    let Some(jti) = jws.str_claim("jti").filter(|j| !j.is_empty()) else {
        return refuse("the client assertion lacks a jti");
    };
    if !st.assertion_jtis.insert(jti.to_owned()) {
        return refuse("the client assertion's jti was seen before (a replay)");
    }
    Ok(client)
}

/// The `aud` values the options accept, as URLs.
fn audiences(auth: &AsShared) -> Vec<String> {
    (auth.opts.assertion_audiences.iter())
        .map(|a| match a {
            AssertionAudience::Issuer => auth.issuer.clone(),
            AssertionAudience::TokenEndpoint => auth.endpoint("/token"),
            AssertionAudience::Exact(value) => value.clone(),
        })
        .collect()
}

/// `exp` in the future, at most `MAX_LIFETIME` after `iat`; `iat` not in the future.
fn lifetime(jws: &Jws) -> Result<(), &'static str> {
    let now = now();
    let Some(exp) = jws.time_claim("exp") else {
        return Err("the client assertion lacks exp");
    };
    if exp <= now {
        return Err("the client assertion has expired");
    }
    let start = match jws.time_claim("iat") {
        Some(iat) if iat > now + SKEW => return Err("the client assertion's iat is in the future"),
        Some(iat) => iat,
        None if jws.claims.get("iat").is_some() => return Err("iat is not a NumericDate"),
        None => now,
    };
    if exp - start > MAX_LIFETIME {
        return Err("the client assertion lives longer than five minutes");
    }
    Ok(())
}
