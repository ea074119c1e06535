//! OAuth logins to remote servers through the real daemon, against the in-process OAuth fixture (`fixture`, with its self-tests), and the machine grants.

pub mod fixture;
pub mod fixture_selftest;
pub mod logins;
pub mod machine;
