//! `server/discover`: asking a server who it is in the 2026-07-28 era.
//!
//! Also what its answer says about its era.

use super::{HandshakeError, refuse_self, send};
use crate::upstream::ServerIdentity;
use crate::upstream::transport::{Inbound, Outbound, Sent};
use futures::{Stream, StreamExt};
use mcpd_runtime::budget;
use mcpd_runtime::framing::Frame;
use mcpd_wire::jsonrpc::{self, ErrorObject, Id, Message};
use mcpd_wire::protocol::{era, method};
use serde_json::{Value, json};

use super::INITIALIZE_ID;

/// What a `server/discover` exchange says about a server's era.
#[derive(Debug, PartialEq)]
pub enum Discovered {
    /// A modern server; its identity when it answered with a `DiscoverResult`.
    Modern(Option<Box<ServerIdentity>>, String),
    /// A legacy server (or one with no modern version in common): use `initialize`.
    Legacy(String),
}

/// The `server/discover` request, with mcpd's modern envelope.
pub fn discover_line(id: &Id) -> String {
    let mut params = None;
    era::add_envelope(&mut params, &json!({}));
    // Who this daemon is, for a server that is another daemon (`era::instance_in`).
    if let Some(meta) = params
        .as_mut()
        .and_then(|p| p.get_mut("_meta"))
        .and_then(Value::as_object_mut)
    {
        meta.insert(era::key::MCPD_INSTANCE.into(), json!(era::instance()));
    }
    jsonrpc::request_line(id, method::DISCOVER, params.as_ref())
}

/// Classifies the answer to `server/discover`, as the spec and the official SDKs do. A
/// `-32020` or `-32021` is taken as modern evidence (only a modern server knows those
/// codes); the server's complaint is kept in the reason and shows in `ctl status`.
pub fn classify(outcome: Result<Value, ErrorObject>) -> Discovered {
    match outcome {
        Ok(result) => {
            let shared = result
                .get("supportedVersions")
                .and_then(Value::as_array)
                .is_some_and(|v| v.iter().any(|s| s == era::MODERN_VERSION));
            if shared {
                let identity = discover_identity(&result);
                Discovered::Modern(Some(Box::new(identity)), "answered server/discover".into())
            } else if let Some(listed) = result.get("supportedVersions") {
                Discovered::Legacy(format!(
                    "server/discover lists no version mcpd speaks ({listed})"
                ))
            } else {
                Discovered::Legacy(
                    "server/discover answered something that is not a DiscoverResult".into(),
                )
            }
        }
        Err(e) if e.code == era::code::UNSUPPORTED_VERSION => {
            if lists_modern(&e) {
                Discovered::Modern(
                    None,
                    format!(
                        "server/discover refused with -32022 ({}) but the server lists {}",
                        e.message,
                        era::MODERN_VERSION
                    ),
                )
            } else {
                Discovered::Legacy(format!(
                    "server/discover refused with -32022 ({}); no modern version in common",
                    e.message
                ))
            }
        }
        Err(e)
            if e.code == era::code::HEADER_MISMATCH
                || e.code == era::code::MISSING_CLIENT_CAPABILITY =>
        {
            Discovered::Modern(
                None,
                format!(
                    "server/discover refused with {} ({}), which only modern servers send",
                    e.code, e.message
                ),
            )
        }
        Err(e) => Discovered::Legacy(format!(
            "server/discover failed with {} ({})",
            e.code, e.message
        )),
    }
}

/// A modern server's identity from its `DiscoverResult`.
pub fn discover_identity(result: &Value) -> ServerIdentity {
    let server_info = result
        .pointer("/_meta")
        .and_then(|m| m.get(era::key::SERVER_INFO))
        .cloned()
        .unwrap_or(Value::Null);
    super::answered(era::MODERN_VERSION, server_info, result)
}

/// Whether a refused `server/discover` asks for another try: a -32022 whose `supported`
/// list names the version mcpd speaks (the server refused its first choice, or wants it
/// asked again). The spec's client then retries at once with that version; so does mcpd,
/// once.
pub fn retry_with_supported(outcome: &Result<Value, ErrorObject>) -> bool {
    matches!(outcome, Err(e) if e.code == era::code::UNSUPPORTED_VERSION && lists_modern(e))
}

fn lists_modern(e: &ErrorObject) -> bool {
    e.data
        .as_ref()
        .and_then(|d| d.get("supported"))
        .and_then(Value::as_array)
        .is_some_and(|v| v.iter().any(|s| s == era::MODERN_VERSION))
}

/// Asks a modern server who it is (`server/discover`) on the serving connection. Over
/// HTTP with `auto`, `legacy_fallback` lets a legacy answer go on to `initialize`. A
/// -32022 that lists 2026-07-28 is answered by asking again at once, once; a second one
/// is an error.
pub async fn discover<S>(
    server: &str,
    inbound: &mut S,
    out: &budget::Sender<Outbound>,
    malformed: &mut u64,
    legacy_fallback: bool,
) -> Result<ServerIdentity, HandshakeError>
where
    S: Stream<Item = Inbound> + Unpin,
{
    let mut outcome = discover_exchange(server, inbound, out, malformed).await?;
    if retry_with_supported(&outcome) {
        tracing::info!(
            upstream = server,
            "server/discover refused with -32022 listing {}; asking again with it",
            era::MODERN_VERSION
        );
        outcome = discover_exchange(server, inbound, out, malformed).await?;
    }
    match classify(outcome) {
        Discovered::Modern(identity, reason) => {
            tracing::info!(upstream = server, "modern server: {reason}");
            discovered(out, identity, &reason).await
        }
        Discovered::Legacy(reason) if legacy_fallback => {
            tracing::info!(
                upstream = server,
                "not a modern server ({reason}); using initialize"
            );
            super::initialize(server, inbound, out, malformed).await
        }
        Discovered::Legacy(reason) => Err(HandshakeError::era(format!(
            "the server does not speak 2026-07-28: {reason}"
        ))),
    }
}

/// The server answered `server/discover` as a modern server: its identity, once the
/// version is agreed, or why it cannot be served (it refused the request).
pub(in crate::upstream) async fn discovered(
    out: &budget::Sender<Outbound>,
    identity: Option<Box<ServerIdentity>>,
    reason: &str,
) -> Result<ServerIdentity, HandshakeError> {
    let Some(identity) = identity else {
        return Err(HandshakeError::era(format!(
            "the server speaks 2026-07-28 but refused server/discover: {reason}"
        )));
    };
    let mut identity = refuse_self(*identity)?;
    identity.era_reason = Some(reason.to_owned());
    let version = era::MODERN_VERSION.into();
    send(out, Outbound::Negotiated { version }).await?;
    Ok(identity)
}

/// One `server/discover` request and its answer: the server's outcome, an HTTP 4xx
/// without a JSON-RPC body as an error of that code, or why the exchange failed.
async fn discover_exchange<S>(
    server: &str,
    inbound: &mut S,
    out: &budget::Sender<Outbound>,
    malformed: &mut u64,
) -> Result<Result<Value, ErrorObject>, HandshakeError>
where
    S: Stream<Item = Inbound> + Unpin,
{
    let id = Id::from(INITIALIZE_ID);
    let request = Some(Sent::modern(INITIALIZE_ID, method::DISCOVER, None));
    send(
        out,
        Outbound::Message {
            line: discover_line(&id),
            request,
        },
    )
    .await?;
    let outcome = loop {
        let line = match inbound.next().await {
            None => return Err("the server closed its output during server/discover".into()),
            Some(Inbound::Closed { error, fatal }) => {
                return Err(HandshakeError::closed(error, fatal));
            }
            Some(Inbound::Ended { error, .. }) => {
                // An HTTP 4xx without a modern error body is a legacy server's answer;
                // anything else (5xx, a broken connection) says nothing about the era.
                match &error {
                    // 401/403 are about credentials, never about the era.
                    crate::upstream::UpstreamError::Http {
                        status: 401 | 403,
                        excerpt,
                    } => {
                        let message = crate::upstream::refused_message(excerpt);
                        return Err(HandshakeError::closed(message, true));
                    }
                    crate::upstream::UpstreamError::Http { status, .. }
                        if (400..500).contains(status) =>
                    {
                        // The server's refusal, kept as the outcome `classify` reads (its
                        // HTTP status as the code); no one is answered with it, so it is
                        // not one of mcpd's errors.
                        break Err(ErrorObject::new(i64::from(*status), error.to_string()));
                    }
                    _ => return Err(error.to_string().into()),
                }
            }
            Some(Inbound::Renewed) => continue,
            Some(Inbound::Frame(Frame::Line(line)) | Inbound::Related(Frame::Line(line), _)) => {
                line
            }
            Some(Inbound::Frame(_) | Inbound::Related(..)) => {
                *malformed += 1;
                continue;
            }
        };
        match jsonrpc::parse(&line) {
            Ok(Message::Response(r)) if r.id == id => break r.outcome,
            Ok(_) => tracing::debug!(
                upstream = server,
                "ignored a message during server/discover"
            ),
            Err(_) => *malformed += 1,
        }
    };
    Ok(outcome)
}
