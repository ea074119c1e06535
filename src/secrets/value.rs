//! A secret's value (`SecretValue`) and its name (`SecretName`).
//!
//! The value is redacted in every `Debug` and `Display` and cleared from memory when
//! dropped; the name holds the characters a store can hold it under.

use std::fmt;
use zeroize::Zeroize;

/// A secret's value. It prints as `<redacted>` wherever it is formatted (logs, status,
/// errors, `{:?}` of anything holding it); only `expose` gives the text. Its bytes are
/// overwritten with zeros when it is dropped, so a value no longer needed does not linger
/// in freed heap (copies made from `expose` are the caller's to keep short-lived). The
/// config's header values and bearer tokens are this type too (`config::Secret`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    pub fn new(value: String) -> SecretValue {
        SecretValue(value)
    }

    /// The value itself, for the one place it is used (an environment variable, a header).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The value as a `String`, which is then the caller's to protect: for an API that
    /// takes ownership (a child's environment).
    pub fn into_exposed(mut self) -> String {
        std::mem::take(&mut self.0)
    }
}

impl Drop for SecretValue {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The longest name, in bytes: far above any real name, and short enough that a file name
/// made of it (`NAME.json`) stays under the usual 255-byte limit.
pub const MAX_NAME: usize = 128;

/// A secret's name: 1 to 128 ASCII letters, digits, `_`, `-` and `.`, not starting with
/// `.`. Names become file names in two stores (`$CREDENTIALS_DIRECTORY/NAME`,
/// `state_dir/secrets/NAME.json`), so a name can never be a path (`/`), a hidden file, or
/// `.` or `..`; and the same name must mean the same secret in every store, so no store
/// gets characters another could not hold.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SecretName(String);

impl SecretName {
    /// Checks `name`; the error says what is wrong with it (the name is no secret, so it is
    /// quoted).
    pub fn new(name: &str) -> Result<SecretName, String> {
        if name.is_empty() {
            return Err("a secret name cannot be empty".to_owned());
        }
        if name.len() > MAX_NAME {
            return Err(format!(
                "secret name {:?}… is {} bytes, over {MAX_NAME}",
                name.get(..32).unwrap_or_default(),
                name.len()
            ));
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        {
            return Err(format!(
                "secret name {name:?} has {c:?}: use letters, digits, `_`, `-` and `.`"
            ));
        }
        if name.starts_with('.') {
            return Err(format!("secret name {name:?} cannot start with `.`"));
        }
        Ok(SecretName(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SecretName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The secret names stored in `dir` as files named `NAME` + `suffix`, sorted; a missing
/// directory holds none. Blocking: both stores call it on a blocking thread.
#[allow(clippy::disallowed_methods, reason = "runs on a blocking thread")]
pub(super) fn names_in(
    dir: &std::path::Path,
    suffix: &str,
    what: &dyn Fn() -> String,
) -> Result<Vec<String>, super::SecretError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(super::SecretError::io(what(), e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| super::SecretError::io(what(), e))?;
        let file = entry.file_name();
        if let Some(name) = file.to_str().and_then(|f| f.strip_suffix(suffix))
            && SecretName::new(name).is_ok()
        {
            names.push(name.to_owned());
        }
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, expected: Result<(), &str>) {
        match (SecretName::new(name), expected) {
            (Ok(n), Ok(())) => assert_eq!(n.as_str(), name),
            (Err(e), Err(want)) => assert!(e.contains(want), "{name:?}: {e:?} lacks {want:?}"),
            (got, want) => panic!("{name:?}: got {got:?}, expected {want:?}"),
        }
    }

    #[test]
    fn names_are_letters_digits_underscores_dashes_and_dots() {
        check("GITHUB_TOKEN", Ok(()));
        check("gh-token.work", Ok(()));
        check("a", Ok(()));
        check("0", Ok(()));
        check(&"x".repeat(MAX_NAME), Ok(()));
        check("", Err("cannot be empty"));
        check(&"x".repeat(MAX_NAME + 1), Err("129 bytes, over 128"));
        check("a/b", Err("has '/'"));
        check("../etc", Err("has '/'"));
        check("a b", Err("has ' '"));
        check("tök", Err("has 'ö'"));
        check("a:b", Err("has ':'"));
        check("a}b", Err("has '}'"));
        check(".", Err("cannot start with `.`"));
        check("..", Err("cannot start with `.`"));
        check(".hidden", Err("cannot start with `.`"));
    }

    #[test]
    fn a_value_is_redacted_in_debug_and_display() {
        let v = SecretValue::new("hunter2-canary".into());
        assert_eq!(format!("{v:?}"), "<redacted>");
        assert_eq!(format!("{v}"), "<redacted>");
        assert_eq!(format!("{:?}", Some((&v, 1))), "Some((<redacted>, 1))");
        assert_eq!(v.expose(), "hunter2-canary");
        assert_eq!(v.clone().into_exposed(), "hunter2-canary");
    }
}
