//! Prompts, resources and resource templates of every server, as agents see them, and the routing of names and URIs back to servers. No IO.
//!
//! Prompts get `PREFIX__prompt` names, like tools (the registry decides them). Resource URIs are opaque and may
//! collide between servers, so they are kept as they are when only one server lists
//! them, and qualified reversibly as `mcpd:SERVER:URI` when several do (all of them, so
//! the name does not depend on which server answered first). `mcpd:SERVER:URI` is always
//! accepted, for any resource. A URI no server lists (a resource read through a
//! template) is routed by the servers' URI templates; when templates of several servers
//! match, the agent is told to use the qualified form.

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

/// What kind of list an entry comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Prompts,
    Resources,
    Templates,
}

impl Kind {
    /// The list method, and the field of its result that holds the items.
    pub fn list(self) -> (&'static str, &'static str) {
        match self {
            Kind::Prompts => ("prompts/list", "prompts"),
            Kind::Resources => ("resources/list", "resources"),
            Kind::Templates => ("resources/templates/list", "resourceTemplates"),
        }
    }

    /// The field of an item that names it.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Prompts => "name",
            Kind::Resources => "uri",
            Kind::Templates => "uriTemplate",
        }
    }
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
        raw: &BTreeMap<(Arc<str>, Kind), Vec<Value>>,
        prompt_name: &dyn Fn(&Arc<str>, &str) -> String,
        holds: &dyn Fn(&Arc<str>, &str) -> bool,
    ) -> Surface {
        let of = |kind: Kind| {
            raw.iter()
                .filter(move |((_, k), _)| *k == kind)
                .map(|((s, _), items)| (s, items))
        };
        let mut prompts = Vec::new();
        for (server, items) in of(Kind::Prompts) {
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
        let resources = present_uris(of(Kind::Resources), Kind::Resources);
        let templates = present_uris(of(Kind::Templates), Kind::Templates);
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
        self.prompt_index.get(presented).map(|i| &*self.prompts[*i])
    }

    /// The server and its own URI for a URI an agent used.
    pub fn route_uri(&self, uri: &str, servers: &[&str]) -> Result<(Arc<str>, String), String> {
        if let Some((server, original)) = parse_qualified(uri)
            && servers.contains(&server)
        {
            return Ok((Arc::from(server), original.to_owned()));
        }
        if let Some(i) = self.resource_index.get(uri) {
            let e = &self.resources[*i];
            return Ok((e.server.clone(), e.original.clone()));
        }
        let matching: Vec<&Arc<Entry>> = self
            .templates
            .iter()
            .filter(|t| template_matches(&t.original, uri))
            .collect();
        let mut owners: Vec<&Arc<str>> = matching.iter().map(|t| &t.server).collect();
        owners.dedup();
        match owners.as_slice() {
            [one] => Ok(((*one).clone(), uri.to_owned())),
            [] => Err(format!(
                "no server lists the resource {uri:?} or a template that matches it; call resources/list or resources/templates/list"
            )),
            many => Err(format!(
                "templates of several servers ({}) match {uri:?}; use the qualified form {URI_PREFIX}SERVER:{uri}",
                many.iter().map(|s| &***s).collect::<Vec<_>>().join(", ")
            )),
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
    kind: Kind,
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

/// Whether `uri` is an expansion of an RFC 6570 template. Literal parts must match
/// exactly; a simple `{var}` matches one or more characters other than `/`, `?` and `#`;
/// an operator expression (`{+var}`, `{/var}`, `{?q}` …) matches anything.
pub fn template_matches(template: &str, uri: &str) -> bool {
    let mut parts: Vec<(bool, &str)> = Vec::new(); // (is_expression, text)
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        parts.push((false, &rest[..start]));
        let Some(end) = rest[start..].find('}') else {
            return false;
        };
        parts.push((true, &rest[start + 1..start + end]));
        rest = &rest[start + end + 1..];
    }
    parts.push((false, rest));
    matches_from(&parts, uri)
}

fn matches_from(parts: &[(bool, &str)], s: &str) -> bool {
    let Some(((is_expr, text), rest)) = parts.split_first() else {
        return s.is_empty();
    };
    if !is_expr {
        return s
            .strip_prefix(text)
            .is_some_and(|after| matches_from(rest, after));
    }
    let simple = !text.starts_with(['+', '#', '/', '.', ';', '?', '&']);
    // Try every split point; templates are short, so this is cheap.
    (0..=s.len()).filter(|i| s.is_char_boundary(*i)).any(|i| {
        let (value, after) = s.split_at(i);
        let ok = if simple {
            !value.is_empty() && !value.contains(['/', '?', '#'])
        } else {
            true
        };
        ok && matches_from(rest, after)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(lists: &[(&str, Kind, Value)]) -> BTreeMap<(Arc<str>, Kind), Vec<Value>> {
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

    fn build(raw: &BTreeMap<(Arc<str>, Kind), Vec<Value>>) -> Surface {
        let name = |s: &Arc<str>, n: &str| crate::protocol::naming::qualify(s, n, 64);
        Surface::build(raw, &name, &|_, _| true)
    }

    #[test]
    fn colliding_uris_are_qualified_for_every_server_and_route_back() {
        let r = raw(&[
            (
                "a",
                Kind::Resources,
                json!([{"uri": "file:///x", "name": "x"}, {"uri": "a://only", "name": "o"}]),
            ),
            (
                "b",
                Kind::Resources,
                json!([{"uri": "file:///x", "name": "x"}]),
            ),
            (
                "b",
                Kind::Templates,
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
        ] {
            assert_eq!(template_matches(t, uri), want, "{t} vs {uri}");
        }
    }

    #[test]
    fn prompts_get_qualified_names() {
        let r = raw(&[(
            "a",
            Kind::Prompts,
            json!([{"name": "greet"}, {"name": "has space"}]),
        )]);
        let s = build(&r);
        assert!(s.prompt("a__greet").is_some());
        assert_eq!(s.prompts.len(), 2);
        assert_eq!(s.prompt("a__greet").unwrap().original, "greet");
    }
}
