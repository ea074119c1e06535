//! A server's naming settings validated into a `Naming`.
//!
//! The settings are `prefix`, `[servers.NAME.tools] rename` and `[servers.NAME.prompts]
//! rename`; the name budget is checked at load.

use super::{ConfigError, Validator};
use mcpd_wire::protocol::naming::{self, Naming};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};

/// `[servers.NAME.prompts]`: only renames, since prompts have no filter.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPrompts {
    #[serde(default)]
    pub(super) rename: BTreeMap<String, String>,
}

impl Validator<'_> {
    /// The naming of server `name`: its prefix (the server's name unless set) and its
    /// renames, each of which must fit `limit` with the prefix and use the allowed
    /// characters, so renamed names are never mapped.
    pub(super) fn naming(
        &self,
        name: &str,
        prefix: Option<&str>,
        tools: &BTreeMap<String, String>,
        prompts: &BTreeMap<String, String>,
        limit: usize,
    ) -> Result<Naming, ConfigError> {
        let key = format!("servers.{name}");
        let prefix = prefix.unwrap_or(name);
        if !naming::valid_prefix(prefix) {
            return Err(self.err(
                format!("{key}.prefix"),
                format!(
                    "{prefix:?} is not a prefix: use up to {} characters of A-Z, a-z, 0-9, '_' and '-', or \"\" for none",
                    naming::MAX_PREFIX
                ),
            ));
        }
        self.renames(&format!("{key}.tools.rename"), prefix, tools, limit)?;
        self.renames(&format!("{key}.prompts.rename"), prefix, prompts, limit)?;
        Ok(Naming {
            prefix: prefix.to_owned(),
            tools: tools.clone(),
            prompts: prompts.clone(),
        })
    }

    fn renames(
        &self,
        key: &str,
        prefix: &str,
        table: &BTreeMap<String, String>,
        limit: usize,
    ) -> Result<(), ConfigError> {
        let mut targets: HashMap<&str, &str> = HashMap::new();
        for (from, to) in table {
            let at = format!("{key}.{from}");
            if from.is_empty() {
                return Err(self.err(key, "an empty name renames nothing; remove it"));
            }
            if to.is_empty() || !to.chars().all(naming::allowed) {
                return Err(self.err(
                    at,
                    format!("{to:?} is not a name: use 1 or more characters of A-Z, a-z, 0-9, '_' and '-'"),
                ));
            }
            let len = naming::joined_len(prefix, to);
            if len > limit {
                return Err(self.err(
                    at,
                    format!(
                        "{:?} is {len} characters, longer than daemon.tool_name_limit ({limit}); choose a shorter name",
                        naming::join(prefix, to)
                    ),
                ));
            }
            if let Some(other) = targets.insert(to, from) {
                return Err(self.err(
                    at,
                    format!("{other:?} is renamed to {to:?} too; each name must be unique"),
                ));
            }
        }
        Ok(())
    }
}

/// Server names: lowercase, digits and dashes, so `NAME__tool` splits unambiguously.
pub fn valid_server_name(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() <= 32
        && b.first()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    fn check(text: &str, expected: Result<(&str, &str), &str>) {
        let got = Config::parse(text, Path::new("/etc/mcpd.toml"));
        match (got, expected) {
            (Ok(c), Ok((prefix, renamed))) => {
                let n = &c.servers["srv"].naming;
                assert_eq!(n.prefix, prefix);
                assert_eq!(n.tool("search_repositories", 64), renamed);
            }
            (Err(e), Err(want)) => {
                let msg = e.to_string();
                assert!(msg.contains(want), "error {msg:?} should contain {want:?}");
            }
            (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn prefixes_and_renames_are_validated_at_load() {
        let base = "[servers.srv]\ncommand = \"x\"\n";
        check(base, Ok(("srv", "srv__search_repositories")));
        check(
            &format!("{base}prefix = \"gh\""),
            Ok(("gh", "gh__search_repositories")),
        );
        check(
            &format!(
                "{base}prefix = \"\"\n[servers.srv.tools]\nrename = {{ search_repositories = \"search\" }}"
            ),
            Ok(("", "search")),
        );
        check(
            &format!(
                "{base}prefix = \"gh\"\n[servers.srv.tools.rename]\nsearch_repositories = \"search\""
            ),
            Ok(("gh", "gh__search")),
        );
        check(
            &format!("{base}prefix = \"g.h\""),
            Err("`servers.srv.prefix`: \"g.h\" is not a prefix"),
        );
        check(
            &format!("{base}prefix = \"{}\"", "p".repeat(33)),
            Err("`servers.srv.prefix`"),
        );
        check(
            &format!("{base}[servers.srv.tools]\nrename = {{ a = \"b c\" }}"),
            Err("`servers.srv.tools.rename.a`: \"b c\" is not a name"),
        );
        check(
            &format!("{base}[servers.srv.prompts]\nrename = {{ a = \"\" }}"),
            Err("`servers.srv.prompts.rename.a`"),
        );
        check(
            &format!(
                "{base}[servers.srv.tools]\nrename = {{ a = \"{}\" }}",
                "n".repeat(60)
            ),
            Err("`servers.srv.tools.rename.a`: \"srv__nnn"),
        );
        check(
            &format!(
                "{base}prefix = \"\"\n[servers.srv.tools]\nrename = {{ a = \"{}\" }}",
                "n".repeat(64)
            ),
            Ok(("", "search_repositories")),
        );
        check(
            &format!("{base}[servers.srv.tools]\nrename = {{ a = \"x\", b = \"x\" }}"),
            Err("`servers.srv.tools.rename.b`: \"a\" is renamed to \"x\" too"),
        );
        check(
            &format!("{base}[servers.srv.prompts]\nallow = [\"x\"]"),
            Err("unknown field `allow`"),
        );
    }
}
