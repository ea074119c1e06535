//! The Landlock sandbox (issue #41) beyond files.
//!
//! `network = "none"` stops TCP connections and UDP datagrams that `"all"` and `sandbox =
//! false` let through, an abstract Unix socket outside the server's domain is
//! unreachable, `ctl status --json` shows each confined server's sandbox, a profile the
//! kernel cannot enforce fails the server with a sandbox error, and `check-config` prints
//! the profiles.

use crate::projects::instances::row;
use crate::sandbox::escapes::*;
use crate::support::*;
use serde_json::{Value, json};

/// [`pair`] plus `cut` (`network = "none"`) and `net` (`network = "all"`), confined.
fn trio(s: &Secrets) -> DaemonBuilder {
    pair(s)
        .fixture_with(
            "cut",
            &["--tools", ESCAPE],
            "[servers.cut.sandbox]\nnetwork = \"none\"",
        )
        .fixture_with(
            "net",
            &["--tools", ESCAPE],
            "[servers.net.sandbox]\nnetwork = \"all\"",
        )
}

/// The Landlock ABI this kernel offers; None without Landlock.
fn kernel_abi() -> Option<u64> {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with a null attribute, size 0 and the VERSION flag, the call only returns a
    // number; it reads and writes no memory.
    let abi = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<nix::libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u64::try_from(abi).ok().filter(|n| *n > 0)
}

#[tokio::test]
async fn with_network_none_no_tcp_connection_is_made_and_with_all_or_no_sandbox_one_is() {
    let s = secrets();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    let d = trio(&s).start().await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let args = json!({"host": "127.0.0.1", "port": port});
    let what = format!("a TCP connection to 127.0.0.1:{port}");
    escape(
        &mut a,
        "cut",
        &what,
        "try_connect",
        args.clone(),
        &["EACCES", "EPERM"],
    )
    .await;
    let r = attempt(&mut a, "net", "try_connect", args).await;
    assert!(
        r.starts_with("ok"),
        "confined with network = \"all\", {what} works: {r}"
    );
}

#[tokio::test]
async fn with_network_none_no_udp_datagram_leaves_and_with_all_or_no_sandbox_one_arrives() {
    let s = secrets();
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = socket.local_addr().expect("addr").port();
    let d = trio(&s).start().await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    // `cut` goes first: on loopback a datagram is queued as it is sent, so once the later
    // ones have arrived, one from `cut` would have too.
    let mut results = Vec::new();
    for name in ["cut", "open", "net"] {
        let args = json!({"host": "127.0.0.1", "port": port, "text": format!("from {name}")});
        results.push(attempt(&mut a, name, "try_udp", args).await);
    }
    let what = format!("a UDP datagram to 127.0.0.1:{port}");
    only_unconfined(&what, &results[1], &results[0], &["EACCES", "EPERM"]);
    assert!(
        results[2].starts_with("ok"),
        "network = \"all\": {}",
        results[2]
    );
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while !(got.iter().any(|g| g == "from open") && got.iter().any(|g| g == "from net")) {
        let (n, _) = within(
            &format!("the datagrams of open and net (got {got:?})"),
            socket.recv_from(&mut buf),
        )
        .await
        .expect("recv");
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    assert!(
        !got.iter().any(|g| g == "from cut"),
        "nothing from the server with network = \"none\": {got:?}"
    );
}

#[tokio::test]
async fn a_confined_server_cannot_reach_an_abstract_unix_socket_outside_its_domain() {
    use std::os::linux::net::SocketAddrExt as _;
    let s = secrets();
    let name = format!("mcpd-it-escape-{}-{}", std::process::id(), rand_suffix());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).expect("name");
    let _listener = std::os::unix::net::UnixListener::bind_addr(&addr).expect("bind");
    let d = pair(&s).start().await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let what = format!("connecting to the abstract socket @{name}");
    escape(
        &mut a,
        "boxed",
        &what,
        "try_abstract",
        json!({"name": name}),
        &["EPERM"],
    )
    .await;
}

/// A suffix no other test process picks at the same time.
fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

#[tokio::test]
async fn ctl_status_shows_the_sandbox_of_each_confined_server_and_none_for_an_unconfined_one() {
    let s = secrets();
    let abi = kernel_abi().expect("this kernel offers Landlock");
    let d = trio(&s).start().await;
    d.wait_ready().await;
    let (code, out, err) = d.run_cli(&["ctl", "status", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let st: Value = serde_json::from_str(&out).expect("status --json prints JSON");
    let open = row(&st, "open").expect("open");
    assert!(
        open.get("sandbox").is_none_or(Value::is_null),
        "an unconfined server's row has no sandbox: {open}"
    );
    for (name, network) in [("boxed", "all"), ("net", "all"), ("cut", "none")] {
        let r = row(&st, name).expect("row");
        let sb = &r["sandbox"];
        assert_eq!(sb["mechanism"], "landlock", "{name}: {r}");
        assert_eq!(sb["abi"], abi, "{name}: the kernel's ABI: {r}");
        assert_eq!(sb["network"], network, "{name}: {r}");
        for key in ["read", "write"] {
            // Readable: the system and the install; writable: TMPDIR and the caches.
            assert!(
                sb[key].as_u64().is_some_and(|n| n > 0),
                "{name}: a count of {key} paths: {r}"
            );
        }
    }
}

#[tokio::test]
async fn a_profile_the_kernel_cannot_enforce_fails_its_server_with_a_sandbox_error() {
    let s = secrets();
    let d = trio(&s).env("MCPD_LANDLOCK_ABI", "3").start().await;
    let cut = d
        .wait_server("cut", "cut is ready or failed", |r| {
            r["state"] == "ready" || r["state"] == "failed"
        })
        .await;
    assert_eq!(
        cut["state"], "failed",
        "at ABI 3 (no TCP rules) network = \"none\" cannot be enforced, so cut must not \
         start: {cut}"
    );
    let why = cut["last_error"].as_str().unwrap_or("").to_lowercase();
    assert!(
        why.contains("sandbox") && ["network", "tcp", "abi"].iter().any(|w| why.contains(w)),
        "the error names the sandbox and what the kernel lacks: {cut}"
    );
    d.wait_server("open", "the unconfined server is ready", |r| {
        r["state"] == "ready"
    })
    .await;
}

#[tokio::test]
async fn check_config_prints_the_profile_of_each_confined_server() {
    let s = secrets();
    let b = trio(&s);
    let config = b.dir().join("check.toml");
    std::fs::write(&config, b.config_text()).expect("config");
    let (code, out, err) = run_mcpd(
        &["check-config", "--config", config.to_str().expect("utf-8")],
        None,
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    // Each server's lines: its `server NAME…` line and the indented ones after it.
    let section = |name: &str| -> Vec<&str> {
        out.lines()
            .skip_while(|l| !names_server(l, name))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter(|l| l.starts_with("  sandbox:"))
            .collect()
    };
    for name in ["boxed", "net", "cut"] {
        assert!(
            !section(name).is_empty(),
            "{name}: a `  sandbox:` line gives its profile:\n{out}"
        );
    }
    assert!(
        section("cut").iter().any(|l| l.contains("none")),
        "cut's profile says network none:\n{out}"
    );
}

/// Whether a `check-config` line is the first of server `name`'s (`server NAME: …`).
fn names_server(line: &str, name: &str) -> bool {
    let rest = line
        .strip_prefix("server ")
        .and_then(|l| l.strip_prefix(name));
    rest.is_some_and(|r| !r.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
}

/// Socket families are an allow-list: with `network = "none"` a confined server makes no
/// netlink or vsock socket (vsock reaches the host of a VM), with `"all"` it makes netlink
/// but never vsock, and unconfined the same calls get past mcpd (the kernel may still
/// lack vsock: then EAFNOSUPPORT, never EPERM).
#[tokio::test]
async fn socket_families_beyond_unix_and_ip_are_refused_to_confined_servers() {
    let s = secrets();
    let d = trio(&s).start().await;
    d.wait_ready().await;
    let mut a = d.initialized_agent().await;
    let tried = |server: &'static str, family: &'static str| {
        let args = json!({ "family": family });
        (server, family, args)
    };
    let cases = [
        (tried("cut", "netlink"), "EPERM"),
        (tried("cut", "vsock"), "EPERM"),
        (tried("net", "vsock"), "EPERM"),
        (tried("net", "netlink"), "ok"),
        (tried("open", "netlink"), "ok"),
    ];
    for ((server, family, args), expected) in cases {
        let r = attempt(&mut a, server, "try_socket", args).await;
        assert!(
            r.contains(expected),
            "{server} making a {family} socket: {r}"
        );
    }
    let r = attempt(&mut a, "open", "try_socket", json!({"family": "vsock"})).await;
    assert!(
        !r.contains("EPERM"),
        "unconfined, a vsock socket is not refused by mcpd: {r}"
    );
}
