//! The seeded generator of hostile input.
//!
//! Random bytes, bad UTF-8, truncated and deep JSON, every method with fields of the
//! wrong type, odd ids, both eras, lines at and over the limit, batches.

use super::{
    CAPABILITIES_KEY, CLIENT_INFO_KEY, FIXTURE_TOOLS, MAX_LINE, MESSAGES, MODERN,
    PROTOCOL_VERSION_KEY,
};
use serde_json::{Map, Value, json};

/// The longest URI sent to routes matched against resource templates. Longer ones are
/// slow to match today (the matcher is being made linear, with URIs capped at 8 KiB).
const MAX_URI: usize = 2 * 1024;

/// SplitMix64: small, fast, and the same on every machine, so a seed replays a run.
struct Rng {
    state: u64,
    /// How often (in percent) a request carries a well-formed 2026-07-28 `_meta`. The first
    /// one pins the connection to that era, so agents differ in this.
    modern: usize,
}

impl Rng {
    fn new(seed: u64, modern: usize) -> Rng {
        Rng {
            state: seed,
            modern,
        }
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// The seed of this run: `MCPD_STORM_SEED`, or one taken from the clock.
pub(super) fn seed() -> u64 {
    std::env::var("MCPD_STORM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
}

/// Strings a parser may find awkward.
const ODD_STRINGS: &[&str] = &[
    "",
    " ",
    "\u{0}",
    "\"quoted\"",
    "back\\slash",
    "new\nline",
    "tab\there\r",
    "ünïcödé ✓ 𝄞",
    "\u{202e}rtl",
    "../../etc/passwd",
    "%00%ff",
    "{}",
    "[]",
    "null",
    "__",
    "fx__",
    "__echo",
    "fx__echo__",
    "mcpd:fx:fixture://alpha",
    "mcpd:",
    "mcpd:nope:x",
    "fixture://",
    "fixture://items/",
    "fixture://items/{id}",
    "{id}",
    "{{{{",
];

/// A JSON value of any type, nested at most `depth` deep.
fn any_value(rng: &mut Rng, depth: usize) -> Value {
    let kinds = if depth == 0 { 7 } else { 9 };
    match rng.below(kinds) {
        0 => Value::Null,
        1 => json!(rng.chance(50)),
        2 => json!(*rng.pick(&[0i64, -1, 1, i64::MIN, i64::MAX, 9_007_199_254_740_993])),
        3 => json!(*rng.pick(&[u64::MAX, 1 << 63])),
        4 => json!(*rng.pick(&[0.5f64, -1.25, 1e300, -1e-300, 123456.789])),
        5 => json!(*rng.pick(ODD_STRINGS)),
        6 => json!("s".repeat(rng.below(300))),
        7 => Value::Array(
            (0..rng.below(5))
                .map(|_| any_value(rng, depth - 1))
                .collect(),
        ),
        _ => {
            let mut m = Map::new();
            for _ in 0..rng.below(5) {
                let k = rng.pick(ODD_STRINGS).to_string();
                m.insert(k, any_value(rng, depth - 1));
            }
            Value::Object(m)
        }
    }
}

/// A value of the right type with probability 1/2, or of any type.
fn maybe(rng: &mut Rng, right: Value) -> Value {
    if rng.chance(50) {
        right
    } else {
        any_value(rng, 2)
    }
}

/// A URI: one the fixture offers, a presented one, or an odd one, never over `MAX_URI`.
fn uri(rng: &mut Rng) -> Value {
    let u = match rng.below(6) {
        0 => "fixture://alpha".to_owned(),
        1 => format!("fixture://items/{}", rng.below(1000)),
        2 => format!(
            "fixture://items/{}",
            "9/".repeat(rng.below(MAX_URI / 2 - 20))
        ),
        3 => format!("mcpd:fx:{}", rng.pick(ODD_STRINGS)),
        4 => format!("{}://{}", rng.pick(ODD_STRINGS), rng.pick(ODD_STRINGS)),
        _ => format!("fixture://{}", "%".repeat(rng.below(MAX_URI - 20))),
    };
    maybe(rng, json!(u))
}

/// A `_meta` member: modern (as often as the agent's style says), absent, modern but
/// wrong, or of the wrong type.
fn meta(rng: &mut Rng) -> Option<Value> {
    if rng.chance(rng.modern) {
        let mut m = json!({
            PROTOCOL_VERSION_KEY: MODERN,
            CAPABILITIES_KEY: {},
            CLIENT_INFO_KEY: {"name": "storm", "version": "1"},
        });
        if rng.chance(30) {
            m["progressToken"] = any_value(rng, 2);
        }
        return Some(m);
    }
    match rng.below(7) {
        0..=2 => None,
        3 => Some(json!({
            PROTOCOL_VERSION_KEY: version(rng),
            CAPABILITIES_KEY: any_value(rng, 1),
            CLIENT_INFO_KEY: any_value(rng, 1),
        })),
        5 => Some(json!({ "progressToken": any_value(rng, 2) })),
        6 => Some(json!({ "mcpd/profile": any_value(rng, 1) })),
        _ => Some(any_value(rng, 2)),
    }
}

/// A protocol version: right, wrong, or not a string.
fn version(rng: &mut Rng) -> Value {
    let v = json!(*rng.pick(&[MODERN, "2099-01-01", "", "2025-06-18"]));
    maybe(rng, v)
}

/// Params for `method`, each field right or of a random type.
fn params_for(rng: &mut Rng, method: &str) -> Map<String, Value> {
    let mut p = Map::new();
    let set = |p: &mut Map<String, Value>, k: &str, v: Value| {
        p.insert(k.to_owned(), v);
    };
    match method {
        "initialize" => {
            let v = json!(*rng.pick(&["2025-06-18", "2024-11-05", MODERN, "1999-01-01", ""]));
            set(&mut p, "protocolVersion", maybe(rng, v));
            let caps = json!({"elicitation": maybe(rng, json!({}))});
            set(&mut p, "capabilities", maybe(rng, caps));
            let info = json!({"name": maybe(rng, json!("storm")), "version": any_value(rng, 1)});
            set(&mut p, "clientInfo", maybe(rng, info));
        }
        "tools/list" | "prompts/list" | "resources/list" | "resources/templates/list" => {
            let c = json!(*rng.pick(&["", "0", "999999", "not-a-cursor", "eyJ9"]));
            set(&mut p, "cursor", maybe(rng, c));
        }
        "tools/call" => {
            let tool = format!(
                "fx__{}",
                rng.pick(&FIXTURE_TOOLS.split(',').collect::<Vec<_>>())
            );
            let name = match rng.below(3) {
                0 => json!(tool),
                1 => json!(*rng.pick(ODD_STRINGS)),
                _ => any_value(rng, 2),
            };
            set(&mut p, "name", name);
            // Small numbers only: `progress` takes `steps` and `ms` from them.
            let args = json!({
                "text": any_value(rng, 2),
                "a": any_value(rng, 0),
                "b": any_value(rng, 0),
                "steps": rng.below(3),
                "ms": 0,
            });
            set(&mut p, "arguments", maybe(rng, args));
        }
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
            let u = uri(rng);
            set(&mut p, "uri", u);
        }
        "prompts/get" => {
            let n = json!(*rng.pick(&["fx__greet", "fx__summarize", "greet", "fx__nope"]));
            set(&mut p, "name", maybe(rng, n));
            let a = json!({"name": any_value(rng, 1), "text": any_value(rng, 1)});
            set(&mut p, "arguments", maybe(rng, a));
        }
        "completion/complete" => {
            let t = json!(*rng.pick(&["ref/prompt", "ref/resource", "ref/nope"]));
            let r = json!({
                "type": maybe(rng, t),
                "name": maybe(rng, json!("fx__greet")),
                "uri": uri(rng),
            });
            set(&mut p, "ref", maybe(rng, r));
            let a = json!({"name": maybe(rng, json!("name")), "value": any_value(rng, 1)});
            set(&mut p, "argument", maybe(rng, a));
        }
        "logging/setLevel" => {
            let l = json!(*rng.pick(&["debug", "emergency", "DEBUG", "verbose", "", "trace"]));
            set(&mut p, "level", maybe(rng, l));
        }
        "subscriptions/listen" => {
            let uris: Vec<Value> = (0..rng.below(4)).map(|_| uri(rng)).collect();
            let n = json!({
                "toolsListChanged": any_value(rng, 0),
                "promptsListChanged": any_value(rng, 0),
                "resourcesListChanged": any_value(rng, 0),
                "resourceSubscriptions": maybe(rng, json!(uris)),
            });
            set(&mut p, "notifications", maybe(rng, n));
        }
        "mcpd/profile" => {
            let n = json!(*rng.pick(&["narrow", "nope", ""]));
            set(&mut p, "name", maybe(rng, n));
        }
        _ => {
            for _ in 0..rng.below(3) {
                let k = rng.pick(ODD_STRINGS).to_string();
                p.insert(k, any_value(rng, 2));
            }
        }
    }
    if let Some(m) = meta(rng) {
        p.insert("_meta".into(), m);
    }
    p
}

/// Every method mcpd serves, the daemon's harmless own ones, and some it does not know.
/// (`mcpd/stop`, `mcpd/restart` and `mcpd/reload` are left out: they act, by design.)
const METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "tools/call",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
    "server/discover",
    "mcpd/status",
    "mcpd/agents",
    "mcpd/metrics",
    "mcpd/profile",
    "",
    "nope/nope",
    "notifications/initialized",
    "rpc.discover",
];

/// One hostile line (without its newline) and the id mcpd owes an answer, if any.
pub(super) struct Hostile {
    pub(super) line: Vec<u8>,
    pub(super) owed: Option<Value>,
    /// Where the line is split into two writes, so framing sees a partial line.
    pub(super) split: Option<usize>,
}

impl Hostile {
    fn garbage(line: impl Into<Vec<u8>>) -> Hostile {
        Hostile {
            line: line.into(),
            owed: None,
            split: None,
        }
    }

    /// A request object: mcpd must answer `id` unless the line is over the limit.
    fn request(msg: &Value, id: &Value) -> Hostile {
        let line = msg.to_string().into_bytes();
        let owed = (line.len() <= MAX_LINE).then(|| id.clone());
        Hostile {
            line,
            owed,
            split: None,
        }
    }
}

/// A request id JSON-RPC allows, of many shapes, unique to this agent and message.
fn good_id(rng: &mut Rng, agent: usize, k: usize) -> Value {
    let n = (agent * 100_000 + k) as u64;
    match rng.below(7) {
        0 => json!(n),
        1 => json!(-(n as i64)),
        2 => json!(n as f64 + 0.25),
        3 => json!(format!("{agent}-{k}")),
        4 => json!(format!("{agent}-{k}-{}", rng.pick(ODD_STRINGS))),
        5 => json!(format!("{agent}-{k}-{}", "i".repeat(rng.below(20_000)))),
        _ => json!(u64::MAX - n),
    }
}

/// An id JSON-RPC does not allow: mcpd cannot answer it by id.
fn bad_id(rng: &mut Rng) -> Value {
    rng.pick(&[
        json!({"id": 1}),
        json!([1]),
        json!(true),
        json!(false),
        json!({}),
    ])
    .clone()
}

/// A well-formed request of a random method with hostile params.
fn request(rng: &mut Rng, agent: usize, k: usize) -> Hostile {
    let method = *rng.pick(METHODS);
    let id = good_id(rng, agent, k);
    let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
    match rng.below(10) {
        0 => msg["params"] = json!([any_value(rng, 2), any_value(rng, 2)]),
        1 => {}
        _ => msg["params"] = Value::Object(params_for(rng, method)),
    }
    Hostile::request(&msg, &id)
}

/// A message whose envelope is wrong but whose id is usable: mcpd answers with an error.
fn bad_envelope(rng: &mut Rng, agent: usize, k: usize) -> Hostile {
    let id = good_id(rng, agent, k);
    let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
    match rng.below(6) {
        0 => msg["jsonrpc"] = any_value(rng, 1),
        1 => {
            msg.as_object_mut().map(|m| m.remove("jsonrpc"));
        }
        2 => msg["method"] = any_value(rng, 1),
        3 => msg["params"] = json!(*rng.pick(&["params", "", "[]"])),
        4 => msg["params"] = json!(rng.below(10)),
        _ => {
            // Neither a request nor a response.
            msg.as_object_mut().map(|m| m.remove("method"));
        }
    }
    Hostile::request(&msg, &id)
}

/// One hostile line: garbage of every kind, and requests mcpd must answer.
fn hostile(rng: &mut Rng, agent: usize, k: usize) -> Hostile {
    match rng.below(20) {
        0 => {
            // Random bytes, on one line.
            let n = rng.below(400);
            let mut b = rng.bytes(n);
            b.retain(|&c| c != b'\n');
            Hostile::garbage(b)
        }
        1 => {
            // A request with a byte that is not UTF-8 inside a string.
            let text = format!(
                r#"{{"jsonrpc":"2.0","id":"{agent}-{k}","method":"tools/call","params":{{"name":"fx__echo","arguments":{{"text":"a"#
            );
            let mut b = text.into_bytes();
            b.extend_from_slice(&[0xff, 0xfe, 0xc3]);
            b.extend_from_slice(br#"b"}}}"#);
            Hostile::garbage(b)
        }
        2 => {
            // Truncated JSON: a prefix of a request is never a whole message.
            let r = request(rng, agent, k);
            let cut = rng.below(r.line.len().max(1));
            Hostile::garbage(r.line[..cut].to_vec())
        }
        3 => {
            // An id of a type JSON-RPC does not allow.
            let msg = json!({"jsonrpc": "2.0", "id": bad_id(rng), "method": rng.pick(METHODS)});
            Hostile::garbage(msg.to_string())
        }
        4 => {
            // Cancellations of requests never sent, and other notifications.
            let params = match rng.below(3) {
                0 => {
                    json!({"requestId": format!("unknown-{agent}-{k}"), "reason": any_value(rng, 1)})
                }
                1 => json!({"requestId": any_value(rng, 2)}),
                _ => any_value(rng, 2),
            };
            let method = *rng.pick(&[
                "notifications/cancelled",
                "notifications/initialized",
                "notifications/progress",
                "notifications/roots/list_changed",
                "notifications/nope",
            ]);
            let mut msg = json!({"jsonrpc": "2.0", "method": method});
            if params.is_object() || params.is_array() || rng.chance(50) {
                msg["params"] = params;
            }
            Hostile::garbage(msg.to_string())
        }
        5 => {
            // Responses to ids mcpd never sent.
            let id = rng
                .pick(&[
                    json!("mcpd-1"),
                    json!("mcpd-999"),
                    json!(1),
                    json!(0),
                    json!(format!("unknown-{agent}-{k}")),
                ])
                .clone();
            let msg = if rng.chance(50) {
                json!({"jsonrpc": "2.0", "id": id, "result": any_value(rng, 2)})
            } else {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -1, "message": any_value(rng, 1)}})
            };
            Hostile::garbage(msg.to_string())
        }
        6 => {
            // Deep nesting: far past any parser's recursion limit, or just under it.
            if rng.chance(50) {
                let open = if rng.chance(50) { "[" } else { "{\"a\":" };
                Hostile::garbage(open.repeat(100_000 / open.len()).into_bytes())
            } else {
                let depth = 100;
                let nested = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
                let id = good_id(rng, agent, k);
                let text = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"fx__echo","arguments":{{"text":{nested}}}}}}}"#
                );
                Hostile {
                    line: text.into_bytes(),
                    owed: Some(id),
                    split: None,
                }
            }
        }
        7 => {
            // A huge string just under the line limit.
            let id = good_id(rng, agent, k);
            let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                                 "params": {"name": "fx__echo", "arguments": {"text": ""}}});
            // Room for the server's echo too: a reply over the limit would be dropped.
            let room = MAX_LINE.saturating_sub(msg.to_string().len() + 1024);
            msg["params"]["arguments"]["text"] =
                json!("h".repeat(room.saturating_sub(rng.below(1000))));
            if rng.chance(30) {
                msg["params"]["name"] = json!("fx__nope");
            }
            Hostile::request(&msg, &id)
        }
        8 => {
            // A line of exactly the limit, one byte over it, or far over it.
            let id = good_id(rng, agent, k);
            let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list",
                                 "params": {"pad": ""}});
            let envelope = msg.to_string().len();
            let total = MAX_LINE + *rng.pick(&[0, 1, 100, 10_000, 3 * MAX_LINE]);
            msg["params"]["pad"] = json!("o".repeat(total.saturating_sub(envelope)));
            Hostile::request(&msg, &id)
        }
        9 => {
            // A batch.
            let items: Vec<Value> = (0..rng.below(4))
                .map(|i| json!({"jsonrpc": "2.0", "id": format!("batch-{agent}-{k}-{i}"), "method": "tools/list"}))
                .collect();
            Hostile::garbage(Value::Array(items).to_string())
        }
        10 => Hostile::garbage(*rng.pick(&["", " ", "\t", "\r", "  \r"])),
        11 => Hostile::garbage(
            (*rng.pick(&[
                "null",
                "1",
                "\"str\"",
                "true",
                "{}",
                "[]",
                "{\"jsonrpc\":\"2.0\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":1e999,\"method\":\"ping\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":\"\\ud800\",\"method\":\"ping\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"ping\"",
                "\u{feff}{}",
            ]))
            .to_owned(),
        ),
        12 | 13 => bad_envelope(rng, agent, k),
        _ => request(rng, agent, k),
    }
}

/// The hostile lines of one storm agent. A third of the agents never send a well-formed
/// modern `_meta`, a third mostly do, the rest now and then.
pub(super) fn storm_messages(seed: u64, agent: usize) -> Vec<Hostile> {
    let modern = [0, 80, 5][agent % 3];
    let mut rng = Rng::new(
        seed ^ (agent as u64).wrapping_mul(0xD1B5_4A32_D192_ED03),
        modern,
    );
    (0..MESSAGES)
        .map(|k| {
            let mut h = hostile(&mut rng, agent, k);
            if rng.chance(20) {
                h.split = Some(rng.below(h.line.len() + 1));
            }
            h
        })
        .collect()
}
