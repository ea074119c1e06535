//! Hostile agents: a seeded storm of garbage from many socket connections, an agent that floods requests and never reads, the same garbage over HTTP. The daemon must keep serving everyone else.
//!
//! The storm is reproducible: every run prints its seed, and `MCPD_STORM_SEED=N` replays it
//! (`MCPD_STORM_EXAMPLES=1` also prints every answer).

use crate::support::*;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::time::Instant;

/// `daemon.max_message_bytes` in these tests: small, so over-long lines are cheap to send.
const MAX_LINE: usize = 64 * 1024;
/// Socket connections in the storm, and hostile messages each sends.
const AGENTS: usize = 32;
const MESSAGES: usize = 250;
/// The daemon's resident memory after the storm must stay below this.
const RSS_LIMIT_KIB: u64 = 200 * 1024;
/// The longest URI sent to routes matched against resource templates. Longer ones are
/// slow to match today (the matcher is being made linear, with URIs capped at 8 KiB).
const MAX_URI: usize = 2 * 1024;
const MODERN: &str = "2026-07-28";
const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
const CLIENT_INFO_KEY: &str = "io.modelcontextprotocol/clientInfo";
const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";
/// The fixture's tools the storm may call: each answers at once whatever its arguments.
const FIXTURE_TOOLS: &str = "echo,add,fail,error,structured,bad_result,progress";

// ---------------------------------------------------------------- a seeded generator

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
fn seed() -> u64 {
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
struct Hostile {
    line: Vec<u8>,
    owed: Option<Value>,
    /// Where the line is split into two writes, so framing sees a partial line.
    split: Option<usize>,
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
            // A line over the limit, by a little or by a lot.
            let id = good_id(rng, agent, k);
            let pad = MAX_LINE + *rng.pick(&[1, 100, 10_000, 3 * MAX_LINE]);
            let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list",
                             "params": {"pad": "o".repeat(pad)}});
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

// ---------------------------------------------------------------- one storm agent

/// The text of a JSON value as the test reads it back: the key of an owed answer.
fn key(id: &Value) -> String {
    id.to_string()
}

/// What went wrong on one storm connection, with enough to reproduce it.
#[derive(Default)]
struct Storm {
    problems: Vec<String>,
    /// Answers by id, counted by outcome: "result", or the error code.
    outcomes: BTreeMap<String, usize>,
    null_errors: usize,
}

/// Sends `messages` on one connection while reading everything mcpd writes back, until
/// every owed answer came (or the deadline passed).
async fn storm_agent(socket: PathBuf, agent: usize, messages: Vec<Hostile>) -> Storm {
    let mut out = Storm::default();
    let mut owed: HashMap<String, usize> = HashMap::new();
    for m in &messages {
        if let Some(id) = &m.owed {
            *owed.entry(key(id)).or_default() += 1;
        }
    }
    let stream = within("connect", UnixStream::connect(&socket))
        .await
        .expect("connect");
    let (read, mut write) = stream.into_split();
    let writer = tokio::spawn(async move {
        for m in messages {
            let mut bytes = m.line;
            bytes.push(b'\n');
            let at = m.split.unwrap_or(bytes.len());
            write.write_all(&bytes[..at]).await?;
            write.flush().await?;
            write.write_all(&bytes[at..]).await?;
        }
        write.flush().await?;
        Ok::<_, std::io::Error>(write)
    });
    let mut reader = BufReader::new(read);
    let deadline = Instant::now() + WAIT;
    let mut line = Vec::new();
    while owed.values().any(|&n| n > 0) {
        line.clear();
        let read = tokio::time::timeout_at(deadline, reader.read_until(b'\n', &mut line)).await;
        let n = match read {
            Err(_) => {
                let left: Vec<&String> = owed
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(k, _)| k)
                    .collect();
                out.problems.push(format!(
                    "agent {agent}: no answer within {WAIT:?} to {} requests, e.g. {:.200}",
                    left.len(),
                    left.first().map_or("", |s| s.as_str())
                ));
                break;
            }
            Ok(Err(e)) => {
                out.problems
                    .push(format!("agent {agent}: read failed: {e}"));
                break;
            }
            Ok(Ok(n)) => n,
        };
        if n == 0 {
            out.problems.push(format!(
                "agent {agent}: mcpd closed the connection with {} answers owed",
                owed.values().sum::<usize>()
            ));
            break;
        }
        let msg: Value = match serde_json::from_slice(&line) {
            Ok(v) => v,
            Err(e) => {
                out.problems.push(format!(
                    "agent {agent}: mcpd sent non-JSON ({e}): {:.200}",
                    String::from_utf8_lossy(&line)
                ));
                continue;
            }
        };
        // A subscription is answered by its acknowledgement; the request stays open.
        let id = if msg["method"] == "notifications/subscriptions/acknowledged" {
            msg["params"]["_meta"][SUBSCRIPTION_ID_KEY].clone()
        } else if msg.get("method").is_some() {
            continue;
        } else {
            msg["id"].clone()
        };
        if id.is_null() {
            out.null_errors += 1;
            if msg.get("error").is_none() {
                out.problems.push(format!(
                    "agent {agent}: a null-id message that is no error: {msg:.200}"
                ));
            }
            continue;
        }
        match owed.get_mut(&key(&id)) {
            Some(n) if *n > 0 => {
                *n -= 1;
                let outcome = match msg["error"]["code"].as_i64() {
                    Some(code) => code.to_string(),
                    None if msg.get("method").is_some() => "acknowledged".to_owned(),
                    None => "result".to_owned(),
                };
                *out.outcomes.entry(outcome.clone()).or_default() += 1;
                if std::env::var_os("MCPD_STORM_EXAMPLES").is_some() {
                    println!("{outcome}: {:.300}", msg.to_string());
                }
            }
            _ => out.problems.push(format!(
                "agent {agent}: an answer to an id it did not send or already had answered: {:.300}",
                msg.to_string()
            )),
        }
    }
    match within("the storm writer ends", writer).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => out
            .problems
            .push(format!("agent {agent}: write failed: {e}")),
        Err(e) => out
            .problems
            .push(format!("agent {agent}: writer panicked: {e}")),
    }
    out
}

/// The hostile lines of one storm agent. A third of the agents never send a well-formed
/// modern `_meta`, a third mostly do, the rest now and then.
fn storm_messages(seed: u64, agent: usize) -> Vec<Hostile> {
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

/// A daemon with a small message limit and one quick fixture server `fx`.
async fn storm_daemon(b: DaemonBuilder) -> Daemon {
    let d = b
        .daemon(&format!("max_message_bytes = {MAX_LINE}"))
        .fixture("fx", &["--tools", FIXTURE_TOOLS])
        .profile("narrow", "servers = [\"fx\"]\ntools = [\"fx__echo\"]")
        .start()
        .await;
    d.wait_ready().await;
    d
}

/// What must hold after any hostile traffic: alive, bounded, serving, unharmed upstream.
async fn assert_still_serving(d: &Daemon, what: &str) {
    let pid = d.pid();
    assert!(alive(pid), "the daemon died during {what}");
    let rss = rss_kib(pid).expect("the daemon's VmRSS");
    println!(
        "daemon RSS after {what}: {rss} KiB ({:.1} MiB)",
        rss as f64 / 1024.0
    );
    assert!(rss < RSS_LIMIT_KIB, "daemon RSS {rss} KiB after {what}");
    let mut a = d.initialized_agent().await;
    let tools = a.tool_names().await;
    assert!(tools.iter().any(|t| t == "fx__echo"), "{tools:?}");
    let r = a.call("fx__echo", json!({"text": "still here"})).await;
    assert_eq!(text(&r), "still here", "{r}");
    let (code, out, err) = d.run_cli(&["ctl", "status"]).await;
    assert_eq!(code, 0, "ctl status after {what}: {out}{err}");
    let row = d.server_status("fx").await;
    assert_eq!(row["state"], "ready", "{row}");
    assert_eq!(
        row["restarts"], 0,
        "hostile agents restarted the server: {row}"
    );
    let log = d.log_text();
    assert!(!log.contains("panicked"), "the daemon log shows a panic");
}

// ---------------------------------------------------------------- the tests

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn garbage_from_many_agents_leaves_the_daemon_serving() {
    let seed = seed();
    println!("storm seed {seed} (replay with MCPD_STORM_SEED={seed})");
    let d = storm_daemon(DaemonBuilder::new()).await;
    let started = Instant::now();
    let agents: Vec<_> = (0..AGENTS)
        .map(|n| tokio::spawn(storm_agent(d.socket.clone(), n, storm_messages(seed, n))))
        .collect();
    let mut problems = Vec::new();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut null_errors = 0;
    for a in agents {
        let s = a.await.expect("storm agent");
        for (k, n) in s.outcomes {
            *outcomes.entry(k).or_default() += n;
        }
        null_errors += s.null_errors;
        problems.extend(s.problems);
    }
    println!(
        "storm: {AGENTS} agents x {MESSAGES} messages in {:.1} s; answers by id: {outcomes:?}; {null_errors} errors without an id",
        started.elapsed().as_secs_f64()
    );
    assert!(
        problems.is_empty(),
        "seed {seed}: {} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert_still_serving(&d, "the storm").await;
    d.wait_status("the storm's connections are gone", |s| {
        s["daemon"]["agents"].as_u64().is_some_and(|n| n <= 1)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_flooding_requests_without_reading_is_cut_off_while_others_are_served() {
    let d = storm_daemon(DaemonBuilder::new().daemon("agent_queue = 64")).await;
    let mut other = d.initialized_agent().await;
    // The flooder writes requests as fast as it can and never reads a reply, so its
    // socket fills, then its outbox. It keeps its read half open: only mcpd may end it,
    // and a write fails only once mcpd has closed the socket.
    let stream = within("connect", UnixStream::connect(&d.socket))
        .await
        .expect("connect");
    let (unread, mut write) = stream.into_split();
    let flood_started = Instant::now();
    let flood = tokio::spawn(async move {
        // Each reply carries the request's long id: the socket fills after a few.
        let mut chunk = String::new();
        for i in 0..10 {
            let id = format!("{i}-{}", "f".repeat(30_000));
            chunk.push_str(&format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":\"{id}\",\"method\":\"tools/list\"}}\n"
            ));
        }
        let mut sent = 0usize;
        loop {
            // Once mcpd has cut the agent off, a write fails; while it has not, the
            // writes either go on or block on a full socket.
            match tokio::time::timeout(WAIT, write.write_all(chunk.as_bytes())).await {
                Ok(Ok(())) => sent += 10,
                Ok(Err(e)) => return Ok((sent, e)),
                Err(_) => return Err(sent),
            }
        }
    });
    // Meanwhile another agent's calls are each served (within a bound, not a speed).
    let mut calls = 0;
    while !flood.is_finished() {
        calls += 1;
        let tag = format!("other {calls}");
        let id = other.start_call("fx__echo", json!({"text": tag})).await;
        let r = other.response_within(&id, Duration::from_secs(5)).await;
        assert_eq!(text(&r), tag, "{r}");
    }
    let (sent, error) = match flood.await.expect("flooder") {
        Ok(ended) => ended,
        Err(sent) => panic!(
            "the flooding agent was never cut off: after {sent} requests its writes blocked for {WAIT:?}"
        ),
    };
    println!(
        "flooder cut off after {sent} requests and {:.1} s ({error}); the other agent made {calls} calls meanwhile",
        flood_started.elapsed().as_secs_f64()
    );
    assert!(d.log_text().contains("not reading"), "the log says why");
    d.wait_status("the flooder is no longer counted", |s| {
        s["daemon"]["agents"].as_u64().is_some_and(|n| n <= 2)
    })
    .await;
    drop(unread);
    let r = other.call("fx__echo", json!({"text": "after"})).await;
    assert_eq!(text(&r), "after");
    assert_still_serving(&d, "the flood").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_that_pipelines_more_requests_than_its_queue_holds_gets_every_answer() {
    // Room for 128 requests in flight: the 60 calls below are never refused as busy.
    let d = storm_daemon(DaemonBuilder::new().daemon("agent_queue = 256")).await;
    // Written in big chunks, so mcpd reads requests far faster than its writer sends the
    // replies: that agent is to be slowed down, not taken for one that does not read.
    let n = 3000;
    let mut burst = String::new();
    for i in 0..n {
        let method = match i % 50 {
            0 => "tools/call",
            n if n % 2 == 0 => "tools/list",
            _ => "ping",
        };
        burst.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"{method}\",\"params\":{{\"name\":\"fx__echo\",\"arguments\":{{\"text\":\"{i}\"}}}}}}\n"
        ));
    }
    let stream = within("connect", UnixStream::connect(&d.socket))
        .await
        .expect("connect");
    let (read, mut write) = stream.into_split();
    let writer =
        tokio::spawn(async move { write.write_all(burst.as_bytes()).await.map(|()| write) });
    let mut lines = BufReader::new(read).lines();
    let mut answered = vec![false; n];
    for _ in 0..n {
        let line = within("the next answer", lines.next_line())
            .await
            .expect("read")
            .unwrap_or_else(|| {
                panic!(
                    "mcpd closed the connection after {} answers",
                    answered.iter().filter(|a| **a).count()
                )
            });
        let r: Value = serde_json::from_str(&line).expect("JSON");
        let i = r["id"].as_u64().expect("an id") as usize;
        assert!(r.get("result").is_some(), "request {i}: {r}");
        assert!(
            !std::mem::replace(&mut answered[i], true),
            "two answers to {i}"
        );
    }
    within("the burst is written", writer)
        .await
        .expect("writer")
        .expect("write");
    assert!(
        !d.log_text().contains("not reading"),
        "the agent was taken for one that does not read"
    );
}

// ---------------------------------------------------------------- over HTTP

/// A daemon with the HTTP listener on a free port: its `/mcp` URL and bearer token.
async fn http_daemon() -> (Daemon, String, String) {
    let d = storm_daemon(DaemonBuilder::new().daemon("http_listen = \"127.0.0.1:0\"")).await;
    let url = d.status().await["daemon"]["http"]
        .as_str()
        .expect("status names the HTTP URL")
        .to_owned();
    let (code, out, err) = d.run_cli(&["ctl", "http-token"]).await;
    assert_eq!(code, 0, "ctl http-token: {err}");
    (d, url, out.trim().to_owned())
}

/// Opens a legacy session; returns its id.
async fn http_session(client: &reqwest::Client, url: &str, token: &str) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "storm", "version": "1"}}});
    let r = within(
        "initialize over HTTP",
        client
            .post(url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(body.to_string())
            .send(),
    )
    .await
    .expect("initialize");
    assert_eq!(r.status().as_u16(), 200);
    r.headers()["mcp-session-id"]
        .to_str()
        .expect("a session id")
        .to_owned()
}

/// The messages of a JSON or SSE response body.
fn messages_of(body: &str) -> Vec<Value> {
    let data: Vec<String> = if body.trim_start().starts_with('{') {
        vec![body.to_owned()]
    } else {
        body.split("\n\n")
            .map(|event| {
                event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect()
            })
            .collect()
    };
    data.iter()
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

/// POSTs each hostile message as one body, in a legacy session or, with the 2026-07-28
/// headers, statelessly. Every POST must get a response that is no server error, and one
/// that answers a request carries its id.
async fn http_storm_agent(
    url: String,
    token: String,
    agent: usize,
    messages: Vec<Hostile>,
    statuses: std::sync::Arc<std::sync::Mutex<BTreeMap<u16, usize>>>,
) -> Vec<String> {
    let client = http_client();
    let session = http_session(&client, &url, &token).await;
    let mut problems = Vec::new();
    let mut previous = String::new();
    for (k, m) in messages.into_iter().enumerate() {
        let parsed: Option<Value> = serde_json::from_slice(&m.line).ok();
        let method = parsed
            .as_ref()
            .and_then(|p| p["method"].as_str())
            .unwrap_or("");
        let mut post = client
            .post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(m.line.clone());
        let header_ok = |v: &str| reqwest::header::HeaderValue::from_str(v).is_ok();
        if k % 3 == 0 {
            post = post.header("mcp-protocol-version", MODERN);
            if header_ok(method) {
                post = post.header("mcp-method", method);
            }
            if let Some(name) = parsed.as_ref().and_then(|p| p["params"]["name"].as_str())
                && header_ok(name)
            {
                post = post.header("mcp-name", name);
            }
        } else {
            post = post.header("mcp-session-id", &session);
        }
        let what = format!("agent {agent} message {k} ({method:.40}) after {previous}");
        previous = format!("{method:.40} of {} bytes", m.line.len());
        let r = match tokio::time::timeout(WAIT, post.send()).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                let mut chain = format!("{e}");
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    chain.push_str(&format!(": {s}"));
                    source = s.source();
                }
                problems.push(format!(
                    "{what}: the POST of {} bytes failed: {chain}",
                    m.line.len()
                ));
                continue;
            }
            Err(_) => {
                problems.push(format!("{what}: no response within {WAIT:?}"));
                continue;
            }
        };
        let status = r.status().as_u16();
        previous.push_str(&format!(" answered {status}"));
        *statuses.lock().unwrap().entry(status).or_default() += 1;
        if status >= 500 && status != 503 {
            problems.push(format!("{what}: status {status}"));
        }
        // A subscription's stream stays open: closing it ends the subscription.
        if method == "subscriptions/listen" {
            continue;
        }
        let body = match tokio::time::timeout(WAIT, r.text()).await {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                problems.push(format!("{what}: reading the body failed: {e}"));
                continue;
            }
            Err(_) => {
                problems.push(format!("{what}: the body did not end within {WAIT:?}"));
                continue;
            }
        };
        if let (200, Some(id)) = (status, &m.owed)
            && !messages_of(&body).iter().any(|msg| &msg["id"] == id)
        {
            problems.push(format!(
                "{what}: a 200 without the answer to {id}: {body:.300}"
            ));
        }
    }
    problems
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn garbage_over_http_leaves_the_daemon_serving() {
    let seed = seed();
    println!("HTTP storm seed {seed} (replay with MCPD_STORM_SEED={seed})");
    let (d, url, token) = http_daemon().await;
    // A well-behaved HTTP client whose session must come through unharmed.
    let client = http_client();
    let session = http_session(&client, &url, &token).await;
    let statuses = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::new()));
    let started = Instant::now();
    let agents: Vec<_> = (0..8)
        .map(|n| {
            let mut messages = storm_messages(seed, n);
            messages.truncate(80);
            tokio::spawn(http_storm_agent(
                url.clone(),
                token.clone(),
                n,
                messages,
                statuses.clone(),
            ))
        })
        .collect();
    let mut problems = Vec::new();
    for a in agents {
        problems.extend(a.await.expect("HTTP storm agent"));
    }
    println!(
        "HTTP storm: 8 clients x 80 bodies in {:.1} s; statuses {:?}",
        started.elapsed().as_secs_f64(),
        statuses.lock().unwrap()
    );
    assert!(
        problems.is_empty(),
        "seed {seed}: {} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "fx__echo", "arguments": {"text": "unharmed"}}});
    let r = within(
        "a call in the well-behaved session",
        client
            .post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .header("mcp-session-id", &session)
            .body(call.to_string())
            .send(),
    )
    .await
    .expect("POST");
    assert_eq!(r.status().as_u16(), 200);
    let body: Value = serde_json::from_str(&r.text().await.expect("body")).expect("JSON");
    assert_eq!(text(&body), "unharmed", "{body}");
    assert_still_serving(&d, "the HTTP storm").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_oversized_http_body_does_not_cost_the_client_its_next_request() {
    let (_d, url, token) = http_daemon().await;
    let client = http_client();
    let session = http_session(&client, &url, &token).await;
    let post = |body: String| {
        client
            .post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .header("mcp-session-id", &session)
            .body(body)
            .send()
    };
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                     "params": {"pad": "o".repeat(4 * MAX_LINE)}});
    for i in 0..10 {
        let r = within("an oversized POST", post(big.to_string()))
            .await
            .expect("an answer to the oversized POST");
        assert_eq!(r.status().as_u16(), 413);
        // mcpd does not read the rest, so it closes the connection, and says so.
        assert_eq!(r.headers()["connection"], "close", "{:?}", r.headers());
        let ping = json!({"jsonrpc": "2.0", "id": i, "method": "ping"}).to_string();
        let r = within("the next POST", post(ping))
            .await
            .unwrap_or_else(|e| panic!("the request after a 413 was lost: {e}"));
        assert_eq!(r.status().as_u16(), 200);
    }
}

/// The `_meta` of a well-formed 2026-07-28 request.
fn modern_meta() -> Value {
    json!({PROTOCOL_VERSION_KEY: MODERN, CAPABILITIES_KEY: {}})
}

/// A `subscriptions/listen` request watching these resources.
fn listen(id: usize, uris: &[String]) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": true, "resourceSubscriptions": uris},
        "_meta": modern_meta()}})
}

/// Reads until the acknowledgement of subscription `id` or the answer to it.
async fn listen_outcome(a: &mut Agent, id: usize) -> Value {
    within("a subscription's acknowledgement or refusal", async {
        loop {
            let m = a.recv().await.expect("a message");
            let acked = m["method"] == "notifications/subscriptions/acknowledged"
                && m["params"]["_meta"][SUBSCRIPTION_ID_KEY] == json!(id);
            if acked || m["id"] == json!(id) {
                return m;
            }
        }
    })
    .await
}

fn items(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("fixture://items/{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn open_subscriptions_count_as_requests_in_flight() {
    // agent_queue = 64 allows 32 requests in flight.
    let d = storm_daemon(DaemonBuilder::new().daemon("agent_queue = 64")).await;
    let mut a = d.agent().await;
    for id in 0..32 {
        a.send(listen(id, &items(id..id + 1))).await;
        let m = listen_outcome(&mut a, id).await;
        assert!(m.get("method").is_some(), "subscription {id}: {m}");
    }
    a.send(listen(32, &[])).await;
    let m = listen_outcome(&mut a, 32).await;
    assert_eq!(error_code(&m), Some(-32013), "{m}");
    // Ending one makes room for another.
    a.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 0, "_meta": modern_meta()}}),
    )
    .await;
    a.send(listen(33, &[])).await;
    let m = listen_outcome(&mut a, 33).await;
    assert!(m.get("method").is_some(), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_holds_at_most_1024_resource_subscriptions() {
    let d = storm_daemon(DaemonBuilder::new()).await;
    // Legacy: one resources/subscribe each.
    let mut a = d.initialized_agent().await;
    let uris = items(0..1025);
    // In bursts of 256, fewer than the 512 requests a connection may have in flight.
    for burst in (0..1024).collect::<Vec<usize>>().chunks(256) {
        let mut lines = String::new();
        for &i in burst {
            let m = json!({"jsonrpc": "2.0", "id": i, "method": "resources/subscribe",
                           "params": {"uri": uris[i]}});
            lines.push_str(&format!("{m}\n"));
        }
        a.send_raw(lines.trim_end()).await;
        for &i in burst {
            let r = a.response(&json!(i)).await;
            assert!(r.get("result").is_some(), "subscription {i}: {r}");
        }
    }
    let r = a
        .request("resources/subscribe", Some(json!({"uri": uris[1024]})))
        .await;
    assert_eq!(error_code(&r), Some(-32602), "{r}");
    assert!(error_message(&r).contains("1024"), "{r}");
    // The same resource again is no new subscription; giving one up makes room.
    let r = a
        .request("resources/subscribe", Some(json!({"uri": uris[0]})))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let r = a
        .request("resources/unsubscribe", Some(json!({"uri": uris[0]})))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let r = a
        .request("resources/subscribe", Some(json!({"uri": uris[1024]})))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    // Modern: a subscription that would pass the limit is refused whole.
    let mut b = d.agent().await;
    b.send(listen(1, &items(0..1025))).await;
    let m = listen_outcome(&mut b, 1).await;
    assert_eq!(error_code(&m), Some(-32602), "{m}");
    b.send(listen(2, &items(0..1024))).await;
    let m = listen_outcome(&mut b, 2).await;
    assert!(m.get("method").is_some(), "{m}");
    b.send(listen(3, &items(1024..1025))).await;
    let m = listen_outcome(&mut b, 3).await;
    assert_eq!(error_code(&m), Some(-32602), "{m}");
}
