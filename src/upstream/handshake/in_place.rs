//! Finding a local server's era on its own serving process, as the SDKs' auto mode does.
//!
//! `server/discover` first, then `initialize` on the same process when the answer says
//! legacy or does not come in time.
//!
//! One process, so a server is started once: a package runner (`npx -y …`) installing on
//! its first start is never killed half-way by a second, disposable copy. What the
//! server sees: `server/discover`, and after it `initialize` when the server is legacy.
//! A server still silent after `patience` (`health.probe_timeout`) is sent `initialize`
//! as well, and the answers decide: `initialize` answered means legacy (a legacy server
//! answers it; a dual-era server that answered `server/discover` too took the later
//! request as the era); `initialize` refused after a modern `server/discover` answer
//! means modern. A server that ends when asked `server/discover` is a legacy one that
//! quits on any first request but `initialize`: the error says so, and its next start
//! speaks `initialize` at once.

use super::{
    Discovered, HandshakeError, INITIALIZE_ID, answer_early_request, classify, discover_line,
    discovered, initialize, initialize_line, initialized, retry_with_supported, send,
};
use crate::upstream::ServerIdentity;
use crate::upstream::transport::{Inbound, Outbound, Sent};
use futures::{Stream, StreamExt};
use mcpd_runtime::budget;
use mcpd_runtime::framing::Frame;
use mcpd_wire::jsonrpc::{self, ErrorObject, Id, Message};
use mcpd_wire::protocol::{era, method};
use std::time::Duration;

/// The id of an `initialize` sent while `server/discover` is unanswered: far above the
/// ids the connection's actor counts up from 1, and exact as a JavaScript number.
const LATE_INITIALIZE_ID: u64 = (1 << 53) - 1;

/// What has come back so far, once `initialize` went out after `server/discover`.
#[derive(Default)]
struct Late {
    /// The `server/discover` answer, classified, when it came.
    discover: Option<Discovered>,
    /// The `initialize` refusal, when it came.
    refused: Option<ErrorObject>,
}

/// Finds the era of a freshly started local server on its own process, and completes
/// the handshake in it. The caller bounds the whole in time (the start timeout).
pub async fn in_place<S>(
    server: &str,
    inbound: &mut S,
    out: &budget::Sender<Outbound>,
    malformed: &mut u64,
    patience: Duration,
) -> Result<ServerIdentity, HandshakeError>
where
    S: Stream<Item = Inbound> + Unpin,
{
    let discover_id = Id::from(INITIALIZE_ID);
    let late_id = Id::from(LATE_INITIALIZE_ID);
    send_discover(out, &discover_id).await?;
    let timer = tokio::time::sleep(patience);
    tokio::pin!(timer);
    let mut retried = false;
    // Set once `initialize` went out beside the unanswered `server/discover`.
    let mut late: Option<Late> = None;
    loop {
        let next = tokio::select! {
            next = inbound.next() => next,
            () = &mut timer, if waits(late.as_ref()) => {
                match late.take() {
                    None => {
                        tracing::info!(upstream = server, "no answer to server/discover within {}; sending initialize too", humantime::format_duration(patience));
                        let line = initialize_line(&late_id);
                        let request = Some(Sent::new(LATE_INITIALIZE_ID, method::INITIALIZE));
                        send(out, Outbound::Message { line, request }).await?;
                        late = Some(Late::default());
                    }
                    // A modern answer, and no word on `initialize` for as long again.
                    Some(Late { discover: Some(Discovered::Modern(identity, reason)), .. }) => {
                        return modern(out, identity, reason, patience).await;
                    }
                    other => late = other,
                }
                continue;
            }
        };
        let line = match next {
            None | Some(Inbound::Closed { .. } | Inbound::Ended { .. }) if late.is_none() => {
                return Err(quit_on_discover());
            }
            None => return Err("the server closed its output during initialize".into()),
            Some(Inbound::Closed { error, fatal }) => {
                return Err(HandshakeError::closed(error, fatal));
            }
            Some(Inbound::Ended { error, .. }) => return Err(error.to_string().into()),
            Some(Inbound::Renewed) => continue,
            Some(Inbound::Frame(Frame::Line(l)) | Inbound::Related(Frame::Line(l), _)) => l,
            Some(Inbound::Frame(_) | Inbound::Related(..)) => {
                *malformed += 1;
                continue;
            }
        };
        let response = match jsonrpc::parse(&line) {
            Ok(Message::Response(r)) => r,
            Ok(Message::Request(r)) => {
                answer_early_request(out, &r).await?;
                continue;
            }
            Ok(_) => continue,
            Err(_) => {
                *malformed += 1;
                continue;
            }
        };
        if response.id == discover_id {
            let outcome = response.outcome;
            if late.is_none() && !retried && retry_with_supported(&outcome) {
                retried = true;
                tracing::info!(
                    upstream = server,
                    "server/discover refused with -32022 listing {}; asking again with it",
                    era::MODERN_VERSION
                );
                send_discover(out, &discover_id).await?;
                continue;
            }
            match (classify(outcome), late.as_mut()) {
                (Discovered::Modern(identity, reason), None) => {
                    tracing::info!(upstream = server, "modern server: {reason}");
                    return discovered(out, identity, &reason).await;
                }
                (Discovered::Legacy(reason), None) => {
                    tracing::info!(
                        upstream = server,
                        "not a modern server ({reason}); using initialize"
                    );
                    let mut identity = initialize(server, inbound, out, malformed).await?;
                    identity.era_reason = Some(reason);
                    return Ok(identity);
                }
                (verdict, Some(l)) => match (verdict, l.refused.take()) {
                    (Discovered::Modern(identity, reason), Some(_)) => {
                        return discovered(out, identity, &reason).await;
                    }
                    (Discovered::Legacy(reason), Some(e)) => return Err(neither(&reason, &e)),
                    (verdict, None) => {
                        l.discover = Some(verdict);
                        // A modern answer waits as long again for word on `initialize`.
                        timer.as_mut().reset(tokio::time::Instant::now() + patience);
                    }
                },
            }
        } else if response.id == late_id {
            let Some(l) = late.as_mut() else { continue };
            match response.outcome {
                Ok(result) => {
                    let mut identity = initialized(out, Ok(result)).await?;
                    let slow = humantime::format_duration(patience);
                    identity.era_reason = Some(match l.discover.take() {
                        Some(Discovered::Legacy(r)) => format!(
                            "{r} after more than {slow} (health.probe_timeout), and answered the initialize sent meanwhile"
                        ),
                        _ => format!(
                            "no answer to server/discover within {slow} (health.probe_timeout), then answered initialize"
                        ),
                    });
                    return Ok(identity);
                }
                Err(e) => match l.discover.take() {
                    Some(Discovered::Modern(identity, reason)) => {
                        return discovered(out, identity, &reason).await;
                    }
                    Some(Discovered::Legacy(reason)) => return Err(neither(&reason, &e)),
                    None => l.refused = Some(e),
                },
            }
        }
    }
}

/// Whether the timer means something now: before `initialize` went out, and after a
/// modern answer that `initialize`'s has not followed.
fn waits(late: Option<&Late>) -> bool {
    late.is_none_or(|l| matches!(l.discover, Some(Discovered::Modern(..))))
}

async fn send_discover(out: &budget::Sender<Outbound>, id: &Id) -> Result<(), HandshakeError> {
    let request = Some(Sent::modern(INITIALIZE_ID, method::DISCOVER, None));
    let line = discover_line(id);
    send(out, Outbound::Message { line, request }).await?;
    Ok(())
}

/// The modern answer stands: `initialize`, sent too, was not answered.
async fn modern(
    out: &budget::Sender<Outbound>,
    identity: Option<Box<ServerIdentity>>,
    reason: String,
    patience: Duration,
) -> Result<ServerIdentity, HandshakeError> {
    let reason = format!(
        "{reason} after more than {} (health.probe_timeout)",
        humantime::format_duration(patience)
    );
    discovered(out, identity, &reason).await
}

/// Both requests were refused.
fn neither(discover: &str, initialize: &ErrorObject) -> HandshakeError {
    HandshakeError::era(format!(
        "the server accepted neither protocol era: server/discover: {discover}; initialize: {} ({})",
        initialize.message, initialize.code
    ))
}

/// The process ended when asked `server/discover`, before it answered.
fn quit_on_discover() -> HandshakeError {
    HandshakeError {
        legacy_next: Some(
            "it ended when asked server/discover, without answering, and answered initialize on its next start (a legacy server that accepts only initialize first)".into(),
        ),
        .."the server ended when asked server/discover, without answering: a legacy server that accepts only initialize first (it is started again at once with initialize), or one that fails to start (its stderr says why)".to_owned().into()
    }
}
