//! One tool as agents see it (`ToolEntry`).
//!
//! Also how a server's tool list becomes those entries or the reason it cannot.

use mcpd_wire::protocol::naming::Naming;
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::Arc;

/// One tool as agents see it.
#[derive(Debug, Clone)]
pub struct ToolEntry {
    /// The name agents call it by.
    pub qualified: String,
    pub server: Arc<str>,
    /// The server's own name for it.
    pub original: String,
    /// The server's definition with `name` replaced by the qualified name, as JSON text.
    /// Text, not a `Value`: a parsed definition takes about ten times its text's size
    /// (measured: 650 KB of heap for 260 small tools whose text is 55 KB), and `tools/list`
    /// writes the text as it is. What calls need from it is taken out when it is made.
    pub definition: Box<RawValue>,
    /// Its `outputSchema` when that is an object, shared by every call that checks a
    /// result against it (made once per listing, not once per call).
    pub output_schema: Option<Arc<Value>>,
    /// Whether it runs only as a task (`execution.taskSupport` is "required").
    pub task_required: bool,
}

impl ToolEntry {
    /// The definition as a `Value`, for the rare readers that need its parts (search
    /// indexing, renaming, `describe_tools`).
    pub fn parsed(&self) -> Value {
        // The text was written from a `Value`, so it always parses back.
        serde_json::from_str(self.definition.get()).unwrap_or(Value::Null)
    }
}

/// Why a server's new tool list was not taken.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenerationError {
    #[error("tool #{index} has no string \"name\"")]
    Unnamed { index: usize },
    /// Never seen: a parsed definition always serialises. Here so that nothing is dropped
    /// silently if it ever failed.
    #[error("tool #{index} cannot be written as JSON: {reason}")]
    Unwritable { index: usize, reason: String },
    #[error("tools {first:?} and {second:?} both map to the name {qualified:?}")]
    Duplicate {
        qualified: String,
        first: String,
        second: String,
    },
}

/// A server's tools as agents see them, or why the list cannot be taken.
pub(super) fn present_tools(
    server: &Arc<str>,
    tools: &[Value],
    naming: &Naming,
    limit: usize,
) -> Result<Vec<Arc<ToolEntry>>, GenerationError> {
    let mut entries = Vec::with_capacity(tools.len());
    let mut seen: HashMap<String, String> = HashMap::new();
    for (index, tool) in tools.iter().enumerate() {
        let Some(original) = tool.get("name").and_then(Value::as_str) else {
            return Err(GenerationError::Unnamed { index });
        };
        let qualified = naming.tool(original, limit);
        if let Some(first) = seen.insert(qualified.clone(), original.to_owned()) {
            return Err(GenerationError::Duplicate {
                qualified,
                first,
                second: original.to_owned(),
            });
        }
        let mut definition = tool.clone();
        if let Some(obj) = definition.as_object_mut() {
            obj.insert("name".into(), Value::String(qualified.clone()));
        }
        let output_schema = definition
            .get("outputSchema")
            .filter(|s| s.is_object())
            .map(|s| Arc::new(s.clone()));
        let task_required = definition
            .get("execution")
            .and_then(|e| e.get("taskSupport"))
            .and_then(Value::as_str)
            == Some("required");
        let definition = serde_json::value::to_raw_value(&definition).map_err(|e| {
            GenerationError::Unwritable {
                index,
                reason: e.to_string(),
            }
        })?;
        entries.push(Arc::new(ToolEntry {
            qualified,
            server: server.clone(),
            original: original.to_owned(),
            definition,
            output_schema,
            task_required,
        }));
    }
    Ok(entries)
}
