//! Paging of listings: a page of tools, prompts, resources or templates after a cursor.
//!
//! The cursor names the last entry of the page before, so a page boundary stays right
//! when the catalog changes between pages.

use super::{Catalog, Entry, PAGE_SIZE, ToolEntry};
use std::sync::Arc;

impl Catalog {
    /// Every tool, sorted by qualified name.
    pub fn all_tools(&self) -> &[Arc<ToolEntry>] {
        &self.tools
    }

    /// One page of tools after the cursor, and the cursor of the next page if any.
    pub fn page(
        &self,
        cursor: Option<&str>,
    ) -> Result<(&[Arc<ToolEntry>], Option<String>), String> {
        let start = match cursor {
            None => 0,
            Some(c) => {
                let after = decode_cursor(c).ok_or_else(|| format!("invalid cursor {c:?}"))?;
                self.tools
                    .partition_point(|t| t.qualified.as_str() <= after.as_str())
            }
        };
        let (page, more) = page_of(&self.tools, start);
        let next = more
            .then(|| page.last().map(|t| encode_cursor(&t.qualified)))
            .flatten();
        Ok((page, next))
    }
}

/// One page of prompts, resources or templates after the cursor, and the next cursor.
pub fn page_entries<'a>(
    items: &'a [Arc<Entry>],
    cursor: Option<&str>,
) -> Result<(&'a [Arc<Entry>], Option<String>), String> {
    let start = match cursor {
        None => 0,
        Some(c) => {
            let after = decode_cursor(c).ok_or_else(|| format!("invalid cursor {c:?}"))?;
            items.partition_point(|e| e.presented.as_str() <= after.as_str())
        }
    };
    let (page, more) = page_of(items, start);
    let next = more
        .then(|| page.last().map(|e| encode_cursor(&e.presented)))
        .flatten();
    Ok((page, next))
}

/// The page of `items` that starts at `start`, and whether more follow it.
fn page_of<T>(items: &[T], start: usize) -> (&[T], bool) {
    let rest = items.get(start..).unwrap_or_default();
    let page = rest.get(..PAGE_SIZE).unwrap_or(rest);
    (page, rest.len() > page.len())
}

/// Cursors name the last tool of the page (hex-encoded to keep them opaque), so a page
/// boundary stays right even when the catalog changes between pages.
fn encode_cursor(last: &str) -> String {
    hex::encode(last)
}

fn decode_cursor(c: &str) -> Option<String> {
    String::from_utf8(hex::decode(c).ok()?).ok()
}
