//! The check of a tool's `structuredContent` against its `outputSchema`.
//!
//! A lenient subset of JSON Schema.
//!
//! This is a subset of JSON Schema 2020-12: `type` (a name or an array of names),
//! `properties`, `required`, `additionalProperties` (a bool or a schema), `items` (a schema),
//! `enum`, `const`, `minimum`, `maximum`, `minLength`, `maxLength`, `minItems`, `maxItems`,
//! `anyOf`, `oneOf` and `allOf`, plus boolean schemas. It is lenient about what it does not
//! know. Other keywords (`$ref`, `pattern`, `format`, `not`, `prefixItems`,
//! `exclusiveMinimum`, …), unknown type names, and malformed keyword values are ignored, so
//! it rejects a value only for a reason it fully understands. `additionalProperties` is
//! skipped when `patternProperties` is present, because patterns are not matched here. As in
//! 2020-12, `1.0` is an integer, string length counts characters, and `enum`/`const` compare
//! numbers by value.

use std::cmp::Ordering;

use serde_json::{Map, Number, Value};

/// The deepest nesting of schema (or of values compared by `enum`/`const`) that is checked.
/// The limit keeps a hostile schema from overflowing the stack.
pub const MAX_DEPTH: usize = 64;

/// Work allowed for one schema check. Tree-shaped schemas cannot blow up exponentially,
/// but a wide `anyOf` applied to a long array still costs |schema| × |value|.
const MAX_STEPS: usize = 1_000_000;

/// What checking a value against a schema found.
#[derive(Debug, PartialEq)]
pub enum Judgement {
    Matches,
    /// `"<JSON pointer>: <reason>"`.
    Mismatch(String),
    /// The check hit mcpd's depth or step limit: the answer is not known. Says where.
    Unchecked(String),
}

/// Checks `value` against `schema`.
pub fn judge(schema: &Value, value: &Value) -> Judgement {
    let mut validator = Validator { steps: 0 };
    match validator.check(schema, value, 0) {
        Ok(()) => Judgement::Matches,
        Err(f) => {
            let path = if f.path.is_empty() { "(root)" } else { &f.path };
            let why = format!("{path}: {}", f.reason);
            if f.limit {
                Judgement::Unchecked(why)
            } else {
                Judgement::Mismatch(why)
            }
        }
    }
}

/// Checks `value` against `schema`. On a mismatch, or where mcpd's limits stop the
/// check, it returns `"<JSON pointer>: <reason>"`.
#[cfg(test)]
pub fn validate(schema: &Value, value: &Value) -> Result<(), String> {
    match judge(schema, value) {
        Judgement::Matches => Ok(()),
        Judgement::Mismatch(why) | Judgement::Unchecked(why) => Err(why),
    }
}

/// Why a value failed. `path` is built on the way back up the recursion, so it costs
/// nothing while values pass.
struct Failure {
    path: String,
    reason: String,
    /// The depth or step limit was hit. An `anyOf` branch that fails this way must not count
    /// as "no match": the answer is not known, so the whole check fails.
    limit: bool,
}

impl Failure {
    fn new(reason: String) -> Failure {
        Failure {
            path: String::new(),
            reason,
            limit: false,
        }
    }

    fn under(mut self, segment: &str) -> Failure {
        let escaped = clip(segment).replace('~', "~0").replace('/', "~1");
        self.path.insert_str(0, &format!("/{escaped}"));
        self
    }
}

struct Validator {
    steps: usize,
}

type Checking = Result<(), Failure>;
type Schema = Map<String, Value>;

impl Validator {
    fn spend(&mut self, steps: usize, depth: usize) -> Checking {
        self.steps = self.steps.saturating_add(steps);
        let reason = if depth > MAX_DEPTH {
            format!("nested deeper than {MAX_DEPTH} levels; mcpd does not check further")
        } else if self.steps > MAX_STEPS {
            format!("checking needs more than {MAX_STEPS} steps; mcpd does not check further")
        } else {
            return Ok(());
        };
        Err(Failure {
            limit: true,
            ..Failure::new(reason)
        })
    }

    fn check(&mut self, schema: &Value, value: &Value, depth: usize) -> Checking {
        self.spend(1, depth)?;
        let schema = match schema {
            Value::Object(schema) => schema,
            Value::Bool(false) => {
                return Err(Failure::new(
                    "no value is allowed here (the schema is false)".into(),
                ));
            }
            // `true` and anything that is not a schema at all accept every value.
            _ => return Ok(()),
        };
        check_type(schema, value)?;
        self.check_enum_const(schema, value, depth)?;
        match value {
            Value::Number(n) => check_number(schema, n)?,
            Value::String(s) => self.check_string(schema, s, depth)?,
            Value::Array(items) => self.check_array(schema, items, depth)?,
            Value::Object(fields) => self.check_object(schema, fields, depth)?,
            Value::Null | Value::Bool(_) => {}
        }
        self.check_combinators(schema, value, depth)
    }

    fn check_enum_const(&mut self, schema: &Schema, value: &Value, depth: usize) -> Checking {
        if let Some(expected) = schema.get("const")
            && !self.equal(expected, value, depth)?
        {
            let reason = match expected {
                Value::Array(_) | Value::Object(_) => "does not equal the const value".to_owned(),
                _ => format!("expected {}, got {}", show(expected), show(value)),
            };
            return Err(Failure::new(reason));
        }
        if let Some(Value::Array(options)) = schema.get("enum") {
            for option in options {
                if self.equal(option, value, depth)? {
                    return Ok(());
                }
            }
            let allowed = if options.len() <= 8 {
                options.iter().map(show).collect::<Vec<_>>().join(", ")
            } else {
                format!("the {} enum values", options.len())
            };
            return Err(Failure::new(format!(
                "expected one of {allowed}, got {}",
                show(value)
            )));
        }
        Ok(())
    }

    /// JSON equality, with numbers compared by value (`1 == 1.0`) and bounded depth.
    fn equal(&mut self, a: &Value, b: &Value, depth: usize) -> Result<bool, Failure> {
        self.spend(1, depth)?;
        Ok(match (a, b) {
            (Value::Number(x), Value::Number(y)) => num_cmp(x, y) == Some(Ordering::Equal),
            (Value::Array(xs), Value::Array(ys)) => {
                if xs.len() != ys.len() {
                    return Ok(false);
                }
                for (x, y) in xs.iter().zip(ys) {
                    if !self.equal(x, y, depth + 1)? {
                        return Ok(false);
                    }
                }
                true
            }
            (Value::Object(xs), Value::Object(ys)) => {
                if xs.len() != ys.len() {
                    return Ok(false);
                }
                for (key, x) in xs {
                    match ys.get(key) {
                        Some(y) if self.equal(x, y, depth + 1)? => {}
                        _ => return Ok(false),
                    }
                }
                true
            }
            _ => a == b,
        })
    }

    fn check_string(&mut self, schema: &Schema, s: &str, depth: usize) -> Checking {
        let min = schema.get("minLength").and_then(Value::as_u64);
        let max = schema.get("maxLength").and_then(Value::as_u64);
        if min.is_none() && max.is_none() {
            return Ok(());
        }
        // Counting characters reads the whole string, so a long one costs more steps.
        self.spend(s.len() / 1024, depth)?;
        let count = u64::try_from(s.chars().count()).unwrap_or(u64::MAX);
        if let Some(min) = min.filter(|&min| count < min) {
            let reason = format!("string has {count} characters, fewer than minLength {min}");
            return Err(Failure::new(reason));
        }
        if let Some(max) = max.filter(|&max| count > max) {
            let reason = format!("string has {count} characters, more than maxLength {max}");
            return Err(Failure::new(reason));
        }
        Ok(())
    }

    fn check_array(&mut self, schema: &Schema, items: &[Value], depth: usize) -> Checking {
        let count = u64::try_from(items.len()).unwrap_or(u64::MAX);
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && count < min
        {
            let reason = format!("array has {count} items, fewer than minItems {min}");
            return Err(Failure::new(reason));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && count > max
        {
            let reason = format!("array has {count} items, more than maxItems {max}");
            return Err(Failure::new(reason));
        }
        // The old tuple form (`items` as an array) is not checked.
        if let Some(item_schema @ (Value::Object(_) | Value::Bool(_))) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                self.check(item_schema, item, depth + 1)
                    .map_err(|f| f.under(&i.to_string()))?;
            }
        }
        Ok(())
    }

    fn check_object(
        &mut self,
        schema: &Schema,
        fields: &Map<String, Value>,
        depth: usize,
    ) -> Checking {
        if let Some(Value::Array(required)) = schema.get("required") {
            self.spend(required.len(), depth)?;
            if let Some(missing) = required
                .iter()
                .filter_map(Value::as_str)
                .find(|name| !fields.contains_key(*name))
            {
                let reason = format!("missing required property {:?}", clip(missing));
                return Err(Failure::new(reason));
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        // A property that matches `patternProperties` is not "additional", and patterns are
        // not matched here, so `additionalProperties` is only checked when there are none.
        let additional = match schema.contains_key("patternProperties") {
            true => None,
            false => schema.get("additionalProperties"),
        };
        for (key, field) in fields {
            let result = match (properties.and_then(|p| p.get(key)), additional) {
                (Some(property_schema), _) => self.check(property_schema, field, depth + 1),
                (None, Some(Value::Bool(false))) => Err(Failure::new(
                    "property is not allowed (additionalProperties is false)".to_owned(),
                )),
                (None, Some(extra_schema)) => self.check(extra_schema, field, depth + 1),
                (None, None) => Ok(()),
            };
            result.map_err(|f| f.under(key))?;
        }
        Ok(())
    }

    fn check_combinators(&mut self, schema: &Schema, value: &Value, depth: usize) -> Checking {
        if let Some(Value::Array(all)) = schema.get("allOf") {
            for branch in all {
                self.check(branch, value, depth + 1)?;
            }
        }
        // Empty `anyOf`/`oneOf` arrays are malformed schemas, so they are ignored.
        if let Some(Value::Array(any)) = schema.get("anyOf")
            && !any.is_empty()
            && self.count_matches(any, value, depth, 1)? == 0
        {
            let reason = format!("matches none of the {} anyOf schemas", any.len());
            return Err(Failure::new(reason));
        }
        if let Some(Value::Array(one)) = schema.get("oneOf")
            && !one.is_empty()
        {
            let reason = match self.count_matches(one, value, depth, 2)? {
                0 => format!("matches none of the {} oneOf schemas", one.len()),
                1 => return Ok(()),
                _ => "matches more than one of the oneOf schemas".to_owned(),
            };
            return Err(Failure::new(reason));
        }
        Ok(())
    }

    /// How many `branches` accept `value`. It stops counting at `enough`.
    fn count_matches(
        &mut self,
        branches: &[Value],
        value: &Value,
        depth: usize,
        enough: usize,
    ) -> Result<usize, Failure> {
        let mut matched = 0;
        for branch in branches {
            match self.check(branch, value, depth + 1) {
                Ok(()) => matched += 1,
                Err(f) if f.limit => return Err(f),
                Err(_) => {}
            }
            if matched >= enough {
                break;
            }
        }
        Ok(matched)
    }
}

fn check_type(schema: &Schema, value: &Value) -> Checking {
    let names: Vec<&str> = match schema.get("type") {
        Some(Value::String(name)) => vec![name.as_str()],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => return Ok(()),
    };
    const KNOWN: [&str; 7] = [
        "null", "boolean", "object", "array", "number", "integer", "string",
    ];
    // A type name that is not known might be the value's type, so the check is lenient.
    let accepted = names.is_empty()
        || names.iter().any(|name| {
            !KNOWN.contains(name)
                || type_name(value) == *name
                || (*name == "number" && value.is_number())
        });
    if accepted {
        return Ok(());
    }
    let reason = format!("expected {}, got {}", names.join(" or "), type_name(value));
    Err(Failure::new(reason))
}

fn check_number(schema: &Schema, n: &Number) -> Checking {
    if let Some(min) = schema.get("minimum").and_then(Value::as_number)
        && num_cmp(n, min) == Some(Ordering::Less)
    {
        return Err(Failure::new(format!("{n} is less than the minimum {min}")));
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_number)
        && num_cmp(n, max) == Some(Ordering::Greater)
    {
        return Err(Failure::new(format!(
            "{n} is greater than the maximum {max}"
        )));
    }
    Ok(())
}

/// The JSON Schema type name of `value`. A number with no fractional part is an "integer".
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if is_integer(n) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(n: &Number) -> bool {
    n.is_i64()
        || n.is_u64()
        || n.as_f64()
            .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

/// Compares numbers by value. It is exact when both are integers.
fn num_cmp(a: &Number, b: &Number) -> Option<Ordering> {
    let exact = |n: &Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (exact(a), exact(b)) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// A short, non-recursive rendering of a value for a message.
fn show(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{:?}", clip(s)),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
        scalar => scalar.to_string(),
    }
}

/// Cuts upstream-controlled text that goes into a message to 64 characters.
pub fn clip(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((end, _)) => format!("{}…", s.get(..end).unwrap_or_default()),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests;
