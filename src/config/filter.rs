//! Which of a server's tools agents see, and named profiles (`[profiles.NAME]`).
//!
//! What agents see is set by `[servers.NAME.tools]` allow/deny globs and description
//! overrides.

use super::{ConfigError, Validator};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawToolFilter {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    descriptions: BTreeMap<String, String>,
    /// The server's tool name → the name after the prefix; validated with the naming.
    #[serde(default)]
    pub(super) rename: BTreeMap<String, String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProfile {
    servers: Option<Vec<String>>,
    #[serde(default)]
    tools: super::discovery::RawProfileTools,
    pinned: Option<Vec<String>>,
    discover_above: Option<usize>,
    project: Option<std::path::PathBuf>,
}

/// A server's tool filter, applied before agents see its catalog.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ToolFilter {
    /// Globs over the server's own tool names (before any rename); empty allows all.
    pub allow: Vec<String>,
    /// Globs over the server's own tool names; a match hides the tool.
    pub deny: Vec<String>,
    /// Descriptions to show instead of the server's, by the server's tool name.
    pub descriptions: BTreeMap<String, String>,
}

impl ToolFilter {
    pub fn allows(&self, tool: &str) -> bool {
        (self.allow.is_empty() || self.allow.iter().any(|g| glob(g, tool)))
            && !self.deny.iter().any(|g| glob(g, tool))
    }

    /// Drops hidden tools and applies description overrides to a raw tool list.
    pub fn apply(&self, tools: &[Value]) -> Vec<Value> {
        tools
            .iter()
            .filter(|t| {
                t.get("name")
                    .and_then(Value::as_str)
                    .is_none_or(|n| self.allows(n))
            })
            .map(|t| {
                let mut t = t.clone();
                let name = t.get("name").and_then(Value::as_str).map(str::to_owned);
                if let Some(d) = name.and_then(|n| self.descriptions.get(&n))
                    && let Some(obj) = t.as_object_mut()
                {
                    obj.insert("description".into(), Value::String(d.clone()));
                }
                t
            })
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty() && self.descriptions.is_empty()
    }
}

/// A named subset of servers and tools that an agent can choose.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: String,
    /// The servers it includes; None includes every server.
    pub servers: Option<Vec<String>>,
    /// Globs over qualified tool names (`SERVER__tool`); empty includes every tool of
    /// the included servers.
    pub tools: Vec<String>,
    /// How its agents find their tools: the daemon's settings unless it sets its own.
    pub discovery: super::Discovery,
    /// The project its agents work in, whatever they say (`project`).
    pub project: Option<std::path::PathBuf>,
}

impl Profile {
    pub fn includes_server(&self, server: &str) -> bool {
        self.servers
            .as_ref()
            .is_none_or(|s| s.iter().any(|n| n == server))
    }

    pub fn includes_tool(&self, server: &str, qualified: &str) -> bool {
        self.includes_server(server)
            && (self.tools.is_empty() || self.tools.iter().any(|g| glob(g, qualified)))
    }
}

/// Matches `*` (any run of characters) and `?` (one character). Written out because
/// that is all these lists need; a glob crate would bring a regex engine with it.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matching with one backtrack point for the last `*`: linear in practice.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while let Some(&c) = t.get(ti) {
        let here = p.get(pi).copied();
        if here == Some('?') || here == Some(c) {
            pi += 1;
            ti += 1;
        } else if here == Some('*') {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p.iter().skip(pi).all(|c| *c == '*')
}

impl Validator<'_> {
    pub(super) fn tool_filter(
        &self,
        key: &str,
        raw: Option<RawToolFilter>,
    ) -> Result<ToolFilter, ConfigError> {
        let Some(raw) = raw else {
            return Ok(ToolFilter::default());
        };
        for (list, globs) in [("allow", &raw.allow), ("deny", &raw.deny)] {
            if globs.iter().any(|g| g.is_empty()) {
                return Err(self.err(
                    format!("{key}.tools.{list}"),
                    "an empty pattern matches nothing; remove it",
                ));
            }
        }
        Ok(ToolFilter {
            allow: raw.allow,
            deny: raw.deny,
            descriptions: raw.descriptions,
        })
    }

    pub(super) fn profiles(
        &self,
        raw: BTreeMap<String, RawProfile>,
        servers: &BTreeMap<String, super::ServerConfig>,
        daemon: &super::Discovery,
    ) -> Result<BTreeMap<String, Profile>, ConfigError> {
        let mut out = BTreeMap::new();
        for (name, p) in raw {
            let key = format!("profiles.{name}");
            if !super::valid_server_name(&name) {
                return Err(self.err(key, "a profile name is 1-32 characters of a-z, 0-9 and '-'"));
            }
            if let Some(list) = &p.servers
                && let Some(unknown) = list.iter().find(|s| !servers.contains_key(*s))
            {
                return Err(self.err(
                    format!("{key}.servers"),
                    format!("no server named '{unknown}' is configured"),
                ));
            }
            if let Some(dir) = &p.project
                && !dir.is_absolute()
            {
                return Err(self.err(
                    format!("{key}.project"),
                    format!("{} is not an absolute path", dir.display()),
                ));
            }
            let (discovery, tools) =
                self.profile_discovery(&key, p.tools, p.pinned, p.discover_above, daemon)?;
            out.insert(
                name.clone(),
                Profile {
                    name,
                    servers: p.servers,
                    tools,
                    discovery,
                    project: p.project,
                },
            );
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_stars_and_question_marks() {
        for (p, t, want) in [
            ("read_*", "read_file", true),
            ("read_*", "write_file", false),
            ("*", "", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*_file", "read_file", true),
            ("fs__*", "fs__read", true),
            ("*a*b*", "xaxxbx", true),
            ("*a*b", "xaxxbx", false),
            ("exact", "exact", true),
        ] {
            assert_eq!(glob(p, t), want, "{p} vs {t}");
        }
    }

    #[test]
    fn filters_hide_and_redescribe_tools() {
        let f = ToolFilter {
            allow: vec!["read_*".into(), "list".into()],
            deny: vec!["read_secret*".into()],
            descriptions: [("list".to_owned(), "Lists things.".to_owned())].into(),
        };
        let tools = serde_json::json!([
            {"name": "read_file"}, {"name": "read_secrets"}, {"name": "list", "description": "x"}, {"name": "delete"}
        ]);
        let kept = f.apply(tools.as_array().unwrap());
        let names: Vec<&str> = kept.iter().filter_map(|t| t["name"].as_str()).collect();
        assert_eq!(names, ["read_file", "list"]);
        assert_eq!(kept[1]["description"], "Lists things.");
    }
}
