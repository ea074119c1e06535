//! The daemon in its surroundings.
//!
//! systemd's readiness and socket activation, the socket pointer clients without
//! `XDG_RUNTIME_DIR` look for, and `mcpd connect` across the daemon's restarts.

pub mod restarts;
pub mod socket_pointer;
pub mod systemd;
