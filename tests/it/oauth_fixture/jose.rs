//! The JOSE the fixture checks with: compact JWS parsing, ES256 verification with ring,
//! EC P-256 public JWKs as points, and their RFC 7638 thumbprints. Written for checking;
//! the tests' signing side is `jwt`, kept apart so one cannot hide the other's mistake.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::time::{SystemTime, UNIX_EPOCH};

/// A compact JWS, decoded but not yet verified.
pub(super) struct Jws {
    pub header: Value,
    pub claims: Value,
    signing_input: String,
    signature: Vec<u8>,
}

impl Jws {
    /// Three base64url parts (no padding), the first two JSON objects.
    pub fn parse(compact: &str) -> Result<Jws, String> {
        let parts: Vec<&str> = compact.split('.').collect();
        let [header, claims, signature] = parts[..] else {
            return Err("not a compact JWS of three parts".into());
        };
        let object = |part: &str, what: &str| -> Result<Value, String> {
            let bytes = unb64url(part).ok_or(format!("the {what} is not base64url"))?;
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(v) if v.is_object() => Ok(v),
                _ => Err(format!("the {what} is not a JSON object")),
            }
        };
        Ok(Jws {
            header: object(header, "header")?,
            claims: object(claims, "payload")?,
            signing_input: format!("{header}.{claims}"),
            signature: unb64url(signature).ok_or("the signature is not base64url")?,
        })
    }

    /// Whether the signature is an ES256 one (`r ‖ s`, 64 bytes) by the key at `point`.
    pub fn verifies_with(&self, point: &[u8]) -> bool {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
            .verify(self.signing_input.as_bytes(), &self.signature)
            .is_ok()
    }

    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header[name].as_str()
    }

    pub fn str_claim(&self, name: &str) -> Option<&str> {
        self.claims[name].as_str()
    }

    /// A NumericDate claim, in whole seconds.
    pub fn time_claim(&self, name: &str) -> Option<i64> {
        self.claims[name].as_i64()
    }

    /// `aud`: a string or an array of strings.
    pub fn audiences(&self) -> Vec<&str> {
        match &self.claims["aud"] {
            Value::String(s) => vec![s.as_str()],
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        }
    }
}

/// base64url without padding.
pub(super) fn b64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Strict base64url without padding.
pub(super) fn unb64url(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text).ok()
}

/// The uncompressed point (`04 ‖ x ‖ y`) of a public EC P-256 JWK; a JWK holding a private
/// key (`d`) is refused.
pub(super) fn ec_point(jwk: &Value) -> Result<Vec<u8>, String> {
    if !jwk.is_object() {
        return Err("the jwk is not a JSON object".into());
    }
    if jwk["kty"] != "EC" || jwk["crv"] != "P-256" {
        return Err("the jwk is not an EC P-256 key".into());
    }
    if jwk.get("d").is_some() {
        return Err("the jwk holds a private key".into());
    }
    let coordinate = |name: &str| {
        (jwk[name].as_str())
            .and_then(unb64url)
            .filter(|c| c.len() == 32)
            .ok_or(format!("the jwk's {name} is not 32 base64url bytes"))
    };
    let mut point = vec![4];
    point.extend(coordinate("x")?);
    point.extend(coordinate("y")?);
    Ok(point)
}

/// The RFC 7638 thumbprint of the P-256 key at `point`: SHA-256 of the required members in
/// lexicographic order, without whitespace, base64url.
pub(super) fn thumbprint(point: &[u8]) -> String {
    let (x, y) = point
        .get(1..)
        .map(|xy| xy.split_at(xy.len() / 2))
        .unwrap_or_default();
    let members = format!(
        r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
        b64url(x),
        b64url(y)
    );
    b64url(&Sha256::digest(members.as_bytes()))
}

/// `BASE64URL(SHA-256(text))`: a DPoP `ath`.
pub(super) fn sha256_b64url(text: &str) -> String {
    b64url(&Sha256::digest(text.as_bytes()))
}

/// Seconds since the Unix epoch.
pub(super) fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
