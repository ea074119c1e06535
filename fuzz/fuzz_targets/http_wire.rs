//! Fuzz target: the HTTP relay's message peeking and id restoring on arbitrary lines; a renamed request's reply gets its client's id back exactly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpd::fuzzing::{Peek, restore_id, restore_subscription};
use mcpd_wire::jsonrpc::{ErrorObject, Id, error_line, result_line};
use mcpd_wire::protocol::era::key::SUBSCRIPTION_ID;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let original = client_id(data.len());
    let peek = Peek::of(line);
    assert!(!(peek.is_request && peek.is_response), "{line:?}");
    check_restored(line, &original);
    check_subscription(line, &original);
    if peek.is_request {
        check_renamed_round_trip(line);
    }
});

/// Ids a client may use: integers (large, negative), strings with quotes and escapes.
fn client_id(seed: usize) -> Id {
    match seed % 5 {
        0 => Id::Num(7.into()),
        1 => Id::Num(u64::MAX.into()),
        2 => Id::Num((-9_007_199_254_740_993_i64).into()),
        3 => Id::Str("h1\"\\\u{0}é\u{2028}".into()),
        _ => Id::Str(String::new()),
    }
}

/// On any object with one `id`, restoring gives exactly the client's id and keeps
/// every other member; anything else comes back unchanged or still parses the same.
fn check_restored(line: &str, original: &Id) {
    let restored = restore_id(line.to_owned(), original);
    let Ok(Value::Object(mut before)) = serde_json::from_str::<Value>(line) else {
        return;
    };
    if !single_id(line) {
        return;
    }
    let Ok(Value::Object(mut after)) = serde_json::from_str::<Value>(&restored) else {
        panic!("{line:?} restored as {restored:?}, which is no JSON object");
    };
    assert_eq!(
        after.remove("id"),
        Some(original.to_value()),
        "{restored:?}"
    );
    before.remove("id");
    assert!(
        same_json(&Value::Object(before), &Value::Object(after)),
        "{line:?} -> {restored:?}"
    );
}

/// Whether the object in `line` has at most one `id` member (a derived struct refuses a
/// duplicated field, where a `Value` keeps the last).
fn single_id(line: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct OnlyId {
        #[allow(dead_code)]
        id: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_str::<OnlyId>(line).is_ok()
}

fn check_subscription(line: &str, original: &Id) {
    let restored = restore_subscription(line.to_owned(), original);
    if restored == line {
        return;
    }
    let Ok(v) = serde_json::from_str::<Value>(&restored) else {
        panic!("{line:?} became {restored:?}, which is not JSON");
    };
    if let Some(meta) = v.pointer("/params/_meta").and_then(Value::as_object) {
        assert_eq!(
            meta.get(SUBSCRIPTION_ID),
            Some(&original.to_value()),
            "{restored:?}"
        );
    }
}

/// What the relay does with a client's request on the shared connection: rename its id
/// to `hN`, and restore it on the reply the connection writes, a result or an error.
fn check_renamed_round_trip(line: &str) {
    let Ok(Value::Object(mut m)) = serde_json::from_str::<Value>(line) else {
        return;
    };
    let Some(original) = m.get("id").and_then(Id::from_value) else {
        return;
    };
    let renamed = Id::Str(format!("h{}", line.len()));
    m.insert("id".into(), renamed.to_value());
    let result = json!({ "echo": m.get("params") });
    let replies = [
        result_line(&renamed, &result),
        error_line(Some(&renamed), &ErrorObject::new(-32601, "no such method")),
    ];
    for reply in replies {
        let back = restore_id(reply.clone(), &original);
        let Ok(v) = serde_json::from_str::<Value>(&back) else {
            panic!("{reply:?} restored as {back:?}, which is not JSON");
        };
        assert!(
            same_json(&v["id"], &original.to_value()),
            "{line:?}: {back:?}"
        );
        let Ok(sent) = serde_json::from_str::<Value>(&reply) else {
            panic!("{reply:?} is not JSON");
        };
        assert_eq!(v.get("result"), sent.get("result"), "{back:?}");
        assert_eq!(v.get("error"), sent.get("error"), "{back:?}");
    }
}

/// JSON equality, except that a non-integer number may differ in the last place:
/// serde_json's default float parsing is not exact, and that is not what is checked here.
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            x == y || (x - y).abs() <= f64::EPSILON * x.abs().max(y.abs()) * 4.0
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}
