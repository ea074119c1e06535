//! Failures of the MCP Tasks mcpd follows or watches for an agent, with codes and messages.

use mcpd_wire::jsonrpc::{ErrorObject, code};

/// Why a task mcpd follows, watches or holds input for could not go on. Named by cause,
/// like [`super::AgentError`], and mapped to codes and messages here only.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The server's task went wrong in a way that leaves no result (no id, cancelled,
    /// failed without an error, followed too long).
    #[error("server '{server}': {why}")]
    Server { server: String, why: String },
    /// Too many of the server's input requests already wait on one task.
    #[error("the task has {0} input requests waiting already")]
    TooManyInputRequests(usize),
    #[error("notifications.taskIds must be a list of task ids")]
    TaskIdsNotList,
    #[error(
        "notifications.taskIds names {named} tasks and this connection watches {already}; a connection may watch at most {max} (cancel a listen first)"
    )]
    TooManyWatched {
        named: usize,
        already: usize,
        max: usize,
    },
}

impl TaskError {
    pub fn to_error_object(&self) -> ErrorObject {
        let message = self.to_string();
        match self {
            TaskError::Server { .. } | TaskError::TooManyInputRequests(_) => {
                ErrorObject::new(code::INTERNAL_ERROR, message)
            }
            TaskError::TaskIdsNotList | TaskError::TooManyWatched { .. } => {
                ErrorObject::new(code::INVALID_PARAMS, message)
            }
        }
    }
}
