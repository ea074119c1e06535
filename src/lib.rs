//! mcpd: a local MCP multiplexer daemon. Modules in reading order, from the floors inwards.
//!
//! The floors are crates of their own: `mcpd_wire` (JSON, JSON-RPC, MCP shapes),
//! `mcpd_runtime` (the task tracker, ask, budgets, framing, outboxes) and `mcpd_ctl` (the
//! client, the control contract, socket paths); this crate is the daemon on top.

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
pub mod upgrade;
pub(crate) mod upstream;
