//! The credential's DPoP key.
//!
//! Made when the actor starts, replaced by the one stored with a login, stored with each
//! login whose tokens are bound to it; and the `Access` every request sends.

use super::{Access, Credential};
use crate::config::Secret;
use crate::oauth::dpop::{self, Dpop};
use crate::oauth::jose::SigningKey;
use crate::oauth::store::Stored;
use std::sync::Arc;

/// A new DPoP key for a server. Should the system's random source fail, the key is
/// made when a grant needs it instead (`Credential::ensure_key`).
pub(super) fn fresh_key() -> Arc<Dpop> {
    match SigningKey::generate() {
        Ok(k) => Arc::new(Dpop::new(k)),
        Err(e) => {
            tracing::error!("cannot make a DPoP key: {e}");
            Arc::new(Dpop::unusable())
        }
    }
}

impl Credential {
    /// The token to send, with the DPoP key when it is bound to it.
    pub(super) fn access(&self, token: String, bound: bool) -> Arc<Access> {
        Arc::new(Access {
            token: Secret::new(token),
            dpop: bound.then(|| self.dpop.clone()),
        })
    }

    /// The DPoP key, when this login's token requests carry proofs: the tokens are
    /// bound to it, or the setting and the authorization server call for it.
    pub(super) fn dpop_for(&self, stored: &Stored) -> Option<&Arc<Dpop>> {
        let wanted = stored.tokens.dpop_bound
            || dpop::wanted(
                self.setup.oauth.dpop,
                &stored.metadata.dpop_signing_alg_values_supported,
            );
        (wanted && self.dpop.usable()).then_some(&self.dpop)
    }

    /// The DPoP key as stored with a login.
    pub(super) fn stored_key(&self) -> Option<String> {
        use base64::Engine;
        let der = self.dpop.key()?.pkcs8_der()?;
        Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(der))
    }
}

/// A stored DPoP key; None if it cannot be read (a new one is used).
pub(super) fn decode_key(text: &str) -> Option<SigningKey> {
    use base64::Engine;
    let der = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .ok()?;
    SigningKey::from_pkcs8_der(&der).ok()
}
