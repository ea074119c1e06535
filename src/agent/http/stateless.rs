//! The stateless 2026-07-28 side of the HTTP listener.
//!
//! Telling eras apart, checking the request-metadata headers against the body, and the
//! HTTP status of an answer.

use crate::errors::{EdgeError, EraError};
use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use mcpd_wire::jsonrpc::{self, ErrorObject};
use mcpd_wire::protocol::era::{self, key};
use mcpd_wire::protocol::method;
use serde_json::Value;

/// What a POSTed message is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MessageKind {
    Request,
    Notification,
    Response,
}

/// Classifies a POST body: a single JSON-RPC 2.0 request, notification or response.
pub fn kind(message: &Value) -> Result<MessageKind, ErrorObject> {
    let invalid = |why: &'static str| EdgeError::InvalidMessage(why).to_error_object();
    let Some(obj) = message.as_object() else {
        return Err(invalid(if message.is_array() {
            "batches are not supported; send one JSON-RPC message per POST"
        } else {
            "the body must be one JSON-RPC message (an object)"
        }));
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("\"jsonrpc\" must be \"2.0\""));
    }
    let id_ok = |v: &Value| v.is_string() || v.is_i64() || v.is_u64();
    match (obj.get("method"), obj.get("id")) {
        (Some(m), id) if m.is_string() => match id {
            None => Ok(MessageKind::Notification),
            Some(id) if id_ok(id) => Ok(MessageKind::Request),
            Some(_) => Err(invalid("\"id\" must be a string or an integer")),
        },
        (Some(_), _) => Err(invalid("\"method\" must be a string")),
        (None, Some(id))
            if id_ok(id) && (obj.contains_key("result") || obj.contains_key("error")) =>
        {
            Ok(MessageKind::Response)
        }
        (None, _) => Err(invalid(
            "not a request, notification or response: \"method\", or \"id\" with \"result\" or \"error\", is missing",
        )),
    }
}

/// Whether a version is served statelessly.
pub fn is_modern_version(v: &str) -> bool {
    !mcpd_wire::protocol::is_legacy_version(v)
}

/// A message is stateless when its `_meta` carries a protocol version or its
/// `MCP-Protocol-Version` header names a version that is not a legacy one.
pub fn is_modern(message: &Value, version_header: Option<&str>) -> bool {
    era::declares_version(message.get("params")) || version_header.is_some_and(is_modern_version)
}

/// The error for a stateless request whose method 2026-07-28 removed (404 with -32601
/// over HTTP): the connection actor's answer (`agent::era_check::removed`), given before
/// the header checks because such a request may carry the version only in its header.
pub fn removed_method(message: &Value) -> Option<ErrorObject> {
    let m = message.get("method").and_then(Value::as_str)?;
    crate::agent::era_check::removed(m)
}

/// Checks `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` against the body:
/// missing or different → 400 with `HeaderMismatch`.
pub fn check_headers(
    headers: &HeaderMap,
    message: &Value,
) -> Result<(), (StatusCode, ErrorObject)> {
    let mismatch = |why: String| {
        (
            StatusCode::BAD_REQUEST,
            EraError::HeaderMismatch(why).to_error_object(),
        )
    };
    let meta_version = message
        .pointer("/params/_meta")
        .and_then(|m| m.get(key::PROTOCOL_VERSION));
    let Some(meta_version) = meta_version else {
        let e = EraError::MissingKey(key::PROTOCOL_VERSION).to_error_object();
        return Err((StatusCode::BAD_REQUEST, e));
    };
    // A header given twice is as bad as a wrong one: which copy would count?
    let header = |name: &str| {
        let mut all = headers.get_all(name).iter();
        let first = all.next()?;
        Some(match all.next() {
            Some(_) => Ok(None),
            None => first.to_str().map(decode),
        })
    };
    match header("mcp-protocol-version") {
        None => {
            return Err(mismatch(
                "the MCP-Protocol-Version header is required".into(),
            ));
        }
        Some(Err(_)) => return Err(mismatch("MCP-Protocol-Version is not visible ASCII".into())),
        Some(Ok(Some(v))) if meta_version.as_str() == Some(v.as_str()) => {}
        Some(Ok(v)) => {
            return Err(mismatch(format!(
                "MCP-Protocol-Version ({}) differs from _meta's protocol version ({meta_version})",
                v.unwrap_or_default()
            )));
        }
    }
    let body_method = message
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match header("mcp-method") {
        None => return Err(mismatch("the Mcp-Method header is required".into())),
        Some(Ok(Some(m))) if m == body_method => {}
        Some(_) => {
            return Err(mismatch(format!(
                "Mcp-Method differs from the body's method ({body_method})"
            )));
        }
    }
    let name_field = match body_method {
        method::TOOLS_CALL | method::PROMPTS_GET => Some("name"),
        method::RESOURCES_READ => Some("uri"),
        m if mcpd_wire::protocol::tasks::is_task_method(m) => Some("taskId"),
        _ => None,
    };
    if let Some(field) = name_field {
        let body_name = message
            .pointer(&format!("/params/{field}"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        match header("mcp-name") {
            None => {
                return Err(mismatch(format!(
                    "the Mcp-Name header is required for {body_method}"
                )));
            }
            Some(Ok(Some(n))) if n == body_name => {}
            Some(_) => {
                return Err(mismatch(format!(
                    "Mcp-Name differs from params.{field} ({body_name})"
                )));
            }
        }
    }
    Ok(())
}

/// Checks the `Mcp-Param-*` headers of a `tools/call` against its arguments, for the
/// arguments the tool's input schema marks with `x-mcp-header`: each present, non-null
/// argument needs its header, equal to it after decoding (integers compare as numbers).
/// Tools mcpd does not list are left to the normal "unknown tool" answer.
pub fn check_param_headers(
    headers: &HeaderMap,
    message: &Value,
    catalog: &crate::registry::Catalog,
) -> Result<(), ErrorObject> {
    if message.get("method").and_then(Value::as_str) != Some(method::TOOLS_CALL) {
        return Ok(());
    }
    let Some(tool) = message
        .pointer("/params/name")
        .and_then(Value::as_str)
        .and_then(|n| catalog.tool(n))
    else {
        return Ok(());
    };
    // Only `inputSchema` is read out of the definition's text.
    #[derive(serde::Deserialize)]
    struct Schema {
        #[serde(rename = "inputSchema", default)]
        input_schema: Value,
    }
    let schema = serde_json::from_str::<Schema>(tool.definition.get())
        .map(|s| s.input_schema)
        .unwrap_or_default();
    // A tool with invalid annotations is never listed over HTTP, so none are expected.
    let Ok(pairs) = mcpd_wire::protocol::headers::param_headers(&schema) else {
        return Ok(());
    };
    let args = message.pointer("/params/arguments");
    for (arg, name) in pairs {
        let Some(value) = args.and_then(|a| a.get(&arg)).filter(|v| !v.is_null()) else {
            continue;
        };
        let header = format!("mcp-param-{name}");
        let mismatch = |why: String| EraError::HeaderMismatch(why).to_error_object();
        let Some(raw) = headers.get(header.as_str()) else {
            return Err(mismatch(format!(
                "the Mcp-Param-{name} header is required: argument {arg:?} is present"
            )));
        };
        let Some(got) = raw.to_str().ok().and_then(decode) else {
            return Err(mismatch(format!(
                "Mcp-Param-{name} has invalid characters or invalid base64"
            )));
        };
        let same = match value {
            Value::String(s) => *s == got,
            Value::Bool(b) => got == b.to_string(),
            Value::Number(n) => got
                .parse::<i64>()
                .ok()
                .zip(n.as_i64())
                .is_some_and(|(a, b)| a == b),
            _ => true,
        };
        if !same {
            return Err(mismatch(format!(
                "Mcp-Param-{name} differs from argument {arg:?}"
            )));
        }
    }
    Ok(())
}

/// A header value as the client meant it: `=?base64?…?=` unwrapped. None when the
/// wrapping is not valid base64 of UTF-8.
fn decode(v: &str) -> Option<String> {
    match v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        None => Some(v.to_owned()),
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
    }
}

/// The HTTP status of a stateless answer: 400 for version, header, capability and
/// `_meta` errors, 404 for an unknown method, else 200.
pub fn status_of(line: &str) -> StatusCode {
    if !jsonrpc::is_error_line(line) {
        return StatusCode::OK;
    }
    let Ok(v) = serde_json::from_str::<Value>(line) else {
        return StatusCode::OK;
    };
    let code = v.pointer("/error/code").and_then(Value::as_i64);
    match code {
        Some(
            era::code::HEADER_MISMATCH
            | era::code::MISSING_CLIENT_CAPABILITY
            | era::code::UNSUPPORTED_VERSION,
        ) => StatusCode::BAD_REQUEST,
        Some(jsonrpc::code::METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(jsonrpc::code::INVALID_PARAMS) if v.pointer("/error/data/missing").is_some() => {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpd_wire::protocol::era::MODERN_VERSION;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    fn call(name: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": name, "_meta": {key::PROTOCOL_VERSION: MODERN_VERSION}}})
    }

    #[test]
    fn headers_must_match_the_body() {
        let ok = headers(&[
            ("mcp-protocol-version", MODERN_VERSION),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ]);
        assert!(check_headers(&ok, &call("echo")).is_ok());
        let (status, e) = check_headers(&ok, &call("other")).unwrap_err();
        assert_eq!(
            (status, e.code),
            (StatusCode::BAD_REQUEST, era::code::HEADER_MISMATCH)
        );
        let wrapped = headers(&[
            ("mcp-protocol-version", MODERN_VERSION),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?IGVjaG8g?="),
        ]);
        assert!(check_headers(&wrapped, &call(" echo ")).is_ok());
        let no_name = headers(&[
            ("mcp-protocol-version", MODERN_VERSION),
            ("mcp-method", "tools/call"),
        ]);
        assert!(check_headers(&no_name, &call("echo")).is_err());
    }

    #[test]
    fn messages_are_classified() {
        assert_eq!(
            kind(&json!({"jsonrpc":"2.0","id":1,"method":"x"})).unwrap(),
            MessageKind::Request
        );
        assert_eq!(
            kind(&json!({"jsonrpc":"2.0","method":"x"})).unwrap(),
            MessageKind::Notification
        );
        assert_eq!(
            kind(&json!({"jsonrpc":"2.0","id":"a","result":{}})).unwrap(),
            MessageKind::Response
        );
        assert!(kind(&json!([])).is_err());
        assert!(kind(&json!({"jsonrpc":"2.0","id":1})).is_err());
        assert!(kind(&json!({"id":1,"method":"x"})).is_err());
    }
}
