//! PEM armour and the few DER structures a private key file needs.
//!
//! Which key a PKCS#8 document holds, and SEC1 (`EC PRIVATE KEY`) or PKCS#1 (`RSA PRIVATE
//! KEY`) keys wrapped in PKCS#8 for ring.
//!
//! Both halves are written here on purpose. The armour: `rustls::pki_types::pem` (in the
//! tree through rustls) reads PEM sections, but cannot report what a key file is refused
//! for. It skips a label it does not know, so an `ENCRYPTED PRIVATE KEY` block reads as
//! no key at all; it feeds OpenSSL's legacy `Proc-Type: 4,ENCRYPTED` and `DEK-Info`
//! header lines to its base64 decoder, so an encrypted PKCS#1 key reads as bad base64;
//! its base64 error names no block; and it decodes every known block, so a broken
//! certificate before the key would refuse a file this reader accepts. Keeping
//! `JoseError::Encrypted` and the block named in `UnterminatedPem` and `PemBase64` would
//! take a second scan of the text beside it, which is this reader again. The DER: ring
//! takes only PKCS#8 and no crate in the tree converts SEC1 or PKCS#1 keys to it (nor
//! reads DER for others), so the wrapping and the few reads below are written out too.

use super::JoseError;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const OCTET_STRING: u8 = 0x04;
const NULL: u8 = 0x05;
const OID: u8 = 0x06;
/// `[0]`, constructed: an `ECPrivateKey`'s curve.
const CONTEXT_0: u8 = 0xa0;
/// `[1]`, constructed: an `ECPrivateKey`'s public key.
const CONTEXT_1: u8 = 0xa1;

/// 1.2.840.10045.2.1, id-ecPublicKey.
const ID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
/// 1.2.840.10045.3.1.7, prime256v1 (P-256).
const PRIME256V1: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
/// 1.2.840.113549.1.1.1, rsaEncryption.
const RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];

/// The DER of the first private key in PEM text, by its form.
pub(super) enum Block {
    /// `PRIVATE KEY`: PKCS#8 `PrivateKeyInfo`.
    Pkcs8(Vec<u8>),
    /// `EC PRIVATE KEY`: SEC1 `ECPrivateKey`.
    Sec1(Vec<u8>),
    /// `RSA PRIVATE KEY`: PKCS#1 `RSAPrivateKey`.
    Pkcs1(Vec<u8>),
}

/// What a PKCS#8 document holds.
pub(super) enum KeyKind {
    Ec,
    Rsa,
}

/// The first private key block in `text`, decoded. Other blocks (`EC PARAMETERS`, a
/// certificate) and text outside the blocks are skipped.
pub(super) fn private_key(text: &str) -> Result<Block, JoseError> {
    let mut rest = text;
    while let Some((_, after)) = rest.split_once("-----BEGIN ") {
        let Some((label, body)) = after.split_once("-----") else {
            break;
        };
        if label.contains('\n') {
            rest = after;
            continue;
        }
        let end = format!("-----END {label}-----");
        let block: fn(Vec<u8>) -> Block = match label {
            "ENCRYPTED PRIVATE KEY" => return Err(JoseError::Encrypted),
            "PRIVATE KEY" => Block::Pkcs8,
            "EC PRIVATE KEY" => Block::Sec1,
            "RSA PRIVATE KEY" => Block::Pkcs1,
            _ => {
                rest = body.split_once(&end).map_or("", |(_, more)| more);
                continue;
            }
        };
        let (body, _) = body
            .split_once(&end)
            .ok_or_else(|| JoseError::UnterminatedPem(label.to_owned()))?;
        return Ok(block(decode(label, body)?));
    }
    Err(JoseError::NoPrivateKey)
}

/// A block's base64 body. Legacy OpenSSL encryption shows as `Proc-Type: 4,ENCRYPTED`
/// and `DEK-Info` header lines.
fn decode(label: &str, body: &str) -> Result<Vec<u8>, JoseError> {
    let mut base64 = String::with_capacity(body.len());
    for line in body.lines() {
        if line.contains(':') {
            if line.contains("ENCRYPTED") || line.starts_with("DEK-Info") {
                return Err(JoseError::Encrypted);
            }
            continue;
        }
        base64.extend(line.chars().filter(|c| !c.is_ascii_whitespace()));
    }
    STANDARD
        .decode(base64)
        .map_err(|_| JoseError::PemBase64(label.to_owned()))
}

/// Reads DER elements one after the other.
struct Der<'a>(&'a [u8]);

impl<'a> Der<'a> {
    fn peek(&self) -> Option<u8> {
        self.0.first().copied()
    }

    /// The contents of the next element, which must have `tag`.
    fn next(&mut self, tag: u8, what: &'static str) -> Result<&'a [u8], JoseError> {
        let (&found, rest) = self.0.split_first().ok_or(JoseError::Der(what))?;
        if found != tag {
            return Err(JoseError::Der(what));
        }
        let (&first, rest) = rest.split_first().ok_or(JoseError::Der(what))?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let count = usize::from(first & 0x7f);
            if count == 0 || count > 4 {
                return Err(JoseError::Der(what));
            }
            let bytes = rest.get(..count).ok_or(JoseError::Der(what))?;
            let len = bytes
                .iter()
                .fold(0usize, |len, &b| (len << 8) | usize::from(b));
            (len, rest.get(count..).ok_or(JoseError::Der(what))?)
        };
        let contents = rest.get(..len).ok_or(JoseError::Der(what))?;
        self.0 = rest.get(len..).ok_or(JoseError::Der(what))?;
        Ok(contents)
    }
}

/// One DER element.
fn element(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    match u8::try_from(contents.len()) {
        Ok(len) if len < 0x80 => out.push(len),
        _ => {
            let len = contents.len().to_be_bytes();
            let significant: Vec<u8> = len.iter().copied().skip_while(|b| *b == 0).collect();
            out.push(0x80 | significant.len() as u8);
            out.extend(significant);
        }
    }
    out.extend_from_slice(contents);
    out
}

/// A PKCS#8 v1 `PrivateKeyInfo` of `key` under the algorithm identifier `alg_id` (its
/// contents).
fn wrap(alg_id: &[u8], key: &[u8]) -> Vec<u8> {
    let info = [
        element(INTEGER, &[0]),
        element(SEQUENCE, alg_id),
        element(OCTET_STRING, key),
    ]
    .concat();
    element(SEQUENCE, &info)
}

/// The version, algorithm identifier and private key of a PKCS#8 document.
fn pkcs8_parts(der: &[u8]) -> Result<(Der<'_>, &[u8]), JoseError> {
    let mut info = Der(Der(der).next(SEQUENCE, "expected a PKCS#8 PrivateKeyInfo")?);
    info.next(INTEGER, "no PKCS#8 version")?;
    let alg = Der(info.next(SEQUENCE, "no PKCS#8 algorithm identifier")?);
    let key = info.next(OCTET_STRING, "no PKCS#8 private key")?;
    Ok((alg, key))
}

/// Whether a PKCS#8 document holds a P-256 or an RSA key.
pub(super) fn pkcs8_kind(der: &[u8]) -> Result<KeyKind, JoseError> {
    let (mut alg, _) = pkcs8_parts(der)?;
    let oid = alg.next(OID, "no PKCS#8 algorithm")?;
    if oid == ID_EC_PUBLIC_KEY {
        // Explicit curve parameters are not a named curve, so not P-256 here either.
        let curve = alg
            .next(OID, "no EC curve")
            .map_err(|_| JoseError::UnsupportedCurve)?;
        if curve != PRIME256V1 {
            return Err(JoseError::UnsupportedCurve);
        }
        Ok(KeyKind::Ec)
    } else if oid == RSA_ENCRYPTION {
        Ok(KeyKind::Rsa)
    } else {
        Err(JoseError::UnsupportedKeyType)
    }
}

/// What a SEC1 `ECPrivateKey` says of itself.
struct Sec1<'a> {
    curve: Option<&'a [u8]>,
    has_public_key: bool,
}

fn sec1(der: &[u8]) -> Result<Sec1<'_>, JoseError> {
    let mut key = Der(Der(der).next(SEQUENCE, "expected an EC private key")?);
    key.next(INTEGER, "no EC private key version")?;
    key.next(OCTET_STRING, "no EC private key")?;
    let curve = if key.peek() == Some(CONTEXT_0) {
        let mut params = Der(key.next(CONTEXT_0, "bad EC parameters")?);
        Some(
            params
                .next(OID, "no EC curve")
                .map_err(|_| JoseError::UnsupportedCurve)?,
        )
    } else {
        None
    };
    Ok(Sec1 {
        curve,
        has_public_key: key.peek() == Some(CONTEXT_1),
    })
}

/// A SEC1 P-256 key as PKCS#8. A key without its curve is taken as P-256 (ring checks
/// the public key against the private one); a key without its public key cannot be used,
/// since ring does not derive it.
pub(super) fn sec1_to_pkcs8(der: &[u8]) -> Result<Vec<u8>, JoseError> {
    let key = sec1(der)?;
    if key.curve.is_some_and(|c| c != PRIME256V1) {
        return Err(JoseError::UnsupportedCurve);
    }
    if !key.has_public_key {
        return Err(JoseError::NoPublicKey);
    }
    let alg_id = [element(OID, ID_EC_PUBLIC_KEY), element(OID, PRIME256V1)].concat();
    Ok(wrap(&alg_id, der))
}

/// Whether a PKCS#8 EC key reads well but lacks the public key ring needs.
pub(super) fn pkcs8_ec_lacks_public_key(der: &[u8]) -> bool {
    pkcs8_parts(der)
        .and_then(|(_, key)| sec1(key))
        .is_ok_and(|key| !key.has_public_key)
}

/// A PKCS#1 RSA key as PKCS#8.
pub(super) fn pkcs1_to_pkcs8(der: &[u8]) -> Vec<u8> {
    let alg_id = [element(OID, RSA_ENCRYPTION), element(NULL, &[])].concat();
    wrap(&alg_id, der)
}

/// The bits in the modulus of a PKCS#8 RSA key, if it reads well.
pub(super) fn pkcs8_rsa_bits(der: &[u8]) -> Option<usize> {
    let (_, key) = pkcs8_parts(der).ok()?;
    let mut key = Der(Der(key).next(SEQUENCE, "").ok()?);
    key.next(INTEGER, "").ok()?;
    let n = key.next(INTEGER, "").ok()?;
    let n = n.get(n.iter().position(|b| *b != 0)?..)?;
    let top = n.first()?;
    Some(n.len() * 8 - top.leading_zeros() as usize)
}
