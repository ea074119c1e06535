//! Fetching a server's whole tool list through its handle, following pagination cursors safely.

use super::UpstreamHandle;
use mcpd_wire::protocol::method;
use serde_json::{Value, json};
use std::collections::HashSet;

/// Pages fetched at most, so a server that paginates forever cannot keep us busy.
const MAX_PAGES: usize = 100;

/// Why a server's list could not be had whole (a partial list is never used).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ListError {
    #[error("{method} failed: {message} (code {code})")]
    Refused {
        method: String,
        message: String,
        code: i64,
    },
    #[error("{method} failed: {error}")]
    Upstream {
        method: String,
        error: super::UpstreamError,
    },
    #[error("{method} result has no \"{field}\" array")]
    NoArray { method: String, field: String },
    #[error("{method} repeated the cursor {cursor:?}; the pagination chain is broken")]
    RepeatedCursor { method: String, cursor: String },
    #[error("{method} returned a non-string nextCursor {value}")]
    BadCursor { method: String, value: String },
    #[error("{method} returned more than {MAX_PAGES} pages")]
    TooManyPages { method: String },
}

/// A server's whole tool list, with the cache hints of its pages (2026-07-28).
#[derive(Debug, Default)]
pub struct ToolList {
    pub tools: Vec<Value>,
    /// The shortest `ttlMs` of the pages; None when the server gave none.
    pub ttl_ms: Option<u64>,
    /// Whether any page was `cacheScope: "private"`.
    pub private: bool,
}

/// Fetches every page of `tools/list`.
pub async fn fetch_tools(handle: &UpstreamHandle) -> Result<ToolList, ListError> {
    fetch_list(handle, method::TOOLS_LIST, "tools").await
}

/// Fetches every page of a list method whose items are in `field`. A repeated cursor,
/// too many pages, an error or a result without the array fails the whole fetch: a
/// partial list is never used.
pub async fn fetch_list(
    handle: &UpstreamHandle,
    list_method: &'static str,
    field: &str,
) -> Result<ToolList, ListError> {
    let method = || list_method.to_owned();
    let mut list = ToolList::default();
    let tools = &mut list.tools;
    let mut seen = HashSet::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
        let result = match handle.request(list_method, params).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                return Err(ListError::Refused {
                    method: method(),
                    message: e.message,
                    code: e.code,
                });
            }
            Err(error) => {
                return Err(ListError::Upstream {
                    method: method(),
                    error,
                });
            }
        };
        let Some(page) = result.get(field).and_then(Value::as_array) else {
            return Err(ListError::NoArray {
                method: method(),
                field: field.to_owned(),
            });
        };
        tools.extend(page.iter().cloned());
        if let Some(ttl) = result.get("ttlMs") {
            // A negative or odd TTL counts as zero, as the spec says.
            let ttl = ttl.as_u64().unwrap_or(0);
            list.ttl_ms = Some(list.ttl_ms.map_or(ttl, |t| t.min(ttl)));
        }
        list.private |= result.get("cacheScope").and_then(Value::as_str) == Some("private");
        match result.get("nextCursor") {
            None | Some(Value::Null) => return Ok(list),
            Some(Value::String(next)) => {
                if !seen.insert(next.clone()) {
                    return Err(ListError::RepeatedCursor {
                        method: method(),
                        cursor: next.clone(),
                    });
                }
                cursor = Some(next.clone());
            }
            Some(other) => {
                return Err(ListError::BadCursor {
                    method: method(),
                    value: other.to_string(),
                });
            }
        }
    }
    Err(ListError::TooManyPages { method: method() })
}
