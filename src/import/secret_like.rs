//! Which literal values of a client's `env` and `headers` are secrets.
//!
//! Those are what `mcpd import` moves into mcpd's secret store: by the key's name (TOKEN,
//! KEY, SECRET, PASSWORD, AUTH, CREDENTIAL…) and by the value's shape (`ghp_…`, `sk-…`,
//! `Bearer …`, long random strings), never a plain value (a path, a URL, `true`, a
//! number).

/// Words that make a key's name say "secret" wherever they stand in it
/// (`GITHUB_PERSONAL_ACCESS_TOKEN`, `X-Auth-Token`, `DB_PASSWORD`).
const SECRET_PARTS: [&str; 8] = [
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "APIKEY",
    "COOKIE",
    "PRIVATEKEY",
];

/// Last words of a key's name that say it holds something about a secret, not the secret:
/// `TOKEN_URL`, `AUTH_TYPE`, `KEY_FILE`, `MAX_TOKENS`.
const NOT_THE_SECRET: [&str; 24] = [
    "MODE", "TYPE", "METHOD", "PROVIDER", "FILE", "PATH", "DIR", "URL", "URI", "ENDPOINT", "HOST",
    "PORT", "SCHEME", "HEADER", "ENABLED", "DISABLED", "REQUIRED", "LIMIT", "MAX", "COUNT",
    "TOKENS", "TTL", "TIMEOUT", "EXPIRY",
];

/// Prefixes of well-known credential formats: GitHub, GitLab, OpenAI and Anthropic,
/// Stripe, Slack, Google, npm, PyPI, Hugging Face, Linear, Shopify, DigitalOcean,
/// SendGrid, a JWT.
const TOKEN_PREFIXES: [&str; 22] = [
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "xoxb-",
    "xoxp-",
    "xapp-",
    "AIza",
    "npm_",
    "pypi-",
    "hf_",
    "lin_api_",
    "shpat_",
    "dop_v1_",
    "eyJ",
];

/// HTTP authentication schemes written before the credentials (`Bearer XYZ`): only the
/// credentials move, the scheme stays in the config.
const SCHEMES: [&str; 4] = ["Bearer", "Basic", "Token", "Bot"];

/// A long value of token characters this long or longer, with letters and digits mixed,
/// looks random enough to be a key.
const RANDOM_LEN: usize = 32;

/// The part of a literal `value` of `key` (an env variable or a header name) to move
/// into the secret store, with the text written before its `${secret:NAME}` in the
/// config (`"Bearer "` for `Authorization: Bearer XYZ`); None when it stays as it is.
pub(super) fn secret_part<'a>(key: &str, value: &'a str) -> Option<(&'a str, &'a str)> {
    if value.trim().is_empty() {
        return None;
    }
    // A literal `${` cannot be written into mcpd's config as it is: there it would be a
    // reference. The store keeps it verbatim.
    let must_move = value.contains("${");
    let by_name = secret_name(key) && !plain(value);
    if !(must_move || by_name || secret_shape(value)) {
        return None;
    }
    Some(split_scheme(value))
}

/// Whether a key's name says it holds a secret.
fn secret_name(key: &str) -> bool {
    let words = words(key);
    let joined: String = words.concat();
    if words
        .last()
        .is_some_and(|w| NOT_THE_SECRET.contains(&w.as_str()))
    {
        return false;
    }
    SECRET_PARTS.iter().any(|p| joined.contains(p))
        || words.iter().any(|w| {
            w.ends_with("KEY")
                || matches!(w.as_str(), "PAT" | "PASS" | "DSN" | "SIGNATURE")
                || (w.starts_with("AUTH") && !w.starts_with("AUTHOR"))
                || w.starts_with("AUTHORIZATION")
                || w == "OAUTH"
        })
}

/// A name's words, uppercase: split at anything not a letter or digit, and where a
/// lowercase letter meets an uppercase one (`apiKey`, `X-Api-Key`, `API_KEY`).
fn words(key: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut last_lower = false;
    for c in key.chars() {
        let boundary = !c.is_ascii_alphanumeric() || (last_lower && c.is_ascii_uppercase());
        if boundary && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        if c.is_ascii_alphanumeric() {
            word.push(c.to_ascii_uppercase());
        }
        last_lower = c.is_ascii_lowercase();
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// A value no one would call a secret whatever its key: a flag, a number, a path, a URL
/// without credentials in it.
fn plain(value: &str) -> bool {
    let v = value.trim();
    let lower = v.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "none" | "null" | "enabled" | "disabled"
    ) {
        return true;
    }
    if v.parse::<f64>().is_ok() {
        return true;
    }
    if v.starts_with(['/', '~', '.']) || v.get(1..3) == Some(":\\") {
        return true;
    }
    if let Some((_, rest)) = v.split_once("://") {
        return !url_has_credentials(rest);
    }
    false
}

/// Whether the part of a URL after `scheme://` carries credentials: a user or password
/// before the host (`user:pass@host`, a Sentry DSN's `KEY@host`) or a query parameter
/// named like a secret (`?api_key=…`).
fn url_has_credentials(rest: &str) -> bool {
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return true;
    }
    let query = rest.split_once('?').map_or("", |(_, q)| q);
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .any(|(k, v)| !v.is_empty() && secret_name(k))
}

/// Whether a value looks like credentials whatever its key: a known token format, an
/// authentication scheme with credentials, a URL with credentials, or a long random string.
fn secret_shape(value: &str) -> bool {
    let v = value.trim();
    if let Some((_, rest)) = v.split_once("://") {
        return url_has_credentials(rest);
    }
    // "Bearer XYZ…" under any key; a short word after "Token" is prose, not credentials.
    let (scheme, credentials) = split_scheme(v);
    if !scheme.is_empty() {
        return credentials.len() >= 8;
    }
    let token_char =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '+' | '/' | '=');
    if v.is_empty() || !v.chars().all(token_char) {
        return false;
    }
    let prefixed = TOKEN_PREFIXES
        .iter()
        .any(|p| v.strip_prefix(p).is_some_and(|rest| rest.len() >= 8));
    prefixed || random(v)
}

/// A long string of letters mixed with digits whose characters vary enough to be random
/// (an identifier made of words has long runs of letters; a key does not).
fn random(v: &str) -> bool {
    if v.len() < RANDOM_LEN || v.starts_with(['/', '.']) {
        return false;
    }
    let digits = v.chars().filter(char::is_ascii_digit).count();
    let letters = v.chars().filter(char::is_ascii_alphabetic).count();
    if digits == 0 || letters == 0 {
        return false;
    }
    entropy(v) >= 3.5
}

/// Shannon entropy in bits per character.
fn entropy(v: &str) -> f64 {
    let mut counts = [0u32; 128];
    let mut n = 0u32;
    for b in v.bytes() {
        if let Some(c) = counts.get_mut(usize::from(b & 0x7f)) {
            *c += 1;
            n += 1;
        }
    }
    let n = f64::from(n.max(1));
    counts
        .iter()
        .filter(|c| **c > 0)
        .map(|c| {
            let p = f64::from(*c) / n;
            -p * p.log2()
        })
        .sum()
}

/// `("Bearer ", "XYZ")` for `"Bearer XYZ"` (any of [`SCHEMES`], any case, one word of
/// credentials after it); `("", value)` otherwise.
fn split_scheme(value: &str) -> (&str, &str) {
    let Some((scheme, rest)) = value.split_once(' ') else {
        return ("", value);
    };
    let credentials = rest.trim_start();
    let known = SCHEMES.iter().any(|s| s.eq_ignore_ascii_case(scheme));
    if !known || credentials.is_empty() || credentials.contains(char::is_whitespace) {
        return ("", value);
    }
    let prefix_len = value.len() - credentials.len();
    (value.get(..prefix_len).unwrap_or_default(), credentials)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `expected`: None when the value stays, else the text kept before the reference
    /// and the part that moves.
    fn check(key: &str, value: &str, expected: Option<(&str, &str)>) {
        assert_eq!(secret_part(key, value), expected, "{key} = {value:?}");
    }

    #[test]
    fn secrets_are_told_by_their_keys_names() {
        check("GITHUB_TOKEN", "abc", Some(("", "abc")));
        check("GITHUB_PERSONAL_ACCESS_TOKEN", "x1", Some(("", "x1")));
        check("OPENAI_API_KEY", "k", Some(("", "k")));
        check("apiKey", "k", Some(("", "k")));
        check(
            "X-Api-Key",
            "literal-key-123",
            Some(("", "literal-key-123")),
        );
        check("DB_PASSWORD", "hunter2", Some(("", "hunter2")));
        check("CLIENT_SECRET", "s", Some(("", "s")));
        check(
            "GOOGLE_APPLICATION_CREDENTIALS_JSON",
            "{}",
            Some(("", "{}")),
        );
        check("X-Auth-Token", "t", Some(("", "t")));
        check("Cookie", "session=abc", Some(("", "session=abc")));
        check(
            "SENTRY_DSN",
            "https://k@o1.ingest.sentry.io/1",
            Some(("", "https://k@o1.ingest.sentry.io/1")),
        );
        check("AUTH", "letmein", Some(("", "letmein")));
    }

    #[test]
    fn authorization_keeps_its_scheme_and_moves_the_credentials() {
        check("Authorization", "Bearer XYZ", Some(("Bearer ", "XYZ")));
        check("Authorization", "bearer  XYZ", Some(("bearer  ", "XYZ")));
        check(
            "Authorization",
            "Basic dXNlcjpwYXNz",
            Some(("Basic ", "dXNlcjpwYXNz")),
        );
        check("Authorization", "Custom a b", Some(("", "Custom a b")));
        check("Proxy-Authorization", "Token t", Some(("Token ", "t")));
        check(
            "X-Whatever",
            "Bearer XYZ12345",
            Some(("Bearer ", "XYZ12345")),
        );
        check("DESCRIPTION", "Token based", None);
    }

    #[test]
    fn secrets_are_told_by_their_shape_whatever_the_key() {
        check(
            "X-Client",
            "ghp_0123456789abcdefghij",
            Some(("", "ghp_0123456789abcdefghij")),
        );
        check(
            "OPENAI",
            "sk-proj-abcdefgh12345678",
            Some(("", "sk-proj-abcdefgh12345678")),
        );
        check(
            "GOOGLE",
            "AIzaSyA1234567890abcdefgh",
            Some(("", "AIzaSyA1234567890abcdefgh")),
        );
        check(
            "X",
            "9f8e7d6c5b4a39281706f5e4d3c2b1a0f9e8d7c6",
            Some(("", "9f8e7d6c5b4a39281706f5e4d3c2b1a0f9e8d7c6")),
        );
        check(
            "DATABASE_URL",
            "postgres://me:pw@db/app",
            Some(("", "postgres://me:pw@db/app")),
        );
        check(
            "ENDPOINT",
            "https://x.example/?api_key=abc",
            Some(("", "https://x.example/?api_key=abc")),
        );
        check("LITERAL", "a${b}", Some(("", "a${b}")));
    }

    #[test]
    fn plain_values_stay() {
        check("LOG_LEVEL", "debug", None);
        check("GITHUB_TOKEN_PATH", "/home/me/.token", None);
        check("KEY_FILE", "~/key.pem", None);
        check("TOKEN_URL", "https://auth.example/token", None);
        check("AUTH_TYPE", "oauth", None);
        check("MAX_TOKENS", "4096", None);
        check("DISABLE_AUTH", "true", None);
        check("API_KEY", "", None);
        check("GITHUB_TOKEN", "false", None);
        check("AUTHOR", "Ada Lovelace", None);
        check("X-Team", "acme", None);
        check("X-Client", "mcpd-import-test", None);
        check("KEYBOARD_LAYOUT", "us", None);
        check("MODEL", "sk-learn", None);
        check("NAME", "this_is_a_long_identifier_made_of_words", None);
        check("DATABASE_URL", "postgres://db.example/app", None);
        check("UUIDISH", "0000000000000000000000000000000000", None);
    }
}
