//! A request's params on their way to its server.
//!
//! Parsed into values, or a `tools/call`'s params with its arguments kept as the agent's
//! JSON text.
//!
//! An agent's `tools/call` of either era (a socket agent's line, a one-line HTTP body, or
//! the call named to `mcpd__call_tool`, which `discover.rs` reads the same way) is read by
//! `jsonrpc::peek_tool_call`: its params (the tool's name, `_meta`, a task) are parsed, its
//! arguments are not parsed into values and written out again. The server gets them as the
//! agent wrote them (numbers beyond a double's precision and key order included; inside a
//! modern server's envelope or beside mcpd's progress token), and each call is cheaper.
//! Every path that needs them as values (HTTP parameter headers, tasks, mcpd's own tools,
//! an `input_required` retry) gets them parsed through [`Params::into_map`] or
//! [`Params::change`].

use crate::upstream::{CallParams, PlainCall};
use mcpd_wire::jsonrpc::{self, Request};
use serde_json::{Map, Value};
use std::sync::Arc;

/// A request's params on their way to its server.
#[derive(Clone)]
pub enum Params {
    Parsed(Map<String, Value>),
    /// A `tools/call` read by `jsonrpc::peek_tool_call`, its arguments never parsed
    /// unless a path other than a server's call needs them as values.
    Plain(PlainCall),
}

impl From<Map<String, Value>> for Params {
    fn from(params: Map<String, Value>) -> Self {
        Params::Parsed(params)
    }
}

impl Params {
    /// The params as values: all of them, or a plain call's but its arguments.
    pub fn parsed(&self) -> Option<&Map<String, Value>> {
        match self {
            Params::Parsed(map) => Some(map),
            Params::Plain(plain) => Some(&plain.params),
        }
    }

    /// The request's `_meta`.
    pub fn meta(&self) -> Option<&Value> {
        self.parsed()?.get("_meta")
    }

    /// The params as values, the arguments parsed if they were text.
    pub fn into_map(self) -> Map<String, Value> {
        match self {
            Params::Parsed(map) => map,
            Params::Plain(plain) => match CallParams::ToolCall(plain).into_value() {
                Some(Value::Object(map)) => map,
                _ => Map::new(),
            },
        }
    }

    /// Changes the params as values (the arguments parsed first if they were text).
    pub fn change(&mut self, f: impl FnOnce(&mut Map<String, Value>)) {
        let mut map = std::mem::replace(self, Params::Parsed(Map::new())).into_map();
        f(&mut map);
        *self = Params::Parsed(map);
    }

    /// What the upstream actor is sent for one request with these params.
    pub fn upstream(&self) -> CallParams {
        self.clone().into()
    }
}

impl From<Params> for CallParams {
    fn from(params: Params) -> Self {
        match params {
            Params::Parsed(map) => Some(Value::Object(map)).into(),
            Params::Plain(plain) => CallParams::ToolCall(plain),
        }
    }
}

/// The arguments of a plain `tools/call` (`jsonrpc::peek_tool_call`) kept as the agent's
/// JSON text, apart from the rest of its params.
pub struct PlainArguments(pub Option<Arc<str>>);

impl PlainArguments {
    /// The params with the arguments put back as values.
    pub fn merged(
        self,
        mut params: serde_json::Map<String, Value>,
    ) -> serde_json::Map<String, Value> {
        if let Some(arguments) = self.0 {
            let arguments = crate::upstream::plain_arguments(&arguments);
            params.insert("arguments".into(), arguments);
        }
        params
    }
}

/// The request and plain arguments of a [`jsonrpc::peek_tool_call`]: the request's params
/// hold all but the arguments.
pub fn plain_call(call: jsonrpc::PeekedToolCall<'_>) -> (Request, PlainArguments) {
    let req = Request {
        id: call.id,
        method: mcpd_wire::protocol::method::TOOLS_CALL.into(),
        params: Some(Value::Object(call.params)),
    };
    (req, PlainArguments(call.arguments.map(Arc::from)))
}
