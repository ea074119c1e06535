//! mcpd: a local MCP multiplexer daemon. Modules in reading order, from the wire inwards.

pub mod agent;
pub mod cli;
pub mod config;
pub mod ctl;
pub mod daemon;
pub mod errors;
pub mod framing;
#[doc(hidden)]
pub mod fuzzing;
pub mod import;
pub mod jsonrpc;
pub mod logging;
pub mod metrics;
pub mod outbox;
pub mod paths;
pub mod protocol;
pub mod reaper;
pub mod registry;
pub mod sentinel;
pub mod supervisor;
pub mod systemd;
pub mod upstream;
