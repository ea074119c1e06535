//! Reading a message's members without parsing all of it.
//!
//! A server's plain result (`peek_result`), an agent's `tools/call` with its arguments
//! kept as text (`peek_tool_call`), the tool named in `mcpd__call_tool`'s arguments, and
//! a request's id replaced in its text (`with_id`).

use super::Id;
use crate::json::scan::Member;
use memchr::memmem::Finder;
use serde_json::Value;
use std::sync::LazyLock;

/// If `line` is a plain result response to one of mcpd's own (numeric) request ids,
/// returns the id and where the result lies in `line`. The line is checked once
/// (`json::check`, many bytes a step through long strings), which finds its top-level
/// members on the way, and the result is neither copied nor turned into values, so a large
/// result can be passed on as the server wrote it. Anything else (requests,
/// notifications, errors, odd ids, a member named twice) returns None: `parse` then
/// decides what the line is.
pub fn peek_result(line: &str) -> Option<PeekedResult> {
    let checked = crate::json::check::object_members(line)?;
    let members = &checked.members;
    let one = |key: &str| unique_member(members, key);
    if one("jsonrpc")? != Some("\"2.0\"")
        || one("method")?.is_some()
        || one("params")?.is_some()
        || one("error")?.is_some()
    {
        return None;
    }
    let id = one("id")??;
    // Only mcpd's own ids, written as plain digits, take this path.
    if !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let id: u64 = id.parse().ok()?;
    let result = one("result")??;
    Some(PeekedResult {
        id,
        range: range_in(line, result)?,
        long_strings: checked.long_strings,
    })
}

/// `line`, one JSON object, with the value of its top-level `id` replaced by `id` and
/// every other byte as written. None when it is not one object or names `id` other than
/// once (serde_json would keep the last).
pub fn with_id(line: &str, id: &Id) -> Option<String> {
    let checked = crate::json::check::object_members(line)?;
    let old = range_in(line, unique_member(&checked.members, "id")??)?;
    let id = serde_json::to_string(id).ok()?;
    let mut out = String::with_capacity(line.len() + id.len());
    out.push_str(line.get(..old.start)?);
    out.push_str(&id);
    out.push_str(line.get(old.end..)?);
    Some(out)
}

/// Where `part`, a slice of `line`, lies in it: its offset is its distance from the
/// start (no byte compare), checked to be inside `line`.
fn range_in(line: &str, part: &str) -> Option<std::ops::Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(line.as_ptr() as usize)?;
    let range = start..start + part.len();
    (line.get(range.clone()).map(str::as_ptr) == Some(part.as_ptr())).then_some(range)
}

/// A `tools/call` request found by [`peek_tool_call`]: its params as values but for the
/// `arguments`, which stay the agent's text.
#[derive(Debug, PartialEq)]
pub struct PeekedToolCall<'a> {
    pub id: Id,
    /// The params but `arguments`: the tool's `name` (a string), and `_meta` or any other
    /// member the agent sent.
    pub params: serde_json::Map<String, Value>,
    /// The text of the `arguments` object, already found valid; None when there are none.
    pub arguments: Option<&'a str>,
}

/// Made once: `memmem::find` builds a searcher for each search, which costs more than
/// searching a short line.
static TOOLS_CALL: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"tools/call\""));

/// A `tools/call` read without turning its arguments into values: the line is checked
/// once (`json::check`, which also finds its members), the params' other members (the
/// name, `_meta`, a task) are parsed, and the arguments can go to the server as the agent
/// wrote them. Anything else (other methods or top-level members, a member named twice, a
/// name or arguments of another type) returns None, and [`parse`](super::parse) decides
/// what the line is: this path accepts only what `parse` would read as the same request.
pub fn peek_tool_call<'a>(line: &'a str) -> Option<PeekedToolCall<'a>> {
    // Other messages are not checked twice (here, then by `parse`): a vector search
    // for the method's text passes over them first.
    TOOLS_CALL.find(line.as_bytes())?;
    let checked = crate::json::check::object_members(line)?;
    let members = &checked.members;
    let known = crate::json::scan::Known::new(line, &checked.long_strings);
    // Present once: absent or named twice (serde_json keeps the last) is not plain.
    let one = |members: &[Member<'a>], key: &str| unique_member(members, key).flatten();
    if members.len() != 4
        || one(members, "jsonrpc")? != "\"2.0\""
        || one(members, "method")? != "\"tools/call\""
    {
        return None;
    }
    let id = Id::from_value(&serde_json::from_str(one(members, "id")?).ok()?)?;
    let members = crate::json::scan::members_in(one(members, "params")?, known)?;
    let (name, arguments) = name_and_arguments(&members)?;
    let mut params = serde_json::Map::new();
    for (key, value) in &members {
        if key != "arguments" && params.contains_key(key.as_ref()) {
            return None; // named twice
        }
        if key != "name" && key != "arguments" {
            params.insert(key.to_string(), serde_json::from_str(value).ok()?);
        }
    }
    params.insert("name".into(), Value::String(name));
    Some(PeekedToolCall {
        id,
        params,
        arguments,
    })
}

/// The `name` and the `arguments` text of an object already found valid that names a
/// tool and its arguments, as `mcpd__call_tool`'s arguments do (`{"name": …,
/// "arguments": {…}}`); other members are not looked at. None when either is named twice,
/// the name is not a string, or the arguments are not an object: the caller then reads
/// the object as values.
pub fn peek_name_and_arguments(text: &str) -> Option<(String, Option<&str>)> {
    name_and_arguments(&crate::json::scan::members(text)?)
}

fn name_and_arguments<'a>(members: &[Member<'a>]) -> Option<(String, Option<&'a str>)> {
    let name: String = serde_json::from_str(unique_member(members, "name")??).ok()?;
    let arguments = unique_member(members, "arguments")?;
    if arguments.is_some_and(|a| !a.starts_with('{')) {
        return None;
    }
    Some((name, arguments))
}

/// The value of member `key`: Some(None) when it is absent, None when it is named twice.
fn unique_member<'a>(members: &[Member<'a>], key: &str) -> Option<Option<&'a str>> {
    let mut found = members.iter().filter(|(k, _)| k == key).map(|(_, v)| *v);
    let first = found.next();
    found.next().is_none().then_some(first)
}

/// A result response found by [`peek_result`].
#[derive(Debug, PartialEq)]
pub struct PeekedResult {
    /// mcpd's id of the request it answers.
    pub id: u64,
    /// Where the result's text lies in the line.
    pub range: std::ops::Range<usize>,
    /// The line's long strings (`json::check::Checked::long_strings`).
    pub long_strings: Vec<(usize, usize)>,
}
