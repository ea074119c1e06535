//! Agents' subscriptions to one server's resources.
//!
//! Counted per URI so the server hears of the first subscriber and the last one leaving,
//! and its updates reach exactly the subscribed agents.

use super::Subscription;
use mcpd_wire::jsonrpc;
use mcpd_wire::protocol::era::key;
use mcpd_wire::protocol::method;
use serde_json::{Value, json};
use std::collections::HashMap;

/// Resources one agent may watch on one server at once.
pub const PER_AGENT: usize = 1024;
/// Resources watched on one server at once, by all agents together.
pub const PER_SERVER: usize = 4096;

#[derive(Debug, Default)]
pub struct Subscriptions {
    /// Server URI -> agent -> its subscription.
    by_uri: HashMap<String, HashMap<u64, Subscription>>,
    /// How many URIs each agent watches.
    per_agent: HashMap<u64, usize>,
}

/// A subscription over one of the caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TooMany {
    #[error(
        "this agent already watches {PER_AGENT} resources of this server; unsubscribe from some first"
    )]
    Agent,
    #[error(
        "{PER_SERVER} resources of this server are watched already; unsubscribe from some first"
    )]
    Server,
}

impl Subscriptions {
    /// Adds a subscription; true when it is the first for its URI.
    pub fn add(&mut self, sub: Subscription) -> Result<bool, TooMany> {
        let watching = self.per_agent.get(&sub.agent).copied().unwrap_or(0);
        let known = self.by_uri.get(&sub.uri);
        let again = known.is_some_and(|subs| subs.contains_key(&sub.agent));
        if !again && watching >= PER_AGENT {
            return Err(TooMany::Agent);
        }
        if known.is_none() && self.by_uri.len() >= PER_SERVER {
            return Err(TooMany::Server);
        }
        let agent = sub.agent;
        let subs = self.by_uri.entry(sub.uri.clone()).or_default();
        let first = subs.is_empty();
        if subs.insert(agent, sub).is_none() {
            *self.per_agent.entry(agent).or_default() += 1;
        }
        Ok(first)
    }

    fn uncount(&mut self, agent: u64) {
        if let Some(n) = self.per_agent.get_mut(&agent) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_agent.remove(&agent);
            }
        }
    }

    /// Removes one; true when it was the last for its URI.
    pub fn remove(&mut self, uri: &str, agent: u64) -> bool {
        let Some(subs) = self.by_uri.get_mut(uri) else {
            return false;
        };
        if subs.remove(&agent).is_none() {
            return false;
        }
        let emptied = subs.is_empty();
        if emptied {
            self.by_uri.remove(uri);
        }
        self.uncount(agent);
        emptied
    }

    /// Removes every subscription of an agent; returns the URIs nobody watches now.
    pub fn forget(&mut self, agent: u64) -> Vec<String> {
        self.per_agent.remove(&agent);
        let mut emptied = Vec::new();
        self.by_uri.retain(|uri, subs| {
            subs.remove(&agent);
            if subs.is_empty() {
                emptied.push(uri.clone());
                false
            } else {
                true
            }
        });
        emptied
    }

    pub fn uris(&self) -> Vec<String> {
        let mut v: Vec<String> = self.by_uri.keys().cloned().collect();
        v.sort();
        v
    }

    /// Sends `notifications/resources/updated` to the agents subscribed to `uri` or to a
    /// resource it is part of (the spec lets the URI be a sub-resource).
    pub fn deliver(&self, uri: &str) {
        for (watched, subs) in &self.by_uri {
            let Some(rest) = uri.strip_prefix(watched.as_str()) else {
                continue;
            };
            for sub in subs.values() {
                let shown = format!("{}{rest}", sub.presented);
                let mut params = json!({ "uri": shown });
                if let Some(listen) = &sub.listen {
                    jsonrpc::set_member(
                        &mut params,
                        "_meta",
                        json!({ key::SUBSCRIPTION_ID: listen }),
                    );
                }
                sub.outbox.send(jsonrpc::notification_line(
                    method::RESOURCES_UPDATED,
                    Some(&params),
                ));
            }
        }
    }
}

/// The URI of a `resources/updated` notification.
pub fn updated_uri(params: Option<&Value>) -> Option<&str> {
    params?.get("uri")?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(uri: &str, agent: u64) -> Subscription {
        let (outbox, _rx) = mcpd_runtime::outbox::Outbox::new(4, 1024);
        Subscription {
            uri: uri.to_owned(),
            presented: uri.to_owned(),
            agent,
            outbox,
            listen: None,
        }
    }

    #[test]
    fn an_agent_watches_a_bounded_number_of_resources_and_leaving_frees_them() {
        let mut s = Subscriptions::default();
        for i in 0..PER_AGENT {
            assert_eq!(s.add(sub(&format!("x://{i}"), 1)), Ok(true));
        }
        assert_eq!(s.add(sub("x://one-more", 1)), Err(TooMany::Agent));
        // Subscribing again to a watched URI is no new subscription.
        assert_eq!(s.add(sub("x://0", 1)), Ok(false));
        assert_eq!(s.add(sub("x://0", 2)), Ok(false), "another agent may");
        assert!(s.remove("x://1", 1));
        assert_eq!(s.add(sub("x://one-more", 1)), Ok(true));
        assert_eq!(s.forget(1).len(), PER_AGENT - 1, "x://0 is still watched");
        assert_eq!(s.add(sub("x://again", 1)), Ok(true));
    }
}
