//! Failures of a server's request for an agent's input, with their codes and messages.
//!
//! The request (elicitation, sampling, roots) and the retries that carry the answer.

use mcpd_wire::jsonrpc::{ErrorObject, code, mcpd_code};
use mcpd_wire::protocol::era;
use serde_json::json;

/// Why a server's request to an agent, or an agent's answer to one, could not be carried.
/// Named by cause, like [`super::AgentError`], and mapped to codes and messages here
/// only. Most go to the server that asked; the retry's refusals go to the agent.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// Too many of mcpd's requests to this agent already wait for an answer.
    #[error("{0} requests to this agent already wait for its answer")]
    AgentBusy(usize),
    #[error("the agent is not reading its connection")]
    AgentNotReading,
    /// Too many of a modern agent's calls already wait for its input.
    #[error("{0} calls already wait for this agent's input")]
    TooManyParked(usize),
    #[error("requestState was not accepted: {0}")]
    StateRejected(String),
    #[error(
        "requestState refers to a call that is no longer waiting (answered, expired or cancelled)"
    )]
    NoLongerWaiting,
    #[error("the retry has no inputResponses.{0}")]
    NoInputResponse(String),
    /// A legacy agent never answered mcpd's request.
    #[error("the agent did not answer in time")]
    RequestUnanswered,
    /// A modern agent never retried the call it was asked input for.
    #[error("the agent did not answer in time")]
    RetryMissing,
    #[error("mcpd does not forward {0} to agents")]
    NotForwarded(String),
    #[error("the agent did not declare the {cap} capability, which {method} needs")]
    MissingCapability { cap: &'static str, method: String },
    #[error("server '{server}' asked for input more than {rounds} times in one call; mcpd gave up")]
    TooManyRounds { server: String, rounds: usize },
    #[error("the agent connection is closing")]
    AgentClosing,
    /// The agent could not give what the server asked for; its own code is kept.
    #[error("server '{server}' needs {method} to finish this call: {}", refusal.message)]
    AgentRefused {
        server: String,
        method: String,
        refusal: ErrorObject,
    },
}

impl InputError {
    pub fn to_error_object(&self) -> ErrorObject {
        let message = self.to_string();
        match self {
            InputError::AgentBusy(_) => ErrorObject::new(mcpd_code::BUSY, message),
            InputError::RequestUnanswered => ErrorObject::new(mcpd_code::TIMEOUT, message),
            InputError::AgentNotReading
            | InputError::TooManyParked(_)
            | InputError::RetryMissing
            | InputError::TooManyRounds { .. }
            | InputError::AgentClosing => ErrorObject::new(code::INTERNAL_ERROR, message),
            InputError::StateRejected(_)
            | InputError::NoLongerWaiting
            | InputError::NoInputResponse(_) => ErrorObject::new(code::INVALID_PARAMS, message),
            InputError::NotForwarded(_) => ErrorObject::new(code::METHOD_NOT_FOUND, message),
            InputError::MissingCapability { cap, .. } => {
                ErrorObject::new(era::code::MISSING_CLIENT_CAPABILITY, message)
                    .with_data(json!({ "requiredCapabilities": { *cap: {} } }))
            }
            InputError::AgentRefused { refusal, .. } => ErrorObject::new(refusal.code, message),
        }
    }
}
