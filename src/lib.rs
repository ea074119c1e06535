//! mcpd: a local MCP multiplexer daemon. Modules in reading order, from the wire inwards.

pub(crate) mod agent;
pub(crate) mod ask;
pub(crate) mod budget;
pub mod check_config;
pub mod cli;
pub mod config;
pub(crate) mod control_api;
pub mod ctl;
pub mod daemon;
pub mod discovery;
pub(crate) mod egress;
pub(crate) mod errors;
pub(crate) mod framing;
#[doc(hidden)]
pub mod fuzzing;
pub mod import;
pub(crate) mod inherit;
pub(crate) mod json;
pub(crate) mod jsonrpc;
pub mod logging;
pub(crate) mod metrics;
pub(crate) mod oauth;
pub(crate) mod outbox;
pub mod paths;
pub(crate) mod private_file;
pub(crate) mod protocol;
pub(crate) mod reaper;
pub(crate) mod registry;
pub(crate) mod secrets;
pub mod sentinel;
pub mod stdout;
pub(crate) mod supervisor;
pub(crate) mod systemd;
pub(crate) mod tasks;
pub mod trim;
pub(crate) mod upstream;
