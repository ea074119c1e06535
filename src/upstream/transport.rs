//! The seam between a connection's actor and its transport.
//!
//! What the actor sends out and what comes back in.
//!
//! The actor and the handshake only deal in JSON-RPC lines. Over stdio a line is written
//! to the child's stdin and lines come from its stdout. Over HTTP a transport task turns
//! each line into a POST (or a POST to the SSE endpoint) and feeds every message it reads
//! back as a line, so routing, timeouts and cancellation live in one place for both.

use super::UpstreamError;
use mcpd_runtime::framing::{Frame, OutLine};
use mcpd_wire::protocol::era;

/// A request mcpd sends, as the transport needs to know it.
#[derive(Debug, Clone)]
pub struct Sent {
    /// mcpd's id for it on this connection.
    pub id: u64,
    pub method: &'static str,
    /// Request-metadata headers of the modern HTTP transport (`MCP-Protocol-Version`,
    /// `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`); empty for legacy requests.
    pub headers: Vec<(String, String)>,
}

impl Sent {
    pub fn new(id: u64, method: &'static str) -> Sent {
        Sent {
            id,
            method,
            headers: Vec::new(),
        }
    }

    /// A modern request: its headers name the version, the method and, for
    /// `tools/call`, `prompts/get` and `resources/read`, the name or URI.
    pub fn modern(id: u64, method: &'static str, name: Option<&str>) -> Sent {
        let mut headers = vec![
            (
                "mcp-protocol-version".to_owned(),
                era::MODERN_VERSION.to_owned(),
            ),
            ("mcp-method".to_owned(), method.to_owned()),
        ];
        if let Some(name) = name {
            headers.push((
                "mcp-name".to_owned(),
                mcpd_wire::protocol::headers::header_value(name),
            ));
        }
        Sent {
            id,
            method,
            headers,
        }
    }
}

/// What the actor (or handshake) asks its transport to do.
#[derive(Debug)]
pub enum Outbound {
    /// Send a JSON-RPC message. `request` is set for requests, whose reply the transport
    /// must route back; notifications and responses to the server have none.
    Message { line: String, request: Option<Sent> },
    /// The handshake agreed on this protocol version (HTTP sends it as a header).
    Negotiated { version: String },
    /// mcpd no longer waits for request `id` (cancelled or timed out): HTTP drops the
    /// request's open POST. Over stdio `notifications/cancelled` is all there is.
    Abort(u64),
    /// The reply stream of request `id` broke after the server gave event ids: reopen it
    /// from `last_event_id` (Streamable HTTP resumption).
    Resume { id: u64, resume: Resume },
}

/// Where a broken SSE stream can be picked up again.
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    pub last_event_id: String,
    /// The server's `retry` advice, in milliseconds.
    pub retry_ms: Option<u64>,
}

/// What a transport delivers to the actor, in order.
#[derive(Debug)]
pub enum Inbound {
    /// One message from the server (a stdout line, a JSON body, an SSE `data`).
    Frame(Frame),
    /// A message that came on the reply stream of request `request`, so a server
    /// request in it belongs to that request's call.
    Related(Frame, u64),
    /// The reply stream of request `id` ended. Everything it carried was delivered
    /// before this, so if the request is still pending, its answer is not coming:
    /// `error` says why, or `resume` says how to pick the stream up again.
    Ended {
        id: u64,
        error: UpstreamError,
        resume: Option<Resume>,
    },
    /// The HTTP session expired and the transport started a new one; the server may have
    /// forgotten everything, so catalogs are fetched again.
    Renewed,
    /// The transport cannot go on. `fatal` means retrying will not help until the
    /// configuration changes (the server refused our credentials).
    Closed { error: String, fatal: bool },
}

impl mcpd_runtime::budget::Weigh for Outbound {
    fn bytes(&self) -> usize {
        self.line().map_or(0, str::len)
    }
}

impl OutLine for Outbound {
    fn line(&self) -> Option<&str> {
        match self {
            Outbound::Message { line, .. } => Some(line),
            _ => None,
        }
    }
}
