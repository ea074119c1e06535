//! Interop: official SDK clients and published servers, written by other people, through mcpd in each of its roles.

pub mod discovery;
pub mod eras;
pub mod http;
pub mod http_serve;
pub mod pins;
pub mod projects;
pub mod sandbox;
pub mod sdks;
