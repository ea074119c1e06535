//! mcpd's refusals of a server's own requests, with their codes and messages.
//!
//! A method it does not carry, or no agent to carry it to.
//!
//! Mapped here rather than in `src/errors/`: `errors` names `UpstreamError`, so the
//! upstream side naming `errors` would close an import loop; these go only to servers.

use mcpd_wire::jsonrpc::{ErrorObject, code};

/// Why mcpd did not carry a request a server sent it to an agent. Named by cause, like
/// [`crate::errors::AgentError`], and mapped to codes and messages here only; these go
/// to the server, never to an agent.
#[derive(Debug, thiserror::Error)]
pub enum ServerRequestRefusal {
    #[error("mcpd does not forward {0} from servers to agents")]
    NotForwarded(String),
    #[error("{0} arrived while no agent call is in flight; mcpd cannot tell which agent it is for")]
    NoCallInFlight(String),
    #[error(
        "{method} arrived while {calls} agent calls are in flight; mcpd cannot tell which agent it is for"
    )]
    ManyCallsInFlight { method: String, calls: usize },
    /// The call it belongs to has no agent's input to reach (its caller cannot answer).
    #[error("{0} is not available for this request")]
    NoAgentToAsk(String),
    #[error("the agent that owns this call is gone or busy")]
    AgentGoneOrBusy,
    #[error("the agent went away before answering")]
    AgentWentAway,
    /// The spec allows nothing but a ping before the handshake ends.
    #[error("{0} is not available before initialization")]
    BeforeInitialization(String),
}

impl ServerRequestRefusal {
    pub fn to_error_object(&self) -> ErrorObject {
        let message = self.to_string();
        let code = match self {
            ServerRequestRefusal::NotForwarded(_)
            | ServerRequestRefusal::NoAgentToAsk(_)
            | ServerRequestRefusal::BeforeInitialization(_) => code::METHOD_NOT_FOUND,
            ServerRequestRefusal::NoCallInFlight(_)
            | ServerRequestRefusal::ManyCallsInFlight { .. } => code::INVALID_REQUEST,
            ServerRequestRefusal::AgentGoneOrBusy | ServerRequestRefusal::AgentWentAway => {
                code::INTERNAL_ERROR
            }
        };
        ErrorObject::new(code, message)
    }
}
