//! What of a definition is pinned, and its fingerprint: the fields agents are told, in a canonical JSON form (keys sorted at every depth, no whitespace), hashed with SHA-256.
//!
//! The canonical form is written out here rather than left to `serde_json::to_string`,
//! which sorts keys only because no crate in the build turns on its `preserve_order`
//! feature: one dependency doing so would change every fingerprint, and every pinned
//! definition would wait for approval again.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The kinds of definitions a server shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Tool,
    Prompt,
    Resource,
    Template,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::Resource => "resource",
            Kind::Template => "resource template",
        }
    }

    /// The fields agents are told, which a change to is a change of the definition.
    fn fields(self) -> &'static [&'static str] {
        match self {
            Kind::Tool => &[
                "name",
                "title",
                "description",
                "inputSchema",
                "outputSchema",
                "annotations",
                "execution",
            ],
            Kind::Prompt => &["name", "title", "description", "arguments"],
            Kind::Resource => &["name", "title", "description", "uri", "mimeType"],
            Kind::Template => &["name", "title", "description", "uriTemplate", "mimeType"],
        }
    }

    /// The field that names a definition: a tool's or prompt's name, a resource's URI,
    /// a template's URI template.
    pub fn id_field(self) -> &'static str {
        match self {
            Kind::Tool | Kind::Prompt => "name",
            Kind::Resource => "uri",
            Kind::Template => "uriTemplate",
        }
    }
}

/// A definition as pinned: its id, its pinned fields and their fingerprint.
#[derive(Debug, Clone, PartialEq)]
pub struct Pinned {
    pub id: String,
    pub fields: Value,
    pub sha256: String,
}

/// The pinned form of `item`; None when it has no id (the registry refuses such an item).
pub fn pin(kind: Kind, item: &Value) -> Option<Pinned> {
    let id = item.get(kind.id_field())?.as_str()?.to_owned();
    let fields: Map<String, Value> = kind
        .fields()
        .iter()
        .filter_map(|f| item.get(*f).map(|v| ((*f).to_owned(), v.clone())))
        .collect();
    let fields = Value::Object(fields);
    let sha256 = fingerprint(&fields);
    Some(Pinned { id, fields, sha256 })
}

/// SHA-256 of the canonical form, in hex.
pub fn fingerprint(v: &Value) -> String {
    let mut text = String::new();
    canonical(v, &mut text);
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Appends the canonical form of `v`: object keys sorted by their UTF-8 bytes at every
/// depth, no insignificant whitespace, strings and numbers as serde_json writes them.
pub fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(k) {
                    canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: Value, expected: &str) {
        let mut out = String::new();
        canonical(&v, &mut out);
        assert_eq!(out, expected);
    }

    #[test]
    fn the_canonical_form_sorts_keys_at_every_depth_and_keeps_arrays_in_order() {
        check(
            json!({"b": 1, "a": {"d": [3, {"z": 1, "y": 2}], "c": "x"}}),
            r#"{"a":{"c":"x","d":[3,{"y":2,"z":1}]},"b":1}"#,
        );
        check(json!("quote \" and \n"), r#""quote \" and \n""#);
        check(json!([1.5, null, true]), "[1.5,null,true]");
        check(json!({}), "{}");
    }

    #[test]
    fn reordering_members_is_not_a_change_but_any_pinned_text_is() {
        let a = json!({"name": "t", "description": "d", "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "number"}}}});
        let b = json!({"inputSchema": {"properties": {"y": {"type": "number"}, "x": {"type": "string"}}, "type": "object"}, "description": "d", "name": "t"});
        let pa = pin(Kind::Tool, &a).unwrap();
        assert_eq!(pa.sha256, pin(Kind::Tool, &b).unwrap().sha256);
        assert_eq!(pa.sha256.len(), 64);
        let mut c = a.clone();
        c["description"] = json!("d ");
        assert_ne!(pa.sha256, pin(Kind::Tool, &c).unwrap().sha256);
        let mut d = a.clone();
        d["inputSchema"]["properties"]["x"]["type"] = json!("integer");
        assert_ne!(pa.sha256, pin(Kind::Tool, &d).unwrap().sha256);
        let mut e = a.clone();
        e["annotations"] = json!({"destructiveHint": false});
        assert_ne!(pa.sha256, pin(Kind::Tool, &e).unwrap().sha256);
        // What agents are not told is not pinned.
        let mut f = a.clone();
        f["_meta"] = json!({"at": 1});
        assert_eq!(pa.sha256, pin(Kind::Tool, &f).unwrap().sha256);
    }

    #[test]
    fn each_kind_is_named_by_its_own_field() {
        assert_eq!(
            pin(Kind::Resource, &json!({"uri": "file:///a", "name": "a"}))
                .unwrap()
                .id,
            "file:///a"
        );
        assert_eq!(
            pin(
                Kind::Template,
                &json!({"uriTemplate": "x://{id}", "name": "x"})
            )
            .unwrap()
            .id,
            "x://{id}"
        );
        assert!(pin(Kind::Tool, &json!({"description": "no name"})).is_none());
    }

    #[test]
    fn a_newline_inside_a_value_cannot_pass_for_another_field() {
        // The weakness of a newline-joined fingerprint: "a\nb=c" must not equal two fields.
        let one = pin(
            Kind::Prompt,
            &json!({"name": "p", "description": "a\ntitle=b"}),
        )
        .unwrap();
        let two = pin(
            Kind::Prompt,
            &json!({"name": "p", "description": "a", "title": "b"}),
        )
        .unwrap();
        assert_ne!(one.sha256, two.sha256);
    }
}
