//! The daemon in its surroundings.
//!
//! systemd's readiness and socket activation, and the socket pointer clients without
//! `XDG_RUNTIME_DIR` look for.

pub mod socket_pointer;
pub mod systemd;
