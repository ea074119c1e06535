//! mcpd: a local MCP multiplexer daemon. Modules in reading order, from the wire inwards.

// The wire and runtime floors, named here by its old paths while the daemon moves to `mcpd_wire::…`.
pub use mcpd_runtime::trim;
pub(crate) use mcpd_runtime::{ask, budget, framing, outbox, private_file, tracker as tasks};
pub(crate) use mcpd_wire::{json, jsonrpc, protocol};

pub(crate) mod agent;
pub mod check_config;
pub mod cli;
pub mod config;
pub(crate) mod control_api;
pub mod ctl;
pub mod daemon;
pub(crate) mod dashboard;
pub mod discovery;
pub(crate) mod egress;
pub(crate) mod errors;
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod http_accept;
pub mod import;
pub(crate) mod inherit;
pub mod logging;
pub(crate) mod metrics;
pub(crate) mod oauth;
pub mod paths;
pub(crate) mod reaper;
pub(crate) mod registry;
pub(crate) mod secrets;
pub mod sentinel;
pub(crate) mod socket_pointer;
pub mod stdout;
pub(crate) mod supervisor;
pub(crate) mod systemd;
pub(crate) mod upstream;
pub(crate) mod visible;
