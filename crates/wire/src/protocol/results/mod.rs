//! Checks each upstream `tools/call` result before agents see it, and repairs what the spec allows.
//!
//! [`check_call_result`] makes three passes over one `CallToolResult`, with no IO:
//! 1. Shape: an object with a `content` array of typed blocks, a boolean `isError`, and the
//!    fields that each known block type needs. If a result fails here, it is not a
//!    `CallToolResult`. It is reported as [`Checked::Invalid`] and left unchanged.
//! 2. `structuredContent` against the tool's `outputSchema`. If they do not match, the result
//!    becomes a tool error (`isError: true`, one text block that says why). The agent was
//!    promised that shape and must not act on anything else.
//! 3. Image and audio blocks: a known MIME type, valid base64, and a decoded size under a cap.
//!    A bad block is replaced by a text block that says what was removed. One broken picture
//!    should not make an agent's model API reject the whole conversation.
//!
//! The schema check (in `schema/`) is a small subset of JSON Schema, written by hand rather
//! than taken from a crate. This keeps the dependency set small. A full 2020-12 validator brings
//! regex engines, format checkers and `$ref` resolution (with network fetching to switch off)
//! into a daemon that otherwise needs none of them. Tool output schemas in practice use only the
//! few keywords listed there.

use super::schema::{Judgement, clip, judge};
use crate::json::scan::{self, Known, Member};
use serde_json::{Map, Value, json};

/// Default for [`Limits::max_media_bytes`]: 10 MiB.
pub const DEFAULT_MAX_MEDIA_BYTES: usize = 10 * 1024 * 1024;

/// Image MIME types let through: formats that model APIs and MCP clients commonly render.
/// They are compared case-insensitively, and any `;` parameters are ignored.
pub const IMAGE_MIME_TYPES: [&str; 9] = [
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "image/svg+xml",
    "image/bmp",
    "image/tiff",
    "image/avif",
    "image/heic",
];

/// Audio MIME types let through, compared the same way as [`IMAGE_MIME_TYPES`].
pub const AUDIO_MIME_TYPES: [&str; 10] = [
    "audio/wav",
    "audio/x-wav",
    "audio/mpeg",
    "audio/mp3",
    "audio/ogg",
    "audio/webm",
    "audio/flac",
    "audio/aac",
    "audio/mp4",
    "audio/x-m4a",
];

/// Limits applied to every result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest decoded size of one image or audio block. Larger blocks are removed:
    /// model APIs reject them, and they would fill the agent's context.
    pub max_media_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_media_bytes: DEFAULT_MAX_MEDIA_BYTES,
        }
    }
}

/// What [`check_call_result`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// Nothing was changed. Either the result is a valid `CallToolResult`, or it is a kind of
    /// result that mcpd does not check (`input_required`, `task`).
    Ok,
    /// The result was changed in place. Each note says what changed and why.
    Fixed(Vec<String>),
    /// The result is not a `CallToolResult`. The reason names the first problem. Nothing was
    /// changed.
    Invalid(String),
}

/// Checks one `CallToolResult` in place, and repairs it where the spec allows.
///
/// If `output_schema` is `Some`, a result that is not an error must have `structuredContent`
/// that matches it. Results with `isError: true` are not checked against the schema: the
/// tool failed, so it owes no structured output.
pub fn check_call_result(
    result: &mut Value,
    output_schema: Option<&Value>,
    limits: &Limits,
) -> Checked {
    match check_shape(result) {
        Err(reason) => return Checked::Invalid(reason),
        Ok(Shape::NotCallToolResult) => return Checked::Ok,
        Ok(Shape::CallToolResult) => {}
    }
    let is_error = result.get("isError") == Some(&Value::Bool(true));
    if let Some(schema) = output_schema
        && !is_error
    {
        let verdict = match result.get("structuredContent") {
            None => Judgement::Mismatch("structuredContent is missing".to_owned()),
            Some(value) => judge(schema, value),
        };
        if let Judgement::Unchecked(why) = &verdict {
            // A valid result may be larger or deeper than mcpd checks: it is passed on
            // as the server sent it rather than turned into an error.
            tracing::info!("a result was passed on without its outputSchema check: {why}");
        }
        if let Judgement::Mismatch(reason) = verdict {
            // The content is replaced here, so any media problems in it no longer matter.
            let note = format!("the result does not match the tool's outputSchema: {reason}");
            turn_into_error(result, &note);
            return Checked::Fixed(vec![note]);
        }
    }
    let notes = fix_media(result, limits);
    if notes.is_empty() {
        Checked::Ok
    } else {
        Checked::Fixed(notes)
    }
}

/// The top-level members of a result, each kept as the server's own JSON text, in the
/// server's order. Reading them scans the text once and copies nothing but escaped keys.
pub struct RawMembers<'a> {
    pub list: scan::Members<'a>,
    /// The strings of the text already known, which later scans of it jump over.
    known: Known<'a>,
}

impl<'a> RawMembers<'a> {
    /// The members of `raw`, or None when it is not an object or names a member twice
    /// (then only the full parse decides which one counts). `raw` is text `json_check` has
    /// read and found valid (a `RawResult`'s): it is not validated again.
    #[cfg(test)]
    pub fn of(raw: &'a str) -> Option<RawMembers<'a>> {
        Self::of_known(raw, Known::default())
    }

    /// The members of `raw`, as `of` reads them (None when it is not an object or names
    /// a member twice), jumping over the strings `known` lists (here and in every later
    /// scan of the members).
    pub fn of_known(raw: &'a str, known: Known<'a>) -> Option<RawMembers<'a>> {
        let list = scan::members_in(raw, known)?;
        unique(&list).then_some(RawMembers { list, known })
    }

    pub fn get(&self, key: &str) -> Option<&'a str> {
        find(&self.list, key)
    }
}

fn find<'a>(members: &[Member<'a>], key: &str) -> Option<&'a str> {
    members.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
}

/// Whether no key appears twice.
fn unique(members: &[Member]) -> bool {
    // A result's few members are compared pairwise, without a list to sort.
    if members.len() <= 16 {
        return members
            .iter()
            .enumerate()
            .all(|(i, (k, _))| members.iter().take(i).all(|(seen, _)| seen != k));
    }
    let mut keys: Vec<&str> = members.iter().map(|(k, _)| k.as_ref()).collect();
    keys.sort_unstable();
    keys.iter().zip(keys.iter().skip(1)).all(|(a, b)| a != b)
}

fn is_string(raw: Option<&str>) -> bool {
    raw.is_some_and(|r| r.starts_with('"'))
}

/// Whether [`check_call_result`] would pass this result unchanged, decided from its text
/// without building values: a `CallToolResult` with no `outputSchema` to meet, well-formed
/// blocks, and no image or audio block. `false` means "not sure": the caller then runs the
/// full check, which finds the problem (or the repair) and words it. Only each block's
/// type and the members that type requires are looked at; a block naming any member twice
/// is "not sure".
pub fn passes_unchanged(members: &RawMembers, output_schema: Option<&Value>) -> bool {
    if output_schema.is_some() {
        return false;
    }
    if members
        .get("resultType")
        .is_some_and(|t| t != "\"complete\"")
    {
        return false;
    }
    if members
        .get("isError")
        .is_some_and(|e| e != "true" && e != "false")
    {
        return false;
    }
    let Some(content) = members.get("content") else {
        return members.get("structuredContent").is_some();
    };
    let all_plain = scan::each_object_in(content, members.known, |block| {
        let Some(block) = block.filter(|b| unique(b)) else {
            return false;
        };
        let get = |key| find(&block, key);
        // An escaped type could spell "image": only plain ones are compared here.
        let kind = get("type")
            .filter(|k| !k.contains('\\'))
            .and_then(|k| k.strip_prefix('"')?.strip_suffix('"'));
        match kind {
            Some("text") => is_string(get("text")),
            Some("resource_link") => is_string(get("uri")) && is_string(get("name")),
            Some("resource") => get("resource")
                .and_then(|r| scan::members_in(r, members.known))
                .is_some_and(|r| unique(&r) && is_string(find(&r, "uri"))),
            Some("image" | "audio") | None => false,
            Some(_) => true,
        }
    });
    all_plain == Some(true)
}

fn turn_into_error(result: &mut Value, note: &str) {
    if let Some(obj) = result.as_object_mut() {
        obj.insert("isError".to_owned(), Value::Bool(true));
        let text = format!("mcpd: {note}");
        obj.insert(
            "content".to_owned(),
            json!([{"type": "text", "text": text}]),
        );
        obj.remove("structuredContent");
    }
}

enum Shape {
    CallToolResult,
    NotCallToolResult,
}

fn check_shape(result: &Value) -> Result<Shape, String> {
    let Some(obj) = result.as_object() else {
        return Err("the result is not an object".to_owned());
    };
    match obj.get("resultType") {
        // A missing resultType (an older server) means "complete".
        None => {}
        Some(Value::String(t)) if t == "complete" => {}
        // `input_required` (MRTR) and `task` (the Tasks extension) results have no content.
        // mcpd passes on result types it does not know, for the agent to interpret.
        Some(Value::String(_)) => return Ok(Shape::NotCallToolResult),
        Some(_) => return Err("\"resultType\" is not a string".to_owned()),
    }
    if obj.get("isError").is_some_and(|v| !v.is_boolean()) {
        return Err("\"isError\" is not a boolean".to_owned());
    }
    match obj.get("content") {
        None if obj.contains_key("structuredContent") => Ok(Shape::CallToolResult),
        None => Err("the result has no \"content\"".to_owned()),
        Some(Value::Array(blocks)) => {
            for (i, block) in blocks.iter().enumerate() {
                check_block(block).map_err(|problem| format!("content[{i}] {problem}"))?;
            }
            Ok(Shape::CallToolResult)
        }
        Some(_) => Err("\"content\" is not an array".to_owned()),
    }
}

fn check_block(block: &Value) -> Result<(), String> {
    let Some(obj) = block.as_object() else {
        return Err("is not an object".to_owned());
    };
    let kind = match obj.get("type") {
        None => return Err("has no \"type\"".to_owned()),
        Some(Value::String(kind)) => kind.as_str(),
        Some(_) => return Err("has a \"type\" that is not a string".to_owned()),
    };
    let needs = |fields: &Map<String, Value>, field: &str, shown: &str| {
        if fields.get(field).is_some_and(Value::is_string) {
            Ok(())
        } else {
            Err(format!("({kind}) has no string \"{shown}\""))
        }
    };
    match kind {
        "text" => needs(obj, "text", "text"),
        "resource_link" => needs(obj, "uri", "uri").and_then(|()| needs(obj, "name", "name")),
        "resource" => match obj.get("resource") {
            Some(Value::Object(resource)) => needs(resource, "uri", "resource.uri"),
            _ => Err("(resource) has no \"resource\" object".to_owned()),
        },
        // Image and audio blocks are repaired rather than rejected (see `fix_media`). Other
        // types are let through, so that new block types still reach the agent.
        _ => Ok(()),
    }
}

#[derive(Clone, Copy)]
enum Media {
    Image,
    Audio,
}

impl Media {
    fn of(block: &Value) -> Option<Media> {
        match block.get("type").and_then(Value::as_str) {
            Some("image") => Some(Media::Image),
            Some("audio") => Some(Media::Audio),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Media::Image => "image",
            Media::Audio => "audio",
        }
    }

    fn mime_types(self) -> &'static [&'static str] {
        match self {
            Media::Image => &IMAGE_MIME_TYPES,
            Media::Audio => &AUDIO_MIME_TYPES,
        }
    }
}

/// Replaces each bad image or audio block with a text block, and returns one note per block.
fn fix_media(result: &mut Value, limits: &Limits) -> Vec<String> {
    let mut notes = Vec::new();
    let Some(blocks) = result.get_mut("content").and_then(Value::as_array_mut) else {
        return notes;
    };
    for (i, block) in blocks.iter_mut().enumerate() {
        let Some(kind) = Media::of(block) else {
            continue;
        };
        if let Err(reason) = check_media(block, kind, limits) {
            let what = format!("an {} block: {reason}", kind.name());
            *block = json!({"type": "text", "text": format!("[mcpd removed {what}]")});
            notes.push(format!("content[{i}]: removed {what}"));
        }
    }
    notes
}

fn check_media(block: &Value, kind: Media, limits: &Limits) -> Result<(), String> {
    let mime = block
        .get("mimeType")
        .and_then(Value::as_str)
        .ok_or("mimeType is missing or not a string")?;
    let essence = mime.split(';').next().unwrap_or_default().trim();
    if !kind
        .mime_types()
        .iter()
        .any(|known| known.eq_ignore_ascii_case(essence))
    {
        let name = kind.name();
        return Err(format!(
            "mimeType {:?} is not a known {name} type",
            clip(mime)
        ));
    }
    let data = block
        .get("data")
        .and_then(Value::as_str)
        .ok_or("data is missing or not a string")?;
    // An empty picture or sound is no use to an agent, and some model APIs reject it.
    if base64_decoded_len(data, limits.max_media_bytes)? == 0 {
        return Err("data is empty".to_owned());
    }
    Ok(())
}

/// The decoded length of standard base64 `data`, without decoding it. Every character is
/// checked. Padding may be complete or absent, but not partial. Whitespace is rejected, and so
/// are non-zero bits after the last byte, as the `base64` crate's standard engine does.
fn base64_decoded_len(data: &str, max: usize) -> Result<usize, String> {
    let bytes = data.as_bytes();
    let body = bytes
        .strip_suffix(b"==")
        .or_else(|| bytes.strip_suffix(b"="))
        .unwrap_or(bytes);
    let padded = body.len() != bytes.len();
    let rem = body.len() % 4;
    if rem == 1 || (padded && !bytes.len().is_multiple_of(4)) {
        return Err("data is not valid base64 (wrong length or padding)".to_owned());
    }
    let decoded = body.len() / 4 * 3 + rem.saturating_sub(1);
    // The size is checked before the scan, so an oversized block is rejected cheaply.
    if decoded > max {
        return Err(format!(
            "data decodes to {decoded} bytes, over the {max}-byte limit"
        ));
    }
    if let Some(at) = body.iter().position(|&b| sextet(b).is_none()) {
        let what = match body.get(at) {
            Some(b) if b.is_ascii_whitespace() => "whitespace".to_owned(),
            Some(b'=') => "\"=\" before the end".to_owned(),
            Some(b) => format!("byte 0x{b:02x}"),
            None => "end".to_owned(),
        };
        return Err(format!("data is not valid base64 ({what} at offset {at})"));
    }
    let unused_bits = match rem {
        2 => 0x0f,
        3 => 0x03,
        _ => 0,
    };
    if body
        .last()
        .and_then(|&b| sextet(b))
        .is_some_and(|s| s & unused_bits != 0)
    {
        return Err("data is not valid base64 (non-zero bits after the last byte)".to_owned());
    }
    Ok(decoded)
}

fn sextet(b: u8) -> Option<u8> {
    match b {
        b'A'..=b'Z' => Some(b - b'A'),
        b'a'..=b'z' => Some(b - b'a' + 26),
        b'0'..=b'9' => Some(b - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
