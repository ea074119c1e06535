//! OAuth 2.1 for remote servers (MCP authorization, 2025-06-18 … 2026-07-28), the client side.
//!
//! Challenges, discovery, registration, the authorization code grant, the machine grants
//! (client credentials, JWT bearer, enterprise-managed), DPoP, the credential store, and
//! the actor that owns each server's login.

pub mod authorize;
pub mod challenge;
pub mod credential;
pub mod discovery;
pub mod dpop;
pub mod flow;
pub mod grant;
pub mod idp;
pub mod jose;
pub mod registration;
pub mod store;
pub mod token;
pub mod wellknown;
