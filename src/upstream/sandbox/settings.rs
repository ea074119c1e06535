//! The user's npm and git settings as a confined server gets them.
//!
//! Copies of `~/.npmrc` and of git's global config that keep what the tools need
//! (registries, proxies, certificates, who commits, URL rewrites) and leave out every
//! credential, written by mcpd where the server may read them (`NPM_CONFIG_USERCONFIG`,
//! `GIT_CONFIG_GLOBAL` point there) and nowhere else.
//!
//! What is kept is an allow-list of keys, not a deny-list of secret ones: credentials in
//! these files come in forms no list can enumerate (npm's `//host/:_authToken`, `_auth`,
//! `_password`, `certfile`; git's `http.extraHeader`, `http.<url>.extraHeader`,
//! `credential.helper`, a token in a proxy's or a rewrite's URL, an `include` of another
//! file, whatever a later version adds), and a key missing from an allow-list costs a
//! setting while one missing from a deny-list leaks a token. Among the kept keys, a value
//! or section naming a URL with a user or password in it (`http://user:pass@proxy:3128`)
//! is left out too.

/// npm keys kept (compared without case): where packages come from and how to reach it.
const NPM_KEYS: &[&str] = &[
    "registry",
    "proxy",
    "https-proxy",
    "noproxy",
    "strict-ssl",
    "cafile",
    "ca",
    "ca[]",
    "prefer-offline",
    "prefer-online",
    "offline",
    "fetch-retries",
    "fetch-retry-factor",
    "fetch-retry-mintimeout",
    "fetch-retry-maxtimeout",
    "fetch-timeout",
    "maxsockets",
    "loglevel",
    "progress",
    "update-notifier",
    "fund",
    "audit",
    "ignore-scripts",
    "legacy-peer-deps",
    "strict-peer-deps",
    "engine-strict",
    "install-strategy",
    "yes",
    "nodedir",
    "omit",
    "include",
];

/// git keys kept, as `section.key` (any subsection of the section: `http.<url>.proxy`),
/// compared without case.
const GIT_KEYS: &[&str] = &[
    "user.name",
    "user.email",
    "core.autocrlf",
    "core.eol",
    "core.safecrlf",
    "core.quotepath",
    "core.precomposeunicode",
    "core.filemode",
    "core.symlinks",
    "core.ignorecase",
    "core.longpaths",
    "core.checkstat",
    "core.trustctime",
    "init.defaultbranch",
    "http.proxy",
    "http.sslverify",
    "http.sslcainfo",
    "http.sslcapath",
    "http.sslbackend",
    "http.sslversion",
    "http.version",
    "http.postbuffer",
    "http.lowspeedlimit",
    "http.lowspeedtime",
    "http.followredirects",
    "url.insteadof",
    "url.pushinsteadof",
    "safe.directory",
    "protocol.version",
    "protocol.allow",
    "pull.rebase",
    "pull.ff",
    "push.default",
    "push.autosetupremote",
    "fetch.prune",
    "merge.ff",
    "merge.conflictstyle",
    "diff.algorithm",
    "diff.renames",
    "color.ui",
    // Git LFS's filter, without which a repository's large files check out as pointers.
    "filter.clean",
    "filter.smudge",
    "filter.process",
    "filter.required",
];

/// Whether `text` names a URL with a user or a password in it.
fn has_userinfo(text: &str) -> bool {
    text.match_indices("://").any(|(i, _)| {
        let rest = text.get(i + 3..).unwrap_or_default();
        let authority = rest.split(['/', '"', ' ', '\t']).next().unwrap_or_default();
        authority.contains('@')
    })
}

/// `~/.npmrc` with only the kept keys (see the module's note), comments dropped.
pub fn npmrc(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let line = line.trim();
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        let scoped_registry = key.starts_with('@') && key.ends_with(":registry");
        if (NPM_KEYS.contains(&key.as_str()) || scoped_registry) && !has_userinfo(value) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// A git config file with only the kept keys (see the module's note), comments and
/// `include`s dropped. Read as git reads it: `[section]`, `[section "subsection"]` and
/// the older `[section.subsection]` headers, a key on a header's line, `key` alone (a
/// true boolean), and a value continued on the next line by a final backslash (kept or
/// dropped with its key). A line that does not parse is dropped.
pub fn gitconfig(text: &str) -> String {
    let mut out = String::new();
    // The current header as written, whether it may hold kept keys, and whether it is
    // written out yet.
    let mut header: Option<(&str, String, bool)> = None;
    let mut emitted = false;
    let mut lines = text.lines();
    while let Some(raw) = lines.next() {
        let mut line = raw.trim();
        if line.starts_with('[') {
            let Some((head, section, ok, rest)) = git_header(line) else {
                header = None;
                continue;
            };
            header = Some((head, section, ok));
            emitted = false;
            line = rest.trim();
        }
        // A value continued on the next lines belongs to this entry.
        let mut entry = vec![line];
        while entry.last().is_some_and(|l| continues(l)) {
            match lines.next() {
                Some(next) => entry.push(next),
                None => break,
            }
        }
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        let Some((head, section, true)) = &header else {
            continue;
        };
        let key: String = line
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect::<String>()
            .to_ascii_lowercase();
        let name = format!("{section}.{key}");
        if key.is_empty() || !GIT_KEYS.contains(&name.as_str()) {
            continue;
        }
        if entry.iter().any(|l| has_userinfo(l)) {
            continue;
        }
        if !emitted {
            out.push_str(head);
            out.push('\n');
            emitted = true;
        }
        for l in entry {
            out.push('\t');
            out.push_str(l.trim_start());
            out.push('\n');
        }
    }
    out
}

/// Whether a line's value goes on (an odd number of final backslashes).
fn continues(line: &str) -> bool {
    line.bytes().rev().take_while(|b| *b == b'\\').count() % 2 == 1
}

/// A header line: the header as written, its section (lower case), whether its keys may
/// be kept (no user info in its subsection, no `include`), and the rest of the line.
fn git_header(line: &str) -> Option<(&str, String, bool, &str)> {
    let body = line.strip_prefix('[')?;
    let name_len = body
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
        .unwrap_or(body.len());
    let name = body.get(..name_len)?;
    let after = body.get(name_len..)?;
    let (subsection, close) = match after.trim_start().strip_prefix('"') {
        Some(quoted) => {
            let mut end = None;
            let mut escaped = false;
            for (i, c) in quoted.char_indices() {
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '"') => {
                        end = Some(i);
                        break;
                    }
                    _ => {}
                }
            }
            let end = end?;
            let rest = quoted.get(end + 1..)?.trim_start().strip_prefix(']')?;
            (Some(quoted.get(..end)?), rest)
        }
        None => (None, after.trim_start().strip_prefix(']')?),
    };
    let head_len = line.len() - close.len();
    let head = line.get(..head_len)?;
    let (section, dotted) = match name.split_once('.') {
        Some((s, sub)) => (s, Some(sub)),
        None => (name, None),
    };
    let section = section.to_ascii_lowercase();
    let ok = section != "include"
        && section != "includeif"
        && !subsection.or(dotted).is_some_and(has_userinfo);
    Some((head, section, ok, close))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(f: fn(&str) -> String, input: &str, expected: &str) {
        assert_eq!(f(input), expected, "from:\n{input}");
    }

    #[test]
    fn npmrc_keeps_registries_and_proxies_and_drops_every_credential() {
        check(
            npmrc,
            "; a comment\n\
             registry=https://registry.example.com/\n\
             //registry.example.com/:_authToken=npm_SECRET\n\
             @corp:registry=https://npm.corp.example/\n\
             //npm.corp.example/:_auth=c2VjcmV0\n\
             _authToken=npm_SECRET\n\
             email=me@example.com\n\
             proxy=http://user:pass@proxy:3128\n\
             https-proxy = http://proxy:3128\n\
             cafile=/etc/corp-ca.pem\n\
             certfile=/home/me/client.pem\n\
             strict-ssl=true\n",
            "registry=https://registry.example.com/\n\
             @corp:registry=https://npm.corp.example/\n\
             https-proxy = http://proxy:3128\n\
             cafile=/etc/corp-ca.pem\n\
             strict-ssl=true\n",
        );
        check(npmrc, "", "");
    }

    #[test]
    fn gitconfig_keeps_who_commits_and_how_to_reach_and_drops_every_credential() {
        check(
            gitconfig,
            "# mine\n\
             [user]\n\
             \tname = Ada\n\
             \temail = ada@example.com\n\
             \tsigningkey = ABC\n\
             [credential]\n\
             \thelper = store\n\
             [http]\n\
             \textraheader = AUTHORIZATION: bearer ghp_SECRET\n\
             \tproxy = http://proxy:3128\n\
             [http \"https://git.corp.example/\"]\n\
             \textraHeader = Authorization: Basic c2VjcmV0\n\
             \tsslCAInfo = /etc/corp-ca.pem\n\
             [url \"https://x-access-token:ghp_SECRET@github.com/\"]\n\
             \tinsteadOf = https://github.com/\n\
             [url \"https://github.com/\"]\n\
             \tinsteadOf = git@github.com:\n\
             [include]\n\
             \tpath = ~/.gitconfig.local\n\
             [core] autocrlf = input\n\
             [alias]\n\
             \tlg = log --graph \\\n\
             \t  --oneline\n\
             [safe]\n\
             \tdirectory = *\n",
            "[user]\n\
             \tname = Ada\n\
             \temail = ada@example.com\n\
             [http]\n\
             \tproxy = http://proxy:3128\n\
             [http \"https://git.corp.example/\"]\n\
             \tsslCAInfo = /etc/corp-ca.pem\n\
             [url \"https://github.com/\"]\n\
             \tinsteadOf = git@github.com:\n\
             [core]\n\
             \tautocrlf = input\n\
             [safe]\n\
             \tdirectory = *\n",
        );
        // A proxy with a password, the older dotted header, a broken header.
        check(
            gitconfig,
            "[http]\n\tproxy = http://me:pw@proxy:3128\n[user.x]\n\tname = A\n[user\n\tname = B\n",
            "[user.x]\n\tname = A\n",
        );
    }
}
