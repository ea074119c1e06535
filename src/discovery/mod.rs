//! Tool discovery for large catalogs.
//!
//! A search index over every tool (`index.rs`, words from `tokens.rs`), which the agent
//! side's meta-tools (`mcpd__find_tools`, …) and `mcpd ctl tools --search` rank with.

pub mod index;
pub mod tokens;

pub use index::{Hit, Index, Segment};
