//! The small JOSE layer OAuth needs.
//!
//! Compact JWS signing (ES256, RS256), public JWKs and their RFC 7638 thumbprints, DPoP
//! proofs (RFC 9449) and `private_key_jwt` client assertions (RFC 7523).
//!
//! Written by hand on `ring` rather than taken from a JOSE crate: jsonwebtoken 12 needs
//! either aws-lc (a C build) or some forty RustCrypto crates, `rsa` among them; jose-jwk
//! and jose-jws are no longer maintained; josekit needs OpenSSL. `ring` is already linked
//! through rustls, so this adds no crate, and what is needed is small: sign a compact
//! JWS, write a public JWK, hash it. Nothing here verifies a token: mcpd only signs.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

mod key;
mod pem;
#[cfg(test)]
mod tests;

pub use key::SigningKey;

/// How long a client assertion is valid, in seconds: it is made for one request.
const ASSERTION_LIFETIME: u64 = 60;

/// Random bytes in a `jti`: 128 bits, well over the 96 RFC 9449 §4.2 asks for.
const JTI_BYTES: usize = 16;

/// Why a key could not be loaded or a token not made.
#[derive(Debug, thiserror::Error)]
pub enum JoseError {
    #[error("the system's random number generator failed")]
    Random,
    #[error("the system clock is before 1970")]
    Clock,
    #[error(
        "no private key in the PEM text (expected `-----BEGIN PRIVATE KEY-----`, `EC PRIVATE KEY` or `RSA PRIVATE KEY`)"
    )]
    NoPrivateKey,
    #[error("the PEM block `{0}` has no matching `-----END {0}-----` line")]
    UnterminatedPem(String),
    #[error("the PEM block `{0}` is not valid base64")]
    PemBase64(String),
    #[error(
        "encrypted private keys are not supported: decrypt it with `openssl pkcs8 -topk8 -nocrypt -in KEY.pem -out PLAIN.pem`"
    )]
    Encrypted,
    #[error("the key is not valid DER: {0}")]
    Der(&'static str),
    #[error("only EC P-256 (ES256) and RSA (RS256) keys are supported; this key is neither")]
    UnsupportedKeyType,
    #[error("only the P-256 curve is supported for EC keys (ES256); this key is on another curve")]
    UnsupportedCurve,
    #[error(
        "the EC key does not include its public key, which is needed to use it: convert it with `openssl pkcs8 -topk8 -nocrypt -in KEY.pem -out KEY8.pem`"
    )]
    NoPublicKey,
    #[error("the RSA key has {0} bits; at least 2048 are needed")]
    RsaTooSmall(usize),
    #[error("the key was refused: {0}")]
    Rejected(String),
    #[error("signing failed")]
    Sign,
    #[error("could not write the token's JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// A JWS signature algorithm mcpd signs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    /// ECDSA on P-256 with SHA-256 (RFC 7518 §3.4).
    Es256,
    /// RSASSA-PKCS1-v1_5 with SHA-256 (RFC 7518 §3.3).
    Rs256,
}

impl Alg {
    /// The name in a JWS header and in server metadata (`dpop_signing_alg_values_supported`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Alg::Es256 => "ES256",
            Alg::Rs256 => "RS256",
        }
    }
}

fn b64(data: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(data)
}

/// The RFC 7638 thumbprint of a public JWK: base64url of the SHA-256 of its required
/// members (by `kty`), in lexicographic order, as JSON without whitespace. None when the
/// JWK lacks one of them, has a non-string one, or is of an unknown `kty`.
pub fn thumbprint_of(jwk: &Value) -> Option<String> {
    let kty = jwk.get("kty")?.as_str()?;
    let required: &[&str] = match kty {
        "EC" => &["crv", "kty", "x", "y"],
        "RSA" => &["e", "kty", "n"],
        "OKP" => &["crv", "kty", "x"],
        "oct" => &["k", "kty"],
        _ => return None,
    };
    let mut members = BTreeMap::new();
    for name in required {
        members.insert(*name, jwk.get(*name)?.as_str()?);
    }
    let canonical = serde_json::to_string(&members).ok()?;
    Some(b64(&Sha256::digest(canonical.as_bytes())))
}

/// `base64url(SHA-256(access_token))`: a DPoP proof's `ath` claim (RFC 9449 §4.2).
pub fn ath(access_token: &str) -> String {
    b64(&Sha256::digest(access_token.as_bytes()))
}

fn now() -> Result<u64, JoseError> {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .map_err(|_| JoseError::Clock)
}

/// A fresh `jti`: 128 random bits, base64url.
fn jti() -> Result<String, JoseError> {
    let mut bytes = [0u8; JTI_BYTES];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .map_err(|_| JoseError::Random)?;
    Ok(b64(&bytes))
}

/// A DPoP proof for one request (RFC 9449 §4.2): the method, the URL without its query
/// and fragment, the hash of the access token it goes with (none on a token request), and
/// the server's latest `DPoP-Nonce` if it sent one.
pub fn dpop_proof(
    key: &SigningKey,
    htm: &str,
    htu: &reqwest::Url,
    access_token: Option<&str>,
    nonce: Option<&str>,
) -> Result<String, JoseError> {
    let mut target = htu.clone();
    target.set_query(None);
    target.set_fragment(None);
    let mut claims = Map::new();
    claims.insert("jti".into(), jti()?.into());
    claims.insert("htm".into(), htm.into());
    claims.insert("htu".into(), target.as_str().into());
    claims.insert("iat".into(), now()?.into());
    if let Some(token) = access_token {
        claims.insert("ath".into(), ath(token).into());
    }
    if let Some(nonce) = nonce {
        claims.insert("nonce".into(), nonce.into());
    }
    let mut header = Map::new();
    header.insert("typ".into(), "dpop+jwt".into());
    header.insert("jwk".into(), key.public_jwk());
    key.sign(header, &Value::Object(claims))
}

/// A `private_key_jwt` client assertion (RFC 7523 §2.2, RFC 7521 §4.2) for the token
/// endpoint at `audience` (the authorization server's issuer or its token endpoint, as the
/// server asks), valid for a minute.
pub fn client_assertion(
    key: &SigningKey,
    client_id: &str,
    audience: &str,
) -> Result<String, JoseError> {
    let iat = now()?;
    let claims = json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "jti": jti()?,
        "iat": iat,
        "exp": iat.saturating_add(ASSERTION_LIFETIME),
    });
    let mut header = Map::new();
    header.insert("typ".into(), "JWT".into());
    key.sign(header, &claims)
}

/// The `exp` claim of a compact JWT, read without verifying anything (to know when an
/// assertion someone else made runs out). None when the text is not three dot-separated
/// parts, the payload is not base64url JSON, or `exp` is missing or not a non-negative
/// number; a fractional `exp` is rounded down.
pub fn unverified_exp(jwt: &str) -> Option<u64> {
    let mut parts = jwt.trim().split('.');
    let (_header, payload, _signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    let exp = claims.get("exp")?;
    exp.as_u64().or_else(|| {
        exp.as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0 && *f < u64::MAX as f64)
            .map(|f| f as u64)
    })
}
