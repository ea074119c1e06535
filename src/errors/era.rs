//! Refusals of a request that does not fit its protocol era, with their codes and messages.
//!
//! A removed method, an unsupported version, a missing `_meta` key, headers that
//! disagree with the body.

use mcpd_wire::jsonrpc::{ErrorObject, code};
use mcpd_wire::protocol::era;
use serde_json::json;

/// Why a request was refused for its era, before it was served. Named by cause, like
/// [`super::AgentError`], and mapped to codes and messages here only.
#[derive(Debug, thiserror::Error)]
pub enum EraError {
    /// A method 2026-07-28 removed, in a request meant for that era.
    #[error("{0} is not part of 2026-07-28")]
    Removed(String),
    /// A protocol version mcpd does not serve, or one this connection cannot switch to.
    #[error("{why}")]
    UnsupportedVersion {
        requested: Option<String>,
        why: &'static str,
    },
    /// A key every 2026-07-28 request's `_meta` carries is missing.
    #[error("the request's _meta lacks the required key \"{0}\"")]
    MissingKey(&'static str),
    /// An HTTP header (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-…`)
    /// missing, given twice, or disagreeing with the body.
    #[error("{0}")]
    HeaderMismatch(String),
}

impl EraError {
    pub fn to_error_object(&self) -> ErrorObject {
        let message = self.to_string();
        match self {
            EraError::Removed(_) => ErrorObject::new(code::METHOD_NOT_FOUND, message),
            EraError::UnsupportedVersion { requested, .. } => {
                ErrorObject::new(era::code::UNSUPPORTED_VERSION, message)
                    .with_data(era::unsupported_version_data(requested.as_deref()))
            }
            EraError::MissingKey(k) => {
                ErrorObject::new(code::INVALID_PARAMS, message).with_data(json!({ "missing": k }))
            }
            EraError::HeaderMismatch(_) => ErrorObject::new(era::code::HEADER_MISMATCH, message),
        }
    }
}
