//! ES256 JWTs for tests: a P-256 key pair made with ring, compact JWS signing with
//! base64url by hand, and the shapes OAuth asks for (a `private_key_jwt` client assertion,
//! a DPoP proof). Headers and claims are plain JSON, so a test can build malformed ones.
//! The fixture signs its ID-JAGs with it too; it checks with `jose`, not with this.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::time::{SystemTime, UNIX_EPOCH};

/// `client_assertion_type` of a JWT client assertion (RFC 7523 §2.2).
pub const CLIENT_ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// The jwt-bearer grant type (RFC 7523 §2.1).
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// The token exchange grant type (RFC 8693).
pub const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The token type of an OpenID Connect ID token (RFC 8693 §3).
pub const ID_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id_token";
/// The token type of an Identity Assertion JWT Authorization Grant.
pub const ID_JAG_TYPE: &str = "urn:ietf:params:oauth:token-type:id-jag";

/// An ES256 (P-256) key pair.
pub struct Es256Key {
    pair: EcdsaKeyPair,
    pkcs8: Vec<u8>,
}

impl Es256Key {
    /// A fresh key pair.
    pub fn generate() -> Es256Key {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("generate a P-256 key");
        Es256Key::from_pkcs8(doc.as_ref())
    }

    /// The key pair of a PKCS#8 v1 DER document (as `generate` makes).
    pub fn from_pkcs8(der: &[u8]) -> Es256Key {
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der, &SystemRandom::new())
                .expect("a P-256 PKCS#8 key");
        Es256Key {
            pair,
            pkcs8: der.to_vec(),
        }
    }

    /// The private key as PKCS#8 DER.
    pub fn pkcs8_der(&self) -> &[u8] {
        &self.pkcs8
    }

    /// The private key as a PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`).
    pub fn pkcs8_pem(&self) -> String {
        let body = STANDARD.encode(&self.pkcs8);
        let lines: Vec<&str> = (0..body.len())
            .step_by(64)
            .map(|i| &body[i..(i + 64).min(body.len())])
            .collect();
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            lines.join("\n")
        )
    }

    /// The uncompressed public point, `04 ‖ x ‖ y` (65 bytes).
    pub fn public_point(&self) -> Vec<u8> {
        self.pair.public_key().as_ref().to_vec()
    }

    /// The public key as a JWK (`kty`, `crv`, `x`, `y`).
    pub fn public_jwk(&self) -> Value {
        let point = self.public_point();
        json!({"kty": "EC", "crv": "P-256", "x": b64url(&point[1..33]), "y": b64url(&point[33..65])})
    }

    /// The key pair as a JWK with `d`, read out of the PKCS#8 document's ECPrivateKey.
    pub fn private_jwk(&self) -> Value {
        const EC_PRIVATE_KEY: [u8; 5] = [0x02, 0x01, 0x01, 0x04, 0x20]; // version 1, OCTET STRING(32)
        let at = (self.pkcs8.windows(EC_PRIVATE_KEY.len()))
            .position(|w| w == EC_PRIVATE_KEY)
            .expect("an ECPrivateKey in the PKCS#8 document")
            + EC_PRIVATE_KEY.len();
        let mut jwk = self.public_jwk();
        jwk["d"] = json!(b64url(&self.pkcs8[at..at + 32]));
        jwk
    }

    /// The RFC 7638 thumbprint of the public key (what a DPoP-bound token's `jkt` is).
    pub fn thumbprint(&self) -> String {
        thumbprint_of(&self.public_jwk())
    }

    /// A compact JWS of `header` and `claims`, exactly as given, signed with this key.
    pub fn sign(&self, header: &Value, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            b64url(header.to_string().as_bytes()),
            b64url(claims.to_string().as_bytes())
        );
        let signature =
            (self.pair.sign(&SystemRandom::new(), input.as_bytes())).expect("sign with ES256");
        format!("{input}.{}", b64url(signature.as_ref()))
    }

    /// A JWT of `claims` with the header `{"alg":"ES256","typ":"JWT"}`.
    pub fn jwt(&self, claims: &Value) -> String {
        self.sign(&json!({"alg": "ES256", "typ": "JWT"}), claims)
    }

    /// A `private_key_jwt` assertion for `client_id` at audience `aud`: `iss` and `sub` the
    /// client, a fresh `jti`, issued now, expiring in a minute.
    pub fn client_assertion(&self, client_id: &str, aud: &str) -> String {
        self.jwt(&assertion_claims(client_id, aud))
    }

    /// The JOSE header of this key's DPoP proofs: `typ` `dpop+jwt`, `alg` ES256, the
    /// public `jwk`.
    pub fn dpop_header(&self) -> Value {
        json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": self.public_jwk()})
    }

    /// A DPoP proof for a request of method `htm` to `htu`: with `ath` for an access token
    /// sent to a resource, and the server's `nonce` when given.
    pub fn dpop_proof(
        &self,
        htm: &str,
        htu: &str,
        access_token: Option<&str>,
        nonce: Option<&str>,
    ) -> String {
        let mut claims = dpop_claims(htm, htu);
        if let Some(token) = access_token {
            claims["ath"] = json!(ath(token));
        }
        if let Some(nonce) = nonce {
            claims["nonce"] = json!(nonce);
        }
        self.sign(&self.dpop_header(), &claims)
    }
}

/// The claims of a client assertion (see `Es256Key::client_assertion`), to edit.
pub fn assertion_claims(client_id: &str, aud: &str) -> Value {
    let now = now();
    json!({"iss": client_id, "sub": client_id, "aud": aud, "jti": jti(),
        "iat": now, "exp": now + 60})
}

/// The claims of a DPoP proof without `ath` or `nonce`, to edit: a fresh `jti`, `htm`,
/// `htu`, `iat` now.
pub fn dpop_claims(htm: &str, htu: &str) -> Value {
    json!({"jti": jti(), "htm": htm, "htu": htu, "iat": now()})
}

/// The RFC 7638 thumbprint of an EC JWK: SHA-256 of its required members (`crv`, `kty`,
/// `x`, `y`, in that order, no whitespace), base64url.
pub fn thumbprint_of(jwk: &Value) -> String {
    let member = |name: &str| jwk[name].as_str().unwrap_or_default().to_owned();
    let canonical = format!(
        "{{\"crv\":\"{}\",\"kty\":\"{}\",\"x\":\"{}\",\"y\":\"{}\"}}",
        member("crv"),
        member("kty"),
        member("x"),
        member("y")
    );
    b64url(&Sha256::digest(canonical.as_bytes()))
}

/// `ath` of an access token: base64url of its SHA-256.
pub fn ath(access_token: &str) -> String {
    b64url(&Sha256::digest(access_token.as_bytes()))
}

/// A fresh `jti`.
pub fn jti() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Seconds since the Unix epoch.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// base64url without padding.
pub fn b64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The JOSE header of a compact JWS, unverified.
pub fn header_of(jws: &str) -> Value {
    part_of(jws, 0)
}

/// The claims of a compact JWS, unverified.
pub fn claims_of(jws: &str) -> Value {
    part_of(jws, 1)
}

fn part_of(jws: &str, index: usize) -> Value {
    let part = jws.split('.').nth(index).expect("a compact JWS");
    let bytes = URL_SAFE_NO_PAD.decode(part).expect("base64url");
    serde_json::from_slice(&bytes).expect("a JSON part")
}
