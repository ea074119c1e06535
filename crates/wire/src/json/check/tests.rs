//! Tests of `json::check`.
//!
//! It accepts exactly what serde_json accepts, finds the members `scan` finds, and lists
//! the long strings scans may jump over.

use super::*;
use proptest::prelude::*;

fn serde_accepts(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

#[test]
fn accepts_and_refuses_what_serde_json_does() {
    let cases = [
        "",
        " ",
        "0",
        "-0",
        "01",
        "-",
        "1.",
        "1.5",
        ".5",
        "1e",
        "1e+",
        "1E-7",
        "1e5x",
        "-01",
        "123456789012345678901234567890",
        "true",
        "tru",
        "truex",
        "null",
        "nul",
        "false",
        "\"\"",
        "\"a",
        "\"\\u12\"",
        "\"\\u12g4\"",
        "\"\\uD800\"",
        "\"\\x\"",
        "\"\\/\\b\\f\\n\\r\\t\\\\\\\"\"",
        "\"\u{1}\"",
        "\"\t\"",
        "\"\u{7f}\u{e9}\u{1f600}\"",
        "[]",
        "[ ]",
        "[1,]",
        "[,1]",
        "[1 2]",
        "[1,[2,[3]]]",
        "[[[[[[[[[[]]]]]]]]]]",
        "[",
        "]",
        "[}",
        "{}",
        "{ }",
        "{\"a\":1}",
        "{\"a\" : [ 1 , { } ] , \"b\":null}",
        "{\"a\":1,}",
        "{,}",
        "{\"a\"}",
        "{\"a\":}",
        "{1:1}",
        "{\"a\":1 \"b\":2}",
        "{]",
        " {\"a\":1} ",
        "{\"a\":1} x",
        "1 2",
        "\u{c}1",
        "1\u{c}",
        "\r\n\t 1 \r\n\t",
    ];
    for text in cases {
        assert_eq!(is_value(text), serde_accepts(text), "{text:?}");
    }
    let members = |text| object_members(text).map(|c| c.members.to_vec());
    assert_eq!(
        members(r#" { "a" : [1,{"b":2}] , "c\u0064":"}" , "e":{} } "#),
        Some(vec![
            ("a".into(), r#"[1,{"b":2}]"#),
            ("cd".into(), r#""}""#),
            ("e".into(), "{}"),
        ])
    );
    assert_eq!(members("{}"), Some(vec![]));
    assert_eq!(members("[1]"), None);
    assert_eq!(members(r#"{"\ud800":1}"#), None);
    assert_eq!(members(r#"{"a":1,}"#), None);
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    assert!(is_value(&deep));
    assert!(!is_value(&deep[1..]));
}

#[test]
fn long_strings_are_listed_and_later_scans_jump_over_them() {
    use super::super::scan::{Known, each_object_in, members_in};
    // Brackets, quotes and escapes inside the long string: a scan that jumped to the
    // wrong place would find other members.
    let long = format!("{}\\\"}}],{}", "x".repeat(600), "y".repeat(600));
    let text = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{long}"}}],"k":"{long}"}}}}"#
    );
    let checked = object_members(&text).unwrap();
    let quoted = format!("\"{long}\"");
    let first = text.find(&quoted).unwrap();
    let second = text.rfind(&quoted).unwrap();
    assert_eq!(
        checked.long_strings,
        [
            (first, first + quoted.len()),
            (second, second + quoted.len())
        ]
    );
    let known = Known::new(&text, &checked.long_strings);
    let (_, result) = checked.members[2];
    let members = members_in(result, known).unwrap();
    assert_eq!(members, super::super::scan::members(result).unwrap());
    assert_eq!(members[1], ("k".into(), quoted.as_str()));
    let mut texts = Vec::new();
    let all = each_object_in(members[0].1, known, |block| {
        texts.push(block.unwrap()[1].1.to_owned());
        true
    });
    assert_eq!((all, texts), (Some(true), vec![quoted.clone()]));
    // Short strings are not listed; nor are any beyond the cap.
    assert!(
        object_members(r#"{"a":"b"}"#)
            .unwrap()
            .long_strings
            .is_empty()
    );
    let many = format!("{{\"a\":[{}\"\"]}}", "\"\",".repeat(MAX_LONG_STRINGS + 5));
    let listed = object_members_listing(&many, 2).unwrap();
    assert_eq!(listed.long_strings.len(), MAX_LONG_STRINGS);
}

#[test]
fn long_strings_are_checked_in_every_block_and_at_their_end() {
    for len in [0, 1, 31, 32, 33, 63, 64, 65, 1000, 4096] {
        let plain = "x".repeat(len);
        assert!(is_value(&format!("\"{plain}\"")), "{len}");
        for at in [0, len / 2, len.saturating_sub(1)] {
            if at >= len {
                continue;
            }
            for bad in ["\u{0}", "\n", "\u{1f}"] {
                let mut s = plain.clone();
                s.replace_range(at..at + 1, bad);
                assert!(!is_value(&format!("\"{s}\"")), "{len} {at} {bad:?}");
            }
            let mut s = plain.clone();
            s.replace_range(at..at + 1, "\\n");
            assert!(is_value(&format!("\"{s}\"")), "{len} {at}");
            let mut s = plain.clone();
            s.replace_range(at..at + 1, "\"");
            assert!(!is_value(&format!("\"{s}\"")), "{len} {at}");
        }
    }
}

#[test]
fn the_word_at_a_time_head_finds_the_first_special_byte() {
    // Every byte value at every place of the head and just past it, in strings ending
    // before, inside and after a word, with and without a later special byte.
    for len in 0..40 {
        for at in 0..len {
            for byte in 0..=255u8 {
                let mut text = vec![b'a'; len];
                text[at] = byte;
                if at + 2 < len {
                    text[at + 2] = b'"';
                }
                let want = text.iter().position(|&c| special(c)).unwrap_or(len);
                assert_eq!(plain_len(&text), want, "len {len}, {byte:#x} at {at}");
            }
        }
    }
}

#[test]
fn every_block_width_finds_the_same_first_special_byte() {
    let mut text = vec![b'x'; 1000];
    for at in [0, 1, 31, 63, 64, 65, 127, 128, 129, 500, 999] {
        for special in [b'"', b'\\', 0, 0x1f] {
            text[at] = special;
            assert_eq!(plain_len_in::<64>(&text), at);
            assert_eq!(plain_len_in::<128>(&text), at);
            assert_eq!(plain_len(&text), at);
            text[at] = 0x20;
            assert_eq!(plain_len_in::<64>(&text), 1000);
            assert_eq!(plain_len(&text), 1000);
            text[at] = b'x';
        }
    }
}

/// Text made of JSON's own pieces, valid or not, so most cases get deep into the grammar.
fn pieces() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("{"),
        Just("}"),
        Just("["),
        Just("]"),
        Just(","),
        Just(":"),
        Just(" "),
        Just("\""),
        Just("\"k\":"),
        Just("\"s\\\"x\""),
        Just("\\u00e9"),
        Just("\\"),
        Just("0"),
        Just("-1.5e+3"),
        Just("12"),
        Just("."),
        Just("e"),
        Just("true"),
        Just("null"),
        Just("fals"),
        Just("\t"),
        Just("\u{1}"),
        Just("é"),
        Just("\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""),
    ];
    proptest::collection::vec(piece, 0..24).prop_map(|v| v.concat())
}

proptest! {
    #[test]
    fn agrees_with_serde_json_on_text_made_of_json_pieces(text in pieces()) {
        let valid = is_value(&text);
        prop_assert_eq!(valid, serde_accepts(&text), "{:?}", text);
        let checked = object_members_listing(&text, 2);
        if valid {
            same_as_scan(&text, checked)?;
        } else {
            prop_assert!(checked.is_none(), "{:?}", text);
        }
    }

    #[test]
    fn accepts_every_value_serde_json_writes(v in json_value()) {
        let text = serde_json::to_string(&v).unwrap();
        prop_assert!(is_value(&text), "{}", text);
        let pretty = serde_json::to_string_pretty(&v).unwrap();
        prop_assert!(is_value(&pretty), "{}", pretty);
        for text in [&text, &pretty] {
            same_as_scan(text, object_members_listing(text, 2))?;
        }
    }
}

/// The members found while checking are the ones `scan` finds; and `scan`, told of
/// the strings listed in the same pass, finds the same members and elements at every
/// level, jumping over those strings.
fn same_as_scan(text: &str, checked: Option<Checked>) -> Result<(), TestCaseError> {
    use super::super::scan::{Known, each_object, each_object_in, members, members_in};
    let listed = checked.as_ref().map(|c| c.long_strings.as_slice());
    let found = members(text);
    prop_assert_eq!(
        checked.as_ref().map(|c| c.members.to_vec()),
        found.map(|m| m.to_vec())
    );
    let known = Known::new(text, listed.unwrap_or_default());
    // Every object and array in the text, by its own members and elements.
    let mut values = vec![text];
    while let Some(value) = values.pop() {
        let plain = members(value);
        prop_assert_eq!(&members_in(value, known), &plain, "{:?}", value);
        values.extend(plain.iter().flatten().map(|(_, v)| *v));
        let (mut plain, mut jumped) = (Vec::new(), Vec::new());
        let a = each_object(value, |m| {
            plain.push(m.map(|m| {
                m.into_iter()
                    .map(|(k, v)| (k.into_owned(), v.to_owned()))
                    .collect::<Vec<_>>()
            }));
            true
        });
        let b = each_object_in(value, known, |m| {
            jumped.push(m.map(|m| {
                m.into_iter()
                    .map(|(k, v)| (k.into_owned(), v.to_owned()))
                    .collect::<Vec<_>>()
            }));
            true
        });
        prop_assert_eq!(a, b, "{:?}", value);
        prop_assert_eq!(&plain, &jumped, "{:?}", value);
    }
    if let Some(strings) = listed {
        // Every listed string is one: a quote at each end, at least 2 bytes, in order.
        for w in strings.windows(2) {
            prop_assert!(w[0].1 <= w[1].0);
        }
        for &(start, end) in strings {
            prop_assert!(end >= start + 2);
            prop_assert_eq!(text.as_bytes()[start], b'"');
            prop_assert_eq!(text.as_bytes()[end - 1], b'"');
        }
    }
    Ok(())
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::btree_map(any::<String>(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
