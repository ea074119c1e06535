//! `mcpd import`: client config fixtures merged into a temp config by the real binary.
//!
//! The fixtures are in `fixtures/`.

use crate::support::{mcpd_bin, within};
use std::path::{Path, PathBuf};
use tokio::process::Command;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/import/fixtures")
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

/// Keeps an `mcpd` child away from the user's secret stores: no session bus (so no
/// keyring; `$XDG_RUNTIME_DIR/bus` is looked for under `root`), no systemd credentials,
/// and the default state directory `root/state/mcpd`, where the file store is
/// `root/state/mcpd/secrets`.
pub fn isolate(cmd: &mut Command, root: &Path) {
    cmd.env_remove("MCPD_CONFIG")
        .env_remove("MCPD_SOCKET")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env_remove("CREDENTIALS_DIRECTORY")
        .env("XDG_RUNTIME_DIR", root)
        .env("XDG_STATE_HOME", root.join("state"));
}

/// Runs `mcpd ARGS` kept away from the user's secret stores ([`isolate`], under `root`).
pub async fn mcpd_in(root: &Path, args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(mcpd_bin());
    cmd.args(args);
    isolate(&mut cmd, root);
    let out = within("mcpd command", cmd.output())
        .await
        .expect("run mcpd");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The directory a test's isolated state is kept under: the config's.
fn root_of(config: &Path) -> &Path {
    config.parent().expect("a config in a directory")
}

/// Runs `mcpd import --from FIXTURE... --config CONFIG EXTRA...`, isolated under the
/// config's directory.
async fn import(fixtures: &[&str], config: &Path, extra: &[&str]) -> (i32, String, String) {
    let paths: Vec<String> = fixtures.iter().map(|f| fixture(f)).collect();
    let mut args = vec!["import"];
    for p in &paths {
        args.extend(["--from", p.as_str()]);
    }
    let c = config.display().to_string();
    args.extend(["--config", c.as_str()]);
    args.extend(extra);
    mcpd_in(root_of(config), &args).await
}

/// `mcpd check-config --config F` with the variables imported headers refer to set.
async fn check_config(config: &Path) -> (i32, String, String) {
    check_config_with(config, &[]).await
}

/// `check_config` with more variables set in mcpd's environment.
async fn check_config_with(config: &Path, vars: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = tokio::process::Command::new(mcpd_bin());
    cmd.arg("check-config").arg("--config").arg(config);
    // The stores the import wrote to, beside the config: check-config looks secrets up.
    isolate(&mut cmd, config.parent().expect("the config's directory"));
    let out = cmd
        .env("SENTRY_TOKEN", "t")
        .env("TEAM_ID", "t")
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
    // Remote entries: transport, references copied, literal secrets moved to the store.
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
        text.contains("X-Api-Key = \"${secret:legacy-events-X-Api-Key}\""),
        "{text}"
    );
    assert!(
        !err.contains("IMPORTED_") && !out.contains("literal-key-123"),
        "{out}{err}"
    );
    // VS Code inputs cannot be resolved: skipped with a warning.
    assert!(!text.contains("input:"), "{text}");
    assert!(err.contains("X-Key skipped"), "{err}");
    // A stdio server's literal token moves too.
    assert!(
        text.contains(
            "GITHUB_PERSONAL_ACCESS_TOKEN = \"${secret:github-tools-GITHUB_PERSONAL_ACCESS_TOKEN}\""
        ),
        "{text}"
    );
    assert!(!text.contains("ghp_literal_secret") && !err.contains("ghp_literal_secret"));
    assert!(
        out.contains("[servers.github-tools] env GITHUB_PERSONAL_ACCESS_TOKEN: secret github-tools-GITHUB_PERSONAL_ACCESS_TOKEN in the file store"),
        "{out}"
    );

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
    let (code, _, err) = mcpd_in(dir.path(), &["import", "--from", "emacs", "--config", &c]).await;
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("claude-desktop"), "{err}");
    let (code, _, _) = mcpd_in(dir.path(), &["import", "--bogus"]).await;
    assert_eq!(code, 64);
    let (code, out, _) = mcpd_in(dir.path(), &["import", "--help"]).await;
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
    let (code, _, err) = mcpd_in(
        dir.path(),
        &["import", "--from", &client, "--config", &config_arg],
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
const OAUTH_VARS: [(&str, &str); 3] = [
    ("NOTION_CLIENT_SECRET", "s2"),
    ("PIPES_CLIENT_SECRET", "s3"),
    ("STATIC_TOKEN", "t"),
];

/// The Cursor and VS Code parts of `oauth_settings_of_remote_servers_are_carried_over`,
/// and the notes on redirects and secrets left in a keychain.
fn cursor_and_vscode_oauth_carried_over(parsed: &toml::Table, err: &str) {
    // Cursor: "auth" with CLIENT_ID, CLIENT_SECRET as ${env:VAR} and a list of scopes.
    let pipes = oauth(parsed, "pipes").expect("pipes oauth");
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
    let env_id = oauth(parsed, "pipes-env-id").expect("pipes-env-id oauth");
    assert_eq!(env_id.len(), 1, "{env_id:?}");
    assert_eq!(strs(&env_id["scopes"]), ["kb:read"]);
    assert!(
        err.contains("auth.CLIENT_ID \"${env:PIPES_CLIENT_ID}\" is a placeholder"),
        "{err}"
    );

    // VS Code: "oauth" with clientId only.
    let vs = oauth(parsed, "vs-slack").expect("vs-slack oauth");
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
}

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
    // A literal clientSecret is moved into the secret store; scopes are split and
    // deduplicated.
    let linear = oauth(&parsed, "linear").expect("linear oauth");
    assert_eq!(linear["client_id"].as_str(), Some("lin-client"));
    assert_eq!(
        linear["client_secret"].as_str(),
        Some("${secret:linear-oauth_client_secret}")
    );
    assert_eq!(strs(&linear["scopes"]), ["read", "write"]);
    let said = format!("{out}{err}");
    assert!(
        said.contains("[servers.linear] OAuth client secret: secret linear-oauth_client_secret in the file store"),
        "{said}"
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

    cursor_and_vscode_oauth_carried_over(&parsed, &err);

    // The daemon accepts it once the variables are set; with one missing, only that server
    // will not start, and check-config says which variable it waits for.
    let (code, out, cerr) = check_config_with(&config, &OAUTH_VARS).await;
    assert_eq!(code, 0, "check-config: {out}{cerr}\n{text}");
    assert!(
        out.contains("server slack: https://mcp.slack.com/mcp"),
        "{out}"
    );
    assert!(!out.contains("will not start"), "{out}");
    let (code, out, cerr) = check_config_with(&config, &OAUTH_VARS[1..]).await;
    assert_eq!(code, 0, "{out}{cerr}");
    let waiting = out
        .lines()
        .filter(|l| l.contains("will not start"))
        .collect::<Vec<_>>();
    assert_eq!(waiting.len(), 1, "{out}");
    assert!(
        waiting[0].contains("NOTION_CLIENT_SECRET") && waiting[0].contains("client_secret_env"),
        "{out}"
    );

    // Importing again finds every table, oauth included, already present.
    let (code, _, err) = import(&fixtures, &config, &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("nothing new to import"), "{err}");
    assert!(!err.contains("different definition"), "{err}");
    assert_eq!(read(&config), text);
}

/// The closing lines of an import's stderr: one `[servers.NAME] will not …` line per
/// server that still needs a variable, then what they mean and how to set them.
fn closing_lines(err: &str) -> Vec<&str> {
    let lines: Vec<&str> = err.lines().collect();
    let first = lines
        .iter()
        .position(|l| l.starts_with("[servers."))
        .unwrap_or_else(|| panic!("no [servers.NAME] lines in:\n{err}"));
    let closing = lines[first..].to_vec();
    let last = closing.last().copied().unwrap_or_default();
    assert!(
        last.contains("systemctl --user edit mcpd")
            && last.contains("Environment=")
            && last.contains("EnvironmentFile=")
            && last.contains("mcpd serve"),
        "the import does not end saying how to set them:\n{err}"
    );
    closing
}

/// `mcpd import ARGS` in an empty working directory with HOME (and the clients' own
/// homes) pointing at `home`, and the extra variables `vars`.
async fn import_as_user(
    home: &Path,
    args: &[&str],
    vars: &[(&str, &Path)],
) -> (i32, String, String) {
    let cwd = tempfile::tempdir_in(home).expect("working dir");
    let mut cmd = Command::new(mcpd_bin());
    isolate(&mut cmd, home);
    let out = cmd
        .arg("import")
        .args(args)
        .current_dir(cwd.path())
        .env_remove("CODEX_HOME")
        .env_remove("GEMINI_CLI_HOME")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .envs(vars.iter().copied())
        .output()
        .await
        .expect("run mcpd import");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Imports `fixture` into a new config and checks that none of `secrets` reached the
/// config or the output; returns the temp dir, the config's path, its text and its
/// table, and the import's (stdout, stderr).
async fn imported_without(
    secrets: &[&str],
    fixture: &str,
) -> (
    tempfile::TempDir,
    PathBuf,
    String,
    toml::Table,
    (String, String),
) {
    let dir = temp();
    let config = dir.path().join("mcpd.toml");
    let (code, out, err) = import(&[fixture], &config, &[]).await;
    assert_eq!(code, 0, "stdout {out}\nstderr {err}");
    let text = read(&config);
    for secret in secrets {
        assert!(!text.contains(secret), "{secret} leaked into:\n{text}");
        assert!(
            !out.contains(secret) && !err.contains(secret),
            "{secret} printed:\n{out}\n{err}"
        );
    }
    let parsed: toml::Table = toml::from_str(&text).expect("the written config is TOML");
    (dir, config, text, parsed, (out, err))
}

#[tokio::test]
async fn gemini_cli_settings_import_with_their_keys_mapped() {
    let (_dir, config, text, parsed, (_out, err)) = imported_without(
        &["ghp_literal_token_abc", "literal-gemini-secret"],
        "gemini_settings.json",
    )
    .await;

    // stdio: `$VAR` in env is a reference, left for mcpd's environment; timeout (ms) and
    // includeTools map to mcpd's timeout and tool filter.
    let github = server(&parsed, "github");
    assert_eq!(github["command"].as_str(), Some("docker"));
    assert_eq!(
        strs(&github["args"]),
        ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"]
    );
    assert_eq!(github["cwd"].as_str(), Some("/home/me/work"));
    let env = github["env"].as_table().expect("env");
    assert_eq!(env.len(), 1, "{env:?}");
    assert_eq!(env["LOG_LEVEL"].as_str(), Some("debug"));
    assert_eq!(github["timeout"].as_str(), Some("30s"));
    assert_eq!(
        strs(&github["tools"]["allow"]),
        ["create_issue", "list_issues"]
    );
    assert!(
        text.contains("# GitHub tools\n[servers.github]\n"),
        "{text}"
    );
    assert!(err.contains("\"github\": trust not copied"), "{err}");

    // sse: `"type": "sse"`, a ${VAR} header kept, excludeTools as the tool filter's deny.
    let events = server(&parsed, "events");
    assert_eq!(
        events["url"].as_str(),
        Some("https://events.example.com/sse")
    );
    assert_eq!(events["transport"].as_str(), Some("sse"));
    assert_eq!(
        events["headers"]["X-Api-Key"].as_str(),
        Some("${EVENTS_KEY}")
    );
    assert_eq!(strs(&events["tools"]["deny"]), ["delete_event"]);
    // http: `"type": "http"` is left to mcpd's auto; the literal token moves to the secret
    // store, its scheme stays.
    let remote = server(&parsed, "gh-remote");
    assert!(!remote.contains_key("transport"), "{remote:?}");
    assert_eq!(
        remote["headers"]["Authorization"].as_str(),
        Some("Bearer ${secret:gh-remote-Authorization}")
    );
    // httpUrl (Streamable HTTP) is the url; Gemini's oauth carries over.
    let docs = server(&parsed, "legacy-docs");
    assert_eq!(docs["url"].as_str(), Some("https://docs.example.com/mcp"));
    let oauth = oauth(&parsed, "legacy-docs").expect("legacy-docs oauth");
    assert_eq!(oauth["client_id"].as_str(), Some("gemini-docs-client"));
    assert_eq!(
        oauth["client_secret"].as_str(),
        Some("${secret:legacy-docs-oauth_client_secret}")
    );
    assert_eq!(strs(&oauth["scopes"]), ["docs.read", "offline_access"]);
    assert!(err.contains("oauth.redirectUri not copied"), "{err}");
    assert!(
        err.contains("authProviderType \"google_credentials\" not copied"),
        "{err}"
    );
    // mcp.excluded: kept, but not started.
    assert_eq!(server(&parsed, "memory")["enabled"].as_bool(), Some(false));
    assert!(!server(&parsed, "events").contains_key("enabled"));

    let closing = closing_lines(&err);
    let line = "[servers.events] will not start until EVENTS_KEY is set in mcpd's environment (header X-Api-Key)";
    assert!(closing.contains(&line), "{line:?} missing in:\n{err}");
    assert!(
        closing.iter().any(|l| l.starts_with(
            "[servers.github] will not get GITHUB_PERSONAL_ACCESS_TOKEN until it is set in mcpd's environment"
        )),
        "{err}"
    );
    assert_eq!(
        closing
            .iter()
            .filter(|l| l.starts_with("[servers."))
            .count(),
        2,
        "{err}"
    );

    let vars = [("EVENTS_KEY", "k")];
    let (code, out, cerr) = check_config_with(&config, &vars).await;
    assert_eq!(code, 0, "check-config: {out}{cerr}\n{text}");
    assert!(!out.contains("will not start"), "{out}");
    assert!(out.contains("server memory (disabled)"), "{out}");
}

#[tokio::test]
async fn codex_config_toml_imports_with_its_keys_mapped() {
    let (_dir, config, text, parsed, (_out, err)) = imported_without(
        &["literal-codex-secret", "ghp_codex_literal"],
        "codex_config.toml",
    )
    .await;

    // stdio: env (a table) copied as it is, cwd, both timeouts and enabled_tools.
    let github = server(&parsed, "github");
    assert_eq!(github["command"].as_str(), Some("docker"));
    assert_eq!(
        strs(&github["args"]),
        ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"]
    );
    assert_eq!(
        github["env"]["GITHUB_PERSONAL_ACCESS_TOKEN"].as_str(),
        Some("${secret:github-GITHUB_PERSONAL_ACCESS_TOKEN}")
    );
    assert_eq!(github["env"]["LOG_LEVEL"].as_str(), Some("debug"));
    assert_eq!(github["cwd"].as_str(), Some("/home/me/work"));
    assert_eq!(github["timeout"].as_str(), Some("120s"));
    assert_eq!(github["health"]["startup_timeout"].as_str(), Some("20s"));
    assert_eq!(
        strs(&github["tools"]["allow"]),
        ["create_issue", "list_issues"]
    );
    assert_eq!(
        strs(&server(&parsed, "fs")["args"]),
        [
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "/home/me/projects"
        ]
    );

    // Streamable HTTP: bearer_token_env_var, literal http_headers (one that is no secret
    // copied as it is), env_http_headers.
    let remote = server(&parsed, "remote");
    assert_eq!(remote["url"].as_str(), Some("https://mcp.example.com/mcp"));
    assert!(!remote.contains_key("transport"), "{remote:?}");
    assert_eq!(remote["bearer_token_env"].as_str(), Some("EXAMPLE_TOKEN"));
    assert_eq!(
        remote["headers"]["X-Client"].as_str(),
        Some("mcpd-import-test")
    );
    assert_eq!(
        remote["headers"]["X-Team"].as_str(),
        Some("${EXAMPLE_TEAM}")
    );
    assert_eq!(strs(&remote["tools"]["deny"]), ["delete_everything"]);
    // enabled = false, and the OAuth client `codex mcp add --oauth-client-id` wrote.
    assert_eq!(server(&parsed, "docs")["enabled"].as_bool(), Some(false));
    let linear = oauth(&parsed, "linear").expect("linear oauth");
    assert_eq!(linear["client_id"].as_str(), Some("lin-codex"));
    assert_eq!(
        linear["client_secret"].as_str(),
        Some("${secret:linear-oauth_client_secret}")
    );
    assert!(err.contains("oauth.callback_url not copied"), "{err}");

    let closing = closing_lines(&err);
    let line = "[servers.remote] will not start until EXAMPLE_TEAM and EXAMPLE_TOKEN are set in mcpd's environment (header X-Team; bearer token)";
    assert!(closing.contains(&line), "{line:?} missing in:\n{err}");
    assert!(
        closing.iter().any(|l| l.starts_with(
            "[servers.github] will not get GITHUB_HOST until it is set in mcpd's environment"
        )),
        "{err}"
    );

    let vars = [("EXAMPLE_TOKEN", "t"), ("EXAMPLE_TEAM", "team")];
    let (code, out, cerr) = check_config_with(&config, &vars).await;
    assert_eq!(code, 0, "check-config: {out}{cerr}\n{text}");
    assert!(!out.contains("will not start"), "{out}");
    assert!(
        out.contains("server remote: https://mcp.example.com/mcp (transport auto, bearer token)"),
        "{out}"
    );
    assert!(out.contains("server docs (disabled)"), "{out}");
}

#[tokio::test]
async fn a_codex_file_is_read_as_toml_whatever_its_name() {
    let dir = temp();
    let config = dir.path().join("mcpd.toml");
    // No .toml extension: recognised by its [mcp_servers] table.
    let renamed = dir.path().join("codex-config");
    std::fs::copy(fixture("codex_config.toml"), &renamed).unwrap();
    let from = renamed.display().to_string();
    let c = config.display().to_string();
    let (code, out, err) = mcpd_in(dir.path(), &["import", "--from", &from, "--config", &c]).await;
    assert_eq!(code, 0, "stdout {out}\nstderr {err}");
    assert!(read(&config).contains("[servers.remote]\n"));

    // A broken .toml file is reported as TOML, naming the file, and nothing is written.
    let broken = dir.path().join("config.toml");
    std::fs::write(&broken, "[mcp_servers.x\ncommand = \"y\"\n").unwrap();
    let before = read(&config);
    let from = broken.display().to_string();
    let (code, _, err) = mcpd_in(dir.path(), &["import", "--from", &from, "--config", &c]).await;
    assert_eq!(code, 78, "{err}");
    assert!(err.contains("config.toml is not valid TOML"), "{err}");
    assert!(!err.contains("JSON"), "{err}");
    assert_eq!(read(&config), before);
}

#[tokio::test]
async fn from_gemini_and_from_codex_read_the_clients_own_files() {
    let home = temp();
    let h = home.path();
    std::fs::create_dir_all(h.join(".gemini")).unwrap();
    std::fs::copy(
        fixture("gemini_settings.json"),
        h.join(".gemini/settings.json"),
    )
    .unwrap();
    std::fs::create_dir_all(h.join("codex-home")).unwrap();
    std::fs::copy(
        fixture("codex_config.toml"),
        h.join("codex-home/config.toml"),
    )
    .unwrap();
    let config = h.join("mcpd.toml");
    let c = config.display().to_string();

    let codex_home = h.join("codex-home");
    let (code, out, err) = import_as_user(
        h,
        &[
            "--from",
            "gemini",
            "--from",
            "codex",
            "--config",
            &c,
            "--dry-run",
        ],
        &[("CODEX_HOME", &codex_home)],
    )
    .await;
    assert_eq!(code, 0, "stdout {out}\nstderr {err}");
    let gemini_file = h.join(".gemini/settings.json");
    let codex_file = codex_home.join("config.toml");
    assert!(
        out.contains(&format!(
            "# imported from {} (gemini)\n",
            gemini_file.display()
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "# imported from {} (codex)\n",
            codex_file.display()
        )),
        "{out}"
    );
    // Both have a "github": Codex's, read second, gets the next free name.
    assert!(
        out.contains("[servers.github]\n") && out.contains("[servers.github-2]\n"),
        "{out}"
    );
    assert!(
        err.contains("server \"github\" becomes [servers.github-2]"),
        "{err}"
    );
    assert!(
        closing_lines(&err)
            .iter()
            .any(|l| l.starts_with("[servers.github-2] will not get GITHUB_HOST"))
    );
    assert!(!config.exists());

    // Without CODEX_HOME, Codex's file is ~/.codex/config.toml.
    std::fs::rename(&codex_home, h.join(".codex")).unwrap();
    let (code, out, err) = import_as_user(h, &["--from", "codex", "--config", &c], &[]).await;
    assert_eq!(code, 0, "stdout {out}\nstderr {err}");
    let text = read(&config);
    assert!(
        text.contains(&format!(
            "# imported from {} (codex)\n",
            h.join(".codex/config.toml").display()
        )),
        "{text}"
    );
    assert!(text.contains("[servers.remote]\n"), "{text}");

    // A Gemini CLI settings.json without servers (before any `gemini mcp add`) is no error.
    std::fs::write(
        h.join(".gemini/settings.json"),
        "{\"ui\": {\"theme\": \"Default\"}}",
    )
    .unwrap();
    let (code, _, err) = import_as_user(h, &["--from", "gemini", "--config", &c], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("nothing new to import"), "{err}");
}

#[tokio::test]
async fn a_closed_standard_output_ends_the_import_without_a_panic() {
    let dir = temp();
    let config = dir.path().join("mcpd.toml");
    // A reader that left before anything was written: every write fails with EPIPE.
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    // Not `output()`: tokio's pipes standard output whatever was set.
    let mut cmd = Command::new(mcpd_bin());
    isolate(&mut cmd, dir.path());
    let child = cmd
        .args([
            "import",
            "--from",
            &fixture("mcp.json"),
            "--dry-run",
            "--config",
        ])
        .arg(&config)
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run mcpd import");
    let out = child
        .wait_with_output()
        .await
        .expect("wait for mcpd import");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!config.exists());
}
