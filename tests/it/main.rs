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

mod clock;
mod support;

mod catalog;
mod cli;
mod daemon;
mod dashboard;
mod failure;
mod hostile;
mod http;
mod import;
mod interop;
mod keyring;
mod mcp;
mod oauth;
mod pins;
mod projects;
mod sandbox;
mod secrets;
mod tidy;
