//! `${secret:NAME}` references in a server's settings.
//!
//! Where they may stand (a local server's `env`, a remote server's `headers` and
//! `bearer_token`), the names each server needs, `[daemon] secrets`, and putting the
//! values in when the server starts.
//!
//! Validation finds every reference (a malformed one is a config error naming the key)
//! and refuses them where a value would be seen by others: a command line is readable by
//! every user of the machine (`ps`), so `command`, `args` and `cwd` cannot hold one.
//! Nothing here looks a secret up: the supervisor does that at each start
//! (`crate::secrets::Secrets::lookup_all`) and hands the values to
//! [`ServerConfig::with_secrets`], which makes the launch the process or the HTTP
//! transport uses. The config itself never holds a value.

use super::{ConfigError, Launch, ServerConfig, StdioLaunch, Validator};
use crate::secrets::{Preferred, SecretValue, references, substitute};
use std::collections::HashMap;

impl Validator<'_> {
    /// `[daemon] secrets`: where `mcpd ctl secret set` stores.
    pub(super) fn secrets_store(&self, raw: Option<&str>) -> Result<Preferred, ConfigError> {
        match raw {
            None | Some("auto") => Ok(Preferred::Auto),
            Some("keyring") => Ok(Preferred::Keyring),
            Some("file") => Ok(Preferred::File),
            Some(other) => Err(self.err(
                "daemon.secrets",
                format!(
                    "{other:?} is not a secret store; use \"auto\" (the keyring when a Secret Service answers, else the file store), \"keyring\" or \"file\""
                ),
            )),
        }
    }

    /// The names of the secrets `value` (the setting `key`) refers to, checked.
    pub(super) fn secret_refs(&self, key: &str, value: &str) -> Result<Vec<String>, ConfigError> {
        references(value).map_err(|e| self.err(key, e))
    }

    /// Every secret a server's launch refers to, each once, in the order of its settings;
    /// an error for a reference where it may not stand.
    pub(super) fn launch_secrets(
        &self,
        key: &str,
        launch: &Launch,
    ) -> Result<Vec<String>, ConfigError> {
        let mut names: Vec<String> = Vec::new();
        let mut add = |found: Vec<String>| {
            for n in found {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        };
        match launch {
            Launch::Stdio(s) => {
                let visible = std::iter::once(("command", s.command.as_str()))
                    .chain(s.args.iter().map(|a| ("args", a.as_str())))
                    .chain(s.cwd.iter().filter_map(|c| c.to_str()).map(|c| ("cwd", c)));
                for (k, v) in visible {
                    if !self.secret_refs(&format!("{key}.{k}"), v)?.is_empty() {
                        return Err(self.err(
                            format!("{key}.{k}"),
                            "a ${secret:…} cannot stand in a command line, which every user of the machine can read (ps); pass it in `env` and let the server read it from there",
                        ));
                    }
                }
                for (var, v) in &s.env {
                    add(self.secret_refs(&format!("{key}.env.{var}"), v)?);
                }
            }
            Launch::Http(h) => {
                for (name, v) in &h.headers {
                    add(self.secret_refs(&format!("{key}.headers.{name}"), v.expose())?);
                }
                if let Some(b) = &h.bearer {
                    add(self.secret_refs(&format!("{key}.bearer_token"), b.expose())?);
                }
                // Looked up at each start too, so a missing one keeps the server down
                // with the same message; the login itself looks it up when it needs it.
                if let Some(o) = &h.oauth {
                    let key_text = match &o.private_key {
                        Some(crate::config::KeySource::Secret(t)) => Some(t),
                        _ => None,
                    };
                    let idp = o.identity_provider.as_deref();
                    let id_token = match idp.and_then(|i| i.id_token.as_ref()) {
                        Some(crate::config::KeySource::Secret(t)) => Some(t),
                        _ => None,
                    };
                    let texts = [o.client_secret.as_ref(), key_text, id_token]
                        .into_iter()
                        .chain([idp.and_then(|i| i.client_secret.as_ref())])
                        .flatten();
                    for t in texts {
                        add(references(t.expose()).unwrap_or_default());
                    }
                }
            }
        }
        Ok(names)
    }
}

impl ServerConfig {
    /// The launch with every `${secret:NAME}` replaced by its value from `values` (what
    /// the supervisor looked up for `self.secrets`). Only those names are replaced: text
    /// that came from elsewhere (a project's path, put in by `${PROJECT}`) cannot name
    /// another secret and be given it. Errors name the setting and the secret, never a
    /// value. A launch without references comes back as it is.
    pub fn with_secrets(&self, values: &HashMap<String, SecretValue>) -> Result<Launch, String> {
        let lookup = |n: &str| values.get(n).map(SecretValue::expose);
        let key = |k: &str| format!("servers.{}.{k}", self.name);
        if self.secrets.is_empty() {
            return Ok(self.launch.clone());
        }
        match &self.launch {
            Launch::Stdio(s) => {
                let mut env = std::collections::BTreeMap::new();
                for (var, v) in &s.env {
                    let value = substitute(v, lookup)
                        .map_err(|e| format!("{}: {e}", key(&format!("env.{var}"))))?;
                    if value.expose().contains('\0') {
                        return Err(format!(
                            "{}: the value holds a NUL byte, which an environment variable cannot",
                            key(&format!("env.{var}"))
                        ));
                    }
                    env.insert(var.clone(), value.into_exposed());
                }
                Ok(Launch::Stdio(StdioLaunch { env, ..s.clone() }))
            }
            Launch::Http(h) => {
                let mut out = h.clone();
                for (name, v) in &mut out.headers {
                    let k = key(&format!("headers.{name}"));
                    let value = substitute(v.expose(), lookup).map_err(|e| format!("{k}: {e}"))?;
                    if reqwest::header::HeaderValue::from_str(value.expose()).is_err() {
                        return Err(format!(
                            "{k}: the value with its secrets put in is not a valid header value (a line break or control character in a secret?)"
                        ));
                    }
                    *v = value;
                }
                if let Some(b) = &mut out.bearer {
                    let k = key("bearer_token");
                    let value = substitute(b.expose(), lookup).map_err(|e| format!("{k}: {e}"))?;
                    let header = format!("Bearer {}", value.expose());
                    if value.expose().trim().is_empty()
                        || reqwest::header::HeaderValue::from_str(&header).is_err()
                    {
                        return Err(format!(
                            "{k}: the token with its secrets put in is empty or holds characters a header cannot carry"
                        ));
                    }
                    *b = value;
                }
                Ok(Launch::Http(out))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;
    use std::path::Path;

    fn parse(text: &str) -> Result<Config, String> {
        let env = |var: &str| (var == "HOST").then(|| "example.com".to_owned());
        Config::parse_with_env(text, Path::new("/etc/mcpd.toml"), &env).map_err(|e| e.to_string())
    }

    fn refused(text: &str, want: &str) {
        match parse(text) {
            Ok(_) => panic!("{text}: accepted"),
            Err(e) => assert!(e.contains(want), "{text}: {e:?} lacks {want:?}"),
        }
    }

    #[test]
    fn references_are_collected_from_env_headers_and_the_bearer_token() {
        let c = parse(
            "[daemon]\nsecrets = \"file\"\n\
             [servers.local]\ncommand = \"x\"\nenv = { A = \"${secret:a}\", B = \"pre-${secret:b}-${secret:a}\" }\n\
             [servers.web]\nurl = \"https://${HOST}/mcp\"\nheaders = { X-Key = \"${secret:k}\", X-Host = \"${HOST}\" }\nbearer_token = \"${secret:tok}\"\n\
             [servers.plain]\ncommand = \"x\"\nenv = { A = \"$HOME ${secretX}\" }",
        )
        .unwrap();
        assert_eq!(c.daemon.secrets, Preferred::File);
        assert_eq!(c.servers["local"].secrets, ["a", "b"]);
        assert_eq!(c.servers["web"].secrets, ["k", "tok"]);
        assert!(c.servers["plain"].secrets.is_empty());
        assert!(c.servers["web"].unresolved.is_none());
        assert_eq!(parse("").unwrap().daemon.secrets, Preferred::Auto);
    }

    #[test]
    fn bad_or_misplaced_references_are_config_errors_naming_the_key() {
        refused(
            "[servers.s]\ncommand = \"x\"\nenv = { A = \"${secret:a/b}\" }",
            "`servers.s.env.A`: ${secret:a/b}: secret name \"a/b\" has '/'",
        );
        refused(
            "[servers.s]\ncommand = \"x\"\nenv = { A = \"${secret:a\" }",
            "`servers.s.env.A`: an unterminated ${secret:",
        );
        refused(
            "[servers.s]\ncommand = \"x\"\nargs = [\"--token\", \"${secret:a}\"]",
            "`servers.s.args`: a ${secret:…} cannot stand in a command line",
        );
        refused(
            "[servers.s]\ncommand = \"${secret:a}\"",
            "`servers.s.command`: a ${secret:…} cannot stand",
        );
        refused(
            "[servers.r]\nurl = \"https://h/mcp\"\nheaders = { X = \"${secret:}\" }",
            "`servers.r.headers.X`: ${secret:}: a secret name cannot be empty",
        );
        refused(
            "[servers.r]\nurl = \"https://h/mcp\"\nbearer_token = \"plain-token\"",
            "`servers.r.bearer_token`: holds no ${secret:NAME}",
        );
        refused(
            "[servers.r]\nurl = \"https://h/mcp\"\nbearer_token = \"${secret:t}\"\nbearer_token_env = \"T\"",
            "`servers.r.bearer_token`: conflicts with bearer_token_env",
        );
        refused(
            "[servers.r]\nurl = \"https://h/mcp\"\nbearer_token = \"${secret:t}\"\nheaders = { Authorization = \"x\" }",
            "conflicts with bearer_token or bearer_token_env",
        );
        refused(
            "[servers.r]\nurl = \"https://h/mcp\"\nheaders = { X = \"a\\nb ${secret:t}\" }",
            "not a valid header value",
        );
        refused(
            "[servers.s]\ncommand = \"x\"\nbearer_token = \"${secret:t}\"",
            "`servers.s.bearer_token`: only applies to remote servers",
        );
        refused(
            "[daemon]\nsecrets = \"vault\"",
            "`daemon.secrets`: \"vault\" is not a secret store",
        );
        let oauth = "[servers.r]\nurl = \"https://h/mcp\"\n[servers.r.oauth]\n";
        refused(
            &format!("{oauth}client_id = \"c\"\nclient_secret = \"plain\""),
            "`servers.r.oauth.client_secret`: holds no ${secret:NAME}",
        );
        refused(
            &format!("{oauth}client_secret = \"${{secret:c}}\""),
            "a client secret needs its client_id",
        );
        refused(
            &format!(
                "{oauth}client_id = \"c\"\nclient_secret = \"${{secret:c}}\"\nclient_secret_env = \"C\""
            ),
            "conflicts with client_secret_env",
        );
        let c = parse(&format!(
            "{oauth}client_id = \"c\"\nclient_secret = \"${{secret:oauth-c}}\""
        ))
        .unwrap();
        assert_eq!(c.servers["r"].secrets, ["oauth-c"]);
        let c = Config::parse(
            &format!(
                "{oauth}grant = \"jwt_bearer\"\nclient_id = \"c\"\nprivate_key = \"${{secret:k}}\"\n[servers.r.oauth.identity_provider]\nissuer = \"https://i\"\nclient_id = \"i\"\nclient_secret = \"${{secret:ic}}\"\nid_token = \"${{secret:it}}\"\n"
            ),
            Path::new("/etc/mcpd.toml"),
        )
        .unwrap();
        let mut names = c.servers["r"].secrets.clone();
        names.sort();
        assert_eq!(
            names,
            ["ic", "it", "k"],
            "every secret the machine grant needs is looked up at start"
        );
    }

    fn values(pairs: &[(&str, &str)]) -> HashMap<String, SecretValue> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), SecretValue::new((*v).to_owned())))
            .collect()
    }

    #[test]
    fn values_are_put_in_at_start_and_checked_there() {
        let c = parse(
            "[servers.local]\ncommand = \"x\"\nenv = { A = \"${secret:a}\", B = \"pre-${secret:b}\" }\n\
             [servers.web]\nurl = \"https://h/mcp\"\nheaders = { X-Key = \"k=${secret:k}\" }\nbearer_token = \"${secret:tok}\"",
        )
        .unwrap();
        let Launch::Stdio(l) = c.servers["local"]
            .with_secrets(&values(&[("a", "AAA"), ("b", "BBB")]))
            .unwrap()
        else {
            panic!("not stdio")
        };
        assert_eq!(l.env["A"], "AAA");
        assert_eq!(l.env["B"], "pre-BBB");
        let Launch::Http(h) = c.servers["web"]
            .with_secrets(&values(&[("k", "KKK"), ("tok", "TTT")]))
            .unwrap()
        else {
            panic!("not http")
        };
        assert_eq!(h.headers[0].1.expose(), "k=KKK");
        assert_eq!(h.bearer.as_ref().unwrap().expose(), "TTT");
        // The config itself keeps the references, never the values.
        assert!(!format!("{:?}", c.servers["local"]).contains("AAA"));
        let e = c.servers["web"]
            .with_secrets(&values(&[("k", "line\nbreak-SECRETVALUE"), ("tok", "T")]))
            .unwrap_err();
        assert!(
            e.contains("servers.web.headers.X-Key") && !e.contains("SECRETVALUE"),
            "{e}"
        );
        let e = c.servers["local"]
            .with_secrets(&values(&[("a", "A")]))
            .unwrap_err();
        assert!(
            e.contains("servers.local.env.B: ${secret:b} has no value"),
            "{e}"
        );
        let e = c.servers["local"]
            .with_secrets(&values(&[("a", "nul\0SECRETVALUE"), ("b", "B")]))
            .unwrap_err();
        assert!(e.contains("NUL") && !e.contains("SECRETVALUE"), "{e}");
    }

    #[test]
    fn text_from_a_project_path_cannot_name_another_secret() {
        let c = parse("[servers.p]\ncommand = \"x\"\nshare = \"project\"\nenv = { ROOT = \"${PROJECT}\", K = \"${secret:k}\" }").unwrap();
        let mut inst = c.servers["p"].clone();
        let Launch::Stdio(l) = &inst.launch else {
            panic!()
        };
        inst.launch = Launch::Stdio(l.instantiate(Path::new("/home/u/${secret:other}")));
        let e = inst
            .with_secrets(&values(&[("k", "K"), ("zzz", "Z")]))
            .unwrap_err();
        assert!(e.contains("${secret:other} has no value"), "{e}");
    }
}
