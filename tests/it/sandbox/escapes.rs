//! The Landlock sandbox (issue #41) against the fixture's escape tools.
//!
//! A confined server reads and writes nothing outside its profile (directly, through a
//! symlink or `..`), signals neither the daemon nor a sibling, reads no other process's
//! environment, and is refused as an agent on mcpd's socket, while the same server with
//! `sandbox = false` does each of these (so each test can fail); helpers for the other
//! `sandbox_*` files.

use crate::projects::instances::{IN_PROJECT, agent_in, projects, row, show};
use crate::support::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The fixture's escape tools, and `pid`.
pub const ESCAPE: &str = "try_read,try_socket,try_proxy,try_write,try_connect,try_udp,try_kill,try_unix,try_abstract,try_environ,fds,env,pid";

/// What the fake `~/.ssh/id_rsa` holds.
pub const KEY: &str = "-----BEGIN FAKE OPENSSH PRIVATE KEY-----";
/// What the secret in the other temp dir holds.
pub const SECRET: &str = "the secret in another temp dir";

/// A fake home (the daemon's `$HOME`) with `~/.ssh/id_rsa` and a package cache `~/.npm`,
/// and a secret in a temp dir of its own.
pub struct Secrets {
    home: tempfile::TempDir,
    elsewhere: tempfile::TempDir,
}

impl Secrets {
    pub fn home(&self) -> PathBuf {
        std::fs::canonicalize(self.home.path()).expect("canonical home")
    }

    pub fn key(&self) -> PathBuf {
        self.home().join(".ssh/id_rsa")
    }

    /// The other temp dir.
    pub fn elsewhere(&self) -> PathBuf {
        std::fs::canonicalize(self.elsewhere.path()).expect("canonical temp dir")
    }

    pub fn secret(&self) -> PathBuf {
        self.elsewhere().join("secret.txt")
    }
}

pub fn secrets() -> Secrets {
    let dir = |prefix: &str| {
        tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in("/tmp")
            .expect("temp dir")
    };
    let s = Secrets {
        home: dir("mcpd-home"),
        elsewhere: dir("mcpd-secret"),
    };
    std::fs::create_dir_all(s.home().join(".ssh")).expect("~/.ssh");
    std::fs::create_dir_all(s.home().join(".npm")).expect("~/.npm");
    std::fs::write(s.key(), KEY).expect("id_rsa");
    std::fs::write(s.secret(), SECRET).expect("secret");
    s
}

/// A daemon that confines every server (`[daemon] sandbox = true`), its `$HOME` the fake
/// home, with `boxed` (the default profile) and `open` (`sandbox = false`), both serving
/// the escape tools.
pub fn pair(s: &Secrets) -> DaemonBuilder {
    DaemonBuilder::new()
        .env("HOME", &show(&s.home()))
        // Servers' private caches under the fake home (empty counts as unset).
        .env("XDG_CACHE_HOME", "")
        .daemon("sandbox = true")
        .fixture("boxed", &["--tools", ESCAPE])
        .fixture_with("open", &["--tools", ESCAPE], "sandbox = false")
}

/// Calls `SERVER__TOOL`; the text the escape tools always answer, `ok: …` or `err: …`.
pub async fn attempt(a: &mut Agent, server: &str, tool: &str, args: Value) -> String {
    let r = a.call(&format!("{server}__{tool}"), args).await;
    assert!(
        r["result"]["isError"] != true,
        "the escape tools never answer isError: {r}"
    );
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{server}__{tool} gave no text result: {r}"))
        .to_owned()
}

/// Asserts the unconfined attempt worked (else the test proves nothing) and the confined
/// one failed with one of `errnos`.
pub fn only_unconfined(what: &str, open: &str, boxed: &str, errnos: &[&str]) {
    assert!(
        open.starts_with("ok"),
        "without the sandbox, {what} works (else this test proves nothing), but: {open}"
    );
    assert!(
        errnos
            .iter()
            .any(|e| boxed.starts_with(&format!("err: {e}"))),
        "under the sandbox, {what} must fail with {}; it gave: {boxed}",
        errnos.join(" or ")
    );
}

/// Runs the same attempt in `open`, then in `confined`, and checks it with [`only_unconfined`].
pub async fn escape(
    a: &mut Agent,
    confined: &str,
    what: &str,
    tool: &str,
    args: Value,
    errnos: &[&str],
) {
    let open = attempt(a, "open", tool, args.clone()).await;
    let boxed = attempt(a, confined, tool, args).await;
    only_unconfined(what, &open, &boxed, errnos);
}

/// The pid of a server's status row.
pub fn pid_of(status: &Value, name: &str) -> u32 {
    row(status, name)
        .and_then(status_pid)
        .unwrap_or_else(|| panic!("no pid for {name} in {status}"))
}

#[tokio::test]
async fn a_confined_server_reads_neither_a_secret_elsewhere_nor_the_ssh_key_but_reads_system_files()
{
    let s = secrets();
    let d = pair(&s).start().await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    for (what, path, content) in [
        ("reading a file in another temp dir", s.secret(), SECRET),
        ("reading ~/.ssh/id_rsa", s.key(), KEY),
    ] {
        let args = json!({"path": path});
        let open = attempt(&mut a, "open", "try_read", args.clone()).await;
        assert_eq!(open, format!("ok: {content}"), "{what}, unconfined");
        let boxed = attempt(&mut a, "boxed", "try_read", args).await;
        only_unconfined(what, &open, &boxed, &["EACCES"]);
    }
    // The default profile leaves the system and the server's own install readable.
    for path in ["/etc/passwd", fixture_bin()] {
        let r = attempt(&mut a, "boxed", "try_read", json!({"path": path})).await;
        assert!(r.starts_with("ok: "), "confined, {path} is readable: {r}");
    }
}

#[tokio::test]
async fn a_confined_server_writes_neither_in_home_nor_in_another_temp_dir_but_in_its_package_cache()
{
    let s = secrets();
    let d = pair(&s).start().await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    for (what, dir) in [
        ("writing in $HOME", s.home()),
        ("writing in another temp dir", s.elsewhere()),
    ] {
        let (to_open, to_boxed) = (dir.join("pwned-open"), dir.join("pwned-boxed"));
        let open = attempt(&mut a, "open", "try_write", json!({"path": to_open})).await;
        let boxed = attempt(&mut a, "boxed", "try_write", json!({"path": to_boxed})).await;
        only_unconfined(what, &open, &boxed, &["EACCES"]);
        assert!(
            to_open.exists(),
            "{what}: the unconfined write made its file"
        );
        assert!(
            !to_boxed.exists(),
            "{what}: no file from the confined write"
        );
    }
    let cache = s.home().join(".cache/mcpd/servers/boxed/probe");
    let r = attempt(&mut a, "boxed", "try_write", json!({"path": cache})).await;
    assert!(
        r.starts_with("ok"),
        "confined, its private cache is writable: {r}"
    );
}

#[tokio::test]
async fn a_confined_project_server_leaves_its_project_neither_by_symlink_nor_by_dotdot_but_writes_in_it()
 {
    let s = secrets();
    let p = projects(1);
    let dir = &p.dirs[0];
    std::os::unix::fs::symlink(s.secret(), dir.join("link")).expect("symlink");
    std::fs::write(p.root().join("outside.txt"), "beside the project").expect("outside");
    std::fs::write(dir.join("inside.txt"), "in the project").expect("inside");
    let d = DaemonBuilder::new()
        .env("HOME", &show(&s.home()))
        .daemon("sandbox = true")
        .fixture_with("boxed", &["--tools", ESCAPE], IN_PROJECT)
        .fixture_with(
            "open",
            &["--tools", ESCAPE],
            &format!("{IN_PROJECT}\nsandbox = false"),
        )
        .start()
        .await;
    let mut a = agent_in(&d, dir).await;
    for name in ["boxed", "open"] {
        let slot = format!("{name}@{}", dir.display());
        d.wait_status(&format!("{slot} is ready"), |st| {
            row(st, &slot).is_some_and(|r| r["state"] == "ready")
        })
        .await;
    }
    eventually("both project servers' tools are listed", WAIT, || async {
        let names = d.initialized_agent().await.tool_names().await;
        let want = ["boxed__try_read", "open__try_read"];
        want.iter()
            .all(|w| names.iter().any(|n| n == w))
            .then_some(())
    })
    .await;

    let elsewhere = s.elsewhere();
    let away = elsewhere.file_name().expect("name").to_string_lossy();
    let escapes = [
        (
            "reading the secret through a symlink in the project",
            "link".to_owned(),
        ),
        (
            "reading beside the project by ../",
            "../outside.txt".to_owned(),
        ),
        (
            "reading beside the project by PROJECT/../",
            format!("{}/../outside.txt", dir.display()),
        ),
        (
            "reading the secret by PROJECT/../../",
            format!("{}/../../{away}/secret.txt", dir.display()),
        ),
    ];
    for (what, path) in escapes {
        escape(
            &mut a,
            "boxed",
            what,
            "try_read",
            json!({"path": path}),
            &["EACCES"],
        )
        .await;
    }
    for name in ["open", "boxed"] {
        let r = attempt(&mut a, name, "try_read", json!({"path": "inside.txt"})).await;
        assert_eq!(r, "ok: in the project", "{name} reads in its project");
        let made = dir.join(format!("made-by-{name}"));
        let r = attempt(&mut a, name, "try_write", json!({"path": made})).await;
        assert!(r.starts_with("ok"), "{name} writes in its project: {r}");
        assert!(made.exists(), "{name}'s file is in the project");
    }
}

#[tokio::test]
async fn a_confined_server_signals_neither_the_daemon_nor_a_sibling_but_itself() {
    // With user namespaces the others are not even in its PID namespace (ESRCH); without,
    // Landlock's scoping refuses (EPERM). Both are checked.
    for userns in [true, false] {
        let s = secrets();
        let mut b = pair(&s).fixture("peer", &["--tools", "pid"]);
        if !userns {
            b = b.env("MCPD_USERNS", "0");
        }
        let d = b.start().await;
        let st = d.wait_ready().await;
        let mut a = d.initialized_agent().await;
        let targets = [("the daemon", d.pid()), ("a sibling", pid_of(&st, "peer"))];
        let refused: &[&str] = if userns { &["ESRCH"] } else { &["EPERM"] };
        for (whom, pid) in targets {
            let what = format!("kill -0 of {whom} ({pid})");
            escape(
                &mut a,
                "boxed",
                &what,
                "try_kill",
                json!({"pid": pid}),
                refused,
            )
            .await;
        }
        // Its own pid as it sees it (2 in a PID namespace of its own).
        let own = attempt(&mut a, "boxed", "pid", json!({})).await;
        let own: u32 = own
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("a pid: {own}"));
        let r = attempt(&mut a, "boxed", "try_kill", json!({"pid": own})).await;
        assert!(r.starts_with("ok"), "a confined server signals itself: {r}");
    }
}

#[tokio::test]
async fn a_confined_server_reads_no_other_process_environment_in_proc() {
    // With user namespaces the daemon is not in its /proc at all (ENOENT); without,
    // Landlock refuses (EACCES). Both are checked.
    for userns in [true, false] {
        let s = secrets();
        let mut b = pair(&s).env("AWS_SECRET_ACCESS_KEY", "not-a-real-key");
        if !userns {
            b = b.env("MCPD_USERNS", "0");
        }
        let d = b.start().await;
        d.wait_ready().await;
        let mut a = d.initialized_agent().await;
        let args = json!({"pid": d.pid()});
        let open = attempt(&mut a, "open", "try_environ", args.clone()).await;
        assert!(
            open.contains("AWS_SECRET_ACCESS_KEY"),
            "unconfined, the daemon's environ names the secret: {open}"
        );
        let boxed = attempt(&mut a, "boxed", "try_environ", args).await;
        let refused: &[&str] = if userns {
            &["ENOENT"]
        } else {
            &["EACCES", "EPERM"]
        };
        only_unconfined("reading /proc/<daemon>/environ", &open, &boxed, refused);
        // Nor that of its namespace's init, a copy of the daemon (Landlock's scoping).
        if userns {
            let init = attempt(&mut a, "boxed", "try_environ", json!({"pid": 1})).await;
            assert!(
                init.starts_with("err: EACCES") || init.starts_with("err: EPERM"),
                "{init}"
            );
        }
    }
}

#[tokio::test]
async fn a_confined_server_is_refused_as_an_agent_on_the_daemons_socket() {
    let s = secrets();
    let d = pair(&s).start().await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let args = json!({
        "path": d.socket,
        "line": r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    });
    // No server may use the control methods (`hostile/server_hygiene.rs`); an unconfined one
    // may still call tools like any agent of its user.
    let open = attempt(&mut a, "open", "try_unix", args.clone()).await;
    assert!(
        open.starts_with("ok: connected; answer: ") && open.contains("\"tools\""),
        "unconfined, a server lists the tools as an agent would (else this test \
         proves nothing): {open}"
    );
    let boxed = attempt(&mut a, "boxed", "try_unix", args).await;
    let answered = boxed
        .strip_prefix("ok: connected; answer: ")
        .map(|line| serde_json::from_str::<Value>(line).unwrap_or(Value::Null));
    let refused = match &answered {
        None => true, // no connection, or closed at once: EOF or a failed read or write
        Some(answer) => answer.get("result").is_none() && answer["error"]["code"] == -32018,
    };
    assert!(
        refused,
        "under the sandbox, mcpd refuses the server's own processes as agents \
         (connection closed or an error answer); the server got: {boxed}"
    );
}

/// Starts `mcpd serve` on the builder's config from `sh` holding fd 7 open on `leak`
/// without close-on-exec, as a careless parent would: mcpd inherits it.
async fn spawn_with_leaked_fd(b: &DaemonBuilder, leak: &Path) -> tokio::process::Child {
    let config = b.dir().join("mcpd.toml");
    std::fs::write(&config, b.config_text()).expect("config");
    let log = std::fs::File::create(b.dir().join("daemon.log")).expect("log");
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg("exec 7>>\"$1\"; shift; exec \"$@\"")
        .arg("sh")
        .arg(leak)
        .arg(mcpd_bin())
        .args(["serve", "--config"])
        .arg(&config)
        .arg("--socket")
        .arg(b.dir().join("mcpd.sock"))
        .env("RUST_LOG", "mcpd=debug")
        .env_remove("MCPD_SOCKET")
        .env_remove("MCPD_CONFIG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("start mcpd");
    let socket = b.dir().join("mcpd.sock");
    eventually("the daemon's socket accepts connections", WAIT, || async {
        tokio::net::UnixStream::connect(&socket)
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    child
}

/// The `fds` tool's descriptors without close-on-exec: those the process inherited.
async fn inherited(a: &mut Agent, server: &str) -> (Vec<i64>, String) {
    let r = attempt(a, server, "fds", json!({})).await;
    let v: Value = r
        .strip_prefix("ok: ")
        .and_then(|j| serde_json::from_str(j).ok())
        .unwrap_or_else(|| panic!("{server}: fds answers ok and JSON: {r}"));
    let fds = v["inherited"].as_array().expect("inherited");
    (fds.iter().filter_map(Value::as_i64).collect(), r)
}

#[tokio::test]
async fn no_server_inherits_a_descriptor_but_stdio_even_one_the_daemon_leaks() {
    let s = secrets();
    let b = pair(&s);
    let leak = s.elsewhere().join("leaked-fd");
    let mut mcpd = spawn_with_leaked_fd(&b, &leak).await;
    let daemon_pid = mcpd.id().expect("pid");
    let fd7 = std::fs::read_link(format!("/proc/{daemon_pid}/fd/7"));
    assert_eq!(fd7.ok(), Some(leak.clone()), "mcpd itself holds fd 7");
    let socket = b.dir().join("mcpd.sock");
    eventually("every server is ready", WAIT, || async {
        let mut a = Agent::connect(&socket).await;
        let s = a.request("mcpd/status", None).await["result"].clone();
        let rows = s["servers"].as_array()?;
        rows.iter().all(|r| r["state"] == "ready").then_some(())
    })
    .await;
    let mut a = Agent::connect(&socket).await;
    a.initialize().await;
    // mcpd marks what it inherited close-on-exec at start, for every server
    // (`tests/it/hostile/server_hygiene.rs` shows a leak reaching a child without that).
    let (open, text) = inherited(&mut a, "open").await;
    assert_eq!(open, [0, 1, 2], "no server inherits mcpd's fd 7: {text}");
    let (boxed, text) = inherited(&mut a, "boxed").await;
    assert_eq!(
        boxed,
        [0, 1, 2],
        "under the sandbox, only stdin, stdout and stderr are inherited: {text}"
    );
    let _ = mcpd.start_kill();
}

/// The names a confined server's environment may hold besides its own `env` table and
/// the names its profile passes.
fn allowed_by_default(name: &str) -> bool {
    [
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "TERM",
        "TZ",
        "TMPDIR",
        // The certificates a TLS client trusts (a company's proxy CA), not secrets.
        "NODE_EXTRA_CA_CERTS",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        // Its private cache and settings (`caches.rs`).
        "npm_config_cache",
        "UV_CACHE_DIR",
        "UV_TOOL_DIR",
        "UV_TOOL_BIN_DIR",
        "UV_PYTHON_INSTALL_DIR",
        "UV_PYTHON_BIN_DIR",
        "PIP_CACHE_DIR",
        "BUN_INSTALL_CACHE_DIR",
        "XDG_CACHE_HOME",
        "NPM_CONFIG_USERCONFIG",
        "GIT_CONFIG_GLOBAL",
    ]
    .contains(&name)
        || name.starts_with("LC_")
}

/// The `env` tool's answer as an object.
async fn environment(a: &mut Agent, server: &str) -> serde_json::Map<String, Value> {
    let r = attempt(a, server, "env", json!({})).await;
    r.strip_prefix("ok: ")
        .and_then(|j| serde_json::from_str::<Value>(j).ok())
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_else(|| panic!("{server}: env answers ok and an object: {r}"))
}

#[tokio::test]
async fn a_confined_server_gets_a_clean_environment_with_only_the_names_its_profile_passes() {
    let s = secrets();
    let b = pair(&s);
    let socket = show(&b.dir().join("mcpd.sock"));
    let d = b
        .env("AWS_SECRET_ACCESS_KEY", "not-a-real-key")
        .env("FOO", "passed by name")
        .env("MCPD_SOCKET", &socket)
        .fixture_with(
            "named",
            &["--tools", ESCAPE],
            "env = { OWN = \"mine\" }\n[servers.named.sandbox]\nenv = [\"FOO\"]",
        )
        .start()
        .await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;

    let open = environment(&mut a, "open").await;
    for name in ["AWS_SECRET_ACCESS_KEY", "FOO"] {
        assert!(
            open.contains_key(name),
            "without the sandbox, {name} reaches the server (else this test proves \
             nothing): {:?}",
            open.keys()
        );
    }
    assert!(
        !open.contains_key("MCPD_SOCKET"),
        "MCPD_* is never passed, even without the sandbox: {:?}",
        open.keys()
    );

    let boxed = environment(&mut a, "boxed").await;
    let extra: Vec<&String> = boxed.keys().filter(|k| !allowed_by_default(k)).collect();
    assert!(
        extra.is_empty(),
        "under the sandbox, only PATH, HOME, LANG, LC_* and TMPDIR reach a server with no \
         env of its own; also got {extra:?} in {boxed:?}"
    );
    assert_eq!(boxed["HOME"], show(&s.home()), "HOME is the daemon's");
    let tmp = boxed["TMPDIR"]
        .as_str()
        .expect("a confined server has a TMPDIR");
    assert_ne!(tmp.trim_end_matches('/'), "/tmp", "TMPDIR is private");
    let probe = Path::new(tmp).join("probe");
    let r = attempt(&mut a, "boxed", "try_write", json!({"path": probe})).await;
    assert!(r.starts_with("ok"), "confined, TMPDIR is writable: {r}");

    let named = environment(&mut a, "named").await;
    assert_eq!(
        named.get("FOO"),
        Some(&json!("passed by name")),
        "{named:?}"
    );
    assert_eq!(named.get("OWN"), Some(&json!("mine")), "{named:?}");
    let extra: Vec<&String> = named
        .keys()
        .filter(|k| !allowed_by_default(k) && *k != "FOO" && *k != "OWN")
        .collect();
    assert!(
        extra.is_empty(),
        "the profile's env = [\"FOO\"] passes FOO and nothing else: {extra:?}"
    );
}
