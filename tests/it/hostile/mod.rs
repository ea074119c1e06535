//! What hostile agents and servers cannot do.
//!
//! Garbage and floods, inputs that once stalled the daemon, control characters in a
//! terminal, a dumpable daemon, a server reaching mcpd's own state.

pub mod adversarial;
pub mod dumpable;
pub mod hardening;
pub mod server_hygiene;
pub mod terminal;
