//! mcpd: a local MCP multiplexer daemon. Modules in reading order, from the wire inwards.

// The floors below the daemon (wire, runtime, ctl), named here by its old paths while the daemon moves to `mcpd_wire::…`.
pub(crate) use mcpd_ctl::{control_api, errln, paths, stdout, visible};
pub(crate) use mcpd_runtime::{ask, budget, framing, outbox, private_file, tracker as tasks, trim};
pub(crate) use mcpd_wire::{json, jsonrpc, protocol};

pub(crate) mod agent;
pub mod check_config;
pub mod cli;
pub mod config;
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
pub(crate) mod reaper;
pub(crate) mod registry;
pub(crate) mod secrets;
pub mod sentinel;
pub(crate) mod socket_pointer;
pub(crate) mod supervisor;
pub(crate) mod systemd;
pub(crate) mod upstream;
