//! MCP through mcpd: the foundation (handshake, routing, errors, shutdown), the rest of the protocol's surface, both protocol eras and tasks.

pub mod eras;
pub mod foundation;
pub mod surface;
pub mod tasks;
