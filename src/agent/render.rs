//! Rendering a server's reply for the agent.
//!
//! Its own result passed on as written when nothing needs checking, else checked,
//! rewritten (content URIs) and given the agent's era's shape; or mcpd's error saying why
//! there is none.

use super::tasks::status::StatusTo;
use crate::errors::AgentError;
use crate::upstream::{RawReply, RawResult, Reply};
use mcpd_wire::jsonrpc::{self, Id};
use mcpd_wire::protocol::era::{self, Era};
use mcpd_wire::protocol::results::{RawMembers, passes_unchanged};
use serde_json::Value;
use std::sync::Arc;

/// A change made to a server's result before the agent sees it.
#[derive(Clone)]
pub enum Rewrite {
    None,
    /// `resources/read`: the contents' URIs become the ones agents see.
    ContentUris {
        surface: Arc<crate::registry::Surface>,
    },
    /// `tools/call`: the result is checked (shape, media, the tool's `outputSchema`).
    ToolResult {
        output_schema: Option<Arc<Value>>,
        limits: mcpd_wire::protocol::results::Limits,
        tasks: TaskMode,
    },
    /// `tasks/*`: the server's task id becomes the one the agent knows (`sealed`). A
    /// 2025-11-25 agent's view of an extension task (`legacy_view`) is translated.
    Task {
        sealed: Arc<str>,
        legacy_view: bool,
    },
}

impl Rewrite {
    /// A legacy agent's call: the statuses of a 2025-11-25 task it makes, which the
    /// server connection `instance` pushes, go to the agent's queue (`outbox`, the
    /// connection's own, not the call's: they come after the call's answer). A modern
    /// agent gets no `notifications/tasks/status`: it names the task in a
    /// `subscriptions/listen` and gets `notifications/tasks` (`tasks/watch.rs`).
    pub fn route_statuses(&mut self, outbox: &mcpd_runtime::outbox::Outbox, instance: u64) {
        if let Rewrite::ToolResult {
            tasks: TaskMode::Owned { status_to, .. },
            ..
        } = self
        {
            *status_to = Some(Box::new(StatusTo {
                outbox: outbox.downgrade(),
                instance,
            }));
        }
    }
}

/// What a `tools/call` may do with tasks.
#[derive(Clone)]
pub enum TaskMode {
    /// The agent asked for no task: a task is not an answer it can use.
    None,
    /// The agent may get a task (it declared the extension, or sent the 2025-11-25
    /// `task` parameter); its id is sealed for this owner, and recorded in the book.
    Owned {
        owner: Arc<str>,
        book: super::tasks::book::TaskBook,
        /// Where the statuses its server pushes go: set for a legacy agent once the
        /// call's connection is known ([`Rewrite::route_statuses`]). Boxed: a rewrite is
        /// in every call's future, and few calls make tasks.
        status_to: Option<Box<StatusTo>>,
    },
    /// The tool runs only as a 2025-11-25 task and the agent did not ask for one: mcpd
    /// asks for it and follows it to its result (`call/fulfil.rs`, `call/parked.rs`).
    Follow,
}

/// [`render`] for a reply whose result is the server's text. A result mcpd has nothing
/// to check or change in is passed on as written (in the server's own line, never parsed
/// into values or written out again); any other takes the full path.
pub fn render_raw(
    id: &Id,
    server: &str,
    method: &str,
    reply: RawReply,
    shape: Era,
    rewrite: &Rewrite,
) -> String {
    match reply {
        Ok(Ok(raw)) => {
            let plain = passed_on(raw.members(), shape, rewrite);
            render_members(id, (server, method), raw, plain, shape, rewrite)
        }
        Ok(Err(e)) => render(id, server, method, Ok(Err(e)), shape, rewrite),
        Err(e) => render(id, server, method, Err(e), shape, rewrite),
    }
}

/// How a result whose top-level members were read (None: it is not an object, or names a
/// member twice) is passed on without the full path: as written, or with only its era's
/// members changed. None: it needs the full path.
pub(super) fn passed_on(
    members: Option<RawMembers>,
    shape: Era,
    rewrite: &Rewrite,
) -> Option<era::Presented> {
    let members = members?;
    let plain = match rewrite {
        Rewrite::None => true,
        Rewrite::ContentUris { .. } | Rewrite::Task { .. } => false,
        Rewrite::ToolResult { output_schema, .. } => {
            passes_unchanged(&members, output_schema.as_deref())
        }
    };
    plain.then(|| era::present_raw(&members, shape == Era::Modern))
}

/// [`render_raw`] once [`passed_on`] has decided.
pub(super) fn render_members(
    id: &Id,
    (server, method): (&str, &str),
    raw: RawResult,
    plain: Option<era::Presented>,
    shape: Era,
    rewrite: &Rewrite,
) -> String {
    match plain {
        Some(era::Presented::AsIs) => raw.into_response_line(id),
        Some(era::Presented::Text(text)) => jsonrpc::raw_result_line(id, &text),
        None => render(id, server, method, raw.to_value().map(Ok), shape, rewrite),
    }
}

/// The agent's answer for an upstream reply: the server's own result or error, or mcpd's
/// explanation of why there is none, in the shape of the agent's era (`shape`).
pub fn render(
    id: &Id,
    server: &str,
    method: &str,
    reply: Reply,
    shape: Era,
    rewrite: &Rewrite,
) -> String {
    match reply {
        Ok(Ok(mut result)) => {
            match rewrite {
                Rewrite::None => {}
                Rewrite::ContentUris { surface } => present_contents(&mut result, surface, server),
                Rewrite::Task {
                    sealed,
                    legacy_view,
                } => {
                    super::tasks::ids::present(&mut result, sealed);
                    if *legacy_view && result.get("status").is_some() {
                        result = super::tasks::ids::legacy_task(&result);
                    }
                }
                Rewrite::ToolResult { tasks, .. } if super::tasks::ids::is_task(&result) => {
                    let TaskMode::Owned {
                        owner,
                        book,
                        status_to,
                    } = tasks
                    else {
                        let e = AgentError::Upstream {
                            server: server.to_owned(),
                            method: method.to_owned(),
                            error: crate::upstream::UpstreamError::Protocol(
                                "the server answered with a task to a request that did not declare the Tasks extension".into(),
                            ),
                        };
                        return jsonrpc::error_line(Some(id), &e.to_error_object());
                    };
                    if let Some(made) = super::tasks::ids::present_created(
                        &mut result,
                        owner,
                        server,
                        shape == Era::Legacy,
                    ) {
                        book.record(owner.clone(), made, status_to.as_deref().cloned());
                    }
                }
                Rewrite::ToolResult {
                    output_schema,
                    limits,
                    ..
                } => {
                    use mcpd_wire::protocol::results::{Checked, check_call_result};
                    match check_call_result(&mut result, output_schema.as_deref(), limits) {
                        Checked::Ok => {}
                        Checked::Fixed(notes) => {
                            tracing::warn!(
                                upstream = server,
                                "changed a tool result before passing it on: {}",
                                notes.join("; ")
                            );
                        }
                        Checked::Invalid(why) => {
                            let e = AgentError::Upstream {
                                server: server.to_owned(),
                                method: method.to_owned(),
                                error: crate::upstream::UpstreamError::Protocol(format!(
                                    "the result is not a CallToolResult: {why}"
                                )),
                            };
                            return jsonrpc::error_line(Some(id), &e.to_error_object());
                        }
                    }
                }
            }
            if shape == Era::Modern {
                era::modernize_result(&mut result);
            } else {
                era::legacy_result(&mut result);
            }
            jsonrpc::response_line(id, &Ok(result))
        }
        Ok(outcome) => jsonrpc::response_line(id, &outcome),
        Err(error) => {
            let e = AgentError::Upstream {
                server: server.to_owned(),
                method: method.to_owned(),
                error,
            };
            jsonrpc::error_line(Some(id), &e.to_error_object())
        }
    }
}

/// Gives each `resources/read` content the URI agents know it by.
fn present_contents(result: &mut Value, surface: &crate::registry::Surface, server: &str) {
    let Some(contents) = result.get_mut("contents").and_then(Value::as_array_mut) else {
        return;
    };
    for c in contents {
        if let Some(uri) = c.get("uri").and_then(Value::as_str) {
            let shown = surface.present_uri(server, uri);
            c["uri"] = Value::String(shown);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::upstream::RawResult;
    use mcpd_wire::jsonrpc::strategies::id_text;
    use mcpd_wire::jsonrpc::{Message, parse, peek_result, raw_result_line};

    proptest::proptest! {
        /// A server's result passed on in its own line (rewritten in place) reads exactly
        /// as when it is copied into a new one, whatever the order of the server's members
        /// and however long the agent's id is beside mcpd's: the same envelope and the
        /// same result text, with at most spaces between them (where mcpd's envelope is
        /// the shorter, so the result need not move).
        #[test]
        fn a_result_rewritten_in_its_own_line_equals_the_copied_one(
            id in id_text(),
            n in proptest::prelude::any::<u64>(),
            text in "\\PC{0,40}",
            order in 0usize..3,
        ) {
            let agent = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call"}}"#);
            let Ok(Message::Request(r)) = parse(&agent) else {
                panic!("{agent} does not parse");
            };
            let result = serde_json::json!({"content": [{"type": "text", "text": text}]}).to_string();
            let answer = match order {
                0 => format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{result}}}"#),
                1 => format!(r#"{{"id":{n},"jsonrpc":"2.0","result":{result}}}"#),
                _ => format!(r#"{{"result":{result} , "jsonrpc":"2.0","id":{n}}}"#),
            };
            let peeked = peek_result(&answer).unwrap();
            proptest::prop_assert_eq!(peeked.id, n);
            let server_head = peeked.range.start;
            let line = RawResult::new(answer, peeked.range).into_response_line(&r.id);
            let copied = raw_result_line(&r.id, &result);
            let head = copied.len() - result.len() - 1;
            proptest::prop_assert_eq!(&line[..head], &copied[..head]);
            let spaces = line[head..].len() - line[head..].trim_start_matches(' ').len();
            proptest::prop_assert_eq!(spaces, server_head.saturating_sub(head));
            proptest::prop_assert_eq!(&line[head + spaces..], &copied[head..]);
            let Ok(Message::Response(_)) = parse(&line) else {
                panic!("{line} does not parse as a response");
            };
        }
    }
}
