//! Bridging server→client requests between eras.
//!
//! Sealed `requestState` tokens for modern agents (and the daemon's seal that task ids
//! use too), and which capability each request needs.
//!
//! When a legacy server asks for input during a modern agent's call, mcpd answers the
//! agent with `input_required` and keeps the server's request waiting. The agent's retry
//! carries mcpd's `requestState` back; it is HMAC-sealed with a per-daemon key and bound
//! to the agent connection, so it cannot be forged or used from another connection.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::OnceLock;

/// Marks a `requestState` mcpd issued; any other is the server's own and passes through.
const PREFIX: &str = "mcpd1.";

/// The per-daemon sealing key: made once from the OS's random source, or taken from the
/// image an upgrade replaced (`upgrade::handover`), so ids sealed before it still open.
static KEY: OnceLock<[u8; 32]> = OnceLock::new();

fn key() -> &'static [u8; 32] {
    KEY.get_or_init(rand::random)
}

/// The key, for the upgrade's handover (which keeps it in sealed memory, never on disk).
pub fn key_bytes() -> [u8; 32] {
    *key()
}

/// Takes the key an upgraded-from image used; false if one was made already.
pub fn adopt_key(key: [u8; 32]) -> bool {
    KEY.set(key).is_ok()
}

/// A MAC keyed with this process's key.
fn mac() -> Hmac<Sha256> {
    #[allow(clippy::expect_used, reason = "HMAC takes keys of any length")]
    <Hmac<Sha256> as Mac>::new_from_slice(key()).expect("HMAC accepts any key length")
}

fn tag(payload: &str) -> Vec<u8> {
    let mut mac = mac();
    mac.update(payload.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// Who a sealed state belongs to: one agent connection (its number and a random nonce).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding {
    pub agent: u64,
    pub nonce: u64,
}

/// Seals `parked` (a parked call's number) for this connection.
pub fn seal(binding: Binding, parked: u64) -> String {
    seal_payload(
        PREFIX,
        &format!("{}:{}:{parked}", binding.agent, binding.nonce),
    )
}

/// `payload` under this daemon's seal: `prefix`, the payload and its MAC, each in
/// base64url (visible ASCII, so a sealed value can also travel in a header).
pub(super) fn seal_payload(prefix: &str, payload: &str) -> String {
    format!(
        "{prefix}{}.{}",
        URL_SAFE_NO_PAD.encode(payload.as_bytes()),
        URL_SAFE_NO_PAD.encode(tag(payload))
    )
}

/// The payload of a value [`seal_payload`] made with `prefix`. None: it does not start
/// with `prefix` (not mcpd's). Err: it does but is forged or damaged.
pub(super) fn open_payload(prefix: &str, sealed: &str) -> Option<Result<String, &'static str>> {
    let rest = sealed.strip_prefix(prefix)?;
    let Some((payload, sig)) = rest.split_once('.') else {
        return Some(Err("it is malformed"));
    };
    let (Ok(payload), Ok(sig)) = (URL_SAFE_NO_PAD.decode(payload), URL_SAFE_NO_PAD.decode(sig))
    else {
        return Some(Err("it is malformed"));
    };
    let Ok(payload) = String::from_utf8(payload) else {
        return Some(Err("it is malformed"));
    };
    let mut mac = mac();
    mac.update(payload.as_bytes());
    if mac.verify_slice(&sig).is_err() {
        return Some(Err("its seal does not verify"));
    }
    Some(Ok(payload))
}

/// What a `requestState` from an agent turns out to be.
#[derive(Debug, PartialEq)]
pub enum Opened {
    /// Not one of mcpd's: the server's own, to pass through untouched.
    Foreign,
    /// One of mcpd's, for this connection: the parked call's number.
    Ours(u64),
    /// Claims to be mcpd's but is forged, damaged, or from another connection.
    Invalid(&'static str),
}

pub fn open(state: &str, binding: Binding) -> Opened {
    let payload = match open_payload(PREFIX, state) {
        None => return Opened::Foreign,
        Some(Err(why)) => return Opened::Invalid(why),
        Some(Ok(p)) => p,
    };
    let mut parts = payload.split(':').map(str::parse::<u64>);
    match (parts.next(), parts.next(), parts.next()) {
        (Some(Ok(agent)), Some(Ok(nonce)), Some(Ok(parked)))
            if agent == binding.agent && nonce == binding.nonce =>
        {
            Opened::Ours(parked)
        }
        (Some(Ok(_)), Some(Ok(_)), Some(Ok(_))) => {
            Opened::Invalid("it was issued to another connection")
        }
        _ => Opened::Invalid("it is malformed"),
    }
}

/// The client capability a server→client request needs.
pub fn capability_for(method: &str) -> Option<&'static str> {
    match method {
        "elicitation/create" => Some("elicitation"),
        "sampling/createMessage" => Some("sampling"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_open_only_on_the_connection_they_were_sealed_for() {
        let me = Binding {
            agent: 3,
            nonce: 99,
        };
        let other = Binding { agent: 4, nonce: 7 };
        let s = seal(me, 12);
        assert_eq!(open(&s, me), Opened::Ours(12));
        assert_eq!(
            open(&s, other),
            Opened::Invalid("it was issued to another connection")
        );
        assert_eq!(open("server-state-xyz", me), Opened::Foreign);
        // Change one character of the payload: the seal no longer verifies.
        let forged = s.replacen("mcpd1.M", "mcpd1.N", 1);
        assert_ne!(forged, s);
        assert!(matches!(open(&forged, me), Opened::Invalid(_)));
        assert_eq!(open("mcpd1.nodot", me), Opened::Invalid("it is malformed"));
    }
}
