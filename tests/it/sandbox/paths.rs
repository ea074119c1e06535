//! A path a confined server names outside its sandbox is named before the server meets EACCES.
//!
//! The path is in the server's `args` or `env`. `mcpd check-config` and `mcpd import`
//! warn with the setting and the `[servers.NAME.sandbox]` entry to add, and say nothing
//! once it is there; the shipped example runs under `sandbox = true` without such a
//! warning.

use crate::import::clients::mcpd_in;
use crate::support::*;
use std::path::Path;

/// The lines of `out` that warn about a path outside a sandbox.
fn sandbox_warnings(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| l.contains("warning: sandbox:"))
        .collect()
}

/// A directory under `/tmp` with a settings file in it.
fn data_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("mcpd-data")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::write(dir.path().join("settings.toml"), "x = 1\n").unwrap();
    dir
}

/// A config confining `mem`, whose launch names a file to write, a database and a
/// settings file in `data`, with `extra` lines for its table.
fn config(data: &Path, extra: &str) -> String {
    let d = data.display();
    format!(
        "[daemon]\nsandbox = true\n[servers.mem]\ncommand = {:?}\n\
         args = [\"--db\", \"{d}/store.db\", \"--config={d}/settings.toml\"]\n\
         env = {{ MEMORY_FILE_PATH = \"{d}/memory.json\" }}\n{extra}",
        fixture_bin()
    )
}

#[tokio::test]
async fn check_config_names_a_path_outside_the_sandbox_and_the_entry_that_grants_it() {
    let data = data_dir();
    let d = data.path().display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mcpd.toml");
    std::fs::write(&file, config(data.path(), "")).unwrap();
    let (code, out, err) = run_mcpd(&["check-config", "--config", path(&file)], None).await;
    assert_eq!(code, 0, "{out}\n{err}");
    let warnings = sandbox_warnings(&out);
    let warned = |setting: &str, needle: &str| {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(&format!("sandbox: {setting} is ")) && w.contains(needle)),
            "a warning about {setting} with {needle}:\n{out}"
        );
    };
    // A file to write that does not exist yet: its directory, to write.
    warned(
        "env.MEMORY_FILE_PATH",
        &format!("add [servers.mem.sandbox] write = [\"{d}\"]"),
    );
    warned("env.MEMORY_FILE_PATH", "its TMPDIR is a private directory");
    warned("args[1]", &format!("write = [\"{d}\"]"));
    // A settings file that exists: itself, to read.
    warned(
        "args[2]",
        &format!("add [servers.mem.sandbox] read = [\"{d}/settings.toml\"]"),
    );
    assert_eq!(warnings.len(), 3, "{out}");

    // With the directory granted, nothing is outside.
    let granted = format!("[servers.mem.sandbox]\nwrite = [\"{d}\"]\n");
    std::fs::write(&file, config(data.path(), &granted)).unwrap();
    let (code, out, err) = run_mcpd(&["check-config", "--config", path(&file)], None).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(sandbox_warnings(&out), Vec::<&str>::new(), "{out}");
    // Unconfined, nothing is checked.
    let open = config(data.path(), "sandbox = false\n");
    std::fs::write(&file, open).unwrap();
    let (_, out, _) = run_mcpd(&["check-config", "--config", path(&file)], None).await;
    assert_eq!(sandbox_warnings(&out), Vec::<&str>::new(), "{out}");
}

#[tokio::test]
async fn import_warns_about_a_path_an_imported_server_names_outside_the_daemons_sandbox() {
    let data = data_dir();
    let d = data.path().display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let client = dir.path().join("claude_desktop_config.json");
    let entry = serde_json::json!({"mcpServers": {"memory": {
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-memory"],
        "env": {"MEMORY_FILE_PATH": format!("{d}/memory.json")},
    }}});
    std::fs::write(&client, entry.to_string()).unwrap();
    let config = dir.path().join("mcpd.toml");
    for (daemon, warns) in [("sandbox = true", true), ("sandbox = false", false)] {
        std::fs::write(&config, format!("[daemon]\n{daemon}\n")).unwrap();
        let args = [
            "import",
            "--dry-run",
            "--from",
            path(&client),
            "--config",
            path(&config),
        ];
        let (code, out, err) = mcpd_in(dir.path(), &args).await;
        assert_eq!(code, 0, "{out}\n{err}");
        let warning =
            format!("[servers.memory]: warning: sandbox: env.MEMORY_FILE_PATH is {d}/memory.json");
        assert_eq!(err.contains(&warning), warns, "{daemon}:\n{err}");
        if warns {
            assert!(
                err.contains(&format!("add [servers.memory.sandbox] write = [\"{d}\"]")),
                "{err}"
            );
        }
    }
}

#[tokio::test]
async fn the_example_config_names_no_path_outside_the_sandbox_once_it_is_turned_on() {
    let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/config/mcpd.toml");
    let text = std::fs::read_to_string(shipped).unwrap();
    assert!(text.contains("\n# sandbox = true"), "the example offers it");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mcpd.toml");
    std::fs::write(
        &file,
        text.replace("\n# sandbox = true", "\nsandbox = true"),
    )
    .unwrap();
    let (code, out, err) = run_mcpd(&["check-config", "--config", path(&file)], None).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("sandbox: landlock"), "it confines:\n{out}");
    assert_eq!(sandbox_warnings(&out), Vec::<&str>::new(), "{out}");
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}
