//! What of a definition is pinned, and its fingerprint.
//!
//! The whole definition as the server sent it (every field agents are shown: `_meta`,
//! `icons` and fields no spec names as well), in a canonical JSON form (keys sorted at
//! every depth, no whitespace), hashed with SHA-256.
//!
//! Pin files written when only some fields were pinned (name, title, description,
//! schemas, annotations, `execution`; URI and MIME type for resources) stay valid: a
//! definition with no other field has the same canonical form, and so the same
//! fingerprint, whole as it had cut down to those fields.
//!
//! The canonical form is written out here rather than left to `serde_json::to_string`,
//! which sorts keys only because no crate in the build turns on its `preserve_order`
//! feature: one dependency doing so would change every fingerprint, and every pinned
//! definition would wait for approval again.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;
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

/// A definition as pinned: its id, the definition whole and its fingerprint.
#[derive(Debug, Clone, PartialEq)]
pub struct Pinned {
    pub id: String,
    pub definition: Value,
    pub sha256: String,
}

/// The id and fingerprint of `item`, without copying it; None when it has no id (the
/// registry refuses such an item).
pub fn fingerprint_of(kind: Kind, item: &Value) -> Option<(&str, String)> {
    let id = item.get(kind.id_field())?.as_str()?;
    Some((id, fingerprint(item)))
}

/// The pinned form of `item`, copied out (the tests compare whole pins).
#[cfg(test)]
pub fn pin(kind: Kind, item: &Value) -> Option<Pinned> {
    let (id, sha256) = fingerprint_of(kind, item)?;
    Some(Pinned {
        id: id.to_owned(),
        definition: item.clone(),
        sha256,
    })
}

/// SHA-256 of the canonical form of `v`, in hex.
pub fn fingerprint(v: &Value) -> String {
    digest(&Canonical(v))
}

/// The canonical form of `v`: object keys sorted by their UTF-8 bytes at every depth, no
/// insignificant whitespace, strings and numbers as serde_json writes them.
#[cfg(test)]
pub fn canonical(v: &Value) -> String {
    serde_json::to_string(&Canonical(v)).unwrap_or_default()
}

/// SHA-256 of what `value` serializes to, streamed into the hash (no text is built).
fn digest(value: &impl Serialize) -> String {
    let mut hasher = Sha256::new();
    // Writing into a hash cannot fail, and a Value always serializes.
    let _ = serde_json::to_writer(&mut hasher, value);
    hex::encode(hasher.finalize())
}

/// A value serialized canonically: every object's members in key order.
struct Canonical<'a>(&'a Value);

impl Serialize for Canonical<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => {
                let mut members: Vec<(&String, &Value)> = map.iter().collect();
                members.sort_unstable_by(|a, b| a.0.cmp(b.0));
                let mut m = s.serialize_map(Some(members.len()))?;
                for (k, v) in members {
                    m.serialize_entry(k, &Canonical(v))?;
                }
                m.end()
            }
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Canonical(item))?;
                }
                seq.end()
            }
            scalar => scalar.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: Value, expected: &str) {
        assert_eq!(canonical(&v), expected);
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
        // Every field agents are shown is pinned: `_meta` (and a widget's URI in it),
        // icons, and fields no spec names.
        for (field, value) in [
            ("_meta", json!({"at": 1})),
            ("_meta", json!({"ui": {"resourceUri": "ui://x/w"}})),
            ("icons", json!([{"src": "https://evil.example/i.png"}])),
            ("x-anything", json!("IGNORE PREVIOUS")),
        ] {
            let mut f = a.clone();
            f[field] = value;
            assert_ne!(pa.sha256, pin(Kind::Tool, &f).unwrap().sha256, "{f}");
        }
        let mut g = a.clone();
        g["_meta"] = json!({"ui": {"resourceUri": "ui://x/w"}});
        let mut h = g.clone();
        h["_meta"]["ui"]["resourceUri"] = json!("ui://evil/w");
        assert_ne!(
            pin(Kind::Tool, &g).unwrap().sha256,
            pin(Kind::Tool, &h).unwrap().sha256
        );
    }

    #[test]
    fn a_fingerprint_is_the_hash_of_the_whole_definitions_canonical_form() {
        let item = json!({"name": "t", "z": 1, "description": "d", "inputSchema": {"b": 1, "a": [2, {"y": 1, "x": 0}]}});
        let p = pin(Kind::Tool, &item).unwrap();
        assert_eq!(p.sha256, fingerprint(&p.definition));
        assert_eq!(
            canonical(&p.definition),
            r#"{"description":"d","inputSchema":{"a":[2,{"x":0,"y":1}],"b":1},"name":"t","z":1}"#
        );
        // SHA-256 of "{}", as any other implementation computes it.
        assert_eq!(
            fingerprint(&json!({})),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
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

    /// Entries of a pin file written by mcpd when it pinned only some fields (taken from
    /// such a file, for the fixture server's definitions): whole definitions with no other
    /// field have the fingerprints written then.
    #[test]
    fn a_definition_with_only_the_fields_pinned_before_keeps_its_fingerprint() {
        let v1 = [
            (
                Kind::Tool,
                json!({"description": "Echoes the text argument, or the JSON of all arguments.", "inputSchema": {"properties": {"text": {"description": "Text to echo.", "type": "string"}}, "type": "object"}, "name": "echo"}),
                "c7ebae0ec97beb35b02474145d299462c104928c06df3b78631968319183cf9c",
            ),
            (
                Kind::Prompt,
                json!({"arguments": [{"description": "Who to greet.", "name": "name", "required": true}], "description": "Greets someone by name.", "name": "greet"}),
                "0737c08755fec928e52c1671959f2ac6a62db71e34bfff76ce2321cdf4ab922f",
            ),
            (
                Kind::Resource,
                json!({"mimeType": "text/plain", "name": "alpha", "uri": "fixture://alpha"}),
                "26503fe38b2857e8e6a2336f2798676b3620cf762b06f86d404db9277fdf6f07",
            ),
            (
                Kind::Template,
                json!({"name": "item", "uriTemplate": "fixture://items/{id}"}),
                "dfdcf2013c71ba867035c1fa825f4af787732917b633faf93efdf14e01527963",
            ),
        ];
        for (kind, definition, sha256) in &v1 {
            assert_eq!(
                pin(*kind, definition).unwrap().sha256,
                *sha256,
                "{definition}"
            );
            // The same with `_meta`: a change, held once after the upgrade.
            let mut with_meta = definition.clone();
            with_meta["_meta"] = json!({"k": "v"});
            assert_ne!(pin(*kind, &with_meta).unwrap().sha256, *sha256);
        }
    }
}
