//! `mcpd import`: client configs merged into mcpd's, their literal secrets moved to the file store.
//!
//! The client configs are in `fixtures/`.

pub mod clients;
pub mod secrets;
