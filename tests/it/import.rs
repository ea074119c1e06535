//! `mcpd import`: client config fixtures in `import_fixtures/` merged into a temp config by the real binary.

use crate::support::{mcpd_bin, run_mcpd};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/import_fixtures")
        .join(name)
        .display()
        .to_string()
}

fn temp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("mcpd-import")
        .tempdir()
        .expect("temp dir")
}

/// Runs `mcpd import --from FIXTURE... --config CONFIG EXTRA...`.
async fn import(fixtures: &[&str], config: &Path, extra: &[&str]) -> (i32, String, String) {
    let paths: Vec<String> = fixtures.iter().map(|f| fixture(f)).collect();
    let mut args = vec!["import"];
    for p in &paths {
        args.extend(["--from", p.as_str()]);
    }
    let config = config.display().to_string();
    args.extend(["--config", config.as_str()]);
    args.extend(extra);
    run_mcpd(&args, None).await
}

/// `mcpd check-config --config F` with the variables imported headers refer to set.
async fn check_config(config: &Path) -> (i32, String, String) {
    check_config_with(config, &[]).await
}

/// `check_config` with more variables set in mcpd's environment.
async fn check_config_with(config: &Path, vars: &[(&str, &str)]) -> (i32, String, String) {
    let out = tokio::process::Command::new(mcpd_bin())
        .arg("check-config")
        .arg("--config")
        .arg(config)
        .env_remove("MCPD_CONFIG")
        .env("SENTRY_TOKEN", "t")
        .env("TEAM_ID", "t")
        .env("IMPORTED_LEGACY_EVENTS_X_API_KEY", "t")
        .envs(vars.iter().copied())
        .output()
        .await
        .expect("run mcpd check-config");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).expect("read config")
}

const EXISTING: &str = "# my hand-written servers; keep this comment\n[servers.time]\ncommand = \"uvx\"\nargs = [\"mcp-server-time\", \"--local-timezone\", \"UTC\"]\n";

#[tokio::test]
async fn every_format_imports_into_a_valid_config() {
    let dir = temp();
    let config = dir.path().join("sub/dir/mcpd.toml");
    let (code, out, err) = import(
        &[
            "claude_desktop_config.json",
            "mcp.json",
            "claude.json",
            "cursor_mcp.json",
            "vscode_mcp.json",
        ],
        &config,
        &[],
    )
    .await;
    assert_eq!(code, 0, "stdout {out}\nstderr {err}");
    let text = read(&config);
    for name in [
        "filesystem",
        "github-tools",
        "time",
        "memory",
        "sentry",
        "legacy-events",
        "everything",
        "db",
        "docs",
        "playwright",
        "remote",
    ] {
        assert!(
            text.contains(&format!("[servers.{name}]\n")),
            "{name} missing in:\n{text}"
        );
    }
    assert!(text.contains("# imported from "), "{text}");
    // Remote entries: transport, references copied, literal header values referenced.
    assert!(text.contains("transport = \"sse\""), "{text}");
    assert!(
        text.contains("Authorization = \"Bearer ${SENTRY_TOKEN}\""),
        "{text}"
    );
    assert!(text.contains("X-Team = \"${TEAM_ID}\""), "{text}");
    assert!(
        !text.contains("literal-key-123"),
        "a literal header value leaked:\n{text}"
    );
    assert!(
        text.contains("X-Api-Key = \"${IMPORTED_LEGACY_EVENTS_X_API_KEY}\""),
        "{text}"
    );
    assert!(err.contains("IMPORTED_LEGACY_EVENTS_X_API_KEY"), "{err}");
    // VS Code inputs cannot be resolved: skipped with a warning.
    assert!(!text.contains("input:"), "{text}");
    assert!(err.contains("X-Key skipped"), "{err}");
    // stdio env values are copied as they are, with a note.
    assert!(text.contains("GITHUB_PERSONAL_ACCESS_TOKEN = \"ghp_literal_secret\""));
    assert!(err.contains("copied as they are"), "{err}");

    let (code, out, err) = check_config(&config).await;
    assert_eq!(code, 0, "check-config: {out}{err}\n{text}");
    assert!(out.contains(
        "server legacy-events: https://events.example.com/sse (transport sse, OAuth login when asked)"
    ));
    assert!(out.contains("server db: uvx mcp-server-sqlite --db-path app.db"));
}

#[tokio::test]
async fn existing_servers_and_comments_are_kept_and_collisions_skipped() {
    let dir = temp();
    let config = dir.path().join("mcpd.toml");
    std::fs::write(&config, EXISTING).unwrap();
    let (code, out, err) = import(&["claude_desktop_config.json"], &config, &[]).await;
    assert_eq!(code, 0, "stdout {out}\nstderr {err}");
    let text = read(&config);
    assert!(
        text.starts_with(EXISTING),
        "the existing text changed:\n{text}"
    );
    assert_eq!(text.matches("[servers.time]").count(), 1, "{text}");
    assert!(
        err.contains("skipped server \"time\"") && err.contains("already exists"),
        "{err}"
    );
    assert!(err.contains("rename"), "{err}");
    assert!(text.contains("[servers.filesystem]"), "{text}");
    let (code, out, err) = check_config(&config).await;
    assert_eq!(code, 0, "{out}{err}");

    // Importing again changes nothing: every server is already present.
    let (code, _, err) = import(&["claude_desktop_config.json"], &config, &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("already present"), "{err}");
    assert_eq!(read(&config), text);
}

#[tokio::test]
async fn odd_names_are_sanitized_and_the_mapping_printed() {
    let dir = temp();
    let config = dir.path().join("mcpd.toml");
    let (code, out, err) = import(
        &["cursor_mcp.json", "claude_desktop_config.json"],
        &config,
        &[],
    )
    .await;
    assert_eq!(code, 0, "stdout {out}\nstderr {err}");
    let text = read(&config);
    assert!(
        text.contains("[servers.a-very-long-name-that-certainly]\n"),
        "{text}"
    );
    assert!(text.contains("[servers.github-tools]\n"), "{text}");
    assert!(
        err.contains("\"GitHub Tools\" becomes [servers.github-tools]"),
        "{err}"
    );
    let (code, out, err) = check_config(&config).await;
    assert_eq!(code, 0, "{out}{err}");
}

#[tokio::test]
async fn dry_run_prints_and_writes_nothing() {
    let dir = temp();
    let config = dir.path().join("mcpd.toml");
    std::fs::write(&config, EXISTING).unwrap();
    let (code, out, err) = import(&["mcp.json"], &config, &["--dry-run"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("[servers.memory]"), "{out}");
    assert!(out.contains("# imported from "), "{out}");
    assert_eq!(read(&config), EXISTING);

    let fresh = dir.path().join("new/mcpd.toml");
    let (code, _, err) = import(&["mcp.json"], &fresh, &["--dry-run"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(!fresh.exists() && !dir.path().join("new").exists());
}

#[tokio::test]
async fn broken_json_exits_78_naming_the_file() {
    let dir = temp();
    let config = dir.path().join("mcpd.toml");
    std::fs::write(&config, EXISTING).unwrap();
    let (code, _, err) = import(&["mcp.json", "broken.json"], &config, &[]).await;
    assert_eq!(code, 78, "{err}");
    assert!(err.contains("broken.json"), "{err}");
    assert_eq!(read(&config), EXISTING, "nothing is written");
}

#[tokio::test]
async fn an_invalid_merged_config_writes_nothing() {
    let dir = temp();
    let config = dir.path().join("mcpd.toml");
    // An unknown key: the existing file is already invalid, so the merge is refused.
    let bad = "[daemon]\nno_such_key = 1\n";
    std::fs::write(&config, bad).unwrap();
    let (code, _, err) = import(&["mcp.json"], &config, &[]).await;
    assert_eq!(code, 78, "{err}");
    assert!(err.contains("nothing was written"), "{err}");
    assert_eq!(read(&config), bad);
}

#[tokio::test]
async fn usage_errors_exit_64() {
    let dir = temp();
    let config = dir.path().join("mcpd.toml");
    let c = config.display().to_string();
    let (code, _, err) = run_mcpd(&["import", "--from", "emacs", "--config", &c], None).await;
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("claude-desktop"), "{err}");
    let (code, _, _) = run_mcpd(&["import", "--bogus"], None).await;
    assert_eq!(code, 64);
    let (code, out, _) = run_mcpd(&["import", "--help"], None).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("Exit codes") && out.contains("--dry-run"),
        "{out}"
    );
    assert!(!config.exists());
}

#[tokio::test]
async fn entries_that_run_mcpd_itself_are_skipped_with_a_note() {
    let dir = temp();
    // What `claude mcp add --scope user mcpd -- mcpd connect` writes, plus the same entry
    // by the binary's full path, beside a real server.
    let client = dir.path().join("claude.json");
    let body = serde_json::json!({"mcpServers": {
        "mcpd": {"type": "stdio", "command": "mcpd", "args": ["connect"], "env": {}},
        "mcpd-by-path": {"command": mcpd_bin(), "args": ["connect", "--profile", "p"]},
        "time": {"command": "uvx", "args": ["mcp-server-time"]},
    }});
    std::fs::write(&client, body.to_string()).expect("write client config");
    let config = dir.path().join("mcpd.toml");
    let client = client.display().to_string();
    let config_arg = config.display().to_string();
    let (code, _, err) = run_mcpd(
        &["import", "--from", &client, "--config", &config_arg],
        None,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.matches("runs mcpd itself").count(), 2, "{err}");
    let written = read(&config);
    assert!(written.contains("[servers.time]"), "{written}");
    assert!(!written.contains("[servers.mcpd"), "{written}");
}

/// The `[servers.NAME]` table of a written config.
fn server(config: &toml::Table, name: &str) -> toml::Table {
    config["servers"][name]
        .as_table()
        .unwrap_or_else(|| panic!("no [servers.{name}] in {config:#?}"))
        .clone()
}

/// The `[servers.NAME.oauth]` table of a written config, if any.
fn oauth(config: &toml::Table, name: &str) -> Option<toml::Table> {
    server(config, name)
        .get("oauth")
        .map(|o| o.as_table().expect("oauth is a table").clone())
}

fn strs(v: &toml::Value) -> Vec<&str> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|s| s.as_str().expect("a string"))
        .collect()
}

/// The variables the imported OAuth tables name, set for `check-config`.
const OAUTH_VARS: [(&str, &str); 4] = [
    ("IMPORTED_LINEAR_OAUTH_CLIENT_SECRET", "s1"),
    ("NOTION_CLIENT_SECRET", "s2"),
    ("PIPES_CLIENT_SECRET", "s3"),
    ("STATIC_TOKEN", "t"),
];

#[tokio::test]
async fn oauth_settings_of_remote_servers_are_carried_over() {
    let dir = temp();
    let config = dir.path().join("mcpd.toml");
    std::fs::write(&config, EXISTING).unwrap();
    let fixtures = [
        "oauth_claude_code.json",
        "oauth_cursor.json",
        "oauth_vscode.json",
    ];

    // --dry-run shows the tables as [servers.NAME.oauth] and writes nothing.
    let (code, out, err) = import(&fixtures, &config, &["--dry-run"]).await;
    assert_eq!(code, 0, "stdout {out}\nstderr {err}");
    assert!(
        out.contains(concat!(
            "[servers.slack]\n",
            "url = \"https://mcp.slack.com/mcp\"\n",
            "[servers.slack.oauth]\n",
            "client_id = \"1234.5678\"\n",
            "redirect_port = 3118\n",
        )),
        "{out}"
    );
    assert_eq!(read(&config), EXISTING);

    let (code, out, err) = import(&fixtures, &config, &[]).await;
    assert_eq!(code, 0, "stdout {out}\nstderr {err}");
    let text = read(&config);
    assert!(text.starts_with(EXISTING), "{text}");
    // No literal client secret anywhere: not in the config, not in what was printed.
    for secret in ["literal-oauth-secret-xyz", "another-literal-secret"] {
        assert!(!text.contains(secret), "{secret} leaked into:\n{text}");
        assert!(
            !out.contains(secret) && !err.contains(secret),
            "{secret} printed:\n{out}\n{err}"
        );
    }
    let parsed: toml::Table = toml::from_str(&text).expect("the written config is TOML");

    // Claude Code: clientId and callbackPort.
    let slack = oauth(&parsed, "slack").expect("slack oauth");
    assert_eq!(slack["client_id"].as_str(), Some("1234.5678"));
    assert_eq!(slack["redirect_port"].as_integer(), Some(3118));
    assert_eq!(slack.len(), 2, "{slack:?}");
    // A literal clientSecret becomes a variable the user is told to set; scopes are
    // split and deduplicated.
    let linear = oauth(&parsed, "linear").expect("linear oauth");
    assert_eq!(linear["client_id"].as_str(), Some("lin-client"));
    assert_eq!(
        linear["client_secret_env"].as_str(),
        Some("IMPORTED_LINEAR_OAUTH_CLIENT_SECRET")
    );
    assert_eq!(strs(&linear["scopes"]), ["read", "write"]);
    assert!(
        err.contains("IMPORTED_LINEAR_OAUTH_CLIENT_SECRET  (OAuth client secret of linear)"),
        "{err}"
    );
    // A ${VAR} secret is kept as the variable; settings mcpd has none of get a note.
    let notion = oauth(&parsed, "notion").expect("notion oauth");
    assert_eq!(
        notion["client_secret_env"].as_str(),
        Some("NOTION_CLIENT_SECRET")
    );
    assert_eq!(notion["redirect_port"].as_integer(), Some(8080));
    assert_eq!(server(&parsed, "notion")["transport"].as_str(), Some("sse"));
    assert!(
        err.contains("oauth.authServerMetadataUrl not copied"),
        "{err}"
    );
    assert!(err.contains("oauth.xaa not copied"), "{err}");
    assert!(
        err.contains("oauth.bogusField is not an OAuth setting"),
        "{err}"
    );
    // Malformed values are reported and left out; what is valid stays.
    let malformed = oauth(&parsed, "malformed").expect("malformed oauth");
    assert_eq!(strs(&malformed["scopes"]), ["ok"]);
    assert_eq!(malformed.len(), 1, "{malformed:?}");
    for note in [
        "oauth.clientId is not a client id",
        "oauth.clientSecret skipped",
        "oauth.callbackPort 70000 is not a port",
        "\"bad\\\"one\" is not a scope",
        "oauth.scopes has 7, which is not a scope",
    ] {
        assert!(err.contains(note), "{note:?} missing in:\n{err}");
    }
    // A secret without its client id, an Authorization header beside OAuth settings, an
    // oauth that is not an object, OAuth settings on a local server: no oauth table.
    for name in [
        "secret-only",
        "static-token",
        "not-an-object",
        "local-with-oauth",
        "vs-input",
    ] {
        assert!(oauth(&parsed, name).is_none(), "{name}: {text}");
    }
    assert!(err.contains("only with its client_id"), "{err}");
    assert!(!err.contains("IMPORTED_SECRET_ONLY"), "{err}");
    assert_eq!(
        server(&parsed, "static-token")["headers"]["Authorization"].as_str(),
        Some("Bearer ${STATIC_TOKEN}")
    );
    assert!(err.contains("also sends an Authorization header"), "{err}");
    assert!(err.contains("\"oauth\" is not an object"), "{err}");
    assert!(err.contains("apply to remote servers"), "{err}");

    // Cursor: "auth" with CLIENT_ID, CLIENT_SECRET as ${env:VAR} and a list of scopes.
    let pipes = oauth(&parsed, "pipes").expect("pipes oauth");
    assert_eq!(pipes["client_id"].as_str(), Some("cursor-client"));
    assert_eq!(
        pipes["client_secret_env"].as_str(),
        Some("PIPES_CLIENT_SECRET")
    );
    assert_eq!(
        strs(&pipes["scopes"]),
        ["openid", "kb:read", "offline_access"]
    );
    // A placeholder client id cannot be copied, and then neither can the secret.
    let env_id = oauth(&parsed, "pipes-env-id").expect("pipes-env-id oauth");
    assert_eq!(env_id.len(), 1, "{env_id:?}");
    assert_eq!(strs(&env_id["scopes"]), ["kb:read"]);
    assert!(
        err.contains("auth.CLIENT_ID \"${env:PIPES_CLIENT_ID}\" is a placeholder"),
        "{err}"
    );

    // VS Code: "oauth" with clientId only.
    let vs = oauth(&parsed, "vs-slack").expect("vs-slack oauth");
    assert_eq!(vs["client_id"].as_str(), Some("vscode-client-id"));
    assert_eq!(vs.len(), 1, "{vs:?}");
    assert!(
        err.contains("oauth.clientId \"${input:client-id}\" is a placeholder"),
        "{err}"
    );

    // The redirect and the secret kept in a keychain are pointed out once.
    let note = err
        .lines()
        .find(|l| l.starts_with("note: an OAuth client_id was copied for"))
        .unwrap_or_else(|| panic!("no redirect note in:\n{err}"));
    for name in ["slack", "linear", "notion", "pipes", "vs-slack"] {
        assert!(
            note.contains(&format!(" {name},")) || note.contains(&format!(" {name}:")),
            "{name}: {note}"
        );
    }
    assert!(note.contains("http://127.0.0.1:PORT/callback"), "{note}");
    assert!(
        err.contains("no OAuth client secret was copied for slack, vs-slack"),
        "{err}"
    );

    // The daemon accepts it once the variables are set, and refuses it naming a missing one.
    let (code, out, cerr) = check_config_with(&config, &OAUTH_VARS).await;
    assert_eq!(code, 0, "check-config: {out}{cerr}\n{text}");
    assert!(
        out.contains("server slack: https://mcp.slack.com/mcp"),
        "{out}"
    );
    let (code, _, cerr) = check_config_with(&config, &OAUTH_VARS[1..]).await;
    assert_ne!(code, 0, "{cerr}");
    assert!(
        cerr.contains("IMPORTED_LINEAR_OAUTH_CLIENT_SECRET"),
        "{cerr}"
    );
    assert!(cerr.contains("client_secret_env"), "{cerr}");

    // Importing again finds every table, oauth included, already present.
    let (code, _, err) = import(&fixtures, &config, &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("nothing new to import"), "{err}");
    assert!(!err.contains("different definition"), "{err}");
    assert_eq!(read(&config), text);
}
