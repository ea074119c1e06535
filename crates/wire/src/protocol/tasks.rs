//! The 2026-07-28 Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663).
//!
//! Its name, its methods, and whether a request declared it.

use super::era::{self, key};
use crate::jsonrpc::{ErrorObject, code};
use serde_json::{Value, json};

/// The extension's identifier, in `capabilities.extensions`.
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The `_meta` key that ties a 2025-11-25 message to its task.
pub const RELATED: &str = "io.modelcontextprotocol/related-task";

pub const GET: &str = "tasks/get";
pub const UPDATE: &str = "tasks/update";
pub const CANCEL: &str = "tasks/cancel";

/// Whether a method is one of the extension's own, which name a task by `taskId`.
pub fn is_task_method(m: &str) -> bool {
    matches!(m, GET | UPDATE | CANCEL)
}

/// Whether a request's `_meta` client capabilities declare the extension.
pub fn declared(params: Option<&Value>) -> bool {
    declared_in_meta(params.and_then(|p| p.get("_meta")))
}

/// [`declared`] for a request's `_meta`.
pub fn declared_in_meta(meta: Option<&Value>) -> bool {
    meta.and_then(|m| m.get(key::CLIENT_CAPABILITIES))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(EXTENSION))
        .is_some_and(Value::is_object)
}

/// Declares the extension in a capabilities object (the `clientCapabilities` mcpd sends
/// when it follows a task itself).
pub fn declare(capabilities: &mut Value) {
    if !capabilities.is_object() {
        *capabilities = json!({});
    }
    if let Some(caps) = capabilities.as_object_mut() {
        let ext = caps.entry("extensions").or_insert_with(|| json!({}));
        if !ext.is_object() {
            *ext = json!({});
        }
        if let Some(ext) = ext.as_object_mut() {
            ext.insert(EXTENSION.into(), json!({}));
        }
    }
}

/// For a request dressed for a modern server: a 2025-11-25 agent's `task` parameter on
/// `tools/call` (the agent asks for a task) becomes the extension's declaration, and the
/// extension's own methods always declare it. Other requests are left as they are.
pub fn declare_for_modern(method: &str, params: &mut Option<Value>) {
    let Some(p) = params.as_mut().and_then(Value::as_object_mut) else {
        return;
    };
    let asks_task = method == super::method::TOOLS_CALL && p.remove("task").is_some();
    if !asks_task && !is_task_method(method) {
        return;
    }
    let meta = p.entry("_meta").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    if let Some(m) = meta.as_object_mut() {
        declare(
            m.entry(key::CLIENT_CAPABILITIES)
                .or_insert_with(|| json!({})),
        );
    }
}

/// The -32021 a request gets when it did not declare the extension it needs.
///
/// This and [`unknown_task`] are facts of the Tasks protocol (the code, and the
/// `requiredCapabilities` shape a client reads to retry), so they live with it here:
/// the daemon's own errors are mapped in its `errors` module, which this floor cannot
/// name.
pub fn not_declared(method: &str) -> ErrorObject {
    ErrorObject::new(
        era::code::MISSING_CLIENT_CAPABILITY,
        format!("{method} needs the {EXTENSION} extension: declare it in this request's _meta clientCapabilities.extensions"),
    )
    .with_data(json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}}))
}

/// Whether an error asks for the extension (a server that runs a tool only as a task).
pub fn requires_extension(error: &ErrorObject) -> bool {
    error.code == era::code::MISSING_CLIENT_CAPABILITY
        && error
            .data
            .as_ref()
            .and_then(|d| d.pointer("/requiredCapabilities/extensions"))
            .and_then(|e| e.get(EXTENSION))
            .is_some()
}

/// The -32602 for a task id mcpd does not know (or no longer knows).
pub fn unknown_task(why: &str) -> ErrorObject {
    ErrorObject::new(code::INVALID_PARAMS, format!("unknown task: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_is_found_and_made() {
        let mut caps = json!({"elicitation": {}});
        declare(&mut caps);
        let params = json!({"_meta": {key::CLIENT_CAPABILITIES: caps}});
        assert!(declared(Some(&params)));
        assert!(!declared(Some(&json!({"_meta": {}}))));
        assert!(!declared(None));
        assert!(requires_extension(&not_declared(GET)));
    }

    #[test]
    fn a_legacy_task_request_declares_the_extension_for_a_modern_server() {
        let mut call = Some(json!({"name": "t", "task": {"ttl": 1000}, "_meta": {}}));
        declare_for_modern("tools/call", &mut call);
        assert!(call.as_ref().is_some_and(|c| c.get("task").is_none()));
        assert!(declared(call.as_ref()));
        let mut plain = Some(json!({"name": "t"}));
        declare_for_modern("tools/call", &mut plain);
        assert!(!declared(plain.as_ref()));
        let mut get = Some(json!({"taskId": "x"}));
        declare_for_modern(GET, &mut get);
        assert!(declared(get.as_ref()));
    }
}
