//! `${secret:NAME}` references inside a setting's value.
//!
//! Finding them (`references`) and replacing them with the values looked up
//! (`substitute`); pure text, no IO.
//!
//! The syntax follows the config's `${VAR}` (`config/remote.rs`, `expand`): a `$` not
//! followed by `{` stays as it is, an unterminated reference is an error, and there is
//! no `$$` escape (the config has none for `${VAR}` either). Anything else in `${…}`
//! (`${VAR}`, `${PROJECT}`) is not a secret reference and passes through untouched, for
//! its own expansion. Errors name the reference, never the text around it, which may
//! already hold an expanded value.

use super::value::{SecretName, SecretValue};

/// What starts a reference.
const OPEN: &str = "${secret:";

/// One piece of a value: text to keep, or a reference's name.
enum Piece<'a> {
    Text(&'a str),
    Secret(&'a str),
}

/// Splits `text` into its pieces, checking every reference's name. Linear in the text:
/// each search starts where the last one stopped.
fn pieces(text: &str) -> Result<Vec<Piece<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let (before, after_open) = rest.split_at(start);
        let after = after_open.get(OPEN.len()..).unwrap_or_default();
        let Some(end) = after.find('}') else {
            return Err("an unterminated ${secret: in the value".to_owned());
        };
        let (name, after_name) = after.split_at(end);
        if let Err(e) = SecretName::new(name) {
            return Err(format!("${{secret:{}}}: {e}", shorten(name)));
        }
        out.push(Piece::Text(before));
        out.push(Piece::Secret(name));
        rest = after_name.get(1..).unwrap_or_default();
    }
    out.push(Piece::Text(rest));
    Ok(out)
}

/// A name too long to repeat whole in an error, cut to its first 32 characters.
fn shorten(name: &str) -> String {
    match name.char_indices().nth(32) {
        Some((i, _)) => format!("{}…", name.get(..i).unwrap_or_default()),
        None => name.to_owned(),
    }
}

/// The names of the secrets `text` refers to with `${secret:NAME}`, each once, in the
/// order they first appear; an error for an unterminated reference or an invalid name.
pub fn references(text: &str) -> Result<Vec<String>, String> {
    let mut names: Vec<String> = Vec::new();
    for piece in pieces(text)? {
        if let Piece::Secret(name) = piece
            && !names.iter().any(|n| n == name)
        {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

/// `text` with every `${secret:NAME}` replaced by `lookup(NAME)`; an error (naming the
/// reference, never a value) for a malformed reference or a name `lookup` has no value
/// for. The result holds secret text, so it comes back as a `SecretValue`.
pub fn substitute<'v>(
    text: &str,
    lookup: impl Fn(&str) -> Option<&'v str>,
) -> Result<SecretValue, String> {
    let mut parts = Vec::new();
    for piece in pieces(text)? {
        match piece {
            Piece::Text(t) => parts.push(t),
            Piece::Secret(name) => match lookup(name) {
                Some(value) => parts.push(value),
                None => return Err(format!("${{secret:{name}}} has no value")),
            },
        }
    }
    // Sized once: a string that grew would leave copies of the secret in the buffers it
    // outgrew, which no one clears.
    let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        out.push_str(part);
    }
    Ok(SecretValue::new(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_refs(text: &str, expected: Result<&[&str], &str>) {
        match (references(text), expected) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{text:?}"),
            (Err(e), Err(want)) => assert!(e.contains(want), "{text:?}: {e:?} lacks {want:?}"),
            (got, want) => panic!("{text:?}: got {got:?}, expected {want:?}"),
        }
    }

    #[test]
    fn references_are_found_once_each_in_order() {
        check_refs("plain", Ok(&[]));
        check_refs("", Ok(&[]));
        check_refs("${secret:A}", Ok(&["A"]));
        check_refs("Bearer ${secret:gh-token}", Ok(&["gh-token"]));
        check_refs("${secret:b}:${secret:a}/${secret:b}", Ok(&["b", "a"]));
        check_refs("${secret:a.b_c-d}}", Ok(&["a.b_c-d"]));
        // Other references and lone dollars are not secrets.
        check_refs(
            "$HOME ${HOME} ${PROJECT} $ ${secretX} ${SECRET:a} $secret:a",
            Ok(&[]),
        );
        check_refs("${secret:a", Err("an unterminated ${secret:"));
        check_refs("${secret:a}${secret:", Err("an unterminated ${secret:"));
        check_refs(
            "${secret:}",
            Err("${secret:}: a secret name cannot be empty"),
        );
        check_refs(
            "${secret:a/b}",
            Err("${secret:a/b}: secret name \"a/b\" has '/'"),
        );
        check_refs("${secret:..}", Err("cannot start with `.`"));
        check_refs("${secret:${x}}", Err("has '$'"));
        let long = format!("${{secret:{}}}", "x".repeat(200));
        check_refs(&long, Err(&format!("${{secret:{}…}}", "x".repeat(32))));
    }

    fn lookup(name: &str) -> Option<&'static str> {
        match name {
            "a" => Some("AAA"),
            "b" => Some("${secret:a}"),
            "empty" => Some(""),
            _ => None,
        }
    }

    fn check_sub(text: &str, expected: Result<&str, &str>) {
        match (substitute(text, lookup), expected) {
            (Ok(got), Ok(want)) => assert_eq!(got.expose(), want, "{text:?}"),
            (Err(e), Err(want)) => assert!(e.contains(want), "{text:?}: {e:?} lacks {want:?}"),
            (got, want) => panic!("{text:?}: got {got:?}, expected {want:?}"),
        }
    }

    #[test]
    fn substitution_replaces_each_reference_and_keeps_the_rest() {
        check_sub("plain", Ok("plain"));
        check_sub("Bearer ${secret:a}", Ok("Bearer AAA"));
        check_sub("${secret:a}${secret:a}", Ok("AAAAAA"));
        check_sub("x${secret:empty}y", Ok("xy"));
        check_sub("${HOME}/$secret ${secret:a}", Ok("${HOME}/$secret AAA"));
        // A value is inserted as it is, never read for references again.
        check_sub("${secret:b}", Ok("${secret:a}"));
        check_sub("${secret:zzz}", Err("${secret:zzz} has no value"));
        check_sub("${secret:a", Err("unterminated"));
    }

    #[test]
    fn substitution_errors_never_carry_values_or_the_text() {
        let e = substitute("AAA-prefix ${secret:a} ${secret:zzz}", lookup).unwrap_err();
        assert!(!e.contains("AAA"), "{e}");
        let e = substitute("hunter2 ${secret:a/b}", lookup).unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn values_can_come_from_what_a_lookup_found() {
        let found =
            std::collections::HashMap::from([("tok".to_owned(), SecretValue::new("T".into()))]);
        let v = substitute("Bearer ${secret:tok}", |n| {
            found.get(n).map(SecretValue::expose)
        });
        assert_eq!(v.unwrap().expose(), "Bearer T");
    }

    #[test]
    fn a_substituted_value_is_redacted() {
        let v = substitute("Bearer ${secret:a}", lookup).unwrap();
        assert_eq!(format!("{v:?} {v}"), "<redacted> <redacted>");
    }
}
