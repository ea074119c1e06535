//! DPoP proofs (RFC 9449 §4.3), as both the AS and the resource check them: one `DPoP`
//! header, a `dpop+jwt` ES256 JWS whose public `jwk` verifies it, `htm`, `htu`, `iat`, `ath`,
//! the server's nonce, and `jti` replay; and each side's nonce and seen `jti`s.

use super::jose::{Jws, ec_point, now, sha256_b64url, thumbprint};
use super::stats::DpopCheck;
use super::wire::fresh;
use axum::http::HeaderMap;
use reqwest::Url;
use std::collections::HashSet;

/// How far `iat` may be from now, either way.
const IAT_WINDOW: i64 = 300;

/// One server's DPoP state: its current nonce (when it demands one) and the `jti`s seen.
#[derive(Default)]
pub(super) struct DpopState {
    pub nonce: Option<String>,
    seen: HashSet<String>,
}

impl DpopState {
    pub fn new(demand_nonce: bool) -> DpopState {
        DpopState {
            nonce: demand_nonce.then(|| fresh("nonce-")),
            seen: HashSet::new(),
        }
    }

    /// A new nonce (demanded from now on); the old one is refused.
    pub fn rotate(&mut self) -> String {
        let nonce = fresh("nonce-");
        self.nonce = Some(nonce.clone());
        nonce
    }
}

/// What a proof must match.
pub(super) struct Expect<'a> {
    pub htm: &'a str,
    /// The URL of the request, compared without query and fragment.
    pub htu: &'a str,
    /// At a resource, the access token sent (`ath` required and matching); at the token
    /// endpoint None (`ath` refused).
    pub access_token: Option<&'a str>,
    /// The thumbprint the proof's key must have (a bound token's).
    pub jkt: Option<&'a str>,
}

/// Why a proof was refused.
pub(super) enum Refusal {
    /// `invalid_dpop_proof`.
    Invalid,
    /// `use_dpop_nonce`: everything else was right.
    Nonce,
}

/// The `DPoP` header's value: None without one, Err with more than one or an unreadable one.
pub(super) fn proof_header(headers: &HeaderMap) -> Result<Option<String>, String> {
    let mut values = headers.get_all("dpop").iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err("more than one DPoP header".into());
    }
    match first.to_str() {
        Ok(text) => Ok(Some(text.to_owned())),
        Err(_) => Err("the DPoP header is not visible ASCII".into()),
    }
}

/// Checks `proof` against `expect`, then the nonce, then replay (remembering its `jti`
/// only when it passed). The record says what was read and why it failed.
pub(super) fn check(
    state: &mut DpopState,
    proof: &str,
    expect: &Expect,
) -> (DpopCheck, Result<String, Refusal>) {
    let mut record = DpopCheck {
        had_proof: true,
        ..DpopCheck::default()
    };
    let outcome = verify(state, proof, expect, &mut record);
    if let Err((_, why)) = &outcome {
        record.error = Some(why.clone());
    }
    (record, outcome.map_err(|(refusal, _)| refusal))
}

/// The record of a request that needed a proof and sent none (or sent several).
pub(super) fn missing(why: &str, had_proof: bool) -> DpopCheck {
    DpopCheck {
        had_proof,
        error: Some(why.to_owned()),
        ..DpopCheck::default()
    }
}

type Verdict = Result<String, (Refusal, String)>;

fn verify(state: &mut DpopState, proof: &str, expect: &Expect, record: &mut DpopCheck) -> Verdict {
    let invalid = |why: String| Err((Refusal::Invalid, why));
    let jws = match Jws::parse(proof) {
        Ok(jws) => jws,
        Err(why) => return invalid(why),
    };
    record.jti = jws.str_claim("jti").map(str::to_owned);
    record.nonce = jws.str_claim("nonce").map(str::to_owned);
    if jws.header_str("typ") != Some("dpop+jwt") {
        return invalid("typ must be dpop+jwt".into());
    }
    if jws.header_str("alg") != Some("ES256") {
        return invalid("alg must be ES256".into());
    }
    let point = match ec_point(&jws.header["jwk"]) {
        Ok(point) => point,
        Err(why) => return invalid(why),
    };
    let jkt = thumbprint(&point);
    record.jkt = Some(jkt.clone());
    if !jws.verifies_with(&point) {
        return invalid("the signature does not verify with the jwk".into());
    }
    let Some(jti) = jws.str_claim("jti").filter(|j| !j.is_empty()) else {
        return invalid("jti is missing".into());
    };
    if jws.str_claim("htm") != Some(expect.htm) {
        return invalid(format!("htm must be {}", expect.htm));
    }
    if !jws
        .str_claim("htu")
        .is_some_and(|htu| same_url(htu, expect.htu))
    {
        return invalid(format!("htu must be {}", expect.htu));
    }
    match jws.time_claim("iat") {
        Some(iat) if (iat - now()).abs() <= IAT_WINDOW => {}
        Some(_) => return invalid("iat is too far from now".into()),
        None => return invalid("iat is missing".into()),
    }
    match (expect.access_token, jws.str_claim("ath")) {
        (None, None) => {}
        (None, Some(_)) => return invalid("ath has no place in a token request".into()),
        (Some(token), Some(ath)) if ath == sha256_b64url(token) => {}
        (Some(_), Some(_)) => return invalid("ath is not the access token's hash".into()),
        (Some(_), None) => return invalid("ath is missing".into()),
    }
    if expect.jkt.is_some_and(|bound| bound != jkt) {
        return invalid("the proof's key is not the one the token is bound to".into());
    }
    if let Some(nonce) = &state.nonce
        && jws.str_claim("nonce") != Some(nonce.as_str())
    {
        let why = "use_dpop_nonce: the proof lacks the current nonce".into();
        return Err((Refusal::Nonce, why));
    }
    if !state.seen.insert(jti.to_owned()) {
        return invalid("jti was seen before (a replayed proof)".into());
    }
    Ok(jkt)
}

/// Whether two URLs are the same once parsed (normalised) and stripped of query and
/// fragment.
fn same_url(a: &str, b: &str) -> bool {
    let bare = |text: &str| {
        Url::parse(text).ok().map(|mut url| {
            url.set_query(None);
            url.set_fragment(None);
            url
        })
    };
    matches!((bare(a), bare(b)), (Some(a), Some(b)) if a == b)
}
