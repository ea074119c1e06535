//! How a request is dressed for a server's era.
//!
//! The modern `_meta` envelope and HTTP request-metadata headers, or neither.

use super::transport::Sent;
use mcpd_wire::jsonrpc::{self, Id};
use mcpd_wire::protocol::era::{self, Era};
use mcpd_wire::protocol::{headers, method};
use serde_json::{Value, json};
use std::collections::HashMap;

/// Per-tool `(argument, header)` pairs from `x-mcp-header` annotations.
pub type ParamHeaders = HashMap<String, Vec<(String, String)>>;

/// What the request line and the transport's view of a request need to know.
pub struct Dress<'a> {
    pub era: Era,
    /// Whether the transport is HTTP (only then do headers matter).
    pub http: bool,
    pub param_headers: &'a ParamHeaders,
}

impl Dress<'_> {
    /// Builds the request line and its `Sent`. A modern server gets the envelope, with
    /// the calling agent's capabilities when it declared any; a legacy one gets the
    /// params without modern keys.
    pub fn request(
        &self,
        id: u64,
        method: &'static str,
        mut params: Option<Value>,
        caps: Option<&Value>,
    ) -> (String, Sent) {
        let sent = match self.era {
            Era::Modern => {
                era::add_envelope(&mut params, caps.unwrap_or(&json!({})));
                mcpd_wire::protocol::tasks::declare_for_modern(method, &mut params);
                let name = params.as_ref().and_then(|p| named(method, p));
                let mut sent = Sent::modern(id, method, name);
                if self.http && method == method::TOOLS_CALL {
                    self.add_param_headers(&mut sent, params.as_ref());
                }
                sent
            }
            Era::Legacy => {
                era::strip_envelope(&mut params);
                Sent::new(id, method)
            }
        };
        (
            jsonrpc::request_line(&Id::from(id), method, params.as_ref()),
            sent,
        )
    }

    fn add_param_headers(&self, sent: &mut Sent, params: Option<&Value>) {
        let Some(params) = params else { return };
        let Some(tool) = params.get("name").and_then(Value::as_str) else {
            return;
        };
        let args = params.get("arguments");
        for (arg, header) in self.param_headers.get(tool).into_iter().flatten() {
            if let Some(v) = args.and_then(|a| a.get(arg)).and_then(headers::param_value) {
                sent.headers.push((format!("mcp-param-{header}"), v));
            }
        }
    }
}

/// The `Mcp-Name` of a request: the tool or prompt name, or the resource URI.
fn named<'a>(method: &str, params: &'a Value) -> Option<&'a str> {
    let field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    params.get(field).and_then(Value::as_str)
}

/// Drops tools whose `x-mcp-header` annotations are invalid, as the spec requires of
/// HTTP clients, and collects the valid annotations.
pub fn check_tools(server: &str, tools: Vec<Value>) -> (Vec<Value>, ParamHeaders) {
    let mut map = ParamHeaders::new();
    let kept = tools
        .into_iter()
        .filter(|t| {
            let name = t.get("name").and_then(Value::as_str).unwrap_or("?");
            let schema = t.get("inputSchema").unwrap_or(&Value::Null);
            match headers::param_headers(schema) {
                Ok(pairs) => {
                    if !pairs.is_empty() {
                        map.insert(name.to_owned(), pairs);
                    }
                    true
                }
                Err(why) => {
                    tracing::warn!(
                        upstream = server,
                        tool = name,
                        "dropped a tool with an invalid x-mcp-header annotation: {why}"
                    );
                    false
                }
            }
        })
        .collect();
    (kept, map)
}

/// Marks the tools of a server with the Tasks extension as ones a 2025-11-25 agent may
/// ask to run as a task (`execution.taskSupport: "optional"`): the extension lets the
/// server run any call as a task, and mcpd translates a 2025-11-25 task for it. The
/// 2026-07-28 era has no `execution`, so a definition that has one is left alone.
pub fn may_run_as_tasks(tools: &mut [Value]) {
    for tool in tools {
        if let Some(t) = tool.as_object_mut() {
            t.entry("execution")
                .or_insert_with(|| json!({"taskSupport": "optional"}));
        }
    }
}

/// The `subscriptions/listen` request that asks a modern server for list changes (it
/// honours the subset it supports).
pub fn listen_params(resources: &[String]) -> Value {
    let mut filter = json!({
        "toolsListChanged": true,
        "promptsListChanged": true,
        "resourcesListChanged": true,
    });
    if !resources.is_empty() {
        mcpd_wire::jsonrpc::set_member(&mut filter, "resourceSubscriptions", json!(resources));
    }
    json!({ "notifications": filter })
}

/// The subscription a notification belongs to, if any.
pub fn subscription_of(params: Option<&Value>) -> Option<u64> {
    params?
        .get("_meta")?
        .get(era::key::SUBSCRIPTION_ID)?
        .as_u64()
}
