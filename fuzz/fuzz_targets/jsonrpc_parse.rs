//! Fuzz target: `jsonrpc::parse` and `peek_result` on arbitrary text, and messages written back out parse to the same id and method.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpd_wire::jsonrpc::{
    Id, Message, ParseError, error_line, notification_line, parse, peek_result, raw_result_line,
    request_line, response_line,
};

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = parse(line);
    if let Some(peeked) = peek_result(line) {
        check_peeked(line, peeked.id, peeked.range, &parsed);
    }
    match parsed {
        Ok(message) => check_rewritten(&message),
        Err(e) => {
            // Every refusal can be answered: the error line must itself be a response.
            let answer = error_line(e.id(), &e.to_error_object());
            if e.id().is_some() {
                assert!(
                    matches!(parse(&answer), Ok(Message::Response(_))),
                    "{answer}"
                );
            }
        }
    }
});

/// What `peek_result` finds must be what `parse` finds: a result response with that id,
/// whose result is the text in the range.
fn check_peeked(
    line: &str,
    id: u64,
    range: std::ops::Range<usize>,
    parsed: &Result<Message, ParseError>,
) {
    let Some(text) = line.get(range) else {
        panic!("peek_result's range is not inside the line: {line:?}");
    };
    let r = match parsed {
        Ok(Message::Response(r)) => r,
        // Valid JSON text that serde_json skips over but will not build into values: a
        // number too large for an f64 (`1E400`), a lone surrogate escape (`"\ud800"`).
        // The result passes on as the server wrote it, where a parse into values
        // refuses it. Nothing else may tell the two apart.
        Err(ParseError::NotJson(e)) if unbuildable(e) => return,
        _ => panic!("peek_result found a result in a line parse refuses: {line:?} -> {parsed:?}"),
    };
    assert_eq!(r.id, Id::from(id), "{line:?}");
    let Ok(result) = &r.outcome else {
        panic!("peek_result found a result in an error response: {line:?}");
    };
    let Ok(in_place) = serde_json::from_str::<serde_json::Value>(text) else {
        panic!("peek_result's range is not JSON: {text:?}");
    };
    assert_eq!(&in_place, result, "{line:?}");
    // Passing the server's text on under another id keeps the result.
    let passed = raw_result_line(&Id::Str("a".into()), text);
    assert!(
        matches!(parse(&passed), Ok(Message::Response(_))),
        "{passed}"
    );
}

/// Whether serde_json refused to build a value out of valid JSON text.
fn unbuildable(error: &str) -> bool {
    [
        "number out of range",
        "surrogate",
        "hex escape",
        "unicode code point",
    ]
    .iter()
    .any(|m| error.contains(m))
}

/// A message written with the module's writers parses again to the same kind, id and
/// method.
fn check_rewritten(message: &Message) {
    let written = match message {
        Message::Request(r) => request_line(&r.id, &r.method, r.params.as_ref()),
        Message::Notification(n) => notification_line(&n.method, n.params.as_ref()),
        Message::Response(r) => response_line(&r.id, &r.outcome),
    };
    let again = parse(&written).unwrap_or_else(|e| panic!("{written:?} does not parse: {e}"));
    match (message, &again) {
        (Message::Request(a), Message::Request(b)) => {
            assert!(same_id(&a.id, &b.id), "{a:?} -> {b:?}");
            assert_eq!(a.method, b.method);
        }
        (Message::Notification(a), Message::Notification(b)) => assert_eq!(a.method, b.method),
        (Message::Response(a), Message::Response(b)) => {
            assert!(same_id(&a.id, &b.id), "{a:?} -> {b:?}");
            assert_eq!(a.outcome.is_ok(), b.outcome.is_ok());
        }
        (a, b) => panic!("{a:?} was written as {written:?}, which parses as {b:?}"),
    }
}

/// Ids are equal, except that a non-integer number may come back one unit in the last
/// place off: serde_json's default float parsing is not exact, and that is not mcpd's
/// doing (integers, which is what clients send, must match exactly).
fn same_id(a: &Id, b: &Id) -> bool {
    match (a, b) {
        (Id::Num(x), Id::Num(y)) if x.is_f64() && y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            x == y || (x - y).abs() <= f64::EPSILON * x.abs().max(y.abs()) * 4.0
        }
        _ => a == b,
    }
}
