//! Reading and rewriting outgoing messages just enough to route them: is it a reply, whose, and giving renamed ids back.

use crate::jsonrpc::Id;
use serde::Deserialize;
use serde_json::Value;

/// Just enough of an outgoing message to route it.
pub struct Peek {
    pub id: Option<Id>,
    pub is_response: bool,
    pub is_request: bool,
}

impl Peek {
    pub fn of(line: &str) -> Peek {
        #[derive(Deserialize)]
        struct Head {
            #[serde(default)]
            id: Option<Value>,
            #[serde(default)]
            method: Option<serde::de::IgnoredAny>,
            #[serde(default)]
            result: Option<serde::de::IgnoredAny>,
            #[serde(default)]
            error: Option<serde::de::IgnoredAny>,
        }
        match serde_json::from_str::<Head>(line) {
            Ok(h) => Peek {
                is_response: h.method.is_none() && (h.result.is_some() || h.error.is_some()),
                is_request: h.method.is_some() && h.id.is_some(),
                id: h.id.as_ref().and_then(Id::from_value),
            },
            Err(_) => Peek {
                id: None,
                is_response: false,
                is_request: false,
            },
        }
    }
}

/// Gives a reply back the client's own id. Replies are written with the envelope keys
/// first (`{"jsonrpc":"2.0","id":…`), so the id is spliced in without re-parsing the
/// result; anything else is parsed and rewritten.
pub fn restore_id(line: String, original: &Id) -> String {
    const HEAD: &str = "{\"jsonrpc\":\"2.0\",\"id\":\"h";
    if let Some(rest) = line.strip_prefix(HEAD)
        && let Some(end) = rest.find('"')
        && rest[..end].bytes().all(|b| b.is_ascii_digit())
    {
        let id = original.to_value().to_string();
        let tail = &rest[end + 1..];
        return format!("{{\"jsonrpc\":\"2.0\",\"id\":{id}{tail}");
    }
    // Only an object has an id to give back; indexing any other value would panic.
    match serde_json::from_str::<Value>(&line) {
        Ok(Value::Object(mut v)) => {
            v.insert("id".to_owned(), original.to_value());
            Value::Object(v).to_string()
        }
        _ => line,
    }
}

/// Gives a subscription's notification back the client's own request id.
pub fn restore_subscription(line: String, original: &Id) -> String {
    let Ok(mut v) = serde_json::from_str::<Value>(&line) else {
        return line;
    };
    if let Some(meta) = v
        .pointer_mut("/params/_meta")
        .and_then(Value::as_object_mut)
    {
        meta.insert(
            crate::protocol::era::key::SUBSCRIPTION_ID.to_owned(),
            original.to_value(),
        );
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc;
    use serde_json::json;

    #[test]
    fn replies_get_their_ids_back() {
        let line = jsonrpc::result_line(&Id::Str("h12".into()), &json!({"a": "h1\""}));
        let back = restore_id(line, &Id::Num(7.into()));
        let v: Value = serde_json::from_str(&back).unwrap();
        assert_eq!(v["id"], json!(7));
        assert_eq!(v["result"]["a"], json!("h1\""));
        let other = "{\"id\":\"h3\",\"jsonrpc\":\"2.0\",\"result\":{}}".to_owned();
        let v: Value = serde_json::from_str(&restore_id(other, &Id::Str("x".into()))).unwrap();
        assert_eq!(v["id"], json!("x"));
    }

    #[test]
    fn lines_that_are_not_objects_come_back_unchanged() {
        // Found by the `http_wire` fuzz target: restoring the id of `1` panicked.
        for line in ["1", "[]", "\"h1\"", "null", "true", "not json"] {
            assert_eq!(restore_id(line.to_owned(), &Id::Num(7.into())), line);
        }
    }

    #[test]
    fn peek_tells_responses_from_requests() {
        let p = Peek::of(r#"{"jsonrpc":"2.0","id":1,"result":{"method":"x"}}"#);
        assert!(p.is_response && !p.is_request);
        let p = Peek::of(r#"{"jsonrpc":"2.0","id":"mcpd-1","method":"elicitation/create"}"#);
        assert!(p.is_request && !p.is_response);
        let p = Peek::of(r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#);
        assert!(!p.is_request && !p.is_response);
    }
}
