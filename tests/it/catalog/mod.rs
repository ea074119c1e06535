//! What agents see of the servers: naming, per-server lists and profiles, and discovery mode's meta-tools.

pub mod discovery;
pub mod naming;
pub mod profiles;
