//! Tests of the `CallToolResult` check.
//!
//! Shapes reported unchanged, output-schema mismatches made tool errors, bad media
//! replaced by notes, the quick check against the full one, and odd inputs.

use super::*;
use crate::protocol::schema::validate;

/// A small cap, so the media cases stay short.
const SMALL: Limits = Limits { max_media_bytes: 8 };

fn parse(text: &str) -> Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("bad test JSON {text}: {e}"))
}

/// Each line is `result ;; outputSchema or - ;; ok | invalid: reason`. Neither verdict
/// may change the result.
const UNCHANGED: &str = r##"
{"content": []} ;; - ;; ok
{"content": [{"type": "text", "text": "hi"}], "isError": false} ;; - ;; ok
{"content": [], "resultType": "complete"} ;; - ;; ok
{"structuredContent": {"a": 1}} ;; - ;; ok
{"content": [{"type": "resource_link", "uri": "file:///a", "name": "a"}]} ;; - ;; ok
{"content": [{"type": "resource", "resource": {"uri": "file:///a", "text": "x"}}]} ;; - ;; ok
{"content": [{"type": "tool_use_v9", "anything": [1]}]} ;; - ;; ok
{"content": [{"type": "image", "data": "iVBORw==", "mimeType": "image/png"}]} ;; - ;; ok
{"resultType": "input_required", "requestState": "s"} ;; - ;; ok
{"resultType": "input_required", "content": 7} ;; {"type": "object"} ;; ok
{"resultType": "task", "taskId": "t1", "status": "working"} ;; - ;; ok
{"content": [], "structuredContent": {"count": 2}} ;; {"required": ["count"]} ;; ok
{"structuredContent": {"count": 2}} ;; {"required": ["count"]} ;; ok
{"content": [], "isError": true} ;; {"required": ["count"]} ;; ok
{"content": [], "isError": true, "structuredContent": 1} ;; {"type": "object"} ;; ok
{"content": [], "structuredContent": "anything"} ;; - ;; ok
[] ;; - ;; invalid: the result is not an object
null ;; - ;; invalid: the result is not an object
{} ;; - ;; invalid: the result has no "content"
{"content": {}} ;; - ;; invalid: "content" is not an array
{"content": [], "isError": "yes"} ;; - ;; invalid: "isError" is not a boolean
{"content": [], "resultType": 1} ;; - ;; invalid: "resultType" is not a string
{"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}, {"text": "x"}]} ;; - ;; invalid: content[2] has no "type"
{"content": ["x"]} ;; - ;; invalid: content[0] is not an object
{"content": [{"type": 3}]} ;; - ;; invalid: content[0] has a "type" that is not a string
{"content": [{"type": "text"}]} ;; - ;; invalid: content[0] (text) has no string "text"
{"content": [{"type": "text", "text": 1}]} ;; - ;; invalid: content[0] (text) has no string "text"
{"content": [{"type": "resource_link", "uri": "file:///a"}]} ;; - ;; invalid: content[0] (resource_link) has no string "name"
{"content": [{"type": "resource_link", "name": "a"}]} ;; - ;; invalid: content[0] (resource_link) has no string "uri"
{"content": [{"type": "resource", "uri": "file:///a"}]} ;; - ;; invalid: content[0] (resource) has no "resource" object
{"content": [{"type": "resource", "resource": {"text": "x"}}]} ;; - ;; invalid: content[0] (resource) has no string "resource.uri"
{"content": [{"type": "image", "data": "", "mimeType": "image/png"}, {}]} ;; - ;; invalid: content[1] has no "type"
"##;

#[test]
fn results_beyond_the_schema_checks_limits_pass_unchecked() {
    // Each item matches only the last of 2000 branches: a million steps is not enough.
    let mut branches = vec![json!({"type": "string"}); 1999];
    branches.push(json!({"type": "integer"}));
    let schema = json!({"type": "object", "properties": {"v": {"items": {"anyOf": branches}}}});
    let mut result = json!({"content": [], "structuredContent": {"v": vec![1; 1000]}});
    let before = result.clone();
    let checked = check_call_result(&mut result, Some(&schema), &Limits::default());
    assert!(matches!(checked, Checked::Ok), "{checked:?}");
    assert_eq!(result, before);
    // A real mismatch is still turned into an error.
    let mut bad = json!({"content": [], "structuredContent": {"v": [null]}});
    let checked = check_call_result(&mut bad, Some(&schema), &Limits::default());
    assert!(matches!(checked, Checked::Fixed(_)), "{checked:?}");
    assert_eq!(bad["isError"], true);
}

#[test]
fn the_quick_check_passes_only_what_the_full_check_passes_unchanged() {
    let mut quick = 0;
    for line in UNCHANGED.lines().filter(|l| !l.trim().is_empty()) {
        let [input, schema, _] = line.split(" ;; ").collect::<Vec<_>>()[..] else {
            panic!("bad case {line}");
        };
        let schema = (schema != "-").then(|| parse(schema));
        let passes =
            RawMembers::of(input.trim()).is_some_and(|m| passes_unchanged(&m, schema.as_ref()));
        let mut full = parse(input);
        let verdict = check_call_result(&mut full, schema.as_ref(), &Limits::default());
        if passes {
            quick += 1;
            assert_eq!(verdict, Checked::Ok, "{line}");
        }
    }
    assert!(quick >= 6, "the quick check should pass the plain cases");
    let cases = [
        r#"{"content": [{"type": "im\u0061ge", "data": "", "mimeType": "image/png"}]}"#,
        r#"{"content": [{"type": "text", "text": "a", "text": 1}]}"#,
        r#"{"content": [], "content": 1}"#,
        r#"{"content": [{"type": "audio", "data": "AA==", "mimeType": "audio/wav"}]}"#,
    ];
    for input in cases {
        let passes = RawMembers::of(input).is_some_and(|m| passes_unchanged(&m, None));
        assert!(!passes, "{input}");
    }
}

#[test]
fn valid_results_pass_and_invalid_ones_are_reported_unchanged() {
    for line in UNCHANGED.lines().filter(|l| !l.trim().is_empty()) {
        let [input, schema, expected] = line.split(" ;; ").collect::<Vec<_>>()[..] else {
            panic!("bad case {line}");
        };
        let (input, schema) = (parse(input), (schema != "-").then(|| parse(schema)));
        let expected = match expected.strip_prefix("invalid: ") {
            Some(reason) => Checked::Invalid(reason.to_owned()),
            None => Checked::Ok,
        };
        let mut got = input.clone();
        assert_eq!(
            check_call_result(&mut got, schema.as_ref(), &SMALL),
            expected,
            "{line}"
        );
        assert_eq!(got, input, "the result changed without a note: {line}");
    }
}

/// Each line is `media block => ok | the reason it is removed`.
const MEDIA: &str = r##"
{"type": "image", "mimeType": "image/png", "data": "AAAAAAAAAAA="} => ok
{"type": "image", "mimeType": "IMAGE/JPEG", "data": "AAAAAAAAAAA"} => ok
{"type": "image", "mimeType": "image/svg+xml; charset=utf-8", "data": "PHN2Zz4="} => ok
{"type": "audio", "mimeType": "audio/x-m4a", "data": "AA=="} => ok
{"type": "audio", "mimeType": "audio/wav", "data": "R0lG"} => ok
{"type": "image", "mimeType": "image/x-paint", "data": "AAAA"} => mimeType "image/x-paint" is not a known image type
{"type": "audio", "mimeType": "image/png", "data": "AAAA"} => mimeType "image/png" is not a known audio type
{"type": "image", "data": "AAAA"} => mimeType is missing or not a string
{"type": "audio", "mimeType": "audio/ogg", "data": 5} => data is missing or not a string
{"type": "image", "mimeType": "image/png", "data": ""} => data is empty
{"type": "image", "mimeType": "image/png", "data": "AAAAAAAAAAAA"} => data decodes to 9 bytes, over the 8-byte limit
{"type": "image", "mimeType": "image/png", "data": "AAAAAAA$"} => data is not valid base64 (byte 0x24 at offset 7)
{"type": "image", "mimeType": "image/png", "data": "AA\nA"} => data is not valid base64 (whitespace at offset 2)
{"type": "image", "mimeType": "image/png", "data": "A=AA"} => data is not valid base64 ("=" before the end at offset 1)
{"type": "image", "mimeType": "image/png", "data": "AA="} => data is not valid base64 (wrong length or padding)
{"type": "image", "mimeType": "image/png", "data": "AAAAA"} => data is not valid base64 (wrong length or padding)
{"type": "image", "mimeType": "image/png", "data": "AB=="} => data is not valid base64 (non-zero bits after the last byte)
"##;

#[test]
fn bad_media_blocks_are_replaced_by_a_text_note() {
    let text = json!({"type": "text", "text": "a"});
    for line in MEDIA.lines().filter(|l| !l.trim().is_empty()) {
        let Some((block, reason)) = line.split_once(" => ") else {
            panic!("bad case {line}");
        };
        let input = json!({"content": [text, parse(block)]});
        let mut got = input.clone();
        let outcome = check_call_result(&mut got, None, &SMALL);
        if reason == "ok" {
            assert_eq!((outcome, &got), (Checked::Ok, &input), "{line}");
            continue;
        }
        let kind = if block.contains("\"image\"") {
            "image"
        } else {
            "audio"
        };
        let what = format!("an {kind} block: {reason}");
        let note = format!("content[1]: removed {what}");
        let replaced = json!({"type": "text", "text": format!("[mcpd removed {what}]")});
        assert_eq!(outcome, Checked::Fixed(vec![note]), "{line}");
        assert_eq!(got, json!({"content": [text, replaced]}), "{line}");
    }
}

#[test]
fn every_bad_media_block_gets_its_own_note_and_long_values_are_clipped() {
    let bad = json!({"type": "audio", "mimeType": "audio/mp3", "data": "!"});
    let good = json!({"type": "image", "mimeType": "image/gif", "data": "R0lG"});
    let reason = "removed an audio block: data is not valid base64 (wrong length or padding)";
    let gone = json!({"type": "text", "text": format!("[mcpd {reason}]")});
    let mut result = json!({"content": [bad, good, bad], "isError": true});
    let notes = vec![
        format!("content[0]: {reason}"),
        format!("content[2]: {reason}"),
    ];
    assert_eq!(
        check_call_result(&mut result, None, &SMALL),
        Checked::Fixed(notes)
    );
    assert_eq!(
        result,
        json!({"content": [gone, good, gone], "isError": true})
    );

    let block = json!({"type": "image", "mimeType": format!("image/{}", "x".repeat(999))});
    let mut result = json!({"content": [block]});
    let outcome = check_call_result(&mut result, None, &SMALL);
    assert!(
        matches!(&outcome, Checked::Fixed(n) if n[0].len() < 150),
        "{outcome:?}"
    );
}

#[test]
fn default_limits_allow_ten_mebibytes() {
    let cap = DEFAULT_MAX_MEDIA_BYTES;
    assert_eq!(Limits::default().max_media_bytes, 10 * 1024 * 1024);
    let at_cap = "A".repeat(cap / 3 * 4);
    assert_eq!(base64_decoded_len(&at_cap, cap), Ok(cap / 3 * 3));
    assert!(base64_decoded_len(&"A".repeat(cap / 3 * 4 + 4), cap).is_err());
}

#[test]
fn base64_lengths_agree_with_the_base64_crate() {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode as Mode, GeneralPurpose, GeneralPurposeConfig};
    let engine = |mode| {
        let config = GeneralPurposeConfig::new().with_decode_padding_mode(mode);
        GeneralPurpose::new(&base64::alphabet::STANDARD, config)
    };
    let (padded, unpadded) = (engine(Mode::RequireCanonical), engine(Mode::RequireNone));
    let alphabet = b"AQgw/+=\n -Z";
    // A fixed linear congruential generator, so every run sees the same inputs.
    let (mut seed, mut valid): (u32, usize) = (1, 0);
    for _ in 0..20_000 {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let input: String = (0..(seed >> 16) as usize % 11)
            .map(|i| (seed >> (i % 3 * 4)) as usize + i * 7)
            .map(|pick| char::from(alphabet[pick % alphabet.len()]))
            .collect();
        let reference = padded.decode(&input).or_else(|_| unpadded.decode(&input));
        let reference = reference.map(|bytes| bytes.len()).ok();
        let ours = base64_decoded_len(&input, usize::MAX);
        assert_eq!(ours.clone().ok(), reference, "{input:?}: ours {ours:?}");
        valid += usize::from(reference.is_some());
    }
    // Both verdicts must be common, or the comparison proves little.
    assert!(
        (2_000..18_000).contains(&valid),
        "{valid} of 20000 inputs were valid"
    );
}

/// Each line is `result ;; the mismatch`, checked against one outputSchema.
const MISMATCHES: &str = r##"
{"content": [], "structuredContent": {"count": "2"}} ;; /count: expected integer, got string
{"content": [], "structuredContent": {}} ;; (root): missing required property "count"
{"content": [], "isError": false} ;; structuredContent is missing
{"structuredContent": [1], "content": [{"type": "image"}]} ;; (root): expected object, got array
"##;

#[test]
fn structured_content_that_misses_the_output_schema_becomes_a_tool_error() {
    let schema = json!({"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]});
    for line in MISMATCHES.lines().filter(|l| !l.trim().is_empty()) {
        let Some((input, reason)) = line.split_once(" ;; ") else {
            panic!("bad case {line}");
        };
        let mut got = parse(input);
        let note = format!("the result does not match the tool's outputSchema: {reason}");
        let text = format!("mcpd: {note}");
        let outcome = check_call_result(&mut got, Some(&schema), &SMALL);
        assert_eq!(outcome, Checked::Fixed(vec![note]), "{line}");
        let error = json!({"content": [{"type": "text", "text": text}], "isError": true});
        assert_eq!(got, error, "{line}");
    }
}

#[test]
fn odd_inputs_never_panic() {
    let odd = [
        "null",
        "1",
        "\"s\"",
        "[]",
        "{}",
        "true",
        "-1.5",
        r#"{"type": "image"}"#,
        r#"{"type": ["object", 1]}"#,
        r#"{"enum": 1}"#,
        r#"{"items": 1}"#,
        r#"{"minLength": -1}"#,
        r#"{"properties": []}"#,
        r#"{"required": "a"}"#,
        r#"{"anyOf": {}}"#,
        r#"{"content": [{"type": "audio", "data": "====", "mimeType": "audio/mp3"}]}"#,
        r#"{"content": [{"type": "image", "data": "é", "mimeType": ";"}]}"#,
        r#"{"content": [], "structuredContent": null}"#,
    ]
    .map(parse);
    for result in &odd {
        for schema in odd.iter().map(Some).chain([None]) {
            // Only the absence of a panic matters here, not the verdicts.
            let _ = check_call_result(&mut result.clone(), schema, &Limits::default());
            let _ = validate(schema.unwrap_or(&Value::Null), result);
        }
    }
}
