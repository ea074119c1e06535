//! The era probe of a local server: `server/discover` sent to a disposable process started with the same command, which is then stopped and reaped.
//!
//! A separate process, because some legacy servers exit (or stop serving) on any first
//! request that is not `initialize`; the serving process is started afterwards and sees
//! only what its era expects.

use super::handshake::{self, Discovered};
use super::process::{self, Spawned};
use crate::framing::{BoundedLines, Frame};
use crate::jsonrpc::{self, Id, Message};
use crate::protocol::era::Era;
use futures::StreamExt;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

/// How long a probe process gets to exit after its stdin closes, and again after
/// SIGTERM: it is disposable and has nothing to save.
const PROBE_STOP_GRACE: Duration = Duration::from_millis(200);

/// The probe's verdict and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeVerdict {
    pub era: Era,
    pub reason: String,
}

/// Probes one freshly spawned process, then stops and reaps it. Anything but a modern
/// answer within `timeout` is a legacy verdict; None when `cancel` fired first.
pub async fn run(
    server: &str,
    spawned: Spawned,
    timeout: Duration,
    max_line: usize,
    cancel: &CancellationToken,
) -> Option<ProbeVerdict> {
    let Spawned {
        mut child,
        pid,
        mut stdin,
        stdout,
        stderr,
        ..
    } = spawned;
    // The probe's stderr is not interesting; drain it so the process never blocks on it.
    let drain = crate::tasks::spawn(async move {
        let mut sink = tokio::io::sink();
        let mut stderr = stderr;
        let _ = tokio::io::copy(&mut stderr, &mut sink).await;
    });
    let id = Id::from(handshake::INITIALIZE_ID);
    let line = handshake::discover_line(&id) + "\n";
    let mut frames = FramedRead::new(stdout, BoundedLines::new(max_line));
    let exchange = async {
        if let Err(e) = stdin.write_all(line.as_bytes()).await {
            return ProbeVerdict {
                era: Era::Legacy,
                reason: format!(
                    "a first copy of the server, started to learn its protocol version, exited before it was asked ({e}); taken to speak the older protocol"
                ),
            };
        }
        let _ = stdin.flush().await;
        loop {
            match frames.next().await {
                None | Some(Err(_)) => {
                    return ProbeVerdict {
                        era: Era::Legacy,
                        reason: "a first copy of the server, started to learn its protocol version, exited without answering; taken to speak the older protocol".into(),
                    };
                }
                Some(Ok(Frame::Line(l))) => {
                    if let Ok(Message::Response(r)) = jsonrpc::parse(&l)
                        && r.id == id
                    {
                        return match handshake::classify(r.outcome) {
                            Discovered::Modern(_, reason) => ProbeVerdict {
                                era: Era::Modern,
                                reason,
                            },
                            Discovered::Legacy(reason) => ProbeVerdict {
                                era: Era::Legacy,
                                reason,
                            },
                        };
                    }
                }
                Some(Ok(_)) => {}
            }
        }
    };
    let verdict = tokio::select! {
        r = tokio::time::timeout(timeout, exchange) => Some(match r {
            Ok(v) => v,
            Err(_) => ProbeVerdict {
                era: Era::Legacy,
                reason: format!(
                    "no answer to server/discover within {} (health.probe_timeout)",
                    humantime::format_duration(timeout)
                ),
            },
        }),
        () = cancel.cancelled() => None,
    };
    drop(stdin);
    drop(frames);
    let status = process::stop(&mut child, pid, PROBE_STOP_GRACE).await;
    drain.abort();
    match &verdict {
        Some(v) => {
            tracing::info!(upstream = server, pid, era = v.era.as_str(), status = %status, "probe: {}", v.reason)
        }
        None => tracing::debug!(upstream = server, pid, "probe cancelled"),
    }
    verdict
}
