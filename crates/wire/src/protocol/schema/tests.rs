//! Tests of the JSON Schema subset.
//!
//! What it accepts and rejects as JSON Schema does, and the depth limit and step budget.

use super::*;
use serde_json::json;

fn parse(text: &str) -> Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("bad test JSON {text}: {e}"))
}

/// Each line is `schema ;; value ;; ok | the mismatch`.
const SCHEMA: &str = r##"
{"type": "integer"} ;; 3 ;; ok
{"type": "integer"} ;; 3.0 ;; ok
{"type": "integer"} ;; 3.5 ;; (root): expected integer, got number
{"type": "number"} ;; 3 ;; ok
{"type": "number"} ;; "3" ;; (root): expected number, got string
{"type": ["string", "null"]} ;; null ;; ok
{"type": ["string", "null"]} ;; 1 ;; (root): expected string or null, got integer
{"type": "object"} ;; [] ;; (root): expected object, got array
{"type": "boolean"} ;; false ;; ok
{"type": "widget"} ;; 1 ;; ok
{"type": []} ;; 1 ;; ok
true ;; {"any": 1} ;; ok
false ;; 1 ;; (root): no value is allowed here (the schema is false)
"not a schema" ;; 1 ;; ok
{"pattern": "^a$", "format": "email", "$ref": "#/x", "not": {}} ;; "b" ;; ok
{"properties": {"count": {"type": "integer"}}, "required": ["count"]} ;; {"count": 1, "extra": true} ;; ok
{"properties": {"count": {"type": "integer"}}, "required": ["count"]} ;; {"count": "1"} ;; /count: expected integer, got string
{"properties": {"count": {"type": "integer"}}, "required": ["count"]} ;; {"tags": []} ;; (root): missing required property "count"
{"properties": {"tags": {"items": {"type": "string"}}}} ;; {"tags": ["a", 2]} ;; /tags/1: expected string, got integer
{"properties": {"a": {}}, "additionalProperties": false} ;; {"a": 1} ;; ok
{"properties": {"a": {}}, "additionalProperties": false} ;; {"a": 1, "b/~c": 2} ;; /b~1~0c: property is not allowed (additionalProperties is false)
{"additionalProperties": {"type": "number"}} ;; {"x": 1.5} ;; ok
{"additionalProperties": {"type": "number"}} ;; {"x": "1"} ;; /x: expected number, got string
{"patternProperties": {"^x": {}}, "additionalProperties": false} ;; {"x1": 1} ;; ok
{"required": ["a"]} ;; "not an object" ;; ok
{"items": [{"type": "string"}]} ;; [1] ;; ok
{"enum": ["a", 1, null]} ;; 1.0 ;; ok
{"enum": ["a", 1, null]} ;; "b" ;; (root): expected one of "a", 1, null, got "b"
{"enum": [0, 1, 2, 3, 4, 5, 6, 7, 8]} ;; 9 ;; (root): expected one of the 9 enum values, got 9
{"const": {"a": [1, 2]}} ;; {"a": [1, 2.0]} ;; ok
{"const": {"a": [1, 2]}} ;; {"a": [1, 3]} ;; (root): does not equal the const value
{"const": "x"} ;; true ;; (root): expected "x", got true
{"minimum": 1, "maximum": 9.5} ;; 1 ;; ok
{"minimum": 1, "maximum": 9.5} ;; 0.5 ;; (root): 0.5 is less than the minimum 1
{"minimum": 1, "maximum": 9.5} ;; 10 ;; (root): 10 is greater than the maximum 9.5
{"minimum": -1} ;; 18446744073709551615 ;; ok
{"maximum": -9223372036854775808} ;; 18446744073709551615 ;; (root): 18446744073709551615 is greater than the maximum -9223372036854775808
{"minimum": 5} ;; "6" ;; ok
{"minLength": 2, "maxLength": 3} ;; "éé" ;; ok
{"minLength": 2} ;; "é" ;; (root): string has 1 characters, fewer than minLength 2
{"maxLength": 3} ;; "abcd" ;; (root): string has 4 characters, more than maxLength 3
{"minItems": 1, "maxItems": 2} ;; [1] ;; ok
{"minItems": 1} ;; [] ;; (root): array has 0 items, fewer than minItems 1
{"maxItems": 2} ;; [1, 2, 3] ;; (root): array has 3 items, more than maxItems 2
{"minLength": "two", "minimum": "one", "required": "a", "properties": []} ;; {"a": ""} ;; ok
{"anyOf": [{"type": "string"}, {"type": "integer"}]} ;; 1 ;; ok
{"anyOf": [{"type": "string"}, {"type": "integer"}]} ;; 1.5 ;; (root): matches none of the 2 anyOf schemas
{"oneOf": [{"type": "number"}, {"type": "integer"}]} ;; 1.5 ;; ok
{"oneOf": [{"type": "number"}, {"type": "integer"}]} ;; 1 ;; (root): matches more than one of the oneOf schemas
{"oneOf": [{"type": "number"}, {"type": "integer"}]} ;; "1" ;; (root): matches none of the 2 oneOf schemas
{"properties": {"n": {"allOf": [{"minimum": 0}, {"maximum": 5}]}}} ;; {"n": 3} ;; ok
{"properties": {"n": {"allOf": [{"minimum": 0}, {"maximum": 5}]}}} ;; {"n": 6} ;; /n: 6 is greater than the maximum 5
{"anyOf": [], "oneOf": []} ;; 1 ;; ok
"##;

#[test]
fn the_schema_subset_accepts_and_rejects_as_json_schema_does() {
    for line in SCHEMA.lines().filter(|l| !l.trim().is_empty()) {
        let [schema, value, expected] = line.split(" ;; ").collect::<Vec<_>>()[..] else {
            panic!("bad case {line}");
        };
        let expected = if expected == "ok" {
            Ok(())
        } else {
            Err(expected.to_owned())
        };
        assert_eq!(validate(&parse(schema), &parse(value)), expected, "{line}");
    }
}

/// A one-field object, built by hand: `json!` would re-serialize a deep `value`.
fn obj(key: &str, value: Value) -> Value {
    Value::Object(Map::from_iter([(key.to_owned(), value)]))
}

fn nested(depth: usize, leaf: Value, wrap: impl Fn(Value) -> Value) -> Value {
    (0..depth).fold(leaf, |inner, _| wrap(inner))
}

#[test]
fn deep_schemas_and_values_stop_at_the_depth_limit() {
    let reason = "nested deeper than 64 levels; mcpd does not check further";
    let too_deep = Err(format!("(root): {reason}"));
    let all_of = |depth| {
        nested(depth, json!({"type": "string"}), |s| {
            obj("allOf", json!([s]))
        })
    };
    assert_eq!(validate(&all_of(60), &json!("ok")), Ok(()));
    assert_eq!(validate(&all_of(300), &json!("ok")), too_deep);
    let schema = nested(300, json!({}), |s| obj("properties", obj("a", s)));
    let value = nested(300, json!(1), |v| obj("a", v));
    let at_depth_65 = format!("{}: {reason}", "/a".repeat(65));
    assert_eq!(validate(&schema, &value), Err(at_depth_65));
    let list = nested(300, json!(1), |v| Value::Array(vec![v]));
    assert_eq!(validate(&obj("const", list.clone()), &list), too_deep);
    // A limit hit inside an anyOf branch is reported as the limit, not as "no match".
    let any = obj("anyOf", Value::Array(vec![all_of(100)]));
    assert_eq!(validate(&any, &json!(1)), too_deep);
}

#[test]
fn wide_schemas_over_long_values_stop_at_the_step_budget() {
    // Every item matches only the last branch, so each one costs 2000 steps.
    let mut branches = vec![json!({"type": "string"}); 1999];
    branches.push(json!({"type": "integer"}));
    let schema = json!({"items": {"anyOf": branches}});
    let got = validate(&schema, &json!(vec![1; 1000]));
    let over = "checking needs more than 1000000 steps; mcpd does not check further";
    assert!(got.as_ref().is_err_and(|e| e.ends_with(over)), "{got:?}");
    assert_eq!(validate(&schema, &json!(vec![1; 400])), Ok(()));
    assert!(matches!(
        judge(&schema, &json!(vec![1; 1000])),
        Judgement::Unchecked(_)
    ));
    assert!(matches!(
        judge(&schema, &json!(vec!["a"; 10])),
        Judgement::Matches
    ));
    assert!(matches!(
        judge(&schema, &json!([null])),
        Judgement::Mismatch(_)
    ));
}
