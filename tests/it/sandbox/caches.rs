//! A confined server's package caches and tool settings (issue #54).
//!
//! It cannot change a package in the user's `npx` or `uv` cache (which the user's next
//! `npx` would run) nor in another server's cache, and fills a private cache of its own,
//! which its npm, uv and pip variables name; it reads npm's and git's settings without
//! their credentials (`~/.npmrc`'s token, `~/.gitconfig`'s `http.extraHeader`, git's
//! credential stores), and `git` still runs. Each attack is made by the same server
//! unconfined too, where it works.

use crate::sandbox::escapes::{ESCAPE, attempt, only_unconfined, pair, secrets};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The `env` tool's answer of `server`.
async fn env_of(a: &mut crate::support::Agent, server: &str) -> Value {
    let r = attempt(a, server, "env", json!({})).await;
    r.strip_prefix("ok: ")
        .and_then(|j| serde_json::from_str(j).ok())
        .unwrap_or_else(|| panic!("{server}: env answers ok and an object: {r}"))
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

#[tokio::test]
async fn a_confined_server_cannot_poison_the_users_or_another_servers_package_cache_but_fills_its_own()
 {
    let s = secrets();
    let home = s.home();
    let npx = home.join(".npm/_npx/1a2b3c/node_modules/pkg/index.js");
    let uv = home.join(".cache/uv/archive-v0/abc/pkg/__init__.py");
    let tools = home.join(".local/share/uv/tools/pkg/bin/pkg");
    let pip = home.join(".cache/pip/http-v2/a/b");
    for f in [&npx, &uv, &tools, &pip] {
        write(f, "original");
    }
    let d = pair(&s)
        .fixture("other", &["--tools", ESCAPE])
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    for (what, file) in [
        ("rewriting a package in ~/.npm/_npx", &npx),
        ("rewriting a package in ~/.cache/uv", &uv),
        ("rewriting a tool uv installed", &tools),
        ("rewriting an entry of ~/.cache/pip", &pip),
    ] {
        let open = attempt(
            &mut a,
            "open",
            "try_write",
            json!({"path": file, "text": "by open"}),
        )
        .await;
        let boxed = attempt(
            &mut a,
            "boxed",
            "try_write",
            json!({"path": file, "text": "by boxed"}),
        )
        .await;
        only_unconfined(what, &open, &boxed, &["EACCES"]);
        assert_eq!(std::fs::read_to_string(file).unwrap(), "by open", "{what}");
    }

    // Its own cache: named by its tools' variables, made 0700, writable by it alone.
    let root = home.join(".cache/mcpd/servers");
    let own = root.join("boxed");
    let env = env_of(&mut a, "boxed").await;
    for (name, dir) in [
        ("npm_config_cache", "npm"),
        ("UV_CACHE_DIR", "uv"),
        ("UV_TOOL_DIR", "uv-tools"),
        ("UV_PYTHON_INSTALL_DIR", "uv-python"),
        ("PIP_CACHE_DIR", "pip"),
        ("XDG_CACHE_HOME", "xdg"),
    ] {
        assert_eq!(env[name], json!(own.join(dir)), "{name} in {env}");
    }
    let mode = std::fs::metadata(&own).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "the private cache is the user's alone");
    let mine = own.join("npm/_npx/1a2b3c/index.js");
    std::fs::create_dir_all(mine.parent().unwrap()).unwrap();
    let r = attempt(&mut a, "boxed", "try_write", json!({"path": mine})).await;
    assert!(
        r.starts_with("ok"),
        "confined, its own cache is writable: {r}"
    );
    let others = root.join("other/npm-probe");
    let open = attempt(&mut a, "open", "try_write", json!({"path": others})).await;
    let boxed = attempt(&mut a, "boxed", "try_write", json!({"path": others})).await;
    only_unconfined(
        "writing in another server's cache",
        &open,
        &boxed,
        &["EACCES"],
    );
    let r = attempt(&mut a, "other", "try_write", json!({"path": others})).await;
    assert!(r.starts_with("ok"), "the other server writes its own: {r}");
}

/// `git config --global --list` as `server` runs it: its exit code and output.
async fn git_config(a: &mut crate::support::Agent, server: &str) -> (i64, String) {
    let r = a
        .call(
            &format!("{server}__exec"),
            json!({"command": "git", "args": ["-C", "/", "config", "--global", "--list"]}),
        )
        .await;
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    let out: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {r}"));
    let code = out["code"].as_i64().unwrap_or(-1);
    (
        code,
        format!(
            "{}{}",
            out["stdout"].as_str().unwrap_or_default(),
            out["stderr"].as_str().unwrap_or_default()
        ),
    )
}

#[tokio::test]
async fn a_confined_server_reads_npm_and_git_settings_without_their_credentials_and_git_runs() {
    const NPM_TOKEN: &str = "npm_CANARY9d1c";
    const GIT_TOKEN: &str = "ghp_CANARY5e7a";
    let s = secrets();
    let home = s.home();
    write(
        &home.join(".npmrc"),
        &format!(
            "registry=https://registry.example.test/\n//registry.example.test/:_authToken={NPM_TOKEN}\n"
        ),
    );
    write(
        &home.join(".gitconfig"),
        &format!(
            "[user]\n\tname = Ada\n\temail = ada@example.test\n[http]\n\textraheader = AUTHORIZATION: bearer {GIT_TOKEN}\n[credential]\n\thelper = store\n"
        ),
    );
    let store = format!("https://ada:{GIT_TOKEN}@github.com\n");
    write(&home.join(".git-credentials"), &store);
    write(&home.join(".config/git/credentials"), &store);
    write(&home.join(".config/git/ignore"), "*.swp\n");
    let d = pair(&s)
        .fixture_with("boxed-git", &["--tools", "exec,env"], "")
        .fixture_with("open-git", &["--tools", "exec,env"], "sandbox = false")
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    for (what, file, token) in [
        ("reading ~/.npmrc", ".npmrc", NPM_TOKEN),
        ("reading ~/.gitconfig", ".gitconfig", GIT_TOKEN),
        ("reading ~/.git-credentials", ".git-credentials", GIT_TOKEN),
        (
            "reading ~/.config/git/credentials",
            ".config/git/credentials",
            GIT_TOKEN,
        ),
    ] {
        let args = json!({"path": home.join(file)});
        let open = attempt(&mut a, "open", "try_read", args.clone()).await;
        assert!(
            open.contains(token),
            "{what}, unconfined, shows the token: {open}"
        );
        let boxed = attempt(&mut a, "boxed", "try_read", args).await;
        only_unconfined(what, &open, &boxed, &["EACCES"]);
    }
    // What it reads instead: the settings without the token.
    let env = env_of(&mut a, "boxed").await;
    let npmrc = env["NPM_CONFIG_USERCONFIG"]
        .as_str()
        .expect("NPM_CONFIG_USERCONFIG");
    let r = attempt(&mut a, "boxed", "try_read", json!({"path": npmrc})).await;
    assert_eq!(r, "ok: registry=https://registry.example.test/\n");
    let r = attempt(&mut a, "boxed", "try_write", json!({"path": npmrc})).await;
    assert!(
        r.starts_with("err: EACCES"),
        "the settings are read-only: {r}"
    );
    // git runs, and sees who commits but not the token; unconfined it sees the token.
    let (code, open) = git_config(&mut a, "open-git").await;
    assert!(
        code == 0 && open.contains(GIT_TOKEN),
        "unconfined git sees the token: {open}"
    );
    let (code, boxed) = git_config(&mut a, "boxed-git").await;
    assert_eq!(code, 0, "git runs confined: {boxed}");
    assert!(boxed.contains("user.name=Ada"), "{boxed}");
    assert!(
        !boxed.contains(GIT_TOKEN) && !boxed.contains("credential"),
        "{boxed}"
    );
    assert!(
        !boxed.contains("unable to access"),
        "git reads what it needs: {boxed}"
    );
}
