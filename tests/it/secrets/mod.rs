//! Secrets through the real daemon.
//!
//! The stores a server's `${secret:NAME}` comes from, and the value in none of mcpd's
//! outputs.

pub mod leak;
pub mod stores;
