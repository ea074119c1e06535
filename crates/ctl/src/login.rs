//! `mcpd ctl login` and `logout`: the client side of a server's OAuth login, which the daemon runs.
//!
//! This prints the URL, opens the browser or takes the pasted redirect, and waits for the
//! outcome.

use super::{CtlError, at, request_within};
use crate::stdout::Out;
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
/// How long `ctl login` waits for the daemon to start a login (discovery, registration).
const LOGIN_START: Duration = Duration::from_secs(90);
/// How long `ctl login` waits for the browser (the daemon's own limit is 10 minutes).
const LOGIN_WAIT: Duration = Duration::from_secs(11 * 60);

/// `mcpd ctl login NAME`: the daemon starts (or joins) the server's one pending login;
/// this prints its URL, opens it, and waits for the daemon to report how it ended.
pub async fn login(socket: &Path, name: &str, browser: bool, paste: bool) -> Result<(), CtlError> {
    let params = json!({ "name": name });
    let failed = |e: CtlError| match e {
        CtlError::Rpc { message, .. } => CtlError::LoginFailed(message),
        e => e,
    };
    let started = request_within(socket, "mcpd/login", Some(params.clone()), LOGIN_START)
        .await
        .map_err(failed)?;
    if let Some(grant) = at(&started, "granted").as_str() {
        crate::errln!("{name}: mcpd got a token with the {grant} grant (no browser login needed)");
        return Ok(());
    }
    let Some(url) = at(&started, "url").as_str() else {
        return Err(CtlError::Unexpected(started.to_string()));
    };
    crate::errln!("To log in to {name}, open this URL in a browser:");
    {
        // Not a quiet success when nobody reads it: without the URL there is no login.
        let mut out = Out::lock();
        writeln!(out, "{url}")
            .and_then(|()| out.flush())
            .map_err(|e| CtlError::LoginFailed(format!("the URL could not be printed: {}", e.0)))?;
    }
    // Removed when the browser has read it, or when this command ends.
    let page = if browser && !paste {
        open_browser(socket, url)
    } else {
        None
    };
    if paste {
        crate::errln!(
            "Then paste the address the browser was sent to (it starts with http://127.0.0.1:…/callback) and press Enter:"
        );
        let mut line = String::new();
        let mut stdin = BufReader::new(tokio::io::stdin());
        // Waits for the paste, or for the redirect reaching the daemon by itself.
        let wait = request_within(socket, "mcpd/login/wait", Some(params.clone()), LOGIN_WAIT);
        tokio::select! {
            read = stdin.read_line(&mut line) => {
                read?;
                let pasted = line.trim();
                if pasted.is_empty() {
                    return Err(CtlError::LoginFailed("nothing was pasted".into()));
                }
                let p = json!({ "name": name, "url": pasted });
                request_within(socket, "mcpd/login/redirect", Some(p), LOGIN_START)
                    .await
                    .map_err(failed)?;
            }
            r = wait => { r.map_err(failed)?; }
        }
    } else {
        let wait = request_within(socket, "mcpd/login/wait", Some(params), LOGIN_WAIT);
        tokio::pin!(wait);
        let outcome = match page {
            Some(page) => tokio::select! {
                r = &mut wait => r,
                // The page goes as soon as the browser has it; then the login goes on.
                _ = page.read_within(LOGIN_WAIT) => wait.await,
            },
            None => wait.await,
        };
        outcome.map_err(failed)?;
    }
    crate::errln!("logged in to {name}");
    Ok(())
}

/// Whether there is a display a browser could open on.
pub(super) fn has_display() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
}

/// Opens a URL through a launch page when there is a display (the URL's `state` is on no
/// command line); says so when it cannot.
fn open_browser(socket: &Path, url: &str) -> Option<super::launch::Launched> {
    if !has_display() {
        crate::errln!(
            "(no display here: open it on any machine, or use --paste if this host's loopback is out of the browser's reach)"
        );
        return None;
    }
    let dir = socket.parent().unwrap_or(Path::new("/"));
    match super::launch::open(dir, &super::launch::Page::Go(url)) {
        Ok(page) => Some(page),
        Err(e) => {
            crate::errln!("(could not open a browser: {e}; open the URL yourself)");
            None
        }
    }
}

/// `mcpd ctl logout NAME`.
pub async fn logout(socket: &Path, name: &str) -> Result<(), CtlError> {
    let r = request_within(
        socket,
        "mcpd/logout",
        Some(json!({ "name": name })),
        LOGIN_START,
    )
    .await?;
    let what = at(&r, "revocation").as_str().unwrap_or("");
    crate::errln!("logged out of {name}: {what}");
    Ok(())
}
