//! Pinned definitions.
//!
//! A server's changed definitions held until approved, for every field and every kind.

pub mod fields;
pub mod held;
pub mod kinds;
