//! What mcpd says about itself to agents of either era.
//!
//! Its capabilities, its instructions, the cache hints of its listings, and the
//! `server/discover` answer.

use super::AgentContext;
use mcpd_wire::jsonrpc::{self, Request};
use mcpd_wire::protocol::era;
use serde_json::{Value, json};

/// mcpd's own capabilities, the same in both eras.
pub fn capabilities() -> Value {
    json!({
        "tools": { "listChanged": true },
        "prompts": { "listChanged": true },
        "resources": { "subscribe": true, "listChanged": true },
        "completions": {},
        "logging": {},
    })
}

pub const INSTRUCTIONS: &str = "mcpd multiplexes several MCP servers. Tool names are SERVER__TOOL: the part before the double underscore names the server that provides the tool.";

/// The cache hints mcpd puts on its listings.
pub fn cache_hints(ctx: &AgentContext) -> (u64, &'static str) {
    let c = ctx.catalog.borrow();
    (
        c.cache().ttl_ms,
        if c.cache().private {
            "private"
        } else {
            "public"
        },
    )
}

/// Answers `server/discover`.
pub fn discover(req: &Request, ctx: &AgentContext) -> String {
    let (ttl, scope) = cache_hints(ctx);
    // Tasks pass through to the servers that make them (the extension is declared per
    // request, and each server decides per call).
    let mut caps = capabilities();
    mcpd_wire::protocol::tasks::declare(&mut caps);
    let result = json!({
        "resultType": "complete",
        "supportedVersions": era::supported_versions(),
        "capabilities": caps,
        "instructions": INSTRUCTIONS,
        "ttlMs": ttl,
        "cacheScope": scope,
        "_meta": era::handshake_meta(ctx.catalog.borrow().mcpd_behind()),
    });
    jsonrpc::result_line(&req.id, &result)
}
