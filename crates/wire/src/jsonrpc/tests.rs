//! Tests of the JSON-RPC message model.
//!
//! Parsing, ids kept exactly, the writers, and `peek_result`, `peek_tool_call` and
//! `peek_name_and_arguments` against `parse`.

use super::*;
use crate::jsonrpc::strategies::id_text;

/// The `id` member of `line` exactly as written.
fn raw_id(line: &str) -> String {
    let members = crate::json::scan::members(line).unwrap();
    let (_, id) = members.into_iter().find(|(k, _)| k == "id").unwrap();
    id.to_owned()
}

fn check(line: &str, expected: Result<&str, i64>) {
    match (parse(line), expected) {
        (Ok(m), Ok(kind)) => {
            let k = match m {
                Message::Request(_) => "request",
                Message::Notification(_) => "notification",
                Message::Response(_) => "response",
            };
            assert_eq!(k, kind, "{line}");
        }
        (Err(e), Err(code)) => assert_eq!(e.to_error_object().code, code, "{line}"),
        (got, want) => panic!("{line}: got {got:?}, want {want:?}"),
    }
}

#[test]
fn lines_parse_into_the_right_kind_or_error() {
    check(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, Ok("request"));
    check(
        r#"{"jsonrpc":"2.0","id":"a","method":"x","params":{}}"#,
        Ok("request"),
    );
    check(
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        Ok("notification"),
    );
    check(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, Ok("response"));
    check(
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m"}}"#,
        Ok("response"),
    );
    check("not json", Err(code::PARSE_ERROR));
    check(r#"{"jsonrpc":"2.0","id":1,"#, Err(code::PARSE_ERROR));
    check("[1,2]", Err(code::INVALID_REQUEST));
    check("42", Err(code::INVALID_REQUEST));
    check(r#"{"id":1,"method":"x"}"#, Err(code::INVALID_REQUEST));
    check(
        r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#,
        Err(code::INVALID_REQUEST),
    );
    check(
        r#"{"jsonrpc":"2.0","id":1,"method":5}"#,
        Err(code::INVALID_REQUEST),
    );
    check(
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#,
        Err(code::INVALID_REQUEST),
    );
    check(r#"{"jsonrpc":"2.0","id":1}"#, Err(code::INVALID_REQUEST));
    check(
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#,
        Err(code::INVALID_REQUEST),
    );
}

#[test]
fn plain_results_are_found_in_place_and_everything_else_is_left_to_parse() {
    let check = |line: &str, want: Option<(u64, &str)>| {
        let got = peek_result(line).map(|p| (p.id, &line[p.range]));
        assert_eq!(got, want, "{line}");
    };
    check(
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#,
        Some((7, r#"{"content":[]}"#)),
    );
    check(
        r#"{ "result" : [1, "x"] , "id": 3, "jsonrpc": "2.0" }"#,
        Some((3, r#"[1, "x"]"#)),
    );
    check(r#"{"jsonrpc":"2.0","id":"7","result":{}}"#, None);
    check(r#"{"jsonrpc":"2.0","id":7.0,"result":{}}"#, None);
    check(r#"{"jsonrpc":"2.0","id":-1,"result":{}}"#, None);
    check(r#"{"jsonrpc":"1.0","id":7,"result":{}}"#, None);
    check(
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":""}}"#,
        None,
    );
    check(r#"{"jsonrpc":"2.0","id":7,"result":{},"result":{}}"#, None);
    check(r#"{"jsonrpc":"2.0","id":7,"method":"x","result":{}}"#, None);
    check(r#"{"jsonrpc":"2.0","id":7,"id":8,"result":{}}"#, None);
    check(r#"{"jsonrpc":"2.0","id":7,"result":{"#, None);
    check(r#"{"jsonrpc":"2.0","id":7,"result":{"a":[1,]}}"#, None);
    check("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\"a\u{1}\"}", None);
    check(r#"["2.0",7,null,null,{},null]"#, None);
    check("not json", None);
    // Keys are compared as serde_json reads them; members mcpd does not know may repeat.
    check(
        r#"{"jsonrpc":"2.0","\u0069d":7,"res\u0075lt":{"x":"\"}"},"y":1,"y":2}"#,
        Some((7, r#"{"x":"\"}"}"#)),
    );
    assert_eq!(
        raw_result_line(&Id::Str("a".into()), r#"{"x": 1}"#),
        r#"{"jsonrpc":"2.0","id":"a","result":{"x": 1}}"#
    );
}

proptest::proptest! {
    /// What the agent side does with every request it passes upstream: it keeps the
    /// agent's id and writes it back on the reply, in whichever way the reply is
    /// written. The id comes back byte for byte.
    #[test]
    fn an_agents_id_comes_back_exactly_on_every_kind_of_reply(id in id_text()) {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{}}}}"#);
        let Ok(Message::Request(r)) = parse(&line) else {
            panic!("{line} does not parse as a request");
        };
        let error = ErrorObject::new(code::INTERNAL_ERROR, "x");
        for reply in [
            result_line(&r.id, &Value::Null),
            raw_result_line(&r.id, r#"{"content":[]}"#),
            error_line(Some(&r.id), &error),
            response_line(&r.id, &Ok(Value::Bool(true))),
            response_line(&r.id, &Err(error.clone())),
        ] {
            proptest::prop_assert_eq!(&raw_id(&reply), &id, "{}", reply);
            let Ok(Message::Response(back)) = parse(&reply) else {
                panic!("{reply} does not parse as a response");
            };
            proptest::prop_assert_eq!(&back.id, &r.id);
        }
    }

    /// What the upstream side does: a request goes out under mcpd's own numeric id
    /// and the server's answer is matched by `peek_result`, which must find that id
    /// and the result in place.
    #[test]
    fn mcpds_own_ids_are_found_again_in_the_servers_answer(n in proptest::prelude::any::<u64>(), text in "\\PC{0,40}") {
        let id = Id::from(n);
        let sent = request_line(&id, "tools/call", None);
        let Ok(Message::Request(r)) = parse(&sent) else {
            panic!("{sent} does not parse");
        };
        proptest::prop_assert_eq!(r.id.as_u64(), Some(n));
        let result = Value::String(text).to_string();
        let answer = raw_result_line(&r.id, &result);
        let peeked = peek_result(&answer).unwrap();
        proptest::prop_assert_eq!(peeked.id, n);
        proptest::prop_assert_eq!(&answer[peeked.range], result.as_str());
    }
}

#[test]
fn ids_round_trip_exactly() {
    let m = parse(r#"{"jsonrpc":"2.0","id":12345678901234,"method":"x"}"#).unwrap();
    let Message::Request(r) = m else { panic!() };
    assert_eq!(
        result_line(&r.id, &Value::Null),
        r#"{"jsonrpc":"2.0","id":12345678901234,"result":null}"#
    );
    let e = error_line(None, &ErrorObject::new(-32700, "x"));
    assert_eq!(
        e,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#
    );
}

/// A `tools/call` is read by `peek_tool_call` as `parse` reads it, with the arguments kept
/// as written; anything more or different is left to `parse`.
#[test]
fn peek_tool_call_takes_only_plain_calls_and_agrees_with_parse() {
    let plain = [
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"hi"}}}"#,
        r#" { "params" : { "arguments" : {"z": 12345678901234567890123, "a": 1.50} , "name" : "s\u005f\u005fx" } , "id" : "a-b", "method" : "tools/call", "jsonrpc" : "2.0" } "#,
        r#"{"jsonrpc":"2.0","id":-3.5e2,"method":"tools/call","params":{"name":"t"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{}}}"#,
        // `_meta`, a task, or any other member of the params is read as values.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"n":1},"_meta":{"progressToken":1}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"task":{"ttl":5},"name":"t"}}"#,
    ];
    for line in plain {
        let peeked = peek_tool_call(line).unwrap_or_else(|| panic!("plain: {line}"));
        let Ok(Message::Request(req)) = parse(line) else {
            panic!("parse: {line}")
        };
        assert_eq!(peeked.id, req.id, "{line}");
        assert_eq!(req.method, "tools/call");
        let Some(Value::Object(mut params)) = req.params else {
            panic!("params: {line}")
        };
        let args: Option<Value> = peeked.arguments.map(|a| serde_json::from_str(a).unwrap());
        assert_eq!(args, params.remove("arguments"), "{line}");
        assert_eq!(peeked.params, params, "{line}");
    }
    let peeked = peek_tool_call(plain[1]).unwrap();
    assert_eq!(peeked.params["name"], "s__x");
    assert_eq!(
        peeked.arguments,
        Some(r#"{"z": 12345678901234567890123, "a": 1.50}"#)
    );
    let not_plain = [
        // Any other top-level member goes the full way.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"extra":1}"#,
        // A member named twice: serde_json keeps the last, so `parse` decides.
        r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"t"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","name":"u"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{},"_meta":{}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"arguments":{}}}"#,
        // Other methods, versions, ids, names and arguments.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"t"}}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t"}}"#,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":3}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":[1]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":null}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{}}"#,
        "not json",
    ];
    for line in not_plain {
        assert_eq!(peek_tool_call(line), None, "{line}");
    }
}

#[test]
fn a_plain_call_is_written_with_the_arguments_as_they_are() {
    let args = r#"{"z": 12345678901234567890123, "a": 1.50}"#;
    let line = tool_call_line(9, "say \"hi\"", Some(args));
    assert_eq!(
        line,
        format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"say \"hi\"","arguments":{args}}}}}"#
        )
    );
    let Ok(Message::Request(req)) = parse(&line) else {
        panic!("{line}")
    };
    assert_eq!(req.id, Id::from(9));
    assert_eq!(req.params.unwrap()["name"], "say \"hi\"");
    assert_eq!(
        tool_call_line(1, "t", None),
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#
    );
}

#[test]
fn arguments_are_written_into_a_dressed_request_as_they_are() {
    let args = r#"{"z": 12345678901234567890123, "a": 1.50}"#;
    let params = serde_json::json!({"name": "t", "_meta": {"k": 1}});
    let line = request_line(&Id::from(4), "tools/call", Some(&params));
    let line = with_arguments(line, args).expect("a request line with params");
    assert!(
        line.ends_with(&format!(r#","arguments":{args}}}}}"#)),
        "{line}"
    );
    let Ok(Message::Request(req)) = parse(&line) else {
        panic!("{line}")
    };
    let p = req.params.unwrap();
    assert_eq!((&p["name"], &p["_meta"]["k"]), (&"t".into(), &1.into()));
    // Lines it cannot add to: no params, empty params.
    let empty = serde_json::json!({});
    for params in [None, Some(&empty)] {
        assert_eq!(
            with_arguments(request_line(&Id::from(1), "m", params), args),
            None
        );
    }
}

#[test]
fn a_name_and_arguments_are_peeked_only_when_unambiguous() {
    let args = r#"{"z": 12345678901234567890123, "a": 1.50}"#;
    assert_eq!(
        peek_name_and_arguments(&format!(
            r#"{{"arguments": {args}, "name": "s\u0041__t", "x": 1}}"#
        )),
        Some(("sA__t".to_owned(), Some(args)))
    );
    assert_eq!(
        peek_name_and_arguments(r#"{"name":"t"}"#),
        Some(("t".to_owned(), None))
    );
    for refused in [
        r#"{"name":"t","name":"u","arguments":{}}"#,
        r#"{"name":"t","arguments":{},"arguments":{}}"#,
        r#"{"name":7,"arguments":{}}"#,
        r#"{"arguments":{}}"#,
        r#"{"name":"t","arguments":null}"#,
        r#"{"name":"t","arguments":[1]}"#,
        r#"[1]"#,
    ] {
        assert_eq!(peek_name_and_arguments(refused), None, "{refused}");
    }
}

#[test]
fn with_id_replaces_the_id_alone() {
    let line = r#"{ "id" : 7 , "method":"tools/call","params":{"id":1,"a":1.50}}"#;
    assert_eq!(
        with_id(line, &Id::Str("h1".into())).as_deref(),
        Some(r#"{ "id" : "h1" , "method":"tools/call","params":{"id":1,"a":1.50}}"#)
    );
    assert_eq!(
        with_id(r#"{"id":"a\"b"}"#, &Id::from(3)).as_deref(),
        Some(r#"{"id":3}"#)
    );
    for refused in [r#"{"id":1,"id":2}"#, r#"{"method":"x"}"#, "[1]", "{", ""] {
        assert_eq!(with_id(refused, &Id::from(1)), None, "{refused}");
    }
}

#[test]
fn ids_and_names_written_in_place_are_what_serde_json_writes() {
    let ids = [
        "0",
        "-1",
        "18446744073709551615",
        "-9223372036854775808",
        "1.5",
        "1e400",
        "\"a\"",
        "\"q\\\"b\\\\s\\u0001\\u00e9\"",
    ];
    for text in ids {
        let id = match serde_json::from_str::<Value>(text) {
            Ok(Value::Number(n)) => Id::Num(n),
            Ok(Value::String(s)) => Id::Str(s),
            _ => continue, // a number serde_json cannot read is no id
        };
        let want = format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#,
            serde_json::to_string(&id).unwrap()
        );
        assert_eq!(raw_result_line(&id, "{}"), want, "id {text}");
    }
    for name in [
        "echo",
        "",
        "say \"hi\"",
        "back\\slash",
        "tab\there",
        "é ü 日本",
        "\u{7f}",
    ] {
        let line = tool_call_line(3, name, None);
        let want = format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":{}}}}}"#,
            serde_json::to_string(name).unwrap()
        );
        assert_eq!(line, want, "name {name:?}");
    }
}
