//! OAuth logins to remote servers through the real daemon, and the machine grants.
//!
//! They run against the in-process OAuth fixture (`fixture`, with its self-tests).

pub mod fixture;
pub mod fixture_selftest;
pub mod logins;
pub mod machine;
