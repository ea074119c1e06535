//! DPoP (RFC 9449): a server's proof-of-possession key and the proofs made with it.
//!
//! Proofs are made for token requests (to the authorization server) and for every request
//! that carries a DPoP-bound token (to the MCP server), each with the latest nonce that
//! side gave.
//!
//! The nonces are each a `watch` (a latest value, as the login's token is): every
//! request reads the current one, and any response may bring a newer one (§8.2, §9).
//! A proof is made fresh for each request (its own `jti`), never re-sent.

use super::jose::{self, SigningKey};
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, Url};
use tokio::sync::watch;

/// The request header that carries a proof, and the response header with a nonce.
pub const DPOP: &str = "DPoP";
pub const DPOP_NONCE: &str = "DPoP-Nonce";
/// Longest nonce kept; a longer one is ignored (and its retry refused by the server).
const MAX_NONCE: usize = 1024;

/// One server's DPoP key, with the nonces its authorization server and resource gave.
pub struct Dpop {
    /// None only if the system's random source failed: then no proof is made.
    key: Option<SigningKey>,
    as_nonce: watch::Sender<Option<String>>,
    rs_nonce: watch::Sender<Option<String>>,
}

impl std::fmt::Debug for Dpop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.key {
            Some(k) => write!(f, "Dpop({})", k.thumbprint()),
            None => f.write_str("Dpop(none)"),
        }
    }
}

/// Which side a nonce or proof is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The authorization server's token endpoint.
    Token,
    /// The MCP server.
    Resource,
}

impl Dpop {
    pub fn new(key: SigningKey) -> Dpop {
        Dpop {
            key: Some(key),
            as_nonce: watch::channel(None).0,
            rs_nonce: watch::channel(None).0,
        }
    }

    /// No key (one could not be made): makes no proofs, so no token is bound.
    pub fn unusable() -> Dpop {
        Dpop {
            key: None,
            as_nonce: watch::channel(None).0,
            rs_nonce: watch::channel(None).0,
        }
    }

    pub fn key(&self) -> Option<&SigningKey> {
        self.key.as_ref()
    }

    pub fn usable(&self) -> bool {
        self.key.is_some()
    }

    fn nonce(&self, side: Side) -> &watch::Sender<Option<String>> {
        match side {
            Side::Token => &self.as_nonce,
            Side::Resource => &self.rs_nonce,
        }
    }

    /// A proof for one request: `token` (the access token it carries, for `ath`) only
    /// towards the resource. None if it cannot be made (then the request goes without,
    /// and the server refuses it).
    pub fn proof(
        &self,
        side: Side,
        method: &Method,
        url: &Url,
        token: Option<&str>,
    ) -> Option<HeaderValue> {
        let key = self.key.as_ref()?;
        let nonce = self.nonce(side).borrow().clone();
        let proof = match jose::dpop_proof(key, method.as_str(), url, token, nonce.as_deref()) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("could not make a DPoP proof: {e}");
                return None;
            }
        };
        let mut v = HeaderValue::from_str(&proof).ok()?;
        v.set_sensitive(true);
        Some(v)
    }

    /// Keeps the nonce a response gave, if any; whether it gave one.
    pub fn saw(&self, side: Side, headers: &HeaderMap) -> bool {
        let Some(n) = headers
            .get(DPOP_NONCE)
            .and_then(|v| v.to_str().ok())
            .filter(|n| !n.is_empty() && n.len() <= MAX_NONCE)
        else {
            return false;
        };
        self.nonce(side).send_if_modified(|cur| {
            if cur.as_deref() == Some(n) {
                return false;
            }
            *cur = Some(n.to_owned());
            true
        });
        true
    }
}

/// Whether a server's DPoP setting and its authorization server's metadata call for
/// proofs: `dpop = true` always, `false` never, unset when ES256 is offered.
pub fn wanted(setting: Option<bool>, algs: &[String]) -> bool {
    setting.unwrap_or_else(|| algs.iter().any(|a| a == "ES256"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_decides_then_the_offer() {
        let es = vec!["ES256".to_owned()];
        assert!(wanted(None, &es));
        assert!(!wanted(None, &[]));
        assert!(!wanted(None, &["RS256".to_owned()]));
        assert!(wanted(Some(true), &[]));
        assert!(!wanted(Some(false), &es));
    }

    #[test]
    fn a_new_nonce_is_kept_per_side_and_used_in_the_next_proof() {
        let d = Dpop::new(SigningKey::generate().unwrap());
        let mut h = HeaderMap::new();
        h.insert(DPOP_NONCE, HeaderValue::from_static("n1"));
        assert!(d.saw(Side::Resource, &h));
        assert!(!d.saw(Side::Resource, &HeaderMap::new()), "no nonce given");
        let url = Url::parse("https://mcp.example.com/mcp?x=1").unwrap();
        let claims = |p: HeaderValue| -> serde_json::Value {
            let text = p.to_str().unwrap().to_owned();
            let payload = text.split('.').nth(1).unwrap();
            use base64::Engine;
            let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(payload)
                .unwrap();
            serde_json::from_slice(&bytes).unwrap()
        };
        let rs = claims(
            d.proof(Side::Resource, &Method::POST, &url, Some("t"))
                .unwrap(),
        );
        assert_eq!(rs["nonce"], "n1");
        assert_eq!(rs["htu"], "https://mcp.example.com/mcp");
        assert_eq!(rs["ath"], jose::ath("t"));
        let token = claims(d.proof(Side::Token, &Method::POST, &url, None).unwrap());
        assert!(
            token.get("nonce").is_none(),
            "the other side's nonce is not used"
        );
        assert!(token.get("ath").is_none());
        let mut long = HeaderMap::new();
        long.insert(
            DPOP_NONCE,
            HeaderValue::from_str(&"n".repeat(2000)).unwrap(),
        );
        assert!(!d.saw(Side::Token, &long), "an overlong nonce is ignored");
    }
}
