//! The dashboard's credentials.
//!
//! One-time launch tokens (`mcpd ctl ui`), the sessions they open (bounded in number and
//! age) and the cookie that names one. Pure data with the time passed in; the dashboard's
//! actor owns the one `Keys`.

use std::time::Duration;
use subtle::ConstantTimeEq;
use tokio::time::Instant;

/// How long a launch token may wait to be used.
pub const TOKEN_TTL: Duration = Duration::from_secs(120);
/// Launch tokens waiting at once; minting one more drops the oldest.
pub const MAX_TOKENS: usize = 16;
/// Sessions at once; opening one more ends the one used least recently.
pub const MAX_SESSIONS: usize = 64;
/// A session unused this long has ended.
pub const SESSION_IDLE: Duration = Duration::from_secs(12 * 3600);

/// 32 random bytes: a launch token or a session id. Its `Debug` never shows them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Key([u8; 32]);

impl Key {
    /// A fresh key from the operating system's generator.
    pub fn random() -> Key {
        use rand::RngCore;
        let mut bytes = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        Key(bytes)
    }

    /// The key as 64 lowercase hex digits, as URLs and cookies carry it.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// A key written as 64 hex digits; anything else is no key.
    pub fn parse(text: &str) -> Option<Key> {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(text, &mut bytes).ok()?;
        Some(Key(bytes))
    }

    /// Whether two keys are equal, in time that does not depend on where they differ.
    fn matches(&self, other: &Key) -> bool {
        bool::from(self.0.ct_eq(&other.0))
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(…)")
    }
}

/// The session cookie's name.
pub const COOKIE: &str = "mcpd_ui";

/// The open session of a request that passed the guard, for the pages.
#[derive(Clone, Copy, Debug)]
pub struct SessionId(pub Key);

/// The session id in a request's `mcpd_ui` cookie, if it holds one.
pub fn session_cookie(headers: &axum::http::HeaderMap) -> Option<Key> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .and_then(|(_, value)| Key::parse(value))
}

/// An open session: who has its id in a cookie, and when it was last used.
struct Session {
    id: Key,
    last_used: Instant,
}

/// The pending launch tokens and the open sessions. Nothing expires by a timer: each
/// question first forgets what is too old, so an idle dashboard costs no wake-ups.
#[derive(Default)]
pub struct Keys {
    /// Tokens not yet used, with when each was minted, oldest first.
    tokens: Vec<(Key, Instant)>,
    sessions: Vec<Session>,
}

/// Index of the entry whose key matches `key`, comparing every entry in constant time
/// (how many bytes of a guess were right is never told by how long the search took).
fn position<T>(items: &[T], key: &Key, key_of: impl Fn(&T) -> &Key) -> Option<usize> {
    let mut found = None;
    for (i, item) in items.iter().enumerate() {
        if key_of(item).matches(key) {
            found = Some(i);
        }
    }
    found
}

impl Keys {
    /// A new launch token, valid once within `TOKEN_TTL`.
    pub fn mint(&mut self, now: Instant) -> Key {
        self.tokens
            .retain(|(_, minted)| now.saturating_duration_since(*minted) <= TOKEN_TTL);
        if self.tokens.len() >= MAX_TOKENS {
            self.tokens.remove(0);
        }
        let token = Key::random();
        self.tokens.push((token, now));
        token
    }

    /// Trades a launch token for a new session id; None when the token is unknown, used
    /// already or too old. A token is gone after this, whatever the answer.
    pub fn redeem(&mut self, token: &Key, now: Instant) -> Option<Key> {
        let i = position(&self.tokens, token, |(k, _)| k)?;
        let (_, minted) = self.tokens.remove(i);
        if now.saturating_duration_since(minted) > TOKEN_TTL {
            return None;
        }
        self.sessions
            .retain(|s| now.saturating_duration_since(s.last_used) <= SESSION_IDLE);
        if self.sessions.len() >= MAX_SESSIONS
            && let Some(lru) = self
                .sessions
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(i, _)| i)
        {
            self.sessions.swap_remove(lru);
        }
        let id = Key::random();
        self.sessions.push(Session { id, last_used: now });
        Some(id)
    }

    /// Whether `session` is open; using it keeps it open for another `SESSION_IDLE`.
    pub fn check(&mut self, session: &Key, now: Instant) -> bool {
        let Some(i) = position(&self.sessions, session, |s| &s.id) else {
            return false;
        };
        let Some(s) = self.sessions.get_mut(i) else {
            return false;
        };
        if now.saturating_duration_since(s.last_used) > SESSION_IDLE {
            self.sessions.swap_remove(i);
            return false;
        }
        s.last_used = now;
        true
    }

    /// Ends `session` (logging out).
    pub fn end(&mut self, session: &Key) {
        if let Some(i) = position(&self.sessions, session, |s| &s.id) {
            self.sessions.swap_remove(i);
        }
    }

    /// Tokens waiting and sessions open, for the log.
    pub fn counts(&self) -> (usize, usize) {
        (self.tokens.len(), self.sessions.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Instant {
        Instant::now()
    }

    fn cookies(values: &[&str]) -> axum::http::HeaderMap {
        let mut h = axum::http::HeaderMap::new();
        for v in values {
            h.append(axum::http::header::COOKIE, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn dashboard_session_cookie_is_found_among_others() {
        let k = Key::random();
        let cookie = format!("a=1; {COOKIE}={}; b=2", k.hex());
        assert_eq!(session_cookie(&cookies(&[&cookie])), Some(k));
        let two = format!("{COOKIE}={}", k.hex());
        assert_eq!(session_cookie(&cookies(&["a=1", &two])), Some(k));
        for none in ["", "mcpd_ui=", "mcpd_ui=zz", "xmcpd_ui=00", "mcpd_uix=1"] {
            assert_eq!(session_cookie(&cookies(&[none])), None, "{none}");
        }
        assert_eq!(session_cookie(&cookies(&[])), None);
    }

    #[test]
    fn dashboard_keys_are_64_hex_digits_and_parse_back() {
        let k = Key::random();
        let hex = k.hex();
        assert_eq!(hex.len(), 64);
        assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(Key::parse(&hex), Some(k));
        assert_eq!(Key::parse(&hex.to_uppercase()), Some(k));
        assert_ne!(Key::random(), k);
        for bad in [
            "",
            "00",
            &hex[..63],
            &format!("{hex}0"),
            &"g".repeat(64),
            &"é".repeat(32),
        ] {
            assert_eq!(Key::parse(bad), None, "{bad:?}");
        }
        assert_eq!(format!("{k:?}"), "Key(…)");
    }

    #[test]
    fn dashboard_token_opens_one_session_once() {
        let mut keys = Keys::default();
        let t = now();
        let token = keys.mint(t);
        let session = keys
            .redeem(&token, t)
            .expect("a fresh token opens a session");
        assert_eq!(keys.redeem(&token, t), None, "a token works once");
        assert!(keys.check(&session, t));
        assert!(!keys.check(&token, t), "a token is no session id");
        assert_eq!(keys.redeem(&Key::random(), t), None, "an unknown token");
        assert_eq!(keys.counts(), (0, 1));
    }

    #[test]
    fn dashboard_token_expires_after_two_minutes() {
        let mut keys = Keys::default();
        let t = now();
        let late = keys.mint(t);
        let in_time = keys.mint(t);
        assert!(keys.redeem(&in_time, t + TOKEN_TTL).is_some());
        assert_eq!(
            keys.redeem(&late, t + TOKEN_TTL + Duration::from_secs(1)),
            None
        );
        assert_eq!(keys.counts().0, 0, "an expired token is dropped too");
    }

    #[test]
    fn dashboard_tokens_are_capped_and_the_oldest_goes_first() {
        let mut keys = Keys::default();
        let t = now();
        let tokens: Vec<Key> = (0..MAX_TOKENS + 1).map(|_| keys.mint(t)).collect();
        assert_eq!(keys.counts().0, MAX_TOKENS);
        assert_eq!(keys.redeem(&tokens[0], t), None, "the oldest was dropped");
        assert!(keys.redeem(&tokens[1], t).is_some());
        assert!(keys.redeem(&tokens[MAX_TOKENS], t).is_some());
    }

    #[test]
    fn dashboard_sessions_expire_when_idle_and_use_keeps_them() {
        let mut keys = Keys::default();
        let t = now();
        let token = keys.mint(t);
        let used = keys.redeem(&token, t).unwrap();
        let token = keys.mint(t);
        let idle = keys.redeem(&token, t).unwrap();
        let half = t + SESSION_IDLE / 2;
        assert!(keys.check(&used, half));
        let later = t + SESSION_IDLE + Duration::from_secs(1);
        assert!(keys.check(&used, later), "used at half time, so still open");
        assert!(
            !keys.check(&idle, later),
            "idle for longer than SESSION_IDLE"
        );
        assert!(!keys.check(&idle, half), "ended for good");
    }

    #[test]
    fn dashboard_sessions_are_capped_and_the_least_recently_used_goes() {
        let mut keys = Keys::default();
        let t = now();
        let mut sessions = Vec::new();
        for i in 0..MAX_SESSIONS {
            let at = t + Duration::from_secs(i as u64);
            let token = keys.mint(at);
            sessions.push(keys.redeem(&token, at).unwrap());
        }
        let at = t + Duration::from_secs(1000);
        assert!(keys.check(&sessions[0], at), "the first, used again now");
        let token = keys.mint(at);
        let newest = keys.redeem(&token, at).unwrap();
        assert_eq!(keys.counts().1, MAX_SESSIONS);
        assert!(!keys.check(&sessions[1], at), "least recently used: ended");
        assert!(keys.check(&sessions[0], at));
        assert!(keys.check(&newest, at));
    }

    #[test]
    fn dashboard_logout_ends_a_session() {
        let mut keys = Keys::default();
        let t = now();
        let token = keys.mint(t);
        let s = keys.redeem(&token, t).unwrap();
        keys.end(&s);
        assert!(!keys.check(&s, t));
    }
}
