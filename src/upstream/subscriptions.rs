//! Agents' subscriptions to one server's resources: counted per URI so the server hears of the first subscriber and the last one leaving, and its updates reach exactly the subscribed agents.

use super::Subscription;
use crate::jsonrpc;
use crate::protocol::era::key;
use crate::protocol::method;
use serde_json::{Value, json};
use std::collections::HashMap;

#[derive(Debug, Default)]
pub struct Subscriptions {
    /// Server URI -> agent -> its subscription.
    by_uri: HashMap<String, HashMap<u64, Subscription>>,
}

impl Subscriptions {
    /// Adds a subscription; true when it is the first for its URI.
    pub fn add(&mut self, sub: Subscription) -> bool {
        let subs = self.by_uri.entry(sub.uri.clone()).or_default();
        let first = subs.is_empty();
        subs.insert(sub.agent, sub);
        first
    }

    /// Removes one; true when it was the last for its URI.
    pub fn remove(&mut self, uri: &str, agent: u64) -> bool {
        let Some(subs) = self.by_uri.get_mut(uri) else {
            return false;
        };
        if subs.remove(&agent).is_none() {
            return false;
        }
        if subs.is_empty() {
            self.by_uri.remove(uri);
            return true;
        }
        false
    }

    /// Removes every subscription of an agent; returns the URIs nobody watches now.
    pub fn forget(&mut self, agent: u64) -> Vec<String> {
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
                    params["_meta"] = json!({ key::SUBSCRIPTION_ID: listen });
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
