//! Secrets through the real daemon: the stores a server's `${secret:NAME}` comes from, and the value in none of mcpd's outputs.

pub mod leak;
pub mod stores;
