//! An agent's `tools/call`.
//!
//! Finding the tool (or, for a server not yet listed, saying what is wrong with it) and
//! forwarding it, to a ready server, one still starting, or the agent's own instance.

use super::AgentContext;
use super::forward::{self, Caller, Route};
use super::params::{Params, PlainArguments};
use super::render::{Rewrite, TaskMode};
use super::reply::{Refusal, ReplyFuture};
use super::session::Session;
use crate::errors::AgentError;
use crate::registry::Resolved;
use crate::upstream::PlainCall;
use mcpd_runtime::outbox::Outbox;
use mcpd_wire::jsonrpc::{Id, Request};
use mcpd_wire::protocol::era::Era;
use mcpd_wire::protocol::method;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Starts a `tools/call`: finds the tool's server and returns the future of its answer.
pub fn start(
    req: Request,
    plain: Option<PlainArguments>,
    ctx: &AgentContext,
    outbox: &Outbox,
    session: &Session,
    era: Era,
) -> Result<(Id, CancellationToken, ReplyFuture), Refusal> {
    let Request { id, params, .. } = req;
    let fail = |error: AgentError| Refusal {
        id: id.clone(),
        error,
    };
    let Some(Value::Object(mut params)) = params else {
        return Err(fail(invalid("params must be an object with a \"name\"")));
    };
    let Some(Value::String(name)) = params.get("name") else {
        return Err(fail(invalid("\"name\" must be a string")));
    };
    let catalog = ctx.catalog.borrow().clone();
    let resolved = catalog.resolve(
        name,
        |s| session.sees_server(s),
        |s, q| session.sees_tool(s, q),
    );
    let tool = match resolved {
        Resolved::Tool(tool) => tool,
        // A held tool is neither unknown nor served: say that a person must look.
        Resolved::Held { server } => {
            return Err(fail(AgentError::Held {
                kind: "tool",
                name: name.clone(),
                server: server.to_string(),
            }));
        }
        // A tool of a server that has not listed its tools yet (it is starting, or has
        // never been reached) is not unknown: the call waits for the server to list
        // them, once, or hears what is wrong with it.
        Resolved::Unlisted {
            server,
            availability,
        } => {
            if !session.is_redo(&id) && super::wait::coming(&catalog, server) {
                let (server, request) = (
                    server.clone(),
                    Request {
                        id: id.clone(),
                        method: method::TOOLS_CALL.into(),
                        params: Some(Value::Object(params)),
                    },
                );
                return super::wait::call(request, plain, server, ctx, session).map_err(fail);
            }
            return Err(fail(AgentError::Unavailable {
                server: server.to_string(),
                why: availability.explain(),
            }));
        }
        Resolved::Unknown => {
            return Err(fail(AgentError::UnknownTool {
                nearest: session.nearest_tools(&catalog, name),
                name: name.clone(),
            }));
        }
    };
    let server = tool.server.clone();
    // The server's own name, written over the agent's (its key is not made again).
    if let Some(name) = params.get_mut("name") {
        *name = Value::String(tool.original.clone());
    }
    let output_schema = tool.output_schema.clone();
    // A modern agent makes tasks through the extension alone: the 2025-11-25 `task`
    // parameter is not part of its era and must not reach a server that knows it. A
    // legacy agent's `task` goes to its server; a tool that runs only as a task gets one
    // from mcpd when the agent did not ask.
    let required = tool.task_required;
    if era == Era::Modern {
        params.remove("task");
    }
    let declared =
        era == Era::Modern && mcpd_wire::protocol::tasks::declared_in_meta(params.get("_meta"));
    if declared && required {
        // A modern agent that can do tasks gets a 2025-11-25 one as an extension task.
        params.insert("task".into(), serde_json::json!({}));
    }
    let tasks = if declared {
        TaskMode::Owned {
            owner: super::tasks::ids::owner(ctx),
            book: ctx.task_book.clone(),
            status_to: None,
        }
    } else if era == Era::Modern && !required {
        TaskMode::None
    } else if era == Era::Legacy && params.get("task").is_some_and(Value::is_object) {
        TaskMode::Owned {
            owner: super::tasks::ids::owner(ctx),
            book: ctx.task_book.clone(),
            status_to: None,
        }
    } else if required {
        TaskMode::Follow
    } else {
        TaskMode::None
    };
    let rewrite = Rewrite::ToolResult {
        output_schema,
        limits: ctx.limits,
        tasks,
    };
    let params = match plain {
        // The arguments go to the server as the agent wrote them.
        Some(PlainArguments(arguments)) => Params::Plain(PlainCall {
            params: std::sync::Arc::new(params),
            arguments,
        }),
        None => params.into(),
    };
    let caller = Caller::of(outbox, session, era);
    let route = Route {
        server: server.clone(),
        method: method::TOOLS_CALL,
        params,
        rewrite,
    };
    // A server still starting (its tools listed from the cached catalog) or idle is
    // waited for; one run per agent or per project, the caller's instance is called.
    let reach = super::resolve::reach(&catalog, &ctx.catalog, &ctx.supervisor, session, &server)
        .map_err(fail)?;
    Ok(forward::go(id, route, reach, &caller))
}

fn invalid(reason: &str) -> AgentError {
    AgentError::InvalidParams {
        method: method::TOOLS_CALL.into(),
        reason: reason.into(),
    }
}
