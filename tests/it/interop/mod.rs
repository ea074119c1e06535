//! Interop: official SDK clients and published servers through mcpd in each of its roles.
//!
//! The clients and servers are written by other people.

pub mod discovery;
pub mod eras;
pub mod http;
pub mod http_serve;
pub mod pins;
pub mod projects;
pub mod restarts;
pub mod sandbox;
pub mod sdks;
