//! Prompts, resources and resource templates of every server, as agents see them.
//!
//! Also the routing of names and URIs back to servers. No IO.
//!
//! Prompts get `PREFIX__prompt` names, like tools (the registry decides them). Resource URIs are opaque and may
//! collide between servers, so they are kept as they are when only one server lists
//! them, and qualified reversibly as `mcpd:SERVER:URI` when several do (all of them, so
//! the name does not depend on which server answered first). `mcpd:SERVER:URI` is always
//! accepted, for any resource. A URI no server lists (a resource read through a
//! template) is routed by the servers' URI templates; when templates of several servers
//! match, the agent is told to use the qualified form.

use mcpd_wire::protocol::ListKind;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The prefix of a qualified URI.
pub const URI_PREFIX: &str = "mcpd:";

/// One prompt, resource or template as agents see it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The name (prompts) or URI (resources, templates) agents use.
    pub presented: String,
    pub server: Arc<str>,
    /// The server's own name or URI.
    pub original: String,
    /// The server's definition with the name or URI replaced by the presented one.
    pub definition: Value,
}

/// Every server's prompts, resources and templates, built from the raw lists.
#[derive(Debug, Default)]
pub struct Surface {
    pub prompts: Vec<Arc<Entry>>,
    pub resources: Vec<Arc<Entry>>,
    pub templates: Vec<Arc<Entry>>,
    prompt_index: HashMap<String, usize>,
    resource_index: HashMap<String, usize>,
}

impl Surface {
    /// Builds the presented lists from each server's raw items. `prompt_name` presents a
    /// server's prompt name; `holds` says whether a server holds a presented prompt name
    /// (another server may hold a name both present).
    pub fn build(
        raw: &BTreeMap<(Arc<str>, ListKind), Vec<Value>>,
        prompt_name: &dyn Fn(&Arc<str>, &str) -> String,
        holds: &dyn Fn(&Arc<str>, &str) -> bool,
    ) -> Surface {
        let of = |kind: ListKind| {
            raw.iter()
                .filter(move |((_, k), _)| *k == kind)
                .map(|((s, _), items)| (s, items))
        };
        let mut prompts = Vec::new();
        for (server, items) in of(ListKind::Prompts) {
            for item in items {
                let Some(name) = item.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let presented = prompt_name(server, name);
                if !holds(server, &presented) {
                    continue;
                }
                prompts.push(entry(server, name, presented, item, "name"));
            }
        }
        let resources = present_uris(of(ListKind::Resources), ListKind::Resources);
        let templates = present_uris(of(ListKind::Templates), ListKind::Templates);
        let mut s = Surface {
            prompts: sorted_unique(prompts),
            resources: sorted_unique(resources),
            templates: sorted_unique(templates),
            ..Surface::default()
        };
        s.prompt_index = index(&s.prompts);
        s.resource_index = index(&s.resources);
        s
    }

    pub fn prompt(&self, presented: &str) -> Option<&Entry> {
        let i = self.prompt_index.get(presented)?;
        self.prompts.get(*i).map(|e| &**e)
    }

    /// The server and its own URI for a URI an agent used. Qualified and listed URIs
    /// are found by lookup; any other is matched against every template.
    pub fn route_uri(&self, uri: &str, servers: &[&str]) -> Result<(Arc<str>, String), RouteError> {
        if uri.len() > MAX_URI_BYTES {
            return Err(RouteError::TooLong {
                len: uri.len(),
                max: MAX_URI_BYTES,
            });
        }
        if let Some((server, original)) = parse_qualified(uri)
            && servers.contains(&server)
        {
            return Ok((Arc::from(server), original.to_owned()));
        }
        if let Some(i) = self.resource_index.get(uri)
            && let Some(e) = self.resources.get(*i)
        {
            return Ok((e.server.clone(), e.original.clone()));
        }
        let mut owners: Vec<&Arc<str>> = self
            .templates
            .iter()
            .filter(|t| template_matches(&t.original, uri))
            .map(|t| &t.server)
            .collect();
        owners.sort();
        owners.dedup();
        match owners.as_slice() {
            [one] => Ok(((*one).clone(), uri.to_owned())),
            [] => Err(RouteError::NotFound(uri.to_owned())),
            many => Err(RouteError::Ambiguous {
                servers: many.iter().map(|s| &***s).collect::<Vec<_>>().join(", "),
                uri: uri.to_owned(),
            }),
        }
    }

    /// The URI an agent sees for a server's own URI (in `resources/read` contents and
    /// `resources/updated` notifications).
    pub fn present_uri(&self, server: &str, original: &str) -> String {
        let qualified = qualify_uri(server, original);
        if self.resource_index.contains_key(&qualified) {
            qualified
        } else {
            original.to_owned()
        }
    }
}

fn entry(
    server: &Arc<str>,
    original: &str,
    presented: String,
    item: &Value,
    key: &str,
) -> Arc<Entry> {
    let mut definition = item.clone();
    if let Some(obj) = definition.as_object_mut() {
        obj.insert(key.into(), Value::String(presented.clone()));
    }
    Arc::new(Entry {
        presented,
        server: server.clone(),
        original: original.to_owned(),
        definition,
    })
}

/// Keeps URIs that only one server lists; qualifies every copy of a shared one.
fn present_uris<'a>(
    lists: impl Iterator<Item = (&'a Arc<str>, &'a Vec<Value>)> + Clone,
    kind: ListKind,
) -> Vec<Arc<Entry>> {
    let key = kind.key();
    let mut owners: HashMap<&str, usize> = HashMap::new();
    for (_, items) in lists.clone() {
        let mut seen = std::collections::HashSet::new();
        for item in items {
            if let Some(uri) = item.get(key).and_then(Value::as_str)
                && seen.insert(uri)
            {
                *owners.entry(uri).or_default() += 1;
            }
        }
    }
    let mut out = Vec::new();
    for (server, items) in lists {
        for item in items {
            let Some(uri) = item.get(key).and_then(Value::as_str) else {
                continue;
            };
            let presented = if owners.get(uri).copied().unwrap_or(0) > 1 {
                qualify_uri(server, uri)
            } else {
                uri.to_owned()
            };
            out.push(entry(server, uri, presented, item, key));
        }
    }
    out
}

pub fn qualify_uri(server: &str, uri: &str) -> String {
    format!("{URI_PREFIX}{server}:{uri}")
}

/// `mcpd:SERVER:URI` → (SERVER, URI). Server names contain no ':'.
pub fn parse_qualified(uri: &str) -> Option<(&str, &str)> {
    uri.strip_prefix(URI_PREFIX)?.split_once(':')
}

fn sorted_unique(mut v: Vec<Arc<Entry>>) -> Vec<Arc<Entry>> {
    v.sort_by(|a, b| a.presented.cmp(&b.presented));
    v.dedup_by(|a, b| a.presented == b.presented);
    v
}

fn index(v: &[Arc<Entry>]) -> HashMap<String, usize> {
    v.iter()
        .enumerate()
        .map(|(i, e)| (e.presented.clone(), i))
        .collect()
}

/// The longest URI mcpd routes. Longer ones are refused before any matching, so the
/// work a `resources/read` can cause stays small whatever an agent sends.
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// Templates longer than this never match: a server's template is short in practice,
/// and the matcher's cost grows with the template's length times the URI's.
pub const MAX_TEMPLATE_BYTES: usize = 1024;

/// Why a URI could not be routed to a server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("the URI is {len} bytes long; mcpd routes URIs of at most {max} bytes")]
    TooLong { len: usize, max: usize },
    #[error(
        "no server lists the resource {0:?} or a template that matches it; call resources/list or resources/templates/list"
    )]
    NotFound(String),
    #[error(
        "templates of several servers ({servers}) match {uri:?}; use the qualified form {URI_PREFIX}SERVER:{uri}"
    )]
    Ambiguous { servers: String, uri: String },
    #[error("no server in this profile offers {0:?}")]
    NotInProfile(String),
}

/// One step of a compiled template: a literal character, one character of a simple
/// variable, or any number of characters of a variable.
#[derive(Debug, Clone, Copy)]
enum Step {
    Literal(char),
    /// One character; `true` when it may not be `/`, `?` or `#` (a simple variable).
    One(bool),
    /// Zero or more characters, restricted as for `One`.
    Many(bool),
}

impl Step {
    fn takes(self, c: char) -> bool {
        let allowed = |simple: bool| !simple || !matches!(c, '/' | '?' | '#');
        match self {
            Step::Literal(l) => l == c,
            Step::One(simple) | Step::Many(simple) => allowed(simple),
        }
    }
}

/// A template as steps: a simple `{var}` is one or more characters other than `/`, `?`
/// and `#` (`One` then `Many`); an operator expression (`{+var}`, `{/var}`, `{?q}` …) is
/// any string. None when an expression is not closed.
fn compile(template: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::with_capacity(template.len());
    let mut rest = template;
    while let Some((literal, after)) = rest.split_once('{') {
        steps.extend(literal.chars().map(Step::Literal));
        let (expression, after) = after.split_once('}')?;
        let simple = !expression.starts_with(['+', '#', '/', '.', ';', '?', '&']);
        if simple {
            steps.push(Step::One(true));
        }
        steps.push(Step::Many(simple));
        rest = after;
    }
    steps.extend(rest.chars().map(Step::Literal));
    Some(steps)
}

/// Whether `uri` is an expansion of an RFC 6570 template. Literal parts must match
/// exactly; a simple `{var}` matches one or more characters other than `/`, `?` and `#`;
/// an operator expression (`{+var}`, `{/var}`, `{?q}` …) matches anything.
///
/// The template runs as a set of positions advanced once per character of the URI (a
/// Thompson simulation): the cost is the URI's length times the template's, with no
/// backtracking, and both lengths are capped.
pub fn template_matches(template: &str, uri: &str) -> bool {
    if template.len() > MAX_TEMPLATE_BYTES || uri.len() > MAX_URI_BYTES {
        return false;
    }
    let Some(steps) = compile(template) else {
        return false;
    };
    // `at[i]`: the URI read so far can end just before step i; `at[steps.len()]`: the
    // whole template has matched it.
    let mut at = vec![false; steps.len() + 1];
    let mut next = vec![false; steps.len() + 1];
    if let Some(first) = at.first_mut() {
        *first = true;
    }
    skip_empty(&steps, &mut at);
    for c in uri.chars() {
        next.fill(false);
        let mut alive = false;
        for (i, (step, here)) in steps.iter().zip(&at).enumerate() {
            if !*here || !step.takes(c) {
                continue;
            }
            // `Many` stays where it is; the other steps move on.
            let to = if matches!(step, Step::Many(_)) {
                i
            } else {
                i + 1
            };
            if let Some(slot) = next.get_mut(to) {
                *slot = true;
                alive = true;
            }
        }
        if !alive {
            return false;
        }
        skip_empty(&steps, &mut next);
        std::mem::swap(&mut at, &mut next);
    }
    at.last().copied().unwrap_or(false)
}

/// A position before a `Many` step may also stand after it (the variable may end
/// there). One forward pass is enough: these moves only go forwards, one step each.
fn skip_empty(steps: &[Step], at: &mut [bool]) {
    for (i, step) in steps.iter().enumerate() {
        if matches!(step, Step::Many(_))
            && at.get(i).copied().unwrap_or(false)
            && let Some(slot) = at.get_mut(i + 1)
        {
            *slot = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(lists: &[(&str, ListKind, Value)]) -> BTreeMap<(Arc<str>, ListKind), Vec<Value>> {
        lists
            .iter()
            .map(|(s, k, v)| {
                (
                    (Arc::from(*s), *k),
                    v.as_array().cloned().unwrap_or_default(),
                )
            })
            .collect()
    }

    fn build(raw: &BTreeMap<(Arc<str>, ListKind), Vec<Value>>) -> Surface {
        let name = |s: &Arc<str>, n: &str| mcpd_wire::protocol::naming::qualify(s, n, 64);
        Surface::build(raw, &name, &|_, _| true)
    }

    #[test]
    fn colliding_uris_are_qualified_for_every_server_and_route_back() {
        let r = raw(&[
            (
                "a",
                ListKind::Resources,
                json!([{"uri": "file:///x", "name": "x"}, {"uri": "a://only", "name": "o"}]),
            ),
            (
                "b",
                ListKind::Resources,
                json!([{"uri": "file:///x", "name": "x"}]),
            ),
            (
                "b",
                ListKind::Templates,
                json!([{"uriTemplate": "b://items/{id}", "name": "item"}]),
            ),
        ]);
        let s = build(&r);
        let uris: Vec<&str> = s.resources.iter().map(|e| e.presented.as_str()).collect();
        assert_eq!(uris, ["a://only", "mcpd:a:file:///x", "mcpd:b:file:///x"]);
        let servers = ["a", "b"];
        assert_eq!(
            s.route_uri("mcpd:b:file:///x", &servers).unwrap(),
            (Arc::from("b"), "file:///x".into())
        );
        assert_eq!(
            s.route_uri("a://only", &servers).unwrap(),
            (Arc::from("a"), "a://only".into())
        );
        assert_eq!(
            s.route_uri("mcpd:a:a://only", &servers).unwrap().0,
            Arc::from("a")
        );
        assert_eq!(
            s.route_uri("b://items/7", &servers).unwrap(),
            (Arc::from("b"), "b://items/7".into())
        );
        assert!(
            s.route_uri("file:///x", &servers).is_err(),
            "ambiguous without qualification"
        );
        assert!(s.route_uri("c://none", &servers).is_err());
        assert_eq!(s.present_uri("a", "file:///x"), "mcpd:a:file:///x");
        assert_eq!(s.present_uri("a", "a://only"), "a://only");
    }

    #[test]
    fn templates_match_their_expansions_only() {
        for (t, uri, want) in [
            ("b://items/{id}", "b://items/7", true),
            ("b://items/{id}", "b://items/7/8", false),
            ("b://items/{id}", "b://items/", false),
            ("file://{+path}", "file:///etc/hosts", true),
            ("x://{a}/{b}", "x://1/2", true),
            ("x://{a}/{b}", "x://1", false),
            ("x://fixed", "x://fixed", true),
            ("x://fixed", "x://fixe", false),
            ("x://{+path}/{id}", "x://a/b/c", true),
            ("x://{+path}/meta", "x://a/b/meta", true),
            ("x://{+path}/meta", "x://a/b/met", false),
            ("x://{a}{b}", "x://ab", true),
            ("x://{a}{b}", "x://a", false),
            ("x://{?q}", "x://", true),
            ("x://{a", "x://a", false),
            ("x://{a}/é", "x://ü/é", true),
            ("{a}", "", false),
        ] {
            assert_eq!(template_matches(t, uri), want, "{t} vs {uri}");
        }
    }

    #[test]
    fn long_uris_are_refused_before_matching_and_long_ones_below_the_cap_match() {
        let r = raw(&[(
            "d",
            ListKind::Templates,
            json!([{"uriTemplate": "demo://resource/dynamic/text/{resourceId}", "name": "t"}]),
        )]);
        let s = build(&r);
        let near = format!("demo://resource/dynamic/text/{}", "a".repeat(8000));
        assert_eq!(s.route_uri(&near, &["d"]).unwrap().0, Arc::from("d"));
        let huge = format!("demo://resource/dynamic/text/{}", "a".repeat(1_000_000));
        assert!(matches!(
            s.route_uri(&huge, &["d"]),
            Err(RouteError::TooLong {
                max: MAX_URI_BYTES,
                ..
            })
        ));
        // An input the fuzzer found: 59 bytes that took the backtracking matcher seconds.
        let input: &[u8] = b"{,rw{}{{g}{}{,r}{}{{{g}{}{}t\n:;t{}}\n:;t\x17\x17\x17\x17\x17\x17\x17\x17\x17\x17\x17\x17\x17\x15\x17\x17{}}}";
        let text = String::from_utf8_lossy(input);
        let (t, uri) = text.split_once('\n').unwrap();
        assert!(!template_matches(t, uri));
        // Many variables in a row once made the matcher try every split of the URI.
        let t = "x://{a}{b}{c}{d}{e}{f}{g}{h}/end";
        let uri = format!("x://{}", "a".repeat(8000));
        assert!(!template_matches(t, &uri));
    }

    #[test]
    fn prompts_get_qualified_names() {
        let r = raw(&[(
            "a",
            ListKind::Prompts,
            json!([{"name": "greet"}, {"name": "has space"}]),
        )]);
        let s = build(&r);
        assert!(s.prompt("a__greet").is_some());
        assert_eq!(s.prompts.len(), 2);
        assert_eq!(s.prompt("a__greet").unwrap().original, "greet");
    }
}
