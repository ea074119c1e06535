//! Reading and rewriting outgoing messages just enough to route them.
//!
//! Is it a reply, whose, and giving renamed ids back.
//!
//! The relay's renaming (`relay.rs`) is a proxy's: a request the client wrote gets `h<N>`
//! in its text (`jsonrpc::with_id`), and its reply and a subscription's notifications get
//! the client's id back exactly as written, spliced into the line without re-parsing it on
//! the common path. The upstream actor's ids (`upstream/actor/requests.rs`) look alike but
//! are not a rename: that actor writes its requests itself under numbers of its own, never
//! sees an agent's id and restores none (answers go back through a channel). Only a
//! counter and a map would be common, with different keys (any `Id` here, since a legacy
//! session's relay keys the same map by the client's own ids), values and bounds; a shared
//! type would wrap those two fields and name no concept that either side lacks.

use mcpd_wire::jsonrpc::Id;
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
            mcpd_wire::protocol::era::key::SUBSCRIPTION_ID.to_owned(),
            original.to_value(),
        );
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpd_wire::jsonrpc;
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

    /// An id as a client may write it: integers across the i64 and u64 ranges, and
    /// strings of any characters.
    fn client_id() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
        ]
    }

    /// The `id` member of `line` exactly as written.
    fn raw_id(line: &str) -> String {
        #[derive(Deserialize)]
        struct Head<'a> {
            #[serde(borrow)]
            id: &'a serde_json::value::RawValue,
        }
        serde_json::from_str::<Head>(line)
            .unwrap()
            .id
            .get()
            .to_owned()
    }

    proptest::proptest! {
        /// The shared stateless connection renames every request's id to `hN`; whatever
        /// the client's id was, the reply gives it back in the same JSON form.
        #[test]
        fn renamed_ids_are_restored_exactly(id in client_id(), n in 0u64..u64::MAX, ok in proptest::bool::ANY) {
            let written = id.to_string();
            let line = format!(r#"{{"jsonrpc":"2.0","id":{written},"method":"tools/call"}}"#);
            let peek = Peek::of(&line);
            proptest::prop_assert!(peek.is_request);
            let original = peek.id.unwrap();
            let renamed = Id::Str(format!("h{n}"));
            let reply = if ok {
                jsonrpc::result_line(&renamed, &json!({"content": [], "id": "h1"}))
            } else {
                jsonrpc::error_line(Some(&renamed), &jsonrpc::ErrorObject::new(-32000, "h"))
            };
            let back = restore_id(reply.clone(), &original);
            proptest::prop_assert_eq!(raw_id(&back), written);
            let (mut sent, mut got): (Value, Value) =
                (serde_json::from_str(&reply).unwrap(), serde_json::from_str(&back).unwrap());
            sent["id"] = Value::Null;
            got["id"] = Value::Null;
            proptest::prop_assert_eq!(sent, got);
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
