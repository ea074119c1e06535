//! `mcpd ctl ui`: asks the daemon for a fresh dashboard launch URL, prints it, and opens it in a browser when there is a display.

use super::{CtlError, at, request};
use crate::stdout::Out;
use std::path::Path;

/// Prints the launch URL (stdout, alone on its line, for scripts); with `browser` and a
/// display, opens it too. Never fails because no browser could be opened.
pub async fn ui(socket: &Path, browser: bool) -> Result<(), CtlError> {
    let answer = request(socket, crate::control_api::UI, None).await?;
    let Some(url) = at(&answer, "url").as_str() else {
        return Err(CtlError::Unexpected(answer.to_string()));
    };
    let minutes = at(&answer, "expires_secs").as_u64().unwrap_or(120) / 60;
    crate::errln!(
        "Open this address to see the dashboard (it works once, within {minutes} minutes):"
    );
    {
        let mut out = Out::lock();
        writeln!(out, "{url}")?;
        out.flush()?;
    }
    if browser && super::login::has_display() {
        super::login::xdg_open(url);
    }
    Ok(())
}
