//! The fixture's tools: their `tools/list` entries and what each call does.

use super::rpc::Request;
use super::state::Shared;
use serde_json::{Value, json};
use std::time::Duration;

pub(super) enum ToolOutcome {
    /// A `CallToolResult`.
    Done(Value),
    /// A JSON-RPC error code and message.
    Failed(i64, String),
    /// End the request's stream without a response (the `drop` tool).
    Dropped,
}

/// Every tool (with `region` and `badheader` in the modern era), with `extras` tools named
/// `extra_1` … `extra_<extras>` at the end.
pub(super) fn list(extras: usize, modern: bool) -> Vec<Value> {
    let mut tools = vec![
        tool(
            "echo",
            "Echoes its text.",
            json!({"text": {"type": "string"}}),
            &["text"],
        ),
        tool(
            "add",
            "Adds two numbers.",
            json!({"a": {"type": "number"}, "b": {"type": "number"}}),
            &["a", "b"],
        ),
        tool(
            "slow",
            "Sleeps ms milliseconds.",
            json!({"ms": {"type": "integer"}}),
            &["ms"],
        ),
        tool(
            "progress",
            "Reports steps progress notifications, then answers.",
            json!({"steps": {"type": "integer"}}),
            &["steps"],
        ),
        tool("notify", "Logs a message, then answers.", json!({}), &[]),
        tool("drop", "Ends its stream without answering.", json!({}), &[]),
        tool("hang", "Never answers.", json!({}), &[]),
        tool(
            "whoami",
            "Reports the caller's credentials.",
            json!({}),
            &[],
        ),
        tool(
            "big",
            "Answers with bytes 'x' characters.",
            json!({"bytes": {"type": "integer"}}),
            &["bytes"],
        ),
    ];
    if modern {
        tools.extend(modern_tools());
    }
    for n in 1..=extras {
        let name = format!("extra_{n}");
        tools.push(tool(&name, "Added at run time.", json!({}), &[]));
    }
    tools
}

/// The tools only the modern era lists: `region`, whose arguments travel in `Mcp-Param-Region`
/// and `Mcp-Param-N` too, and `badheader`, whose `x-mcp-header` sits on a `number` (not
/// allowed: an HTTP client must drop the tool).
pub(super) fn modern_tools() -> Vec<Value> {
    vec![
        tool(
            "region",
            "Names its region and n, which also travel as headers.",
            json!({
                "region": {"type": "string", "x-mcp-header": "Region"},
                "n": {"type": "integer", "x-mcp-header": "N"},
            }),
            &["region", "n"],
        ),
        tool(
            "badheader",
            "Has an invalid x-mcp-header annotation.",
            json!({"amount": {"type": "number", "x-mcp-header": "Amount"}}),
            &[],
        ),
    ]
}

fn tool(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": properties, "required": required},
    })
}

/// A `CallToolResult` with one text block.
pub(super) fn text(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

/// Runs the `tools/call` in `req`. Notifications related to it go through `emit`, which drops
/// them when the reply is a single JSON body.
pub(super) async fn call(
    shared: &Shared,
    req: &Request,
    emit: &(dyn Fn(Value) + Send + Sync),
) -> ToolOutcome {
    let name = req.params["name"].as_str().unwrap_or_default();
    let args = &req.params["arguments"];
    match name {
        "echo" => match args["text"].as_str() {
            Some(t) => ToolOutcome::Done(text(t)),
            None => invalid(name),
        },
        "add" => match (args["a"].as_f64(), args["b"].as_f64()) {
            (Some(a), Some(b)) => ToolOutcome::Done(text(&(a + b).to_string())),
            _ => invalid(name),
        },
        "slow" => {
            let ms = args["ms"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            ToolOutcome::Done(text("done"))
        }
        "progress" => progress(req, args, emit),
        "notify" => {
            emit(log_message("hello from notify"));
            ToolOutcome::Done(text("notified"))
        }
        "drop" => {
            emit(log_message("dropping this stream"));
            ToolOutcome::Dropped
        }
        "hang" => std::future::pending().await,
        "whoami" => {
            let who = json!({"authorization": req.caller.authorization, "key": req.caller.key});
            ToolOutcome::Done(text(&who.to_string()))
        }
        "big" => {
            let bytes = args["bytes"].as_u64().unwrap_or(0) as usize;
            ToolOutcome::Done(text(&"x".repeat(bytes)))
        }
        "region" if shared.opts.modern => match (args["region"].as_str(), args["n"].as_i64()) {
            (Some(region), Some(n)) => ToolOutcome::Done(text(&format!("region={region} n={n}"))),
            _ => invalid(name),
        },
        "badheader" if shared.opts.modern => ToolOutcome::Done(text("badheader")),
        _ if is_extra(shared, name) => ToolOutcome::Done(text("extra")),
        _ => ToolOutcome::Failed(-32602, format!("unknown tool: {name}")),
    }
}

fn progress(req: &Request, args: &Value, emit: &(dyn Fn(Value) + Send + Sync)) -> ToolOutcome {
    let steps = args["steps"].as_u64().unwrap_or(0);
    // Progress is opt-in: without a token the client asked for none.
    if let Some(token) = req.params["_meta"].get("progressToken") {
        for step in 1..=steps {
            emit(json!({
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": step, "total": steps},
            }));
        }
    }
    ToolOutcome::Done(text("progressed"))
}

fn log_message(data: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "data": data},
    })
}

fn is_extra(shared: &Shared, name: &str) -> bool {
    let Some(n) = name
        .strip_prefix("extra_")
        .and_then(|n| n.parse::<usize>().ok())
    else {
        return false;
    };
    n >= 1 && n <= shared.lock().extras
}

fn invalid(name: &str) -> ToolOutcome {
    ToolOutcome::Failed(-32602, format!("invalid arguments for tool {name}"))
}
