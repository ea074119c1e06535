//! `mcpd ctl upgrade`: asks the daemon to upgrade in place, then waits until the new image serves.

use super::{CtlError, Out, at, request, request_within};
use crate::control_api::UPGRADE;
use mcpd_wire::protocol::method::MCPD_STATUS;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long the daemon may take to drain, execute and serve again: its calls' grace and
/// its servers' stops come first.
const BACK_WITHIN: Duration = Duration::from_secs(120);
/// How often the daemon is asked whether it is back.
const POLL: Duration = Duration::from_millis(50);

/// `mcpd ctl upgrade`.
pub async fn upgrade(socket: &Path) -> Result<(), CtlError> {
    let answer = request_within(socket, UPGRADE, None, Duration::from_secs(30)).await?;
    let (from, to) = (
        at(&answer, "from").as_str().unwrap_or("?").to_owned(),
        at(&answer, "to").as_str().unwrap_or("?").to_owned(),
    );
    let path = at(&answer, "path").as_str().unwrap_or("?").to_owned();
    let before = at(&answer, "upgrades").as_u64().unwrap_or(0);
    writeln!(
        Out::lock(),
        "upgrading mcpd {from} to {to} ({path}): draining, then executing it in place"
    )?;
    let deadline = Instant::now() + BACK_WITHIN;
    loop {
        // Refused or closed while the daemon drains and executes: asked again.
        if let Ok(status) = request(socket, MCPD_STATUS, None).await {
            let daemon = at(&status, "daemon");
            if at(daemon, "upgrades").as_u64().unwrap_or(0) > before {
                let pid = at(daemon, "pid").as_u64().unwrap_or(0);
                let version = at(daemon, "version").as_str().unwrap_or("?");
                writeln!(
                    Out::lock(),
                    "upgraded: mcpd {version} serves, same pid {pid}"
                )?;
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            return Err(CtlError::Unexpected(format!(
                "the daemon did not come back upgraded within {BACK_WITHIN:?}; see `journalctl --user -u mcpd` or its log"
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}
