//! The one place where failures become JSON-RPC errors.
//!
//! The errors tell an agent what happened and what to do.

use crate::registry::surface::RouteError;
use crate::upstream::UpstreamError;
use mcpd_ctl::control_api::UNKNOWN_TOOL_HINT;
use mcpd_wire::jsonrpc::{ErrorObject, code, mcpd_code};
use mcpd_wire::protocol::era::Era;
use serde_json::json;

mod edge;
mod era;
mod input;
mod task;

pub use edge::EdgeError;
pub use era::EraError;
pub use input::InputError;
pub use task::TaskError;

/// Why a request from an agent could not be served. Named by cause, so an agent is never
/// blamed for a server's fault and vice versa.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("unknown tool '{name}'{}; {UNKNOWN_TOOL_HINT}", did_you_mean(nearest))]
    UnknownTool { name: String, nearest: Vec<String> },
    #[error("no profile named '{name}' (configured: {known})")]
    UnknownProfile { name: String, known: String },
    #[error("invalid params for {method}: {reason}")]
    InvalidParams { method: String, reason: String },
    #[error("method '{0}' is not supported by mcpd")]
    UnknownMethod(String),
    #[error("server '{server}' is {why}")]
    Unavailable { server: String, why: String },
    #[error(
        "{kind} '{name}' of server '{server}' is new or has changed since it was approved, and is held until a person approves it: run `mcpd ctl diff {server}`, then `mcpd ctl approve {server}`"
    )]
    Held {
        kind: &'static str,
        name: String,
        server: String,
    },
    #[error("server '{server}' runs one instance per project, and {why}")]
    NoProject { server: String, why: String },
    #[error("server '{server}': {why}")]
    InstanceBusy { server: String, why: String },
    #[error("{}", upstream_message(server, method, error))]
    Upstream {
        server: String,
        method: String,
        error: UpstreamError,
    },
    #[error("this connection already has {0} requests in flight; wait for some to finish")]
    TooManyInFlight(usize),
    /// The agent reused the id of one of its requests still in flight.
    #[error("request id {0} is already in use by a request in flight")]
    IdInUse(mcpd_wire::jsonrpc::Id),
    #[error("mcpd is shutting down; reconnect once it is back")]
    ShuttingDown,
    #[error(
        "the daemon's user cancelled this request (mcpd's dashboard or mcpd ctl cancel); the server was told to stop it"
    )]
    CancelledByOperator,
    #[error("a message exceeded the limit of {0} bytes and was discarded")]
    MessageTooLarge(usize),
    #[error("a message was not valid UTF-8 and was discarded")]
    NotUtf8,
    #[error(
        "{method} is a control method, for the daemon's own user (or root) on its Unix socket without a profile; {why}"
    )]
    ControlDenied { method: String, why: ControlDenial },
    /// `mcpd ctl secret` could not read or write a store (never a value in the message).
    #[error("{0}")]
    SecretStore(crate::secrets::SecretError),
    #[error("this connection already has {0} open subscriptions/listen requests; cancel one first")]
    TooManyListens(usize),
    #[error(
        "resourceSubscriptions names {uris} resources; one subscriptions/listen may name at most {max}"
    )]
    TooManyListenUris { uris: usize, max: usize },
    /// A URI no server offers (its code depends on the agent's era), or one too long to route.
    #[error("{why}")]
    Unroutable {
        uri: String,
        why: RouteError,
        era: Era,
    },
    /// A control method asked for something that cannot be done (an unknown server, …).
    #[error("{0}")]
    ControlRefused(String),
    /// A control method whose feature is off in the configuration.
    #[error("{0}")]
    ControlUnavailable(&'static str),
    /// A login to a server's authorization server failed or was refused.
    #[error("{0}")]
    LoginFailed(String),
    #[error("{0}")]
    LogoutFailed(String),
}

/// Why a connection may not use mcpd's control methods (`mcpd/status`, `mcpd/reload` …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ControlDenial {
    #[error("this connection is another user's; run `mcpd ctl` as the daemon's user")]
    OtherUser,
    #[error("HTTP clients cannot use them; run `mcpd ctl` on the daemon's machine")]
    Http,
    #[error(
        "this connection chose a profile, which limits what it may see; use a connection without one (`mcpd ctl`)"
    )]
    Profile,
    #[error(
        "this connection comes from a process of a server mcpd started; servers may not control the daemon"
    )]
    Server,
    #[error(
        "mcpd cannot tell whether this connection comes from a process of a server it started (the connecting process or one of its parents could not be read in /proc), and servers may not control the daemon; connect from a process that stays until it has the answer"
    )]
    UnknownOrigin,
}

fn upstream_message(server: &str, method: &str, e: &UpstreamError) -> String {
    match e {
        UpstreamError::Exited { status } => format!(
            "server '{server}' exited ({status}) while handling {method}; it will be restarted, but the request was not re-sent: retry it if it is safe to repeat"
        ),
        UpstreamError::Timeout { after } => format!(
            "server '{server}' did not answer {method} within {}; the request was cancelled. Raise `timeout` for this server if it needs longer",
            humantime::format_duration(*after)
        ),
        UpstreamError::Busy { limit } => format!(
            "server '{server}' already has {limit} requests in flight (max_in_flight); retry later"
        ),
        UpstreamError::Gone => {
            format!("server '{server}' went away before answering {method}; it is being restarted")
        }
        UpstreamError::Stopping => {
            format!("server '{server}' is being stopped; {method} was not completed")
        }
        UpstreamError::Protocol(why) => {
            format!("server '{server}' broke the protocol answering {method}: {why}")
        }
        UpstreamError::Http { .. } => format!("server '{server}' failed {method}: {e}"),
        UpstreamError::NoResponse { .. } => format!(
            "server '{server}' gave no answer to {method}: {e}; the request was not re-sent: retry it if it is safe to repeat"
        ),
        UpstreamError::Unreachable(why) => {
            format!("server '{server}' cannot be reached ({why}); mcpd keeps retrying with backoff")
        }
        UpstreamError::NeedsLogin(why) => format!("server '{server}' refused {method}: {why}"),
    }
}

impl AgentError {
    pub fn to_error_object(&self) -> ErrorObject {
        let message = self.to_string();
        match self {
            AgentError::UnknownTool { name, nearest } => {
                ErrorObject::new(code::INVALID_PARAMS, message)
                    .with_data(json!({ "tool": name, "nearest": nearest }))
            }
            AgentError::InvalidParams { .. } | AgentError::UnknownProfile { .. } => {
                ErrorObject::new(code::INVALID_PARAMS, message)
            }
            AgentError::UnknownMethod(_) => ErrorObject::new(code::METHOD_NOT_FOUND, message),
            AgentError::SecretStore(crate::secrets::SecretError::Invalid(_)) => {
                ErrorObject::new(code::INVALID_PARAMS, message)
            }
            AgentError::SecretStore(_) => ErrorObject::new(mcpd_code::SECRET_STORE, message),
            AgentError::Unavailable { server, .. } => {
                ErrorObject::new(mcpd_code::SERVER_UNAVAILABLE, message)
                    .with_data(json!({ "server": server }))
            }
            AgentError::Upstream { server, error, .. } => {
                let code = match error {
                    UpstreamError::Exited { .. } | UpstreamError::Gone => mcpd_code::SERVER_EXITED,
                    UpstreamError::Timeout { .. } => mcpd_code::TIMEOUT,
                    UpstreamError::Busy { .. } => mcpd_code::BUSY,
                    UpstreamError::Stopping => mcpd_code::SERVER_UNAVAILABLE,
                    UpstreamError::Protocol(_) => mcpd_code::SERVER_PROTOCOL,
                    UpstreamError::Http { .. } => mcpd_code::SERVER_HTTP_ERROR,
                    UpstreamError::NoResponse { .. } => mcpd_code::SERVER_EXITED,
                    UpstreamError::Unreachable(_) => mcpd_code::SERVER_UNAVAILABLE,
                    UpstreamError::NeedsLogin(_) => mcpd_code::NEEDS_LOGIN,
                };
                ErrorObject::new(code, message).with_data(json!({ "server": server }))
            }
            AgentError::Held { server, name, .. } => ErrorObject::new(mcpd_code::HELD, message)
                .with_data(json!({ "server": server, "name": name })),
            AgentError::NoProject { server, .. } => {
                ErrorObject::new(mcpd_code::NO_PROJECT, message)
                    .with_data(json!({ "server": server }))
            }
            AgentError::InstanceBusy { server, .. } => {
                ErrorObject::new(mcpd_code::BUSY, message).with_data(json!({ "server": server }))
            }
            AgentError::TooManyInFlight(_) => ErrorObject::new(mcpd_code::BUSY, message),
            AgentError::ShuttingDown => ErrorObject::new(mcpd_code::SHUTTING_DOWN, message),
            AgentError::CancelledByOperator => ErrorObject::new(mcpd_code::CANCELLED, message),
            AgentError::MessageTooLarge(_) | AgentError::NotUtf8 | AgentError::IdInUse(_) => {
                ErrorObject::new(code::INVALID_REQUEST, message)
            }
            AgentError::ControlDenied { .. } => ErrorObject::new(mcpd_code::ACCESS_DENIED, message),
            AgentError::TooManyListens(_) => ErrorObject::new(mcpd_code::BUSY, message),
            AgentError::TooManyListenUris { .. } | AgentError::ControlRefused(_) => {
                ErrorObject::new(code::INVALID_PARAMS, message)
            }
            AgentError::Unroutable { uri, why, era } => unroutable(uri, why, *era, message),
            AgentError::ControlUnavailable(_) => ErrorObject::new(code::INVALID_REQUEST, message),
            AgentError::LoginFailed(_) => ErrorObject::new(mcpd_code::NEEDS_LOGIN, message),
            AgentError::LogoutFailed(_) => ErrorObject::new(code::INTERNAL_ERROR, message),
        }
    }
}

/// The code the legacy revisions give a resource no server offers; 2026-07-28 uses
/// invalid params instead (SEP-2164).
const LEGACY_RESOURCE_NOT_FOUND: i64 = -32002;

/// A URI that could not be routed: a resource no server offers is -32602 for a modern
/// agent and -32002 for a legacy one, with the URI in `data`; a URI over the length cap
/// is -32602 in both eras, and is not echoed back.
fn unroutable(uri: &str, why: &RouteError, era: Era, message: String) -> ErrorObject {
    if matches!(why, RouteError::TooLong { .. }) {
        return ErrorObject::new(code::INVALID_PARAMS, message);
    }
    let code = match era {
        Era::Modern => code::INVALID_PARAMS,
        Era::Legacy => LEGACY_RESOURCE_NOT_FOUND,
    };
    ErrorObject::new(code, message).with_data(json!({ "uri": uri }))
}

/// "; did you mean a, b?" for an unknown name's nearest ones, or nothing.
fn did_you_mean(nearest: &[String]) -> String {
    if nearest.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}?", nearest.join(", "))
    }
}
