//! Remote servers over HTTP and mcpd's own HTTP listener.
//!
//! They are tested against the in-process HTTP fixture (`fixture`, with its self-tests).

pub mod edge;
pub mod fixture;
pub mod fixture_selftest;
pub mod modern;
pub mod redirects;
pub mod remote;
pub mod serve;
