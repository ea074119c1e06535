//! The input a connection waits for.
//!
//! mcpd's own requests to the agent, until it answers, and 2026-07-28 agents' calls
//! parked for their input, until the agent retries with mcpd's sealed `requestState`.
//!
//! A call is a future inside its agent's actor. For an agent of the `initialize` era it
//! fulfils a modern server's `input_required` itself and retries (`call/fulfil.rs`). For
//! a 2026-07-28 agent, a legacy server's request during the call makes the future yield
//! the call back to the actor (`call/parked.rs`), which answers `input_required` and
//! parks it here until the agent retries.

use super::call::parked;
use super::reply::{InFlight, ReplyFuture};
use super::request_state;
use super::session::Session;
use crate::errors::InputError;
use crate::upstream::ServerAsk;
use futures::stream::FuturesUnordered;
use mcpd_runtime::outbox::{Held, Out, Outbox};
use mcpd_wire::jsonrpc::{self, ErrorObject, Id};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Server requests queued for a legacy agent.
pub const AGENT_ASKS: usize = 16;
/// Calls of one modern agent parked while waiting for its input, at most.
const MAX_PARKED: usize = 64;
/// How long a parked call waits for the agent's retry, and a request of mcpd's to the
/// agent (an elicitation a person may be answering) for its answer.
const PARK_TIMEOUT: Duration = Duration::from_secs(300);
/// mcpd's requests to one agent waiting for its answer, at most.
const MAX_OUTGOING: usize = 64;

/// A modern agent's call waiting for the agent to retry it with its input.
struct Parked {
    respond_to: oneshot::Sender<Result<Value, ErrorObject>>,
    /// The key of the input request in `inputRequests`.
    key: String,
    call: InFlight,
    since: Instant,
}

/// A connection's cross-era input state: requests mcpd sent the agent, and calls
/// parked until the agent retries them with its input.
pub struct Inputs {
    binding: request_state::Binding,
    next_out: u64,
    /// mcpd's requests to the agent, by the id mcpd gave them, with when they were sent.
    outgoing: HashMap<Id, (oneshot::Sender<Result<Value, ErrorObject>>, Instant)>,
    next_parked: u64,
    parked: HashMap<u64, Parked>,
}

impl Inputs {
    pub fn new(agent: u64) -> Inputs {
        Inputs {
            binding: request_state::Binding {
                agent,
                nonce: rand::random(),
            },
            next_out: 0,
            outgoing: HashMap::new(),
            next_parked: 0,
            parked: HashMap::new(),
        }
    }

    /// The agent answered one of mcpd's requests.
    pub fn answered(&mut self, r: jsonrpc::Response, agent: u64) {
        match self.outgoing.remove(&r.id) {
            // The server may have given up waiting; then no one needs the answer.
            Some((respond_to, _)) => {
                let _ = respond_to.send(r.outcome);
            }
            None => {
                tracing::debug!(agent, rpc_id = %r.id, "ignored a response to no request of mcpd's")
            }
        }
    }

    /// Cancels every parked call, for the connection's end.
    pub fn cancel_parked(&mut self, calls: &mut FuturesUnordered<ReplyFuture>) {
        for (_, p) in self.parked.drain() {
            let cancel = CancellationToken::new();
            cancel.cancel();
            let id = p.call.id.clone();
            calls.push(parked::resume(p.call, id, cancel));
        }
    }

    /// Sends a server's request to a legacy agent as a real request, if the agent declared
    /// the capability it needs; the answer goes back through `respond_to`.
    pub fn ask(&mut self, session: &Session, outbox: &Outbox, ask: ServerAsk) {
        if let Err(e) = has_capability(session.capabilities(), &ask.method) {
            let _ = ask.respond_to.send(Err(e)); // the server side may have given up
            return;
        }
        // A server that gave up waiting needs no answer: its entry goes now.
        self.outgoing
            .retain(|_, (respond_to, _)| !respond_to.is_closed());
        if self.outgoing.len() >= MAX_OUTGOING {
            let e = InputError::AgentBusy(MAX_OUTGOING).to_error_object();
            let _ = ask.respond_to.send(Err(e)); // the server side may have given up
            return;
        }
        self.next_out += 1;
        let id = Id::Str(format!("mcpd-{}", self.next_out));
        let line = jsonrpc::request_line(&id, &ask.method, ask.params.as_ref());
        if outbox.send(line) {
            self.outgoing.insert(id, (ask.respond_to, Instant::now()));
        } else {
            let e = InputError::AgentNotReading.to_error_object();
            let _ = ask.respond_to.send(Err(e));
        }
    }

    /// A legacy server asked for input during a modern agent's call: answer the agent
    /// `input_required` with a sealed state, and keep the call until it retries. An agent
    /// without the capability gets the error, and the server's request gets it too.
    pub fn park(&mut self, outbox: &Outbox, held: &mut Held, ask: ServerAsk, call: InFlight) {
        let id = call.id.clone();
        let refusal = has_capability(&call.caps, &ask.method).err().or_else(|| {
            (self.parked.len() >= MAX_PARKED)
                .then(|| InputError::TooManyParked(MAX_PARKED).to_error_object())
        });
        if let Some(e) = refusal {
            let _ = ask.respond_to.send(Err(e.clone())); // the server may have given up
            let line = jsonrpc::error_line(Some(&id), &e);
            held.reply(
                outbox,
                Out {
                    line,
                    about: Some(id),
                },
            );
            call.cancel.cancel();
            return;
        }
        self.next_parked += 1;
        let n = self.next_parked;
        let key = format!("mcpd-{n}");
        let result = json!({
            "resultType": "input_required",
            "inputRequests": { key.clone(): { "method": ask.method, "params": ask.params } },
            "requestState": request_state::seal(self.binding, n),
            "_meta": { mcpd_wire::protocol::era::key::SERVER_INFO: mcpd_wire::protocol::era::server_info() },
        });
        let line = jsonrpc::result_line(&id, &result);
        held.reply(
            outbox,
            Out {
                line,
                about: Some(id),
            },
        );
        self.parked.insert(
            n,
            Parked {
                respond_to: ask.respond_to,
                key,
                call,
                since: Instant::now(),
            },
        );
    }

    /// A modern agent's retry with one of mcpd's `requestState`s: deliver its input to the
    /// waiting server request and resume the parked call under the retry's id.
    pub fn resume_parked(&mut self, req: &jsonrpc::Request) -> Resumed {
        let params = req.params.as_ref();
        let Some(state) = params
            .and_then(|p| p.get("requestState"))
            .and_then(Value::as_str)
        else {
            return Resumed::NotARetry;
        };
        let refuse = |e: InputError| {
            Resumed::Refused(jsonrpc::error_line(Some(&req.id), &e.to_error_object()))
        };
        let n = match request_state::open(state, self.binding) {
            request_state::Opened::Foreign => return Resumed::NotARetry,
            request_state::Opened::Invalid(why) => {
                return refuse(InputError::StateRejected(why.to_string()));
            }
            request_state::Opened::Ours(n) => n,
        };
        let Some(p) = self.parked.remove(&n) else {
            return refuse(InputError::NoLongerWaiting);
        };
        let answer = params
            .and_then(|p| p.get("inputResponses"))
            .and_then(|r| r.get(&p.key))
            .cloned()
            .ok_or_else(|| InputError::NoInputResponse(p.key.clone()).to_error_object());
        // The server may have given up waiting; the call then ends with its error.
        let _ = p.respond_to.send(answer);
        Resumed::Resume(p.call)
    }

    pub fn next_expiry(&self) -> Option<Instant> {
        let parked = self.parked.values().map(|p| p.since);
        let asked = self.outgoing.values().map(|(_, since)| *since);
        parked.chain(asked).min().map(|t| t + PARK_TIMEOUT)
    }

    /// Parked calls whose agent never retried are cancelled upstream; requests the agent
    /// never answered are failed.
    pub fn expire(&mut self, calls: &mut FuturesUnordered<ReplyFuture>) {
        let now = Instant::now();
        let unanswered: Vec<Id> = self
            .outgoing
            .iter()
            .filter(|(_, (_, since))| *since + PARK_TIMEOUT <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in unanswered {
            if let Some((respond_to, _)) = self.outgoing.remove(&id) {
                let e = InputError::RequestUnanswered.to_error_object();
                let _ = respond_to.send(Err(e)); // the server may have given up
            }
        }
        let expired: Vec<u64> = self
            .parked
            .iter()
            .filter(|(_, p)| p.since + PARK_TIMEOUT <= now)
            .map(|(n, _)| *n)
            .collect();
        for n in expired {
            if let Some(p) = self.parked.remove(&n) {
                let e = InputError::RetryMissing.to_error_object();
                let _ = p.respond_to.send(Err(e));
                let cancel = CancellationToken::new();
                cancel.cancel();
                let id = p.call.id.clone();
                calls.push(parked::resume(p.call, id, cancel));
            }
        }
    }
}

/// What a `tools/call` that may be a retry of a parked call turned out to be.
pub enum Resumed {
    /// An ordinary call (or a retry carrying a server's own state).
    NotARetry,
    Refused(String),
    Resume(InFlight),
}

/// Whether an agent declared the capability a server request needs.
pub fn has_capability(caps: &Value, method: &str) -> Result<(), ErrorObject> {
    let Some(cap) = request_state::capability_for(method) else {
        return Err(InputError::NotForwarded(method.to_owned()).to_error_object());
    };
    if caps.get(cap).is_some_and(Value::is_object) {
        Ok(())
    } else {
        let method = method.to_owned();
        Err(InputError::MissingCapability { cap, method }.to_error_object())
    }
}
