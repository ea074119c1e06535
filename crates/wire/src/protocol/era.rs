//! The two protocol eras.
//!
//! Legacy (`initialize`) and modern 2026-07-28 (stateless, `_meta` on every request). No
//! IO.

use super::LEGACY_VERSIONS;
use serde_json::{Map, Value, json};

/// The one modern protocol version mcpd speaks.
pub const MODERN_VERSION: &str = "2026-07-28";

/// Reserved `_meta` keys of the modern era.
pub mod key {
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    /// mcpd's own key, in its handshake answers: this daemon's instance id, so that a
    /// server entry that leads back to the daemon itself is recognised. Also in its own
    /// handshake requests, so that a daemon it reaches knows which daemon the agent is.
    pub const MCPD_INSTANCE: &str = "mcpd/instance";
    /// The instance ids of the mcpd daemons this daemon reaches through its servers
    /// (directly, or further behind them), so that two daemons configured as each
    /// other's server (A → B → A) are recognised as a loop.
    pub const MCPD_BEHIND: &str = "mcpd/behind";
}

/// The most instance ids a daemon passes on in [`key::MCPD_BEHIND`] (and reads from one).
pub const MAX_BEHIND: usize = 64;

/// MCP error codes of the modern era.
pub mod code {
    pub const HEADER_MISMATCH: i64 = -32020;
    pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
    pub const UNSUPPORTED_VERSION: i64 = -32022;
}

/// Which protocol era a peer speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Era {
    Legacy,
    Modern,
}

impl Era {
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }

    pub fn of_version(version: &str) -> Era {
        if version >= MODERN_VERSION {
            Era::Modern
        } else {
            Era::Legacy
        }
    }
}

/// Legacy methods that 2026-07-28 removed besides `initialize`: a request that declares
/// a protocol version for one of them gets -32601, on the socket as over HTTP.
pub const REMOVED_METHODS: [&str; 6] = [
    super::method::PING,
    super::method::SET_LEVEL,
    super::method::RESOURCES_SUBSCRIBE,
    super::method::RESOURCES_UNSUBSCRIBE,
    // The 2025-11-25 task methods the Tasks extension does not have.
    super::method::TASKS_RESULT,
    super::method::TASKS_LIST,
];

/// Whether 2026-07-28 removed this method.
pub fn is_removed_method(m: &str) -> bool {
    m == super::method::INITIALIZE || REMOVED_METHODS.contains(&m)
}

/// Whether a request's `_meta` declares a protocol version (any value): the request is
/// meant for the modern era, whatever the connection spoke before.
pub fn declares_version(params: Option<&Value>) -> bool {
    params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(key::PROTOCOL_VERSION))
        .is_some()
}

/// Every version mcpd speaks, newest first: what `supportedVersions` and `-32022` list.
pub fn supported_versions() -> Vec<&'static str> {
    let mut v = vec![MODERN_VERSION];
    v.extend(LEGACY_VERSIONS);
    v
}

/// The `data` of an unsupported-version error.
pub fn unsupported_version_data(requested: Option<&str>) -> Value {
    json!({ "supported": supported_versions(), "requested": requested })
}

/// What the `_meta` of an agent's request says about its era.
#[derive(Debug, PartialEq)]
pub enum RequestEra {
    /// No modern keys: a legacy request.
    Legacy,
    /// A well-formed modern request.
    Modern,
    /// Modern, but unusable: the missing key, or the unsupported version.
    MissingKey(&'static str),
    UnsupportedVersion(String),
}

/// Classifies a request by its `params._meta`. A request is modern when it carries the
/// protocol-version key; it must then also carry the client capabilities.
pub fn request_era(params: Option<&Value>) -> RequestEra {
    let meta = params.and_then(|p| p.get("_meta"));
    let Some(version) = meta.and_then(|m| m.get(key::PROTOCOL_VERSION)) else {
        return RequestEra::Legacy;
    };
    match version.as_str() {
        Some(MODERN_VERSION) => {}
        Some(other) => return RequestEra::UnsupportedVersion(other.to_owned()),
        None => return RequestEra::UnsupportedVersion(version.to_string()),
    }
    let caps = meta.and_then(|m| m.get(key::CLIENT_CAPABILITIES));
    if !caps.is_some_and(Value::is_object) {
        return RequestEra::MissingKey(key::CLIENT_CAPABILITIES);
    }
    RequestEra::Modern
}

/// Adds mcpd's modern `_meta` envelope to request params, keeping whatever `_meta` the
/// params already carry (a progress token, the agent's own capabilities).
pub fn add_envelope(params: &mut Option<Value>, capabilities: &Value) {
    let p = params.get_or_insert_with(|| Value::Object(Map::new()));
    let Some(obj) = p.as_object_mut() else {
        return;
    };
    let meta = obj
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Some(m) = meta.as_object_mut() {
        m.insert(key::PROTOCOL_VERSION.into(), json!(MODERN_VERSION));
        // A client that declared nothing (or not an object) declared no capabilities.
        let declared = if capabilities.is_object() {
            capabilities.clone()
        } else {
            Value::Object(Map::new())
        };
        m.entry(key::CLIENT_CAPABILITIES).or_insert(declared);
        m.insert(key::CLIENT_INFO.into(), client_info());
    }
}

/// Removes the modern envelope from params bound for a legacy server, which would not
/// understand it.
pub fn strip_envelope(params: &mut Option<Value>) {
    let Some(meta) = params
        .as_mut()
        .and_then(|p| p.get_mut("_meta"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
    if meta.is_empty()
        && let Some(p) = params.as_mut().and_then(Value::as_object_mut)
    {
        p.remove("_meta");
    }
}

/// mcpd as a client.
pub fn client_info() -> Value {
    json!({ "name": "mcpd", "version": env!("CARGO_PKG_VERSION") })
}

/// mcpd as a server.
/// This daemon's instance id: random, fixed for the life of the process.
pub fn instance() -> &'static str {
    static INSTANCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    INSTANCE.get_or_init(|| format!("{:032x}", rand::random::<u128>()))
}

/// The `_meta` of mcpd's handshake answers (`initialize`, `server/discover`): who it is,
/// and the mcpd daemons it reaches through its servers (`behind`).
pub fn handshake_meta(behind: &[String]) -> Value {
    let mut meta = daemon_meta(behind);
    if let Some(m) = meta.as_object_mut() {
        m.insert(key::SERVER_INFO.into(), server_info());
    }
    meta
}

/// Who this daemon is, and the mcpd daemons it reaches through its servers: the `_meta`
/// of its `initialize` answer.
pub fn daemon_meta(behind: &[String]) -> Value {
    json!({ key::MCPD_INSTANCE: instance(), key::MCPD_BEHIND: behind })
}

/// The mcpd instance id in a handshake message's `_meta`: who a daemon's answer
/// (`initialize` result, `DiscoverResult`) or mcpd's own request (its params) is from.
pub fn instance_in(message: &Value) -> Option<String> {
    message
        .get("_meta")?
        .get(key::MCPD_INSTANCE)?
        .as_str()
        .map(str::to_owned)
}

/// The mcpd daemons another daemon's handshake answer says it reaches (at most
/// [`MAX_BEHIND`]).
pub fn behind_in(result: &Value) -> Vec<String> {
    let listed = result
        .get("_meta")
        .and_then(|m| m.get(key::MCPD_BEHIND))
        .and_then(Value::as_array);
    listed
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .take(MAX_BEHIND)
        .map(str::to_owned)
        .collect()
}

pub fn server_info() -> Value {
    json!({ "name": "mcpd", "version": env!("CARGO_PKG_VERSION") })
}

/// Makes an upstream result a modern one: `resultType` defaults to `complete` (an older
/// server leaves it out), and mcpd's server info goes in `_meta`.
pub fn modernize_result(result: &mut Value) {
    let Some(obj) = result.as_object_mut() else {
        return;
    };
    obj.entry("resultType").or_insert_with(|| json!("complete"));
    let meta = obj
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(m) = meta.as_object_mut() {
        // mcpd is the server the agent talks to, whoever answered behind it.
        m.insert(key::SERVER_INFO.into(), server_info());
    }
}

/// Makes an upstream result a legacy one: the modern-only `resultType` and reserved
/// `_meta` keys are removed (an agent that spoke `initialize` does not know them).
pub fn legacy_result(result: &mut Value) {
    let Some(obj) = result.as_object_mut() else {
        return;
    };
    if obj.get("resultType").and_then(Value::as_str) == Some("complete") {
        obj.remove("resultType");
    }
    let empty = match obj.get_mut("_meta").and_then(Value::as_object_mut) {
        Some(m) => {
            // The related-task key is 2025-11-25's own: a legacy agent's tasks/result has it.
            m.retain(|k, _| {
                !k.starts_with("io.modelcontextprotocol/")
                    || k == "io.modelcontextprotocol/related-task"
            });
            m.is_empty()
        }
        None => false,
    };
    if empty {
        obj.remove("_meta");
    }
}

/// A server's result as an agent of one era gets it, made from the result's text.
pub enum Presented {
    /// The server's text needs no change.
    AsIs,
    /// The result with the era's changes, as JSON text.
    Text(String),
}

/// What [`legacy_result`] or [`modernize_result`] would make of a result, worked out on
/// its top-level members: only the members that change are parsed and written again, and
/// everything else is copied as the server wrote it.
pub fn present_raw(members: &super::results::RawMembers, modern: bool) -> Presented {
    let mut out: Vec<(&str, std::borrow::Cow<str>)> = Vec::with_capacity(members.list.len() + 2);
    let mut changed = modern;
    if modern && members.get("resultType").is_none() {
        out.push(("resultType", "\"complete\"".into()));
    }
    if modern && members.get("_meta").is_none() {
        let meta = json!({ key::SERVER_INFO: server_info() });
        out.push(("_meta", meta.to_string().into()));
    }
    for (k, v) in &members.list {
        let v: &str = v;
        match k.as_ref() {
            "resultType" if !modern && v == "\"complete\"" => changed = true,
            "_meta" if modern => {
                let mut meta: Value = serde_json::from_str(v).unwrap_or(Value::Null);
                match meta.as_object_mut() {
                    Some(m) => {
                        m.insert(key::SERVER_INFO.into(), server_info());
                        out.push(("_meta", meta.to_string().into()));
                    }
                    None => out.push(("_meta", v.into())),
                }
            }
            // An escaped key could spell the reserved prefix: such a `_meta` is parsed too.
            "_meta" if v.contains("io.modelcontextprotocol/") || v.contains('\\') => {
                let mut meta: Value = serde_json::from_str(v).unwrap_or(Value::Null);
                match meta.as_object_mut() {
                    Some(m) => {
                        // The related-task key is 2025-11-25's own: a legacy agent's tasks/result has it.
                        m.retain(|k, _| {
                            !k.starts_with("io.modelcontextprotocol/")
                                || k == "io.modelcontextprotocol/related-task"
                        });
                        changed = true;
                        if !m.is_empty() {
                            out.push(("_meta", meta.to_string().into()));
                        }
                    }
                    None => out.push(("_meta", v.into())),
                }
            }
            _ => out.push((k, v.into())),
        }
    }
    if !changed {
        return Presented::AsIs;
    }
    let mut text = String::with_capacity(out.iter().map(|(k, v)| k.len() + v.len() + 4).sum());
    text.push('{');
    for (i, (k, v)) in out.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&Value::from(*k).to_string());
        text.push(':');
        text.push_str(v);
    }
    text.push('}');
    Presented::Text(text)
}

/// The `resultType` of a result; a missing one means `complete`.
pub fn result_type(result: &Value) -> &str {
    result
        .get("resultType")
        .and_then(Value::as_str)
        .unwrap_or("complete")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_presentation_matches_the_value_presentation() {
        let cases = [
            r#"{"content":[{"type":"text","text":"hi"}]}"#,
            r#"{"content":[],"resultType":"complete","isError":false}"#,
            r#"{"content":[],"resultType":"input_required"}"#,
            r#"{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{},"mine":1}}"#,
            r#"{"content":[],"_meta":{"io.modelcontextprotocol\/serverInfo":{}}}"#,
            r#"{"content":[],"_meta":{"mine":"a"}}"#,
            r#"{"content":[],"_meta":7}"#,
            r#"{"structuredContent":{"k":"v"}}"#,
        ];
        for raw in cases {
            let members = super::super::results::RawMembers::of(raw).expect(raw);
            for modern in [false, true] {
                let mut want: Value = serde_json::from_str(raw).unwrap();
                if modern {
                    modernize_result(&mut want);
                } else {
                    legacy_result(&mut want);
                }
                let got: Value = match present_raw(&members, modern) {
                    Presented::AsIs => serde_json::from_str(raw).unwrap(),
                    Presented::Text(t) => serde_json::from_str(&t).unwrap(),
                };
                assert_eq!(got, want, "{raw} (modern: {modern})");
            }
        }
    }

    #[test]
    fn requests_are_classified_by_their_meta() {
        let check = |params: Value, want: RequestEra| {
            assert_eq!(request_era(Some(&params)), want, "{params}");
        };
        check(json!({}), RequestEra::Legacy);
        check(json!({"_meta": {"progressToken": 1}}), RequestEra::Legacy);
        check(
            json!({"_meta": {key::PROTOCOL_VERSION: MODERN_VERSION, key::CLIENT_CAPABILITIES: {}}}),
            RequestEra::Modern,
        );
        check(
            json!({"_meta": {key::PROTOCOL_VERSION: MODERN_VERSION}}),
            RequestEra::MissingKey(key::CLIENT_CAPABILITIES),
        );
        check(
            json!({"_meta": {key::PROTOCOL_VERSION: "2030-01-01", key::CLIENT_CAPABILITIES: {}}}),
            RequestEra::UnsupportedVersion("2030-01-01".into()),
        );
        assert_eq!(request_era(None), RequestEra::Legacy);
    }

    #[test]
    fn envelopes_are_added_and_stripped_keeping_other_meta() {
        let mut p = Some(json!({"name": "t", "_meta": {"progressToken": 7}}));
        add_envelope(&mut p, &json!({"elicitation": {}}));
        let meta = &p.as_ref().unwrap()["_meta"];
        assert_eq!(meta["progressToken"], 7);
        assert_eq!(meta[key::PROTOCOL_VERSION], MODERN_VERSION);
        assert_eq!(meta[key::CLIENT_CAPABILITIES], json!({"elicitation": {}}));
        strip_envelope(&mut p);
        assert_eq!(p, Some(json!({"name": "t", "_meta": {"progressToken": 7}})));
        let mut q = None;
        add_envelope(&mut q, &json!({}));
        strip_envelope(&mut q);
        assert_eq!(q, Some(json!({})));
        assert_eq!(Era::of_version("2025-11-25"), Era::Legacy);
        assert_eq!(Era::of_version(MODERN_VERSION), Era::Modern);
        let mut r = json!({"content": []});
        modernize_result(&mut r);
        assert_eq!(result_type(&r), "complete");
        assert_eq!(r["_meta"][key::SERVER_INFO]["name"], "mcpd");
    }
}
