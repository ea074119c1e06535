//! Fetching a server's whole tool list through its handle, following pagination cursors safely.

use super::UpstreamHandle;
use crate::protocol::method;
use serde_json::{Value, json};
use std::collections::HashSet;

/// Pages fetched at most, so a server that paginates forever cannot keep us busy.
const MAX_PAGES: usize = 100;

/// Fetches every page of `tools/list`. A repeated cursor, too many pages, an error or a
/// result without a `tools` array fails the whole fetch: a partial list is never used.
pub async fn fetch_tools(handle: &UpstreamHandle) -> Result<Vec<Value>, String> {
    let mut tools = Vec::new();
    let mut seen = HashSet::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
        let result = match handle.request(method::TOOLS_LIST, params).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                return Err(format!(
                    "tools/list failed: {} (code {})",
                    e.message, e.code
                ));
            }
            Err(e) => return Err(format!("tools/list failed: {e}")),
        };
        let Some(page) = result.get("tools").and_then(Value::as_array) else {
            return Err("tools/list result has no \"tools\" array".into());
        };
        tools.extend(page.iter().cloned());
        match result.get("nextCursor") {
            None | Some(Value::Null) => return Ok(tools),
            Some(Value::String(next)) => {
                if !seen.insert(next.clone()) {
                    return Err(format!(
                        "tools/list repeated the cursor {next:?}; the pagination chain is broken"
                    ));
                }
                cursor = Some(next.clone());
            }
            Some(other) => {
                return Err(format!(
                    "tools/list returned a non-string nextCursor {other}"
                ));
            }
        }
    }
    Err(format!("tools/list returned more than {MAX_PAGES} pages"))
}
