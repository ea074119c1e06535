//! Fuzz target: TOML text validated into a `Config`; refusals name the file, and what is accepted keeps the limits validation promises.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpd::fuzzing::{Config, valid_server_name};
use mcpd_wire::protocol::naming::{allowed, join, valid_prefix};
use std::path::Path;

const PATH: &str = "/fuzz/mcpd.toml";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // A fixed environment: `${HOME}` and `${TOKEN}` are set, nothing else is.
    let env = |var: &str| match var {
        "HOME" => Some("/home/fuzz".to_owned()),
        "TOKEN" => Some("s3cret".to_owned()),
        _ => None,
    };
    match Config::parse_with_env(text, Path::new(PATH), &env) {
        Err(e) => {
            let message = e.to_string();
            assert!(
                message.starts_with(PATH),
                "an error that names no file: {message}"
            );
        }
        Ok(config) => check(&config),
    }
});

fn check(config: &Config) {
    let limit = config.daemon.tool_name_limit;
    assert!(limit >= 48, "tool_name_limit {limit} was accepted");
    assert!(config.daemon.max_message_bytes >= 4096);
    for (name, server) in &config.servers {
        assert_eq!(name, &server.name);
        assert!(valid_server_name(name), "server name {name:?} was accepted");
        let naming = &server.naming;
        assert!(valid_prefix(&naming.prefix), "prefix {:?}", naming.prefix);
        for table in [&naming.tools, &naming.prompts] {
            let mut targets = std::collections::HashSet::new();
            for (from, to) in table {
                assert!(!from.is_empty(), "an empty name was renamed");
                assert!(
                    !to.is_empty() && to.chars().all(allowed),
                    "rename to {to:?}"
                );
                let presented = join(&naming.prefix, to);
                assert!(
                    presented.len() <= limit,
                    "rename {presented:?} exceeds {limit}"
                );
                assert!(targets.insert(to), "two names renamed to {to:?}");
            }
        }
    }
}
