//! The signing key: made or loaded, its public JWK and thumbprint, and compact JWS signing.
//!
//! It is loaded from PKCS#8 DER, or PEM in the three forms OpenSSL writes; it is never
//! printed.

use super::pem::{self, Block, KeyKind};
use super::{Alg, JoseError, b64, thumbprint_of};
use ring::rand::SystemRandom;
use ring::rsa::PublicKeyComponents;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, RSA_PKCS1_SHA256, RsaKeyPair,
};
use serde_json::{Map, Value, json};

/// Fewest bits of an RSA modulus accepted (RFC 7518 §3.3).
const RSA_MIN_BITS: usize = 2048;

enum Pair {
    Ec(EcdsaKeyPair),
    Rsa(RsaKeyPair),
}

/// A private key that signs JWSs: a P-256 key for ES256 or an RSA key for RS256. Its
/// `Debug` shows the algorithm and thumbprint only.
pub struct SigningKey {
    pair: Pair,
    /// The key as PKCS#8 DER (for RSA and SEC1 input too: see `pkcs8_der`).
    pkcs8: Vec<u8>,
    jwk: Value,
    thumbprint: String,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("alg", &self.alg().as_str())
            .field("thumbprint", &self.thumbprint)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// A new P-256 key (ES256), from the system's random number generator.
    pub fn generate() -> Result<SigningKey, JoseError> {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| JoseError::Random)?;
        Self::from_pkcs8_der(doc.as_ref())
    }

    /// From PKCS#8 DER (unencrypted, version 1): an EC P-256 key with its public key
    /// inside (ES256), or an RSA key of 2048 bits or more (RS256).
    pub fn from_pkcs8_der(der: &[u8]) -> Result<SigningKey, JoseError> {
        match pem::pkcs8_kind(der)? {
            KeyKind::Ec => Self::ec(der),
            KeyKind::Rsa => Self::rsa(der),
        }
    }

    /// From PEM text: `PRIVATE KEY` (PKCS#8, EC or RSA), `EC PRIVATE KEY` (SEC1, P-256,
    /// with its public key) or `RSA PRIVATE KEY` (PKCS#1). Whitespace and CRLF line ends
    /// are fine, text around the block is ignored (and so is an `EC PARAMETERS` block);
    /// an encrypted key is refused with a way to decrypt it.
    pub fn from_pem(text: &str) -> Result<SigningKey, JoseError> {
        match pem::private_key(text)? {
            Block::Pkcs8(der) => Self::from_pkcs8_der(&der),
            Block::Sec1(der) => Self::from_pkcs8_der(&pem::sec1_to_pkcs8(&der)?),
            Block::Pkcs1(der) => Self::rsa(&pem::pkcs1_to_pkcs8(&der)),
        }
    }

    fn ec(pkcs8: &[u8]) -> Result<SigningKey, JoseError> {
        let pair = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            pkcs8,
            &SystemRandom::new(),
        )
        .map_err(|e| {
            if pem::pkcs8_ec_lacks_public_key(pkcs8) {
                JoseError::NoPublicKey
            } else {
                JoseError::Rejected(e.to_string())
            }
        })?;
        // The uncompressed point: 0x04 || x || y.
        let point = pair.public_key().as_ref();
        let (x, y) = point
            .get(1..33)
            .zip(point.get(33..65))
            .ok_or_else(|| JoseError::Rejected("unexpected EC public key length".into()))?;
        let jwk = json!({"crv": "P-256", "kty": "EC", "x": b64(x), "y": b64(y)});
        Self::new(Pair::Ec(pair), pkcs8, jwk)
    }

    fn rsa(pkcs8: &[u8]) -> Result<SigningKey, JoseError> {
        if let Some(bits) = pem::pkcs8_rsa_bits(pkcs8)
            && bits < RSA_MIN_BITS
        {
            return Err(JoseError::RsaTooSmall(bits));
        }
        let pair = RsaKeyPair::from_pkcs8(pkcs8).map_err(|e| JoseError::Rejected(e.to_string()))?;
        // Big-endian, without leading zero bytes, as RFC 7518 §6.3.1 wants.
        let public = PublicKeyComponents::<Vec<u8>>::from(pair.public());
        let jwk = json!({"e": b64(&public.e), "kty": "RSA", "n": b64(&public.n)});
        Self::new(Pair::Rsa(pair), pkcs8, jwk)
    }

    fn new(pair: Pair, pkcs8: &[u8], jwk: Value) -> Result<SigningKey, JoseError> {
        let thumbprint = thumbprint_of(&jwk)
            .ok_or_else(|| JoseError::Rejected("no thumbprint for the key".into()))?;
        Ok(SigningKey {
            pair,
            pkcs8: pkcs8.to_vec(),
            jwk,
            thumbprint,
        })
    }

    /// The key as PKCS#8 DER, to store it and load it again with `from_pkcs8_der`. Always
    /// Some: a generated or PKCS#8 key as it is, a SEC1 or PKCS#1 key as loaded, wrapped in
    /// PKCS#8.
    pub fn pkcs8_der(&self) -> Option<&[u8]> {
        Some(&self.pkcs8)
    }

    pub fn alg(&self) -> Alg {
        match self.pair {
            Pair::Ec(_) => Alg::Es256,
            Pair::Rsa(_) => Alg::Rs256,
        }
    }

    /// The public JWK: `{"crv","kty","x","y"}` for EC, `{"e","kty","n"}` for RSA; never a
    /// private member.
    pub fn public_jwk(&self) -> Value {
        self.jwk.clone()
    }

    /// The RFC 7638 thumbprint of `public_jwk` (DPoP's `jkt`).
    pub fn thumbprint(&self) -> String {
        self.thumbprint.clone()
    }

    /// A compact JWS of `claims`, its header `alg` followed by the members of `header`
    /// (an `alg` there is ignored: the key decides it).
    pub fn sign(&self, header: Map<String, Value>, claims: &Value) -> Result<String, JoseError> {
        let mut full = Map::new();
        full.insert("alg".into(), self.alg().as_str().into());
        full.extend(header.into_iter().filter(|(name, _)| name != "alg"));
        let input = format!(
            "{}.{}",
            b64(&serde_json::to_vec(&full)?),
            b64(&serde_json::to_vec(claims)?)
        );
        let rng = SystemRandom::new();
        let signature = match &self.pair {
            Pair::Ec(pair) => pair
                .sign(&rng, input.as_bytes())
                .map_err(|_| JoseError::Sign)?
                .as_ref()
                .to_vec(),
            Pair::Rsa(pair) => {
                let mut out = vec![0u8; pair.public().modulus_len()];
                pair.sign(&RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut out)
                    .map_err(|_| JoseError::Sign)?;
                out
            }
        };
        Ok(format!("{input}.{}", b64(&signature)))
    }
}
