//! JSON text without serde values.
//!
//! Whether text is one JSON value (`check`), and the members and elements of text already
//! found valid (`scan`). Neither knows JSON-RPC or MCP, so both `jsonrpc` and `protocol`
//! build on them. `diff` (on serde values) shows a person how two definitions differ.

pub mod check;
pub mod diff;
pub mod scan;
