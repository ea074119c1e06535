//! Servers run per project (`share = "project"`).
//!
//! Their instances, limits over time, where a project comes from, and the methods beyond
//! tools/call.

pub mod instances;
pub mod limits;
pub mod sources;
pub mod surface;
