//! MCP through mcpd: the foundation, the rest of the protocol's surface, both eras and tasks.
//!
//! The foundation is the handshake, routing, errors and shutdown.

pub mod eras;
pub mod foundation;
pub mod surface;
pub mod tasks;
