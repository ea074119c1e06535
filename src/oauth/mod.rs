//! OAuth 2.1 for remote servers (MCP authorization, 2025-06-18 … 2026-07-28), the client side. So far the pure parts: reading challenges and finding metadata.
//!
//! The login flow (`mcpd ctl login`), registration, tokens and refresh build on these;
//! until they are wired to the remote transports, nothing outside the unit tests calls
//! this module.
#![allow(dead_code, reason = "the login flow that uses it is not wired yet")]

pub mod authorize;
pub mod challenge;
pub mod credential;
pub mod discovery;
pub mod flow;
pub mod registration;
pub mod store;
pub mod wellknown;
