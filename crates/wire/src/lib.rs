//! The wire floor: what mcpd reads and writes, parsed and built with no IO and no runtime.
//!
//! `json` scans and checks JSON without building values; `jsonrpc` reads and writes
//! JSON-RPC 2.0 envelopes; `protocol` holds MCP's shapes for both protocol eras (names,
//! results, schemas, headers). Everything above (the daemon, `mcpd ctl`, the fuzz
//! targets) builds on this crate, and it names none of them.

pub mod json;
pub mod jsonrpc;
pub mod protocol;
