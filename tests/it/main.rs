//! Integration tests: the real `mcpd` binary, real fixture server processes, real sockets.

// Test code: a panic here is a failed test or a broken fixture, never the daemon's.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::disallowed_methods,
    clippy::disallowed_macros
)]

mod browser;
mod failure_support;
mod support;

mod http_fixture;
mod oauth_fixture;

mod adversarial;
mod browser_smoke;
mod cli;
mod dashboard;
mod dashboard_launch;
mod dashboard_live;
mod dashboard_port;
mod dashboard_projects;
mod dashboard_sandbox;
mod discovery;
mod dumpable;
mod eras;
mod failure_calls;
mod failure_crashes;
mod failure_health;
mod failure_load;
mod failure_processes;
mod first_contact;
mod first_run;
mod foundation;
mod hardening;
mod http;
mod http_edge;
mod http_fixture_selftest;
mod http_modern;
mod http_redirects;
mod http_serve;
mod import;
mod import_secrets;
mod interop;
mod interop_discovery;
mod interop_eras;
mod interop_http;
mod interop_http_serve;
mod interop_pins;
mod interop_projects;
mod interop_sandbox;
mod keyring_oauth;
mod keyring_secrets;
mod naming;
mod oauth;
mod oauth_fixture_selftest;
mod oauth_machine;
mod pins;
mod pins_fields;
mod pins_kinds;
mod profiles;
mod projects;
mod projects_limits;
mod projects_sources;
mod projects_surface;
mod sandbox;
mod sandbox_caches;
mod sandbox_cwd;
mod sandbox_hosts;
mod sandbox_net;
mod sandbox_ns;
mod sandbox_paths;
mod sandbox_tmp;
mod secrets;
mod secrets_leak;
mod server_hygiene;
mod socket_pointer;
mod surface;
mod systemd;
mod tasks;
mod terminal;
mod tidy;
