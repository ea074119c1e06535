//! Which era a request speaks.
//!
//! The connection pinned by its first decisive exchange, requests that do not fit its era
//! refused, and the methods 2026-07-28 removed answered alike for socket and HTTP agents.

use super::session::Session;
use crate::errors::EraError;
use mcpd_wire::jsonrpc::{self, ErrorObject, Id, Request};
use mcpd_wire::protocol::era::{self, Era, RequestEra, key};
use mcpd_wire::protocol::method;
use serde_json::Value;

/// What `handle` should do with a request after looking at its era.
pub enum EraCheck {
    /// Serve it; `era` is the era whose shape its result gets.
    Serve { era: Era },
    /// Refuse it with this line.
    Refuse(String),
}

/// Decides a request's era and pins the connection on its first decisive exchange:
/// `initialize` pins legacy, a valid modern request pins modern; `server/discover` pins
/// nothing, so a client can still fall back to `initialize`.
pub fn check(req: &Request, session: &mut Session) -> EraCheck {
    // Checked before anything else, so that every connection (socket or HTTP, pinned
    // to either era or not yet) gives the same answer.
    if era::declares_version(req.params.as_ref())
        && let Some(e) = removed(&req.method)
    {
        return EraCheck::Refuse(jsonrpc::error_line(Some(&req.id), &e));
    }
    if req.method == method::INITIALIZE {
        if session.era() == Some(Era::Modern) {
            let requested = req
                .params
                .as_ref()
                .and_then(|p| p.get("protocolVersion"))
                .and_then(Value::as_str);
            return EraCheck::Refuse(unsupported(
                &req.id,
                requested,
                "this connection already speaks 2026-07-28; initialize is not part of it",
            ));
        }
        return EraCheck::Serve { era: Era::Legacy };
    }
    match era::request_era(req.params.as_ref()) {
        // `server/discover` is answered without pinning, so a client can still fall
        // back to `initialize` afterwards.
        RequestEra::Modern | RequestEra::Legacy if req.method == method::DISCOVER => {
            EraCheck::Serve { era: Era::Modern }
        }
        RequestEra::Modern => {
            if session.era().is_none() {
                let info = req
                    .params
                    .as_ref()
                    .and_then(|p| p.get("_meta"))
                    .and_then(|m| m.get(key::CLIENT_INFO));
                let field = |k: &str| {
                    info.and_then(|i| i.get(k))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                };
                session.pin_modern(field("name"), field("version"));
                tracing::info!(agent = session.agent(), "agent speaks 2026-07-28");
            }
            EraCheck::Serve { era: Era::Modern }
        }
        RequestEra::UnsupportedVersion(v) => EraCheck::Refuse(unsupported(
            &req.id,
            Some(&v),
            "Unsupported protocol version",
        )),
        RequestEra::MissingKey(k) => EraCheck::Refuse(missing_key(&req.id, k)),
        RequestEra::Legacy
            if session.era() == Some(Era::Modern) && !is_mcpd_method(&req.method) =>
        {
            EraCheck::Refuse(missing_key(&req.id, key::PROTOCOL_VERSION))
        }
        RequestEra::Legacy => EraCheck::Serve { era: Era::Legacy },
    }
}

/// The answer to a method that 2026-07-28 removed (`initialize`, `ping`,
/// `logging/setLevel`, `resources/subscribe`, `resources/unsubscribe`) in a request meant
/// for that era: -32601. The one definition for the socket and the HTTP listener (which
/// sends it with 404, also when only its header names a modern version).
pub fn removed(m: &str) -> Option<ErrorObject> {
    era::is_removed_method(m).then(|| EraError::Removed(m.to_owned()).to_error_object())
}

fn is_mcpd_method(m: &str) -> bool {
    m.starts_with("mcpd/")
}

fn unsupported(id: &Id, requested: Option<&str>, why: &'static str) -> String {
    let e = EraError::UnsupportedVersion {
        requested: requested.map(str::to_owned),
        why,
    };
    jsonrpc::error_line(Some(id), &e.to_error_object())
}

fn missing_key(id: &Id, k: &'static str) -> String {
    jsonrpc::error_line(Some(id), &EraError::MissingKey(k).to_error_object())
}
