//! JSON-RPC 2.0 message model: parsing a line into a message and writing messages back out. No IO.

use memchr::memmem::Finder;
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::sync::LazyLock;

mod peek;
pub use peek::{PeekedToolCall, peek_name_and_arguments, peek_result, peek_tool_call, with_id};

/// Standard JSON-RPC error codes used by mcpd.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// mcpd's own error codes, in the implementation-defined server range. Documented in
/// docs/troubleshooting.md ("Errors"). They avoid -32020..-32022 and -32042, which MCP itself uses.
pub mod mcpd_code {
    /// The server is starting, restarting, failed or stopped.
    pub const SERVER_UNAVAILABLE: i64 = -32010;
    /// The server did not answer within its timeout.
    pub const TIMEOUT: i64 = -32011;
    /// The server process exited or closed its output while the request was in flight.
    pub const SERVER_EXITED: i64 = -32012;
    /// Too many requests in flight to that server or from this agent.
    pub const BUSY: i64 = -32013;
    /// The daemon is shutting down.
    pub const SHUTTING_DOWN: i64 = -32014;
    /// The server broke the protocol (for example an answer that is not JSON-RPC).
    pub const SERVER_PROTOCOL: i64 = -32015;
    /// A connection limit was reached.
    pub const TOO_MANY_AGENTS: i64 = -32016;
    /// A remote server answered with an HTTP error status.
    pub const SERVER_HTTP_ERROR: i64 = -32017;
    /// The connecting user may not use this daemon, or may not control it.
    pub const ACCESS_DENIED: i64 = -32018;
    /// The server needs an OAuth login (`mcpd ctl login SERVER`), or more scope.
    pub const NEEDS_LOGIN: i64 = -32019;
    /// The server runs per project and the agent has none (or is another user's).
    pub const NO_PROJECT: i64 = -32023;
    /// The definition is new or changed and waits for a person (`mcpd ctl approve`).
    pub const HELD: i64 = -32024;
    /// A secret store could not do what was asked (the keyring locked or not answering,
    /// the file store unwritable).
    pub const SECRET_STORE: i64 = -32025;
    /// The daemon's user cancelled the request (`mcpd ctl cancel`, the dashboard).
    pub const CANCELLED: i64 = -32026;
    /// The daemon went away (restarted or stopped) while the request was in flight:
    /// `mcpd connect` answers it so, and the agent may call again.
    pub const DAEMON_RESTARTED: i64 = -32027;
}

/// A request id as the peer sent it. JSON-RPC allows strings and numbers; we keep the
/// exact JSON number so the reply carries the id back byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Id {
    Num(serde_json::Number),
    Str(String),
}

impl Id {
    pub fn to_value(&self) -> Value {
        match self {
            Id::Num(n) => Value::Number(n.clone()),
            Id::Str(s) => Value::String(s.clone()),
        }
    }

    pub fn from_value(v: &Value) -> Option<Id> {
        match v {
            Value::Number(n) => Some(Id::Num(n.clone())),
            Value::String(s) => Some(Id::Str(s.clone())),
            _ => None,
        }
    }

    /// The id as a u64, for ids mcpd itself issued upstream.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Id::Num(n) => n.as_u64(),
            Id::Str(_) => None,
        }
    }
}

impl From<u64> for Id {
    fn from(n: u64) -> Self {
        Id::Num(n.into())
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{s:?}"),
        }
    }
}

impl Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Id::Num(n) => n.serialize(s),
            Id::Str(v) => v.serialize(s),
        }
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn from_value(v: &Value) -> Option<ErrorObject> {
        let obj = v.as_object()?;
        Some(ErrorObject {
            code: obj.get("code")?.as_i64()?,
            message: obj
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            data: obj.get("data").cloned(),
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: Id,
    pub method: String,
    pub params: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub method: String,
    pub params: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub id: Id,
    pub outcome: Result<Value, ErrorObject>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request(Request),
    Notification(Notification),
    Response(Response),
}

/// Why a line is not a usable JSON-RPC message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    #[error("the line is not valid JSON: {0}")]
    NotJson(String),
    #[error("{reason}")]
    Invalid { id: Option<Id>, reason: String },
}

impl ParseError {
    /// The id to answer with, when the message had a recognisable one.
    pub fn id(&self) -> Option<&Id> {
        match self {
            ParseError::NotJson(_) => None,
            ParseError::Invalid { id, .. } => id.as_ref(),
        }
    }

    pub fn to_error_object(&self) -> ErrorObject {
        match self {
            ParseError::NotJson(_) => ErrorObject::new(code::PARSE_ERROR, self.to_string()),
            ParseError::Invalid { .. } => {
                ErrorObject::new(code::INVALID_REQUEST, format!("invalid request: {self}"))
            }
        }
    }
}

fn invalid(id: Option<Id>, reason: impl Into<String>) -> ParseError {
    ParseError::Invalid {
        id,
        reason: reason.into(),
    }
}

/// Parses one line of newline-delimited JSON-RPC. Never panics.
pub fn parse(line: &str) -> Result<Message, ParseError> {
    let value: Value =
        serde_json::from_str(line).map_err(|e| ParseError::NotJson(e.to_string()))?;
    let mut obj = match value {
        Value::Object(obj) => obj,
        Value::Array(_) => return Err(invalid(None, "batches (JSON arrays) are not supported")),
        _ => return Err(invalid(None, "a message must be a JSON object")),
    };
    let id = match obj.remove("id") {
        None => None,
        Some(v) => match Id::from_value(&v) {
            Some(id) => Some(id),
            None if v.is_null() && !obj.contains_key("method") => None,
            None => return Err(invalid(None, "\"id\" must be a string or a number")),
        },
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(id, "\"jsonrpc\" must be \"2.0\""));
    }
    if let Some(method) = obj.remove("method") {
        let Value::String(method) = method else {
            return Err(invalid(id, "\"method\" must be a string"));
        };
        let params = obj.remove("params");
        if let Some(p) = &params
            && !(p.is_object() || p.is_array())
        {
            return Err(invalid(id, "\"params\" must be an object or an array"));
        }
        return Ok(match id {
            Some(id) => Message::Request(Request { id, method, params }),
            None => Message::Notification(Notification { method, params }),
        });
    }
    let outcome = match (obj.remove("result"), obj.remove("error")) {
        (Some(result), None) => Ok(result),
        (None, Some(error)) => Err(ErrorObject::from_value(&error)
            .ok_or_else(|| invalid(id.clone(), "\"error\" must have a numeric \"code\""))?),
        _ => {
            return Err(invalid(
                id,
                "a message needs \"method\", or exactly one of \"result\" and \"error\"",
            ));
        }
    };
    match id {
        Some(id) => Ok(Message::Response(Response { id, outcome })),
        // An error response with a null id answers a message the peer could not parse.
        None => Err(invalid(None, "a response needs an \"id\"")),
    }
}

/// A result response whose result is already JSON text (the server's own, passed on).
pub fn raw_result_line(id: &Id, result: &str) -> String {
    let mut line = String::with_capacity(result.len() + 64);
    line.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    push_id(&mut line, id);
    line.push_str(",\"result\":");
    line.push_str(result);
    line.push('}');
    line
}

#[derive(Serialize)]
struct OutRequest<'a> {
    jsonrpc: &'static str,
    id: &'a Id,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a Value>,
}

#[derive(Serialize)]
struct OutNotification<'a> {
    jsonrpc: &'static str,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a Value>,
}

#[derive(Serialize)]
struct OutResult<'a, R: Serialize> {
    jsonrpc: &'static str,
    id: &'a Id,
    result: &'a R,
}

#[derive(Serialize)]
struct OutError<'a> {
    jsonrpc: &'static str,
    id: Option<&'a Id>,
    error: &'a ErrorObject,
}

/// Writes `id` as JSON at the end of `line`: an integer in place, anything else through
/// serde_json (a string's escapes, a float's form).
fn push_id(line: &mut String, id: &Id) {
    use std::fmt::Write as _;
    match id {
        Id::Num(n) if n.is_u64() || n.is_i64() => {
            let _ = write!(line, "{n}"); // writing to a String cannot fail
        }
        _ => line.push_str(&to_line(id)),
    }
}

/// Writes `s` as a JSON string at the end of `line`. Text with nothing to escape (what
/// serde_json escapes: a quote, a backslash, a control byte) is copied between quotes,
/// with no string of its own; other text goes through serde_json.
fn push_str_json(line: &mut String, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        line.push('"');
        line.push_str(s);
        line.push('"');
    } else {
        line.push_str(&to_line(&s));
    }
}

fn to_line<T: Serialize>(v: &T) -> String {
    // Serialising these plain structs of strings and Values cannot fail.
    serde_json::to_string(v).unwrap_or_default()
}

/// Sets member `key` of a JSON object; anything but an object is left as it is. (Writing
/// `value[key]` panics on a value that is not an object.)
pub fn set_member(value: &mut Value, key: &str, member: Value) {
    if let Some(object) = value.as_object_mut() {
        object.insert(key.to_owned(), member);
    }
}

pub fn request_line(id: &Id, method: &str, params: Option<&Value>) -> String {
    to_line(&OutRequest {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
}

/// The request line of a plain `tools/call` ([`peek_tool_call`]): the tool's name and the
/// agent's arguments text, written as they are.
pub fn tool_call_line(id: u64, name: &str, arguments: Option<&str>) -> String {
    use std::fmt::Write as _;
    let args_len = arguments.map_or(0, |a| a.len() + 13);
    let mut line = String::with_capacity(88 + name.len() + args_len);
    line.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    let _ = write!(line, "{id}"); // writing to a String cannot fail
    line.push_str(",\"method\":\"tools/call\",\"params\":{\"name\":");
    push_str_json(&mut line, name);
    if let Some(arguments) = arguments {
        line.push_str(",\"arguments\":");
        line.push_str(arguments);
    }
    line.push_str("}}");
    line
}

/// A [`request_line`] whose params (an object with at least one member) get the agent's
/// `arguments` text as their last member, written as it is. None for any other line.
pub fn with_arguments(mut line: String, arguments: &str) -> Option<String> {
    // `request_line` writes `params` last, so the line ends with its `}` and the
    // envelope's; a non-empty object has a member before the one added.
    if !line.ends_with("}}") || line.ends_with("{}}") || !line.contains(",\"params\":{") {
        return None;
    }
    line.truncate(line.len() - 2);
    line.reserve(arguments.len() + 16);
    line.push_str(",\"arguments\":");
    line.push_str(arguments);
    line.push_str("}}");
    Some(line)
}

pub fn notification_line(method: &str, params: Option<&Value>) -> String {
    to_line(&OutNotification {
        jsonrpc: "2.0",
        method,
        params,
    })
}

/// A result response. `result` may be any serialisable value, so large results can be
/// written straight from borrowed parts without building a `Value` first.
pub fn result_line<R: Serialize>(id: &Id, result: &R) -> String {
    to_line(&OutResult {
        jsonrpc: "2.0",
        id,
        result,
    })
}

/// An error response; `id` is None (JSON null) when the request's id could not be read.
pub fn error_line(id: Option<&Id>, error: &ErrorObject) -> String {
    to_line(&OutError {
        jsonrpc: "2.0",
        id,
        error,
    })
}

/// Searchers made once: `memmem::find` builds one for each search, which costs more
/// than searching a short line.
static ERROR_KEY: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"error\":"));
static RESULT_KEY: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"result\":"));

/// Whether a line written by `error_line`/`result_line` is an error response: the
/// envelope's keys come first (`jsonrpc`, `id`, then `result` or `error`), and a quote
/// inside a JSON string is escaped, so the first of the two keys decides.
pub fn is_error_line(line: &str) -> bool {
    // Only the head is looked at: the envelope key follows the id, and a result may be
    // megabytes long. Bytes and memmem: `str::find` sets up a searcher for each call.
    let head = line
        .as_bytes()
        .get(..line.len().min(512))
        .unwrap_or_default();
    match (ERROR_KEY.find(head), RESULT_KEY.find(head)) {
        (Some(e), Some(r)) => e < r,
        (Some(_), None) => true,
        _ => false,
    }
}

pub fn response_line(id: &Id, outcome: &Result<Value, ErrorObject>) -> String {
    match outcome {
        Ok(v) => result_line(id, v),
        Err(e) => error_line(Some(id), e),
    }
}

#[cfg(any(test, feature = "proptest"))]
pub mod strategies;
#[cfg(test)]
pub mod tests;
