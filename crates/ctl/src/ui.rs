//! `mcpd ctl ui`: opens the dashboard without putting its token on a command line.
//!
//! It asks the daemon for a fresh dashboard launch URL, prints it, and with a display
//! opens the dashboard through a launch page, so the token is on no command line.

use super::launch::{Launched, Page};
use super::{CtlError, at, request};
use crate::stdout::Out;
use std::path::Path;
use std::time::Duration;

/// How long `ctl ui` waits for the browser to read the launch page before removing it.
const READ_WITHIN: Duration = Duration::from_secs(60);

/// Prints the launch URL (stdout, alone on its line, for scripts); with `browser` and a
/// display, opens the dashboard too. Never fails because no browser could be opened.
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
        match launch(socket, url) {
            Ok(page) => {
                if !page.read_within(READ_WITHIN).await {
                    crate::errln!(
                        "(no browser read the launch page within {}s: open the address above yourself)",
                        READ_WITHIN.as_secs()
                    );
                }
            }
            Err(why) => {
                crate::errln!("(could not open a browser: {why}; open the address yourself)")
            }
        }
    }
    Ok(())
}

/// The launch page that posts the URL's token to the dashboard's login, beside the socket.
fn launch(socket: &Path, url: &str) -> Result<Launched, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("the daemon's address {e}"))?;
    let token = parsed
        .query_pairs()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
        .ok_or("the daemon's address holds no token")?;
    let mut action = parsed.clone();
    action.set_query(None);
    let dir = socket.parent().unwrap_or(Path::new("/"));
    let page = Page::Post {
        action: action.as_str(),
        fields: &[("token", &token)],
    };
    super::launch::open(dir, &page).map_err(|e| e.to_string())
}
