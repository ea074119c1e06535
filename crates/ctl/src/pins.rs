//! `mcpd ctl diff`, `approve` and `forget`.
//!
//! A person's look at a server's held definitions (each beside its approved version, as a
//! line diff) and answer to them.

use super::{CtlError, Out, at, request_within};
use crate::control_api::PINS;
use mcpd_wire::json::diff::{fields, line_diff};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// An approval waits for the pin file to be on disk.
const PIN_WAIT: Duration = Duration::from_secs(30);

/// `mcpd ctl diff SERVER`.
pub async fn diff(socket: &Path, server: &str) -> Result<(), CtlError> {
    let r = ask(socket, json!({ "name": server, "op": "diff" })).await?;
    let mut out = Out::lock();
    let held = at(&r, "held").as_array().cloned().unwrap_or_default();
    let mode = at(&r, "mode").as_str().unwrap_or("?");
    writeln!(out, "{server}: {} held (pin = \"{mode}\")", held.len())?;
    if let Some(why) = at(&r, "broken").as_str() {
        writeln!(out, "  {why}")?;
    }
    for h in &held {
        let kind = at(h, "kind").as_str().unwrap_or("?");
        let id = at(h, "id").as_str().unwrap_or("?");
        let new = at(h, "held");
        let old = at(h, "approved");
        if old.is_null() {
            writeln!(out, "\nnew {kind} {id:?}:")?;
        } else {
            writeln!(out, "\nchanged {kind} {id:?}:")?;
        }
        for (field, before, after) in fields(old, new) {
            writeln!(out, "  {field}:")?;
            for line in line_diff(&before, &after) {
                writeln!(out, "    {line}")?;
            }
        }
    }
    if !held.is_empty() {
        writeln!(
            out,
            "\napprove all with `mcpd ctl approve {server}`, or some with `mcpd ctl approve {server} NAME…`"
        )?;
    }
    Ok(())
}

/// `mcpd ctl approve SERVER [NAME…]`.
pub async fn approve(socket: &Path, server: &str, names: &[String]) -> Result<(), CtlError> {
    let params = json!({ "name": server, "op": "approve", "names": names });
    ask(socket, params).await?;
    let what = if names.is_empty() {
        "everything held".to_owned()
    } else {
        names.join(", ")
    };
    crate::errln!("approved {what} of {server}; agents were told its lists changed");
    Ok(())
}

/// `mcpd ctl forget SERVER`.
pub async fn forget(socket: &Path, server: &str) -> Result<(), CtlError> {
    ask(socket, json!({ "name": server, "op": "forget" })).await?;
    crate::errln!(
        "forgot the pins of {server}: what it shows now is its first listing (approved under trust-first, held under approve)"
    );
    Ok(())
}

async fn ask(socket: &Path, params: Value) -> Result<Value, CtlError> {
    request_within(socket, PINS, Some(params), PIN_WAIT).await
}
