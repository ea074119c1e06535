//! The modern HTTP transport's request-metadata headers.
//!
//! Value encoding and `x-mcp-header` tool annotations. No IO.

use base64::Engine;
use serde_json::Value;

/// Largest integer an `x-mcp-header` integer may carry (±(2^53−1)).
const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// Encodes a header value as the spec says: as it is, or wrapped as
/// `=?base64?…?=` when it has non-ASCII or control characters, leading or trailing
/// whitespace, or already looks like the wrapping.
pub fn header_value(s: &str) -> String {
    let needs_wrap = s.chars().any(|c| !c.is_ascii() || c.is_ascii_control())
        || s.starts_with(char::is_whitespace)
        || s.ends_with(char::is_whitespace)
        || (s.starts_with("=?base64?") && s.ends_with("?="));
    if needs_wrap {
        let b64 = base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
        format!("=?base64?{b64}?=")
    } else {
        s.to_owned()
    }
}

/// The header value of a tool argument: strings as they are (wrapped if needed),
/// integers in decimal, booleans as `true`/`false`. None for null or other types.
pub fn param_value(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(header_value(s)),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => n
            .as_i64()
            .filter(|i| i.abs() <= MAX_SAFE_INTEGER)
            .map(|i| i.to_string()),
        _ => None,
    }
}

/// RFC 9110 `tchar`.
fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// The `(argument, header name)` pairs a tool's input schema declares with
/// `x-mcp-header`, or why the annotations are invalid (then the tool must be dropped).
pub fn param_headers(input_schema: &Value) -> Result<Vec<(String, String)>, String> {
    let mut found = Vec::new();
    // Annotations reachable from the root through `properties` only.
    if let Some(props) = input_schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            if let Some(h) = prop.get("x-mcp-header") {
                let header = h
                    .as_str()
                    .ok_or_else(|| format!("x-mcp-header of {name:?} is not a string"))?;
                if header.is_empty() || !header.chars().all(is_tchar) {
                    return Err(format!(
                        "x-mcp-header {header:?} of {name:?} is not an HTTP token"
                    ));
                }
                let ty = prop.get("type").and_then(Value::as_str).unwrap_or("");
                if !matches!(ty, "string" | "integer" | "boolean") {
                    return Err(format!(
                        "x-mcp-header on {name:?}, whose type {ty:?} is not string, integer or boolean"
                    ));
                }
                if found
                    .iter()
                    .any(|(_, h): &(String, String)| h.eq_ignore_ascii_case(header))
                {
                    return Err(format!("x-mcp-header {header:?} is used twice"));
                }
                found.push((name.clone(), header.to_owned()));
            }
            if nested_annotation(prop, true) {
                return Err(format!("x-mcp-header nested below {name:?}"));
            }
        }
    }
    for (k, v) in input_schema.as_object().into_iter().flatten() {
        if k != "properties" && nested_annotation(v, false) {
            return Err(format!("x-mcp-header under {k:?}, where it is not allowed"));
        }
    }
    Ok(found)
}

/// Whether `x-mcp-header` appears anywhere below `v` (below its top level when `skip_top`).
fn nested_annotation(v: &Value, skip_top: bool) -> bool {
    match v {
        Value::Object(m) => m
            .iter()
            .any(|(k, v)| (!skip_top && k == "x-mcp-header") || nested_annotation(v, false)),
        Value::Array(a) => a.iter().any(|v| nested_annotation(v, false)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_wrapped_only_when_needed() {
        assert_eq!(header_value("plain-value 1"), "plain-value 1");
        assert_eq!(header_value(" lead"), "=?base64?IGxlYWQ=?=");
        assert_eq!(header_value("caf\u{e9}"), "=?base64?Y2Fmw6k=?=");
        assert_eq!(header_value("a\nb"), "=?base64?YQpi?=");
        assert_eq!(header_value("=?base64?x?="), "=?base64?PT9iYXNlNjQ/eD89?=");
        assert_eq!(param_value(&json!(42)), Some("42".into()));
        assert_eq!(param_value(&json!(true)), Some("true".into()));
        assert_eq!(param_value(&json!(1.5)), None);
        assert_eq!(param_value(&json!(null)), None);
        assert_eq!(param_value(&json!(9_007_199_254_740_993_i64)), None);
    }

    #[test]
    fn annotations_are_accepted_only_where_the_spec_allows() {
        let ok = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"},
            "plain": {"type": "string"}}});
        assert_eq!(
            param_headers(&ok).unwrap(),
            vec![("n".into(), "N".into()), ("region".into(), "Region".into())]
        );
        let bad = [
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "bad header"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "X"}, "b": {"type": "string", "x-mcp-header": "x"}}}),
            json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "X"}}}}),
            json!({"anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "X"}}}]}),
        ];
        for schema in bad {
            assert!(param_headers(&schema).is_err(), "{schema}");
        }
    }
}
