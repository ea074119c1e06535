//! `mcpd import`: client configs (`fixtures/`) merged into mcpd's, and their literal secrets moved into the file store.

pub mod clients;
pub mod secrets;
