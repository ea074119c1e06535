//! `mcpd import` moving a client's literal secrets into mcpd's file store.
//!
//! The config gets `${secret:NAME}`, the store the value, and no output channel ever the
//! value.

use crate::import::clients::mcpd_in;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Values no output and no config may hold.
const TOKEN: &str = "ghp_CANARYtokenAAAA1111";
const BEARER: &str = "CANARY-bearer-9f8e7d";

/// A temp dir with a client config holding literal secrets and an mcpd config whose
/// `[daemon]` puts secrets in the file store under `state`.
struct Setup {
    dir: tempfile::TempDir,
    client: PathBuf,
    config: PathBuf,
    state: PathBuf,
}

impl Setup {
    fn new(token: &str) -> Setup {
        let dir = tempfile::Builder::new()
            .prefix("mcpd-isec")
            .tempdir()
            .expect("temp dir");
        let state = dir.path().join("state-dir");
        let config = dir.path().join("mcpd.toml");
        std::fs::write(&config, daemon_table(&state)).unwrap();
        let client = dir.path().join("client.json");
        write_client(&client, token);
        Setup {
            dir,
            client,
            config,
            state,
        }
    }

    /// `mcpd import --from CLIENT --config CONFIG EXTRA...`.
    async fn import(&self, extra: &[&str]) -> (i32, String, String) {
        let from = self.client.display().to_string();
        let config = self.config.display().to_string();
        let mut args = vec!["import", "--from", &from, "--config", &config];
        args.extend(extra);
        mcpd_in(self.dir.path(), &args).await
    }

    /// The value the file store holds for `name`, if any.
    fn stored(&self, name: &str) -> Option<String> {
        let path = self.state.join("secrets").join(format!("{name}.json"));
        let text = std::fs::read_to_string(&path).ok()?;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", path.display());
        let v: serde_json::Value = serde_json::from_str(&text).expect("a stored secret");
        Some(v["value"].as_str().expect("its value").to_owned())
    }

    fn config_text(&self) -> String {
        std::fs::read_to_string(&self.config).unwrap()
    }
}

fn daemon_table(state: &Path) -> String {
    format!(
        "[daemon]\nsecrets = \"file\"\nstate_dir = {:?}\n",
        state.display().to_string()
    )
}

/// A client config with a remote server sending `Authorization: Bearer …` and a plain
/// header, then a local server with a literal token and plain env values.
fn write_client(path: &Path, token: &str) {
    let body = serde_json::json!({"mcpServers": {
        "api": {"type": "http", "url": "https://api.example.com/mcp",
                "headers": {"Authorization": format!("Bearer {BEARER}"), "X-Team": "acme"}},
        "github": {"command": "github-mcp-server", "args": ["stdio"],
                   "env": {"GITHUB_TOKEN": token, "LOG_LEVEL": "debug", "DATA_DIR": "/var/lib/gh"}},
    }});
    std::fs::write(path, body.to_string()).unwrap();
}

/// Fails when a canary value is in any of `texts`.
fn no_values(texts: &[&str]) {
    for t in texts {
        for v in [TOKEN, BEARER] {
            assert!(!t.contains(v), "{v} shown in:\n{t}");
        }
    }
}

#[tokio::test]
async fn dry_run_shows_the_references_and_the_plan_and_stores_nothing() {
    let s = Setup::new(TOKEN);
    let before = s.config_text();
    let (code, out, err) = s.import(&["--dry-run"]).await;
    assert_eq!(code, 0, "{out}\n{err}");
    no_values(&[&out, &err]);
    assert!(
        out.contains("Authorization = \"Bearer ${secret:api-Authorization}\", X-Team = \"acme\""),
        "{out}"
    );
    assert!(
        out.contains("GITHUB_TOKEN = \"${secret:github-GITHUB_TOKEN}\""),
        "{out}"
    );
    for line in [
        "would store secret api-Authorization in the file store ([servers.api] header Authorization)",
        "would store secret github-GITHUB_TOKEN in the file store ([servers.github] env GITHUB_TOKEN)",
    ] {
        assert!(err.contains(line), "{line:?} missing in:\n{err}");
    }
    assert_eq!(s.config_text(), before);
    assert!(!s.state.exists(), "a dry run created {}", s.state.display());
}

#[tokio::test]
async fn literal_secrets_move_into_the_file_store_and_only_references_stay() {
    let s = Setup::new(TOKEN);
    let (code, out, err) = s.import(&[]).await;
    assert_eq!(code, 0, "{out}\n{err}");
    let text = s.config_text();
    no_values(&[&out, &err, &text]);
    let parsed: toml::Table = toml::from_str(&text).expect("TOML");
    let api = &parsed["servers"]["api"];
    assert_eq!(
        api["headers"]["Authorization"].as_str(),
        Some("Bearer ${secret:api-Authorization}")
    );
    assert_eq!(api["headers"]["X-Team"].as_str(), Some("acme"));
    let env = &parsed["servers"]["github"]["env"];
    assert_eq!(
        env["GITHUB_TOKEN"].as_str(),
        Some("${secret:github-GITHUB_TOKEN}")
    );
    // Plain values stay as they are.
    assert_eq!(env["LOG_LEVEL"].as_str(), Some("debug"));
    assert_eq!(env["DATA_DIR"].as_str(), Some("/var/lib/gh"));
    // Only the credentials after the scheme are stored.
    assert_eq!(s.stored("api-Authorization").as_deref(), Some(BEARER));
    assert_eq!(s.stored("github-GITHUB_TOKEN").as_deref(), Some(TOKEN));
    for line in [
        "[servers.api] header Authorization: secret api-Authorization in the file store",
        "[servers.github] env GITHUB_TOKEN: secret github-GITHUB_TOKEN in the file store",
    ] {
        assert!(out.contains(line), "{line:?} missing in:\n{out}");
    }
    assert!(!err.contains("IMPORTED_"), "{err}");

    let c = s.config.display().to_string();
    let (code, cout, cerr) = mcpd_in(s.dir.path(), &["check-config", "--config", &c]).await;
    assert_eq!(code, 0, "{cout}{cerr}\n{text}");
    no_values(&[&cout, &cerr]);
}

#[tokio::test]
async fn a_different_value_under_a_taken_name_gets_a_new_name_and_the_same_value_is_reused() {
    let first = Setup::new(TOKEN);
    let (code, _, err) = first.import(&[]).await;
    assert_eq!(code, 0, "{err}");

    // Another config sharing the state directory, from a client with another token.
    let other = "ghp_OTHERtokenBBBB2222";
    let dir = first.dir.path();
    let second = dir.join("second.toml");
    std::fs::write(&second, daemon_table(&first.state)).unwrap();
    let client2 = dir.join("client2.json");
    write_client(&client2, other);
    let (from, c) = (client2.display().to_string(), second.display().to_string());
    let (code, out, err) = mcpd_in(dir, &["import", "--from", &from, "--config", &c]).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!out.contains(other) && !err.contains(other), "{out}{err}");
    let text = std::fs::read_to_string(&second).unwrap();
    assert!(
        text.contains("GITHUB_TOKEN = \"${secret:github-GITHUB_TOKEN-2}\""),
        "{text}"
    );
    // The first value is untouched; the same bearer token is used under its name.
    assert_eq!(first.stored("github-GITHUB_TOKEN").as_deref(), Some(TOKEN));
    assert_eq!(
        first.stored("github-GITHUB_TOKEN-2").as_deref(),
        Some(other)
    );
    assert!(
        text.contains("Authorization = \"Bearer ${secret:api-Authorization}\""),
        "{text}"
    );
    assert!(first.stored("api-Authorization-2").is_none());
    assert!(
        out.contains(
            "[servers.api] header Authorization: secret api-Authorization in the file store"
        ),
        "{out}"
    );
}

#[tokio::test]
async fn a_secret_that_cannot_be_stored_leaves_the_config_as_it_was() {
    let s = Setup::new(TOKEN);
    // Where the file store writes github-GITHUB_TOKEN aside first, a directory is in the way.
    std::fs::create_dir_all(s.state.join("secrets/github-GITHUB_TOKEN.json.tmp/x")).unwrap();
    let before = s.config_text();
    let (code, out, err) = s.import(&[]).await;
    assert_eq!(code, 1, "{out}\n{err}");
    no_values(&[&out, &err]);
    assert!(
        err.contains(
            "cannot store secret \"github-GITHUB_TOKEN\" (for [servers.github] env GITHUB_TOKEN) in the file store, \
             so the config was not written"
        ),
        "{err}"
    );
    assert_eq!(s.config_text(), before);
    // The one stored before stays; a second import finds it and uses it.
    assert_eq!(s.stored("api-Authorization").as_deref(), Some(BEARER));
    std::fs::remove_dir_all(s.state.join("secrets/github-GITHUB_TOKEN.json.tmp")).unwrap();
    let (code, out, err) = s.import(&[]).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(s.config_text().contains("${secret:api-Authorization}"));
    assert!(s.stored("api-Authorization-2").is_none());
}
