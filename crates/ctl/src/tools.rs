//! `mcpd ctl tools`: every tool agents see, for a person.
//!
//! With `--search QUERY` it shows the ranking agents get from `mcpd__find_tools`.

use super::table::{self, Align};
use super::{CtlError, Out, at, request};
use crate::control_api::ALL_TOOLS;
use serde_json::json;
use std::path::Path;

/// Prints the best matches for `query`, best first, with their scores.
pub async fn search(
    socket: &Path,
    query: &str,
    server: Option<&str>,
    limit: usize,
) -> Result<(), CtlError> {
    let params = json!({
        "name": "mcpd__find_tools",
        "arguments": {"query": query, "limit": limit.clamp(1, 50), "server": server},
    });
    let result = request(
        socket,
        mcpd_wire::protocol::method::TOOLS_CALL,
        Some(params),
    )
    .await?;
    let mut out = Out::lock();
    let hits = at(&result, "structuredContent");
    let hits = at(hits, "tools").as_array().cloned().unwrap_or_default();
    if hits.is_empty() {
        writeln!(out, "no tool matches '{query}'")?;
        return Ok(());
    }
    let mut rows = Vec::with_capacity(hits.len());
    for h in hits {
        let name = at(&h, "name").as_str().unwrap_or("?");
        let score = at(&h, "score").as_f64().unwrap_or(0.0);
        let description: String = at(&h, "description")
            .as_str()
            .unwrap_or("")
            .chars()
            .take(90)
            .collect();
        rows.push(vec![name.to_owned(), format!("{score:.3}"), description]);
    }
    table::print(&mut out, &[Align::Left, Align::Right, Align::Left], &rows)?;
    Ok(())
}

/// `mcpd ctl tools [SERVER]`: every tool agents see, with the first line of its
/// description.
pub async fn tools(socket: &Path, server: Option<&str>) -> Result<(), CtlError> {
    let mut out = Out::lock();
    let mut cursor: Option<String> = None;
    let prefix = server.map(|s| format!("{s}__"));
    let mut rows = Vec::new();
    loop {
        // Every tool, also when agents get the discovery list.
        let mut params = json!({ "_meta": { ALL_TOOLS: true } });
        if let Some(c) = &cursor {
            mcpd_wire::jsonrpc::set_member(&mut params, "cursor", json!(c));
        }
        let result = request(
            socket,
            mcpd_wire::protocol::method::TOOLS_LIST,
            Some(params),
        )
        .await?;
        for t in at(&result, "tools").as_array().into_iter().flatten() {
            let name = at(t, "name").as_str().unwrap_or("?");
            if prefix
                .as_ref()
                .is_some_and(|p| !name.starts_with(p.as_str()))
            {
                continue;
            }
            let description = at(t, "description")
                .as_str()
                .unwrap_or("")
                .lines()
                .next()
                .unwrap_or("");
            let description: String = description.chars().take(100).collect();
            rows.push(vec![name.to_owned(), description]);
        }
        match at(&result, "nextCursor").as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    table::print(&mut out, &[Align::Left, Align::Left], &rows)?;
    if rows.is_empty() {
        match server {
            Some(s) => writeln!(out, "no tools of server '{s}' (see `mcpd ctl status`)")?,
            None => writeln!(out, "no tools yet (see `mcpd ctl status`)")?,
        }
    }
    Ok(())
}
