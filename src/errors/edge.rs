//! Refusals at the socket's accept and the HTTP listener's edge, and their codes and messages.

use mcpd_wire::jsonrpc::{ErrorObject, code, mcpd_code};

/// Why a connection or an HTTP request was refused before any request in it was served:
/// at the socket's accept, or at the HTTP listener's edge. Named by cause, like
/// [`AgentError`](super::AgentError), and mapped to codes and messages here only.
#[derive(Debug, thiserror::Error)]
pub enum EdgeError {
    #[error(
        "uid {} may not use this mcpd (it serves uid {own}; see daemon.allow_uids)",
        uid.map_or("?".into(), |u| u.to_string())
    )]
    OtherUser { uid: Option<u32>, own: u32 },
    #[error(
        "a confined server's process may not connect to mcpd: through it, it would use every server with the user's rights, around its sandbox"
    )]
    ConfinedServer,
    #[error(
        "mcpd already serves {0} agents (daemon.max_agents); close another agent or raise the limit"
    )]
    TooManyAgents(usize),
    #[error("could not read the body: {0}")]
    UnreadableBody(String),
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    #[error(
        "no Mcp-Session-Id header: send initialize first, or use 2026-07-28 with per-request _meta"
    )]
    NoSessionHeader,
    #[error("no such session (it ended or expired); send initialize again without Mcp-Session-Id")]
    UnknownSession,
    #[error(
        "2026-07-28 clients send no responses; answer input requests by retrying with inputResponses"
    )]
    StatelessResponse,
    #[error(
        "profiles need a session: choose one in initialize's _meta (\"mcpd/profile\") or with mcpd/profile in a legacy session"
    )]
    StatelessProfile,
    #[error("the agent connection ended before answering")]
    ConnectionEnded,
    /// A POST body that is not one JSON-RPC 2.0 request, notification or response.
    #[error("{0}")]
    InvalidMessage(&'static str),
    #[error(
        "the Host header does not name this mcpd (a DNS-rebinding defence); add the name to daemon.http_allowed_hosts to serve it"
    )]
    ForeignHost,
    #[error("requests from this web origin are refused; mcpd serves local clients")]
    ForeignOrigin,
    /// The agent is another mcpd daemon that this one reaches through its own servers.
    #[error(
        "the agent is another mcpd daemon that this daemon reaches through its own servers (a loop: each would serve the other's tools back to it); remove one of the two entries"
    )]
    LoopOfDaemons,
}

impl EdgeError {
    pub fn to_error_object(&self) -> ErrorObject {
        let code = match self {
            EdgeError::OtherUser { .. } | EdgeError::ConfinedServer => mcpd_code::ACCESS_DENIED,
            EdgeError::TooManyAgents(_) => mcpd_code::TOO_MANY_AGENTS,
            EdgeError::NotJson(_) => code::PARSE_ERROR,
            EdgeError::UnreadableBody(_)
            | EdgeError::NoSessionHeader
            | EdgeError::UnknownSession
            | EdgeError::StatelessResponse
            | EdgeError::StatelessProfile
            | EdgeError::InvalidMessage(_)
            | EdgeError::ForeignHost
            | EdgeError::ForeignOrigin
            | EdgeError::LoopOfDaemons => code::INVALID_REQUEST,
            EdgeError::ConnectionEnded => code::INTERNAL_ERROR,
        };
        ErrorObject::new(code, self.to_string())
    }
}
