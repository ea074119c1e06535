//! Servers and agents that fail.
//!
//! Crashes, calls in flight, health, load and limits, process control; `support` holds
//! their shared helpers.

pub mod calls;
pub mod crashes;
pub mod health;
pub mod load;
pub mod processes;
pub mod support;
