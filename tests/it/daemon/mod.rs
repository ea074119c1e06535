//! The daemon in its surroundings.
//!
//! systemd's readiness and socket activation, the socket pointer clients without
//! `XDG_RUNTIME_DIR` look for, `mcpd connect` across the daemon's restarts, and upgrades in place.

pub mod restarts;
pub mod socket_pointer;
pub mod systemd;
pub mod upgrade;
