//! The loop's clock: when to wake, and what to do then.
//!
//! It covers liveness pings of a quiet server, telling the supervisor of idleness, and
//! retrying the subscription and the TTL refresh.

use super::{Actor, ListenState, PendingRequest, Responder};
use crate::upstream::ConnectionEvent;
use crate::upstream::transport::Outbound;
use mcpd_wire::protocol::era::Era;
use mcpd_wire::protocol::method;
use tokio::time::Instant;

impl Actor {
    /// When the loop must next look at the clock: a ping's deadline, or the moment the
    /// idle connection is due for a ping.
    pub(super) fn next_wake(&self) -> Option<Instant> {
        let listen = match self.listen {
            ListenState::RetryAt(t) => Some(t),
            _ => None,
        };
        let idle = match self.idle_timeout {
            Some(t) if !self.idle_told && !self.busy() => Some(self.last_call + t),
            _ => None,
        };
        let request = self.deadlines.first().map(|&(at, _)| at);
        [self.ping_wake(), listen, self.refresh_at, idle, request]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether an agent's request is in progress: then silence may be work, not a hang,
    /// and each request has its own timeout. mcpd's own requests (catalog fetches, the
    /// subscription) do not count: a server that stops answering them is probed.
    fn busy(&self) -> bool {
        debug_assert_eq!(
            self.calls_pending,
            self.pending.values().filter(|p| p.call.is_some()).count(),
            "the count of pending calls"
        );
        self.calls_pending > 0
    }

    fn ping_wake(&self) -> Option<Instant> {
        if let Some((_, deadline)) = self.ping {
            return Some(deadline);
        }
        if self.ping_interval.is_zero() || self.busy() {
            return None;
        }
        Some(self.last_heard + self.ping_interval)
    }

    pub(super) fn on_wake(&mut self) -> Option<String> {
        let now = Instant::now();
        if let Some(t) = self.idle_timeout
            && !self.idle_told
            && !self.busy()
            && now >= self.last_call + t
        {
            let event = ConnectionEvent::Idle {
                server: self.server.clone(),
                instance: self.instance,
            };
            // A full queue means the supervisor is busy: try again at the next wake.
            self.idle_told = self.events.try_send(event).is_ok();
        }
        if matches!(self.listen, ListenState::RetryAt(t) if t <= now) {
            self.open_listen();
        }
        if self.refresh_at.is_some_and(|t| t <= now) {
            self.refresh_at = None;
            tracing::debug!(upstream = %self.server, "the tool list's TTL lapsed; fetching it again");
            self.start_refresh();
        }
        if let Some((_, deadline)) = self.ping {
            if now >= deadline {
                return Some(format!(
                    "the server stopped answering: no reply to ping within {} ({})",
                    humantime::format_duration(self.ping_timeout),
                    self.peer
                ));
            }
            return None;
        }
        if !self.ping_interval.is_zero()
            && !self.busy()
            && now >= self.last_heard + self.ping_interval
        {
            let id = self.next_id;
            self.next_id += 1;
            // The modern era has no ping; `server/discover` is the cheapest request.
            let probe = match self.era {
                Era::Legacy => method::PING,
                Era::Modern => method::DISCOVER,
            };
            let (line, sent) = self.dress().request(id, probe, None, None);
            let _ = self.out.try_send(Outbound::Message {
                line,
                request: Some(sent),
            });
            // A far deadline in the queue; the ping's own deadline is `self.ping`.
            let deadline = Some(self.add_deadline(now + self.ping_timeout * 2, id));
            self.pending.insert(
                id,
                PendingRequest {
                    call: None,
                    task: None,
                    method: method::PING,
                    respond_to: Responder::Ping,
                    progress: None,
                    deadline,
                    resumes: 0,
                    asks: None,
                    logs: None,
                },
            );
            self.ping = Some((id, now + self.ping_timeout));
        }
        None
    }
}
