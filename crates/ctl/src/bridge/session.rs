//! What the bridge keeps of the agent's session, so a new daemon can be given it again.
//!
//! Fed the lines the daemon took from the agent and the lines it sent back, it knows the
//! agent's requests in flight, its `initialize` and `notifications/initialized`, its
//! logging level, its resource subscriptions and its listen streams (2026-07-28). When
//! the daemon goes, [`Session::lost`] answers the requests in flight; once one is back,
//! [`Session::replay`] says what to send it and what to tell the agent.

use super::lines::{self, Head, LineBuf};
use mcpd_wire::jsonrpc::{self, ErrorObject, Id, mcpd_code};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};

/// The most requests tracked in flight; the daemon bounds an agent's calls far below.
const MAX_IN_FLIGHT: usize = 65_536;
/// The most bytes of in-flight requests kept to send again; a request past it is
/// answered with an error if the daemon goes without having taken it.
const MAX_KEPT_BYTES: usize = 64 * 1024 * 1024;
/// The most resource subscriptions and listen streams kept (the daemon's own bounds).
const MAX_SUBSCRIPTIONS: usize = 1024;
const MAX_LISTENS: usize = 32;
/// The prefix of the ids the bridge gives the requests it replays.
pub const OWN_ID_PREFIX: &str = "mcpd-connect-";

#[derive(Clone)]
pub struct Session {
    up: LineBuf,
    down: LineBuf,
    /// Agent requests sent to the daemon and not answered, by id: the line's number on
    /// this connection, and its text (kept within [`MAX_KEPT_BYTES`]) to send again.
    in_flight: HashMap<String, Sent>,
    kept_bytes: usize,
    /// How many of this connection's lines the daemon said it took (its closing note).
    taken: Option<u64>,
    initialize: Option<String>,
    initialized: Option<String>,
    set_level: Option<String>,
    /// `resources/subscribe` lines by URI.
    subscriptions: BTreeMap<String, String>,
    /// `subscriptions/listen` lines by the listen request's id.
    listens: BTreeMap<String, String>,
    /// The daemon refused the connection (an error with a null id): no reconnecting.
    refused: bool,
}

impl Default for Session {
    fn default() -> Session {
        Session {
            up: LineBuf::default(),
            down: LineBuf::heads(),
            in_flight: HashMap::new(),
            kept_bytes: 0,
            taken: None,
            initialize: None,
            initialized: None,
            set_level: None,
            subscriptions: BTreeMap::new(),
            listens: BTreeMap::new(),
            refused: false,
        }
    }
}

#[derive(Clone)]
struct Sent {
    line_no: u64,
    text: Option<Box<[u8]>>,
}

/// What was lost with a daemon that went.
pub struct Lost {
    /// Requests the old daemon did not take, then the start of an agent line it took
    /// part of: sent again, whole, to the new one.
    pub resend: Vec<u8>,
    /// Lines for the agent: a newline ending a reply the old daemon broke off, then an
    /// error for each request it had not answered.
    pub to_agent: Vec<u8>,
}

/// A line replayed to a new daemon, and whether the bridge waits for its answer.
pub struct Replayed {
    pub line: String,
    /// The id of the answer (or, for a listen, its acknowledgement) that ends the wait,
    /// kept from the agent.
    pub awaits: Option<Awaited>,
}

pub enum Awaited {
    Answer(String),
    Acknowledged(String),
}

impl Session {
    /// Lines the daemon took from the agent (the bytes it accepted, in order).
    pub fn sent_up(&mut self, bytes: &[u8]) {
        // Out while it feeds the rest of the session (an empty buffer takes no memory).
        let mut up = std::mem::take(&mut self.up);
        up.feed(bytes, |n, line| {
            if let Some(h) = lines::head(line) {
                self.agent_line(n, &h, line);
            }
        });
        self.up = up;
    }

    /// A new connection, on which the bridge's own handshake has sent `lines` lines.
    pub fn connected(&mut self, lines: u64) {
        self.up.restart(lines);
        self.down.restart(0);
        self.taken = None;
    }

    /// The daemon's closing note: it took the first `n` lines of this connection.
    pub fn closing(&mut self, n: u64) {
        self.taken = Some(n);
    }

    fn agent_line(&mut self, line_no: u64, h: &Head, line: &[u8]) {
        let text = || String::from_utf8_lossy(line).into_owned();
        match (h.id.as_ref(), h.method.as_deref()) {
            (Some(id), Some(method)) => {
                if self.in_flight.len() < MAX_IN_FLIGHT {
                    let text = (self.kept_bytes + line.len() <= MAX_KEPT_BYTES)
                        .then(|| Box::<[u8]>::from(line));
                    self.kept_bytes += text.as_ref().map_or(0, |t| t.len());
                    if let Some(old) = self.in_flight.insert(id.clone(), Sent { line_no, text }) {
                        self.forget(&old);
                    }
                }
                match method {
                    "initialize" => self.initialize = Some(text()),
                    "logging/setLevel" => self.set_level = Some(text()),
                    "resources/subscribe" => {
                        if let Some(uri) = param_str(line, "uri")
                            && (self.subscriptions.len() < MAX_SUBSCRIPTIONS
                                || self.subscriptions.contains_key(&uri))
                        {
                            self.subscriptions.insert(uri, text());
                        }
                    }
                    "resources/unsubscribe" => {
                        if let Some(uri) = param_str(line, "uri") {
                            self.subscriptions.remove(&uri);
                        }
                    }
                    "subscriptions/listen" if self.listens.len() < MAX_LISTENS => {
                        self.listens.insert(id.clone(), text());
                    }
                    _ => {}
                }
            }
            (None, Some("notifications/initialized")) => self.initialized = Some(text()),
            (None, Some("notifications/cancelled")) => {
                if let Some(id) = cancelled_id(line) {
                    self.answered(&id);
                    self.listens.remove(&id);
                }
            }
            _ => {}
        }
    }

    fn answered(&mut self, id: &str) {
        if let Some(sent) = self.in_flight.remove(id) {
            self.forget(&sent);
        }
    }

    fn forget(&mut self, sent: &Sent) {
        self.kept_bytes -= sent.text.as_ref().map_or(0, |t| t.len());
    }

    /// Lines the daemon sent (the bytes read from it, in order).
    pub fn came_down(&mut self, bytes: &[u8]) {
        let Session {
            down,
            listens,
            refused,
            ..
        } = self;
        let mut answered = Vec::new();
        down.feed(bytes, |_, line| {
            let Some(h) = lines::daemon_head(line) else {
                return;
            };
            match h.id {
                Some(id) if h.method.is_none() => {
                    listens.remove(&id); // a listen's answer ends its stream
                    answered.push(id);
                }
                None if h.error && h.method.is_none() => *refused = true,
                _ => {}
            }
        });
        for id in answered {
            self.answered(&id);
        }
    }

    pub fn refused(&self) -> bool {
        self.refused
    }

    /// The daemon went: what the agent must be told, and the start of a line to send
    /// again. Requests in flight are answered with an error, but listens, which the new
    /// daemon is asked to carry on.
    pub fn lost(&mut self) -> Lost {
        let partial = self.up.partial().to_vec();
        let taken = self.taken;
        let mut to_agent = Vec::new();
        if self.down.mid_line() {
            to_agent.push(b'\n');
        }
        self.connected(0);
        let error = ErrorObject::new(
            mcpd_code::DAEMON_RESTARTED,
            "mcpd went away (restarted or stopped) while this request was in flight; it may or may not have run: call again",
        );
        let mut sent: Vec<(String, Sent)> = self.in_flight.drain().collect();
        self.kept_bytes = 0;
        sent.sort_by_key(|(_, s)| s.line_no);
        let mut resend = Vec::new();

        for (id, s) in sent {
            if self.listens.contains_key(&id) {
                continue;
            }
            // Not taken by the daemon, which said so in its closing note: sent again.
            if let (Some(taken), Some(text)) = (taken, &s.text)
                && s.line_no > taken
            {
                resend.extend_from_slice(text);
                resend.push(b'\n');
                continue;
            }
            if let Some(id) = parse_id(&id) {
                to_agent.extend_from_slice(jsonrpc::error_line(Some(&id), &error).as_bytes());
                to_agent.push(b'\n');
            }
        }
        resend.extend_from_slice(&partial);
        Lost { resend, to_agent }
    }

    /// What a new daemon is sent, in order: `initialize` (under the bridge's own id, its
    /// answer kept from the agent, which already has one), `notifications/initialized`,
    /// the logging level, each resource subscription, each listen (under its own id, so
    /// its notifications reach the agent as before; the second acknowledgement is kept
    /// from the agent).
    pub fn replay(&mut self) -> Vec<Replayed> {
        let mut out = Vec::new();
        let mut n = 0;
        let mut own = |line: &str, out: &mut Vec<Replayed>| {
            n += 1;
            let id = format!("{OWN_ID_PREFIX}{n}");
            if let Some(line) = jsonrpc::with_id(line, &Id::Str(id.clone())) {
                let awaits = lines::canonical_id(&Value::String(id)).map(Awaited::Answer);
                out.push(Replayed { line, awaits });
            }
        };
        if let Some(line) = &self.initialize {
            own(line, &mut out);
        }
        if let Some(line) = &self.initialized {
            out.push(Replayed {
                line: line.clone(),
                awaits: None,
            });
        }
        if let Some(line) = &self.set_level {
            own(line, &mut out);
        }
        for line in self.subscriptions.values() {
            own(line, &mut out);
        }
        for (id, line) in &self.listens {
            // Numbered when the handshake sends it (`connected`): not sent again anyway.
            let sent = Sent {
                line_no: 0,
                text: None,
            };
            self.in_flight.insert(id.clone(), sent);
            out.push(Replayed {
                line: line.clone(),
                awaits: Some(Awaited::Acknowledged(id.clone())),
            });
        }
        out
    }

    /// The notifications that make the agent list again: each list's `list_changed`
    /// for an agent that initialized, and on each listen stream the ones it asked for.
    pub fn relist(&self) -> Vec<u8> {
        let mut out = String::new();
        let kinds = ["tools", "prompts", "resources"];
        if self.initialize.is_some() {
            for kind in kinds {
                out += &jsonrpc::notification_line(
                    &format!("notifications/{kind}/list_changed"),
                    None,
                );
                out.push('\n');
            }
        }
        for line in self.listens.values() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let Some(id) = v.get("id") else { continue };
            let wanted = v.pointer("/params/notifications");
            for kind in kinds {
                let flag = format!("{kind}ListChanged");
                if wanted.and_then(|w| w.get(&flag)).and_then(Value::as_bool) == Some(true) {
                    let params =
                        json!({ "_meta": { "io.modelcontextprotocol/subscriptionId": id } });
                    out += &jsonrpc::notification_line(
                        &format!("notifications/{kind}/list_changed"),
                        Some(&params),
                    );
                    out.push('\n');
                }
            }
        }
        out.into_bytes()
    }
}

/// A string member of a line's `params`.
fn param_str(line: &[u8], key: &str) -> Option<String> {
    let v: Value = serde_json::from_slice(line).ok()?;
    Some(v.get("params")?.get(key)?.as_str()?.to_owned())
}

/// The request a `notifications/cancelled` names, as canonical id text.
fn cancelled_id(line: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(line).ok()?;
    lines::canonical_id(v.get("params")?.get("requestId")?)
}

fn parse_id(canonical: &str) -> Option<Id> {
    Id::from_value(&serde_json::from_str(canonical).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(s: &mut Session, line: &str) {
        s.sent_up(format!("{line}\n").as_bytes());
    }

    fn text(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    #[test]
    fn requests_in_flight_are_answered_when_the_daemon_goes() {
        let mut s = Session::default();
        up(
            &mut s,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
        );
        up(
            &mut s,
            r#"{"jsonrpc":"2.0","id":"b","method":"tools/list"}"#,
        );
        s.came_down(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
        // Half a request taken, half a reply sent.
        s.sent_up(br#"{"jsonrpc":"2.0","id":3,"#);
        s.came_down(br#"{"jsonrpc":"2.0","id":"b","res"#);
        let lost = s.lost();
        assert_eq!(lost.resend, br#"{"jsonrpc":"2.0","id":3,"#);
        let told = text(&lost.to_agent);
        assert!(
            told.starts_with('\n'),
            "the broken reply is ended: {told:?}"
        );
        assert!(
            told.contains(r#""id":"b""#) && told.contains("-32027"),
            "{told}"
        );
        assert!(!told.contains(r#""id":1"#), "answered before: {told}");
        assert!(s.lost().to_agent.is_empty(), "told once");
    }

    #[test]
    fn requests_the_daemon_did_not_take_are_sent_again() {
        let mut s = Session::default();
        s.connected(1); // the bridge's own first line
        up(
            &mut s,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
        ); // line 2
        up(
            &mut s,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}"#,
        ); // line 3
        up(
            &mut s,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}"#,
        ); // line 4
        s.came_down(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
        s.closing(3);
        let lost = s.lost();
        let told = text(&lost.to_agent);
        assert!(
            told.contains(r#""id":2"#) && !told.contains(r#""id":3"#),
            "{told}"
        );
        assert_eq!(
            text(&lost.resend),
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{}}\n"
        );
    }

    #[test]
    fn the_session_is_replayed_under_own_ids_and_listed_again() {
        let mut s = Session::default();
        up(
            &mut s,
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#,
        );
        up(
            &mut s,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        up(
            &mut s,
            r#"{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"a://x"}}"#,
        );
        up(
            &mut s,
            r#"{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"a://y"}}"#,
        );
        up(
            &mut s,
            r#"{"jsonrpc":"2.0","id":4,"method":"resources/unsubscribe","params":{"uri":"a://y"}}"#,
        );
        let replay: Vec<String> = s.replay().into_iter().map(|r| r.line).collect();
        assert_eq!(replay.len(), 3, "{replay:?}");
        assert!(replay[0].contains(r#""id":"mcpd-connect-1""#) && replay[0].contains("initialize"));
        assert!(replay[1].contains("notifications/initialized"));
        assert!(replay[2].contains("a://x") && replay[2].contains("mcpd-connect-"));
        let relist = text(&s.relist());
        assert_eq!(relist.lines().count(), 3);
        assert!(relist.contains("notifications/tools/list_changed"));
    }

    #[test]
    fn listens_are_kept_under_their_own_id() {
        let mut s = Session::default();
        up(
            &mut s,
            r#"{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}"#,
        );
        up(
            &mut s,
            r#"{"jsonrpc":"2.0","id":10,"method":"subscriptions/listen","params":{"notifications":{}}}"#,
        );
        up(
            &mut s,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":10}}"#,
        );
        let lost = s.lost();
        assert!(
            lost.to_agent.is_empty(),
            "a listen is carried on, not failed"
        );
        let replay = s.replay();
        assert_eq!(replay.len(), 1);
        assert!(matches!(&replay[0].awaits, Some(Awaited::Acknowledged(id)) if id == "9"));
        let relist = text(&s.relist());
        assert!(
            relist.contains("tools/list_changed")
                && relist.contains(r#""io.modelcontextprotocol/subscriptionId":9"#),
            "{relist}"
        );
        assert!(!relist.contains("prompts"));
    }

    #[test]
    fn a_refusal_is_seen() {
        let mut s = Session::default();
        s.came_down(
            b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32016,\"message\":\"m\"}}\n",
        );
        assert!(s.refused());
    }
}
