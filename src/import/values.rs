//! How a client's values refer to environment variables, rewritten as mcpd's `${VAR}`.
//!
//! The references are `${VAR}`, VS Code's `${env:VAR}` and Gemini's `$VAR`. This file
//! also reads plain values out of an entry.

use super::Dialect;
use super::notes::Notes;
use serde_json::Value;
use std::fmt::Write as _;

/// How a value refers to environment variables.
pub(super) enum Ref {
    /// No reference at all: a literal, possibly a secret.
    Literal,
    /// Only references mcpd understands, rewritten as mcpd's `${VAR}`.
    Vars(String),
    /// A reference mcpd cannot resolve (VS Code's `${input:…}`, a `${VAR:-default}`), and why.
    Unresolvable(String),
}

/// How `value` refers to variables, as its client reads it.
pub(super) fn reference(value: &str, dialect: Dialect) -> Ref {
    match dialect {
        // Codex never expands a value: it names variables with keys of their own.
        Dialect::Codex => Ref::Literal,
        Dialect::Json => braced(value),
        Dialect::Gemini => dollar(value),
    }
}

/// Whether `value` refers to a variable (or looks like it does) as its client reads it.
pub(super) fn has_reference(value: &str, dialect: Dialect) -> bool {
    !matches!(reference(value, dialect), Ref::Literal)
}

/// A variable name mcpd's `${VAR}` takes.
pub(super) fn is_var_name(var: &str) -> bool {
    !var.is_empty()
        && !var.starts_with(|c: char| c.is_ascii_digit())
        && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `${VAR}` and `${env:VAR}`: Claude Code, Cursor and VS Code.
fn braced(value: &str) -> Ref {
    if !value.contains("${") {
        return Ref::Literal;
    }
    let mut out = String::new();
    let mut rest = value;
    while let Some((before, after)) = rest.split_once("${") {
        out.push_str(before);
        let Some((inner, tail)) = after.split_once('}') else {
            return Ref::Unresolvable("an unterminated ${".into());
        };
        let var = inner.strip_prefix("env:").unwrap_or(inner);
        if !is_var_name(var) {
            return Ref::Unresolvable(format!("${{{inner}}} cannot be resolved by mcpd"));
        }
        // Writing to a String cannot fail.
        let _ = write!(out, "${{{var}}}");
        rest = tail;
    }
    out.push_str(rest);
    Ref::Vars(out)
}

/// `$VAR`, `${VAR}` and `${VAR:-default}`: Gemini CLI expands them in every value of its
/// settings. A `$` followed by neither is literal, as it is in mcpd.
fn dollar(value: &str) -> Ref {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::new();
    let mut found = false;
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let var = match chars.peek() {
            Some('{') => {
                chars.next();
                let mut inner = String::new();
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == '}' {
                        closed = true;
                        break;
                    }
                    inner.push(c);
                }
                if !closed {
                    return Ref::Unresolvable("an unterminated ${".into());
                }
                if inner.contains(":-") {
                    return Ref::Unresolvable(format!(
                        "${{{inner}}} has a default value, which mcpd's ${{VAR}} cannot express"
                    ));
                }
                inner
            }
            Some(c) if word(*c) => {
                let mut var = String::new();
                while let Some(c) = chars.next_if(|c| word(*c)) {
                    var.push(c);
                }
                var
            }
            _ => {
                out.push('$');
                continue;
            }
        };
        if !is_var_name(&var) {
            return Ref::Unresolvable(format!("${var} cannot be resolved by mcpd"));
        }
        found = true;
        let _ = write!(out, "${{{var}}}");
    }
    if found { Ref::Vars(out) } else { Ref::Literal }
}

/// The variables an mcpd value refers to (`${VAR}`), in order, each once.
pub(super) fn vars_in(value: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = value;
    while let Some((_, after)) = rest.split_once("${") {
        let Some((var, tail)) = after.split_once('}') else {
            break;
        };
        if !out.iter().any(|v| v == var) {
            out.push(var.to_owned());
        }
        rest = tail;
    }
    out
}

/// The variable of a value that is exactly one `${VAR}` reference, as [`reference()`]
/// rewrites it.
pub(super) fn whole_var(value: &str) -> Option<&str> {
    let var = value.strip_prefix("${")?.strip_suffix('}')?;
    (!var.contains(['$', '{', '}'])).then_some(var)
}

/// The string values of a JSON object field; other values are reported and left out.
pub(super) fn strings(
    v: Option<&Value>,
    what: &str,
    field: &str,
    notes: &mut Notes,
) -> Vec<(String, String)> {
    let Some(v) = v else {
        return Vec::new();
    };
    let Some(map) = v.as_object() else {
        notes.warn(format!("{what}: \"{field}\" is not an object; ignored"));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (k, v) in map {
        match v {
            Value::String(s) => out.push((k.clone(), s.clone())),
            Value::Number(_) | Value::Bool(_) => out.push((k.clone(), v.to_string())),
            _ => notes.warn(format!("{what}: {field} {k} is not a string; ignored")),
        }
    }
    out
}

/// A list of strings; other items are reported and left out, and a value that is not a
/// list at all is None (reported).
pub(super) fn string_list(
    v: &Value,
    what: &str,
    field: &str,
    notes: &mut Notes,
) -> Option<Vec<String>> {
    let Some(items) = v.as_array() else {
        notes.warn(format!("{what}: \"{field}\" is not a list; ignored"));
        return None;
    };
    let mut out = Vec::new();
    for item in items {
        match item.as_str() {
            Some(s) => out.push(s.to_owned()),
            None => notes.warn(format!(
                "{what}: {field} has {item}, which is not a string; ignored"
            )),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(value: &str, dialect: Dialect, expected: Option<&str>) {
        match (reference(value, dialect), expected) {
            (Ref::Literal, Some(e)) if e == value => {}
            (Ref::Vars(v), Some(e)) => assert_eq!(v, e, "{value:?}"),
            (Ref::Unresolvable(_), None) => {}
            (Ref::Literal, _) => panic!("{value:?} read as a literal"),
            (Ref::Vars(v), None) => panic!("{value:?} read as {v:?}"),
            (Ref::Unresolvable(why), Some(_)) => panic!("{value:?} unresolvable: {why}"),
        }
    }

    #[test]
    fn references_are_recognised_per_client() {
        use Dialect::*;
        check("abc", Json, Some("abc"));
        check("Bearer ${env:TOK}", Json, Some("Bearer ${TOK}"));
        check("${input:key}", Json, None);
        check("$TOK", Json, Some("$TOK"));
        check("Bearer $TOK", Gemini, Some("Bearer ${TOK}"));
        check("${A}-$B_2/x", Gemini, Some("${A}-${B_2}/x"));
        check("cost: 5$", Gemini, Some("cost: 5$"));
        check("${TOK:-dev}", Gemini, None);
        check("$1abc", Gemini, None);
        check("${TOK", Gemini, None);
        check("${TOK}", Codex, Some("${TOK}"));
        assert!(matches!(reference("${TOK}", Codex), Ref::Literal));
    }

    #[test]
    fn variables_are_listed_once() {
        assert_eq!(vars_in("${A} and ${B}, ${A}"), ["A", "B"]);
        assert_eq!(whole_var("${A}"), Some("A"));
        assert_eq!(whole_var("x${A}"), None);
    }
}
