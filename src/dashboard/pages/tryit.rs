//! A tool's try-it form, built from its `inputSchema`, and a call's answer as the page shows it.
//!
//! The form has a field per property: text, number, a choice for booleans and enums, JSON
//! for the rest, or the whole arguments as JSON. The arguments are read back from a
//! submitted form, and the answer is shown as text, structured content, images or errors.
//! Every name, description and result is the server's and is escaped by the templates.

use serde_json::{Map, Value};

/// Fields shown per tool at most; a larger schema is filled in as JSON.
const MAX_FIELDS: usize = 64;
/// Prefix of a property's form field (`arg:NAME`).
pub(super) const ARG: &str = "arg:";
/// The form field holding the whole arguments as JSON, when used.
pub(super) const RAW: &str = "json";

/// One input of a tool's form.
#[derive(Debug, Clone)]
pub(super) struct Field {
    /// The property's name (the form field is `arg:` and it).
    pub(super) name: String,
    pub(super) description: String,
    pub(super) required: bool,
    pub(super) kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Kind {
    Text,
    /// `integer` when whole numbers only.
    Number {
        integer: bool,
    },
    /// A choice of `true` / `false` (or left out).
    Boolean,
    /// One of the listed strings.
    Choice(Vec<String>),
    /// Objects, arrays and anything else: JSON text.
    Json,
}

impl Field {
    /// The template's view: which input to draw.
    pub(super) fn input(&self) -> &'static str {
        match self.kind {
            Kind::Text => "text",
            Kind::Number { .. } => "number",
            Kind::Boolean => "boolean",
            Kind::Choice(_) => "choice",
            Kind::Json => "json",
        }
    }

    pub(super) fn choices(&self) -> &[String] {
        match &self.kind {
            Kind::Choice(c) => c,
            _ => &[],
        }
    }

    pub(super) fn step(&self) -> &'static str {
        match self.kind {
            Kind::Number { integer: true } => "1",
            _ => "any",
        }
    }
}

/// The fields of a tool's form, or None when the schema has more properties than a form
/// shows (the whole-JSON field then does).
pub(super) fn fields(schema: &Value) -> Option<Vec<Field>> {
    let props = match schema.get("properties") {
        Some(Value::Object(p)) => p,
        _ => return Some(Vec::new()),
    };
    if props.len() > MAX_FIELDS {
        return None;
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    Some(
        props
            .iter()
            .map(|(name, p)| Field {
                name: name.clone(),
                description: p
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                required: required.contains(&name.as_str()),
                kind: kind(p),
            })
            .collect(),
    )
}

fn kind(p: &Value) -> Kind {
    if let Some(Value::Array(options)) = p.get("enum") {
        let strings: Option<Vec<String>> = options
            .iter()
            .map(|o| o.as_str().map(str::to_owned))
            .collect();
        if let Some(s) = strings.filter(|s| !s.is_empty()) {
            return Kind::Choice(s);
        }
    }
    match p.get("type").and_then(Value::as_str) {
        Some("string") => Kind::Text,
        Some("integer") => Kind::Number { integer: true },
        Some("number") => Kind::Number { integer: false },
        Some("boolean") => Kind::Boolean,
        _ => Kind::Json,
    }
}

/// The arguments a submitted form stands for: the whole-JSON field when filled in, else
/// each filled-in field converted by its kind (empty fields are left out). Says which
/// field is wrong and why.
pub(super) fn arguments(form: &[(String, String)], fields: &[Field]) -> Result<Value, String> {
    let value = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    if let Some(raw) = value(RAW).filter(|v| !v.trim().is_empty()) {
        return match serde_json::from_str::<Value>(raw) {
            Ok(v @ Value::Object(_)) => Ok(v),
            Ok(_) => Err("the arguments must be a JSON object".into()),
            Err(e) => Err(format!("the arguments are not JSON: {e}")),
        };
    }
    let mut out = Map::new();
    for f in fields {
        let Some(text) = value(&format!("{ARG}{}", f.name)).filter(|v| !v.is_empty()) else {
            continue;
        };
        let v = match &f.kind {
            Kind::Text | Kind::Choice(_) => Value::String(text.to_owned()),
            Kind::Number { integer: true } => text
                .trim()
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| format!("{} must be a whole number", f.name))?,
            // A whole number stays one (`2`, not `2.0`).
            Kind::Number { integer: false } => match text.trim().parse::<i64>() {
                Ok(n) => Value::from(n),
                Err(_) => text
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
                    .ok_or_else(|| format!("{} must be a number", f.name))?,
            },
            Kind::Boolean => match text {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => return Err(format!("{} must be true or false", f.name)),
            },
            Kind::Json => {
                serde_json::from_str(text).map_err(|e| format!("{} is not JSON: {e}", f.name))?
            }
        };
        out.insert(f.name.clone(), v);
    }
    Ok(Value::Object(out))
}

/// A call's answer as the page shows it.
#[derive(Debug, Default)]
pub(super) struct Answer {
    pub(super) tool: String,
    /// The arguments sent, as indented JSON.
    pub(super) arguments: String,
    /// The tool said its call failed (`isError`).
    pub(super) is_error: bool,
    /// The call got no result: mcpd's or the server's JSON-RPC error, or no answer.
    pub(super) failure: String,
    pub(super) texts: Vec<String>,
    /// `data:` URLs of images in a raster format.
    pub(super) images: Vec<String>,
    /// `structuredContent`, as indented JSON.
    pub(super) structured: String,
    /// Other content blocks, as indented JSON.
    pub(super) other: Vec<String>,
}

/// Image types shown inline; anything else is shown as its JSON.
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

impl Answer {
    /// The page's view of a JSON-RPC answer to `tools/call`.
    pub(super) fn of(tool: &str, arguments: &Value, answer: &Value) -> Answer {
        let mut a = Answer {
            tool: tool.to_owned(),
            arguments: pretty(arguments),
            ..Default::default()
        };
        if let Some(e) = answer.get("error") {
            let code = e.get("code").and_then(Value::as_i64).unwrap_or_default();
            let message = e.get("message").and_then(Value::as_str).unwrap_or("?");
            a.failure = format!("error {code}: {message}");
            return a;
        }
        let result = answer.get("result").unwrap_or(&Value::Null);
        a.is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
        if let Some(s) = result.get("structuredContent") {
            a.structured = pretty(s);
        }
        let blocks = result.get("content").and_then(Value::as_array);
        for block in blocks.into_iter().flatten() {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => a.texts.push(
                    block
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                ),
                Some("image") => match image_url(block) {
                    Some(url) => a.images.push(url),
                    None => a.other.push(pretty(block)),
                },
                _ => a.other.push(pretty(block)),
            }
        }
        a
    }
}

/// A `data:` URL for an image block in a raster format with well-formed base64, else None.
fn image_url(block: &Value) -> Option<String> {
    let mime = block.get("mimeType")?.as_str()?;
    let data = block.get("data")?.as_str()?;
    let base64 = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=');
    (IMAGE_TYPES.contains(&mime) && data.bytes().all(base64))
        .then(|| format!("data:{mime};base64,{data}"))
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn a_schema_becomes_fields_and_a_form_becomes_arguments() {
        let schema = json!({"type": "object", "required": ["text"], "properties": {
            "text": {"type": "string", "description": "what to echo"},
            "times": {"type": "integer"}, "ratio": {"type": "number"},
            "loud": {"type": "boolean"}, "mode": {"enum": ["a", "b"]},
            "extra": {"type": "object"}}});
        let f = fields(&schema).unwrap();
        assert_eq!(f.len(), 6);
        let text = f.iter().find(|x| x.name == "text").unwrap();
        assert!(text.required);
        assert_eq!(text.kind, Kind::Text);
        let args = arguments(
            &form(&[
                ("arg:text", "hi"),
                ("arg:times", "3"),
                ("arg:ratio", "0.5"),
                ("arg:loud", "true"),
                ("arg:mode", "b"),
                ("arg:extra", "{\"k\":1}"),
                ("arg:unknown", "x"),
            ]),
            &f,
        )
        .unwrap();
        assert_eq!(
            args,
            json!({"text": "hi", "times": 3, "ratio": 0.5, "loud": true, "mode": "b", "extra": {"k": 1}})
        );
        // Empty fields are left out; the whole-JSON field wins when filled in.
        assert_eq!(
            arguments(&form(&[("arg:text", "")]), &f).unwrap(),
            json!({})
        );
        assert_eq!(
            arguments(&form(&[("arg:text", "x"), ("json", "{\"a\": 1}")]), &f).unwrap(),
            json!({"a": 1})
        );
    }

    #[test]
    fn bad_form_values_are_named() {
        let f = fields(&json!({"properties": {"n": {"type": "integer"}, "o": {}}})).unwrap();
        let e = arguments(&form(&[("arg:n", "1.5")]), &f).unwrap_err();
        assert!(e.contains("n must be a whole number"), "{e}");
        let e = arguments(&form(&[("arg:o", "{")]), &f).unwrap_err();
        assert!(e.contains("o is not JSON"), "{e}");
        let e = arguments(&form(&[("json", "[1]")]), &f).unwrap_err();
        assert!(e.contains("JSON object"), "{e}");
    }

    #[test]
    fn answers_show_text_images_and_errors_and_refuse_odd_image_urls() {
        let ok = json!({"result": {"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
            {"type": "image", "mimeType": "image/svg+xml", "data": "PHN2Zz4="},
            {"type": "image", "mimeType": "image/png", "data": "x\" onerror=\"alert(1)"}],
            "structuredContent": {"n": 1}}});
        let a = Answer::of("t", &json!({}), &ok);
        assert_eq!(a.texts, vec!["hello"]);
        assert_eq!(a.images, vec!["data:image/png;base64,iVBORw0KGgo="]);
        assert_eq!(
            a.other.len(),
            2,
            "svg and a malformed payload are shown as JSON"
        );
        assert!(a.structured.contains("\"n\": 1"));
        let err = Answer::of(
            "t",
            &json!({}),
            &json!({"error": {"code": -32026, "message": "cancelled"}}),
        );
        assert_eq!(err.failure, "error -32026: cancelled");
        let failed = Answer::of(
            "t",
            &json!({}),
            &json!({"result": {"isError": true, "content": []}}),
        );
        assert!(failed.is_error);
    }

    #[test]
    fn a_huge_schema_is_filled_in_as_json() {
        let props: Map<String, Value> = (0..100)
            .map(|i| (format!("p{i}"), json!({"type": "string"})))
            .collect();
        assert!(fields(&json!({"properties": props})).is_none());
    }
}
