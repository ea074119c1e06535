//! The command line as a person and a client meet it.
//!
//! `mcpd connect` finding the daemon, a first run, and what the commands print.

pub mod commands;
pub mod first_contact;
pub mod first_run;
