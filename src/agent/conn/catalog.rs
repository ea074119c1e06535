//! A changed catalog on an agent connection: what the agent is told, or a loop of daemons ended.

use super::Conn;
use mcpd_wire::jsonrpc;

impl Conn {
    /// Tells the agent what changed; false when the connection must end: the agent is
    /// another mcpd daemon that this one now reaches through its own servers.
    pub(super) fn on_catalog(&mut self) -> bool {
        let (versions, looped) = {
            let c = self.catalog.borrow_and_update();
            let looped =
                (self.session.mcpd_instance()).is_some_and(|i| c.mcpd_behind().contains(i));
            (c.versions(), looped)
        };
        if looped {
            // A loop of daemons whose two handshakes crossed: each answer went out before
            // the other connection was made, so neither listed the other and both passed
            // `refuse_self`. This side knows both halves (the agent said who it is; the
            // catalog says this daemon reaches it), so it ends the agent's connection.
            // That daemon connects again, and this time the answer lists it: refused.
            tracing::warn!(
                agent = self.agent,
                "the agent is another mcpd daemon that this daemon reaches through its own servers (a loop); disconnecting it"
            );
            // Said as a refusal (a null id), so a `mcpd connect` in between ends instead
            // of reconnecting and replaying the handshake the loop must be found in.
            let e = crate::errors::EdgeError::LoopOfDaemons.to_error_object();
            self.outbox.send(jsonrpc::error_line(None, &e));
            return false;
        }
        self.session
            .notify_changes(&self.outbox, self.seen_versions, versions);
        self.seen_versions = versions;
        true
    }
}
