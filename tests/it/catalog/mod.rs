//! What agents see of the servers.
//!
//! Naming, per-server lists and profiles, and discovery mode's meta-tools.

pub mod discovery;
pub mod naming;
pub mod profiles;
