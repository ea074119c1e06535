//! Unit tests of config validation.
//!
//! Error messages name the file and key, secrets never show, daemon defaults are
//! inherited.

use super::*;

fn check(text: &str, expected: Result<(), &str>) {
    let got = Config::parse(text, Path::new("/etc/mcpd.toml"));
    match (got, expected) {
        (Ok(_), Ok(())) => {}
        (Err(e), Err(want)) => {
            let msg = e.to_string();
            assert!(msg.contains(want), "error {msg:?} should contain {want:?}");
            assert!(msg.starts_with("/etc/mcpd.toml"), "{msg}");
        }
        (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
    }
}

#[test]
fn configs_validate_with_errors_naming_the_key() {
    check("", Ok(()));
    check(
        "[servers.fs]\ncommand = \"npx\"\nargs = [\"-y\"]\ntimeout = \"5s\"",
        Ok(()),
    );
    check(
        "[servers.fs]\ncommand = \"x\"\nbogus = 1",
        Err("unknown field `bogus`"),
    );
    check(
        "[daemon]\nsocket_path = \"x\"",
        Err("unknown field `socket_path`"),
    );
    check(
        "[servers.fs]\ncommand = \"x\"\ntimeout = \"soon\"",
        Err("`servers.fs.timeout`: \"soon\" is not a duration"),
    );
    check(
        "[servers.my_fs]\ncommand = \"x\"",
        Err("`servers.my_fs`: a server name"),
    );
    check("[servers.Fs]\ncommand = \"x\"", Err("`servers.Fs`"));
    check(
        "[servers.fs]\nargs = []",
        Err("`servers.fs.command`: missing"),
    );
    check(
        "[servers.fs]\ncommand = \"x\"\n[servers.fs.restart]\nbackoff_initial = \"10s\"\nbackoff_max = \"1s\"",
        Err("backoff_max"),
    );
    check(
        "[daemon]\nrequest_timeout = \"0s\"",
        Err("daemon.request_timeout"),
    );
    check(
        "[daemon]\ntool_name_limit = 10",
        Err("`daemon.tool_name_limit`: 10 is too small"),
    );
    check("not toml =", Err("/etc/mcpd.toml"));
}

fn check_env(text: &str, expected: Result<(), &str>) {
    let env = |var: &str| match var {
        "TOKEN" => Some("s3cret".to_owned()),
        "EMPTY" => Some(String::new()),
        _ => None,
    };
    let got = Config::parse_with_env(text, Path::new("/etc/mcpd.toml"), &env);
    match (got, expected) {
        (Ok(_), Ok(())) => {}
        (Err(e), Err(want)) => {
            let msg = e.to_string();
            assert!(msg.contains(want), "error {msg:?} should contain {want:?}");
            assert!(!msg.contains("s3cret"), "a secret leaked into {msg:?}");
        }
        (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
    }
}

#[test]
fn remote_servers_validate_and_never_show_their_secrets() {
    let ok = "[servers.r]\nurl = \"https://example.com/mcp\"\n";
    check_env(ok, Ok(()));
    check_env(
        &format!("{ok}transport = \"sse\"\nbearer_token_env = \"TOKEN\"\nconnect_timeout = \"3s\""),
        Ok(()),
    );
    check_env(
        &format!("{ok}headers = {{ X-Key = \"k-${{TOKEN}}\" }}"),
        Ok(()),
    );
    check_env(
        "[servers.r]\nurl = \"ftp://example.com\"",
        Err("`servers.r.url`: the scheme must be http or https"),
    );
    check_env(
        "[servers.r]\nurl = \"not a url\"",
        Err("`servers.r.url`: not a valid URL"),
    );
    check_env(
        &format!("{ok}transport = \"websocket\""),
        Err("`servers.r.transport`: \"websocket\" is not a transport"),
    );
    // A variable that is unset or empty stops that server alone, saying which.
    for (settings, why) in [
        (
            "bearer_token_env = \"MISSING\"",
            "MISSING is not set (for servers.r.bearer_token_env)",
        ),
        (
            "bearer_token_env = \"EMPTY\"",
            "EMPTY is empty (for servers.r.bearer_token_env)",
        ),
        (
            "headers = { X-Key = \"${MISSING}\" }",
            "MISSING is not set (for servers.r.headers.X-Key)",
        ),
    ] {
        let text = format!("{ok}{settings}\n[servers.other]\ncommand = \"x\"");
        let env = |var: &str| (var == "EMPTY").then(String::new);
        let c = Config::parse_with_env(&text, Path::new("/etc/mcpd.toml"), &env).unwrap();
        let unresolved = c.servers["r"].unresolved.as_deref().unwrap_or_default();
        assert!(unresolved.contains(why), "{settings}: {unresolved:?}");
        assert!(c.servers["other"].unresolved.is_none());
    }
    check_env(
        &format!("{ok}headers = {{ X-Key = \"${{TOKEN\" }}"),
        Err("an unterminated ${"),
    );
    check_env(
        &format!("{ok}headers = {{ Mcp-Session-Id = \"x\" }}"),
        Err("mcpd sets this header itself"),
    );
    check_env(
        &format!(
            "{ok}bearer_token_env = \"TOKEN\"\nheaders = {{ Authorization = \"Bearer ${{TOKEN}}\" }}"
        ),
        Err("conflicts with bearer_token or bearer_token_env"),
    );
    check_env(
        &format!("{ok}headers = {{ X-Key = \"a\\nb-${{TOKEN}}\" }}"),
        Err("not a valid header value"),
    );
    check_env(
        "[servers.r]\nurl = \"https://example.com/mcp\"\ncommand = \"x\"",
        Err("either `command`"),
    );
    check_env(
        &format!("{ok}args = [\"a\"]"),
        Err("`servers.r.args`: only applies to local servers"),
    );
    check_env(
        "[servers.r]\ncommand = \"x\"\ntransport = \"sse\"",
        Err("`servers.r.transport`: only applies to remote servers"),
    );
    // Expanded values are kept, but never printed by Debug.
    let c = Config::parse_with_env(
        &format!("{ok}headers = {{ X-Key = \"k-${{TOKEN}}\" }}\nbearer_token_env = \"TOKEN\""),
        Path::new("f"),
        &|v: &str| (v == "TOKEN").then(|| "s3cret".to_owned()),
    )
    .unwrap();
    let Launch::Http(h) = &c.servers["r"].launch else {
        panic!("not remote")
    };
    assert_eq!(h.headers[0].1.expose(), "k-s3cret");
    assert!(!format!("{c:?}").contains("s3cret"));
    let u = reqwest::Url::parse("https://user:pw@example.com/mcp?key=abc").unwrap();
    assert_eq!(display_url(&u), "https://example.com/mcp?…");
}

#[test]
fn server_values_inherit_daemon_defaults() {
    let c = Config::parse(
        "[daemon]\nrequest_timeout = \"7s\"\n[daemon.restart]\nmax_restarts = 2\n[servers.a]\ncommand = \"x\"\n[servers.b]\ncommand = \"y\"\ntimeout = \"1s\"\n[servers.b.restart]\nwindow = \"5s\"",
        Path::new("f"),
    )
    .unwrap();
    assert_eq!(c.servers["a"].timeout, Duration::from_secs(7));
    assert_eq!(c.servers["b"].timeout, Duration::from_secs(1));
    assert_eq!(c.servers["a"].restart.max_restarts, 2);
    assert_eq!(c.servers["b"].restart.max_restarts, 2);
    assert_eq!(c.servers["b"].restart.window, Duration::from_secs(5));
    assert!(c.servers["a"].enabled);
}

#[test]
fn server_names_follow_the_documented_pattern() {
    for ok in [
        "a",
        "fs",
        "server-1",
        "0x",
        "abcdefghijklmnopqrstuvwxyz012345",
    ] {
        assert!(valid_server_name(ok), "{ok}");
    }
    for bad in [
        "",
        "-a",
        "a_b",
        "A",
        "a.b",
        "abcdefghijklmnopqrstuvwxyz0123456",
    ] {
        assert!(!valid_server_name(bad), "{bad}");
    }
}

#[test]
fn http_connection_settings_are_range_checked() {
    let listen = "[daemon]\nhttp_listen = \"127.0.0.1:0\"\n";
    check(&format!("{listen}http_max_connections = 4"), Ok(()));
    check(
        &format!("{listen}http_max_connections = 0"),
        Err("`daemon.http_max_connections`: 0 is too small"),
    );
    check(
        &format!("{listen}http_max_connections = 9223372036854775807"),
        Err("`daemon.http_max_connections`: 9223372036854775807 is too large"),
    );
    check(&format!("{listen}http_header_timeout = \"500ms\""), Ok(()));
    check(
        &format!("{listen}http_header_timeout = \"1ms\""),
        Err("`daemon.http_header_timeout`: must be between 100ms and 1h"),
    );
    check(
        &format!("{listen}http_header_timeout = \"18446744073709551615s\""),
        Err("`daemon.http_header_timeout`"),
    );
    check(
        "[daemon]\nhttp_max_connections = 4",
        Err("`daemon.http_max_connections`: has no effect without daemon.http_listen"),
    );
    let c = Config::parse(listen, Path::new("/etc/mcpd.toml")).unwrap();
    let http = c.daemon.http.unwrap();
    assert_eq!(http.max_connections, 256);
    assert_eq!(http.header_timeout, std::time::Duration::from_secs(10));
}

#[test]
fn sandbox_tables_validate_with_errors_naming_the_key() {
    let server =
        |table: &str| format!("[servers.x]\ncommand = \"x\"\n[servers.x.sandbox]\n{table}");
    check(&server("network = \"none\"\nunix_sockets = true"), Ok(()));
    check(
        &server(
            "network = [\"api.github.com\", \"*.example.com:8443\", \"10.0.0.5\", \"[::1]:80\"]",
        ),
        Ok(()),
    );
    check(
        &server("network = []"),
        Err("`servers.x.sandbox.network`: an empty list"),
    );
    check(
        &server("network = [\"ok.example\", \"https://x.example\"]"),
        Err("`servers.x.sandbox.network[1]`"),
    );
    check(
        &server("network = [\"*\"]"),
        Err("`servers.x.sandbox.network[0]`"),
    );
    check(
        &server("network = [3]"),
        Err("`servers.x.sandbox.network[0]`: 3 is not a string"),
    );
    check(&server("network = \"some\""), Err("a list of hosts"));
    check(
        &server("read = [\"rel/path\"]"),
        Err("`servers.x.sandbox.read`"),
    );
    check(&server("env = [\"A=B\"]"), Err("`servers.x.sandbox.env`"));
    check(
        "[servers.r]\nurl = \"https://example.com/mcp\"\nsandbox = true",
        Err("`servers.r.sandbox`: only applies to local servers"),
    );
}
